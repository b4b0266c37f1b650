//! The node's log: `tracing` events with structured fields — `center` on every event of a
//! center's tasks (or `who`, a task's own name, where a helper serves several tasks), and `seq`,
//! `epoch`, `bmi`, `generation` where they apply — written either as the human line an operator
//! reads in a terminal (`DC1: sequencer: LEADER at epoch 2 ...`, the default) or as one JSON
//! object per line (`--log-format json`: `timestamp`, `level`, `target`, `message` and every field
//! at the top level) that a log shipper (the seed's ELK, or any other) takes as it is. Secrets
//! (PostgreSQL passwords, API keys) are never logged: connection settings appear as `host:port`.

use std::fmt;
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, MakeWriter};
use tracing_subscriber::registry::LookupSpan;

/// How the node writes its log (stderr).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// `CENTER: message`, as an operator reads it.
    #[default]
    Human,
    /// One JSON object per line.
    Json,
}

impl std::str::FromStr for LogFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "human" => Ok(LogFormat::Human),
            "json" => Ok(LogFormat::Json),
            other => Err(format!("log format {other:?}: human or json")),
        }
    }
}

/// Installs the log for this process (the first call wins; a second one changes nothing).
pub fn init(format: LogFormat) {
    let _ = tracing::subscriber::set_global_default(subscriber(format, std::io::stderr));
}

/// The subscriber of [`init`], writing to `writer` (tests give it a buffer).
pub fn subscriber<W>(format: LogFormat, writer: W) -> Box<dyn Subscriber + Send + Sync>
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    let builder = tracing_subscriber::fmt().with_writer(writer).with_ansi(false);
    match format {
        LogFormat::Human => Box::new(builder.event_format(Human).finish()),
        LogFormat::Json => Box::new(builder.json().flatten_event(true).with_current_span(false).finish()),
    }
}

/// `CENTER: message` (or `WHO: message`): the line the node always printed.
struct Human;

#[derive(Default)]
struct Prefix {
    center: Option<String>,
    who: Option<String>,
    message: String,
}

impl Visit for Prefix {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "center" => self.center = Some(value.to_string()),
            "who" => self.who = Some(value.to_string()),
            "message" => self.message = value.to_string(),
            _ => {}
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        match field.name() {
            "center" => self.center = Some(format!("{value:?}")),
            "who" => self.who = Some(format!("{value:?}")),
            "message" => self.message = format!("{value:?}"),
            _ => {}
        }
    }
}

impl<S, N> FormatEvent<S, N> for Human
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(&self, _ctx: &FmtContext<'_, S, N>, mut w: Writer<'_>, event: &Event<'_>) -> fmt::Result {
        let mut p = Prefix::default();
        event.record(&mut p);
        match p.center.or(p.who) {
            Some(prefix) => writeln!(w, "{prefix}: {}", p.message),
            None => writeln!(w, "{}", p.message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap_or_else(|p| p.into_inner()).extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn logged(format: LogFormat) -> String {
        let buffer = Buffer::default();
        let out = buffer.clone();
        let subscriber = subscriber(format, move || out.clone());
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(
                center = "DC2",
                epoch = 7u32,
                seq = 1001u64,
                "sequencer: LEADER at epoch {} from seq {}",
                7,
                1001
            );
            tracing::warn!(who = "DC2: journal", "Message consumption error");
        });
        let bytes = buffer.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
        String::from_utf8(bytes).unwrap_or_default()
    }

    #[test]
    fn the_human_line_is_the_one_operators_read() {
        assert_eq!(
            logged(LogFormat::Human),
            "DC2: sequencer: LEADER at epoch 7 from seq 1001\nDC2: journal: Message consumption error\n"
        );
    }

    #[test]
    fn json_lines_carry_every_field_at_the_top_level() {
        let text = logged(LogFormat::Json);
        let lines: Vec<serde_json::Value> =
            text.lines().map(|l| serde_json::from_str(l).unwrap_or(serde_json::Value::Null)).collect();
        assert_eq!(lines.len(), 2, "{text}");
        let first = &lines[0];
        assert_eq!(first["center"], "DC2");
        assert_eq!(first["epoch"], 7);
        assert_eq!(first["seq"], 1001);
        assert_eq!(first["level"], "INFO");
        assert_eq!(first["message"], "sequencer: LEADER at epoch 7 from seq 1001");
        assert!(first["timestamp"].is_string());
        assert_eq!(lines[1]["level"], "WARN");
        assert_eq!(lines[1]["who"], "DC2: journal");
    }

    #[test]
    fn a_format_is_named_or_refused() {
        assert_eq!("json".parse::<LogFormat>(), Ok(LogFormat::Json));
        assert_eq!("human".parse::<LogFormat>(), Ok(LogFormat::Human));
        assert!("xml".parse::<LogFormat>().is_err());
    }
}
