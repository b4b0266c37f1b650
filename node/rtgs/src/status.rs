//! `rtgs status`: every center of a production cluster, as its own node reports it (the
//! asking and the report are `rtgs_api::cluster`'s, shared with the operator console).
//!
//! Each `rtgs node` serves its status JSON at `GET /status` on its `/metrics` listener
//! (loopback callers only; `127.0.0.1:(9100 + PORT_OFFSET)` by default, the addresses of
//! `scripts/run-dc1.sh..3` and of `deploy/prometheus.yml`). This command asks every center at
//! once, each with a short timeout; a node that does not answer in time (or answers something
//! that is not its status) is `up: false` with the reason in `error` — one down node is a row of
//! the report, never an error of the command.
//!
//! Lag is in entries, behind the most advanced figure any answering node reports: the highest
//! `seq_committed`, or the sequencer leader's `seq_sequenced` when that is higher. A center
//! that does not answer is placed by what the others last heard of its acks (`seq_acked`).
//!
//! Exit status: 0 when every center answered and none halted finality; 1 otherwise (a center
//! down, or a divergence halted finality somewhere); 2 on a usage error. With `--watch` the
//! report repeats until interrupted, and the exit status is that of the last report.

use anyhow::Context;
use clap::Args;
use rtgs_api::cluster::Report;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

/// Default `/metrics` port of center 1 (`rtgs_engine::metrics::METRICS_PORT_BASE`); center N
/// listens on this + N − 1 (its `PORT_OFFSET` in `scripts/run-dcN.sh`).
const PORT_BASE: u16 = rtgs_engine::metrics::METRICS_PORT_BASE;

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// Number of centers; their default addresses are 127.0.0.1:(9100 + N − 1).
    #[arg(long, default_value_t = 3)]
    pub centers: usize,
    /// Each center's /metrics listener, in center order (repeat the flag or separate by commas;
    /// `RTGS_STATUS_ADDRS`). Default: 127.0.0.1:9100, :9101, :9102 (scripts/run-dc1.sh..3).
    #[arg(long = "addr", env = "RTGS_STATUS_ADDRS", value_delimiter = ',', value_name = "ADDR")]
    pub addrs: Vec<SocketAddr>,
    /// A node that has not answered within this many milliseconds is reported down.
    #[arg(long, default_value_t = 500)]
    pub timeout_ms: u64,
    /// Print the report as JSON: {"centers": [{"id", "up", "leader", "epoch", "seq_applied",
    /// "seq_committed", "seq_final", "lag_entries", "halted", ...}], "leader", "ok", ...}.
    #[arg(long)]
    pub json: bool,
    /// Repeat every SECS seconds (default 1) until interrupted (with --json: one report per
    /// line); the exit status is the last report's.
    #[arg(long, num_args = 0..=1, default_missing_value = "1", value_name = "SECS")]
    pub watch: Option<f64>,
}

pub fn run(args: StatusArgs) -> anyhow::Result<ExitCode> {
    let addrs = addresses(&args)?;
    let every = match args.watch {
        Some(s) if !(s.is_finite() && s > 0.0) => anyhow::bail!("--watch takes a positive number of seconds"),
        Some(s) => Some(Duration::from_secs_f64(s)),
        None => None,
    };
    let timeout = Duration::from_millis(args.timeout_ms.max(1));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        let mut ok = once(&addrs, timeout, args.json).await?;
        let Some(every) = every else { return Ok(exit(ok)) };
        // One listener for the whole watch: a Ctrl-C while the nodes are being asked counts too.
        let interrupted = tokio::signal::ctrl_c();
        tokio::pin!(interrupted);
        loop {
            tokio::select! {
                _ = tokio::time::sleep(every) => {}
                _ = &mut interrupted => return Ok(exit(ok)),
            }
            if !args.json {
                println!();
            }
            tokio::select! {
                report = once(&addrs, timeout, args.json) => ok = report?,
                _ = &mut interrupted => return Ok(exit(ok)),
            }
        }
    })
}

fn exit(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn addresses(args: &StatusArgs) -> anyhow::Result<Vec<SocketAddr>> {
    if !args.addrs.is_empty() {
        return Ok(args.addrs.clone());
    }
    if args.centers == 0 || args.centers > rtgs_core::limits::CENTER_COUNT_MAX {
        anyhow::bail!("--centers must be 1..={}", rtgs_core::limits::CENTER_COUNT_MAX);
    }
    (0..args.centers)
        .map(|i| {
            let port = PORT_BASE.checked_add(i as u16).context("port out of range")?;
            Ok(SocketAddr::from(([127, 0, 0, 1], port)))
        })
        .collect()
}

/// One report, printed; whether it is OK.
async fn once(addrs: &[SocketAddr], timeout: Duration, json: bool) -> anyhow::Result<bool> {
    let report = rtgs_api::cluster::ask(addrs, timeout).await;
    if json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", table(&report));
    }
    Ok(report.ok)
}

/// The human form: one aligned row per center, then a verdict line.
fn table(r: &Report) -> String {
    let head = [
        "CENTER",
        "UP",
        "LEADER",
        "EPOCH",
        "APPLIED",
        "COMMITTED",
        "FINAL",
        "LAG",
        "HALTED",
        "GAP_PULLS",
        "OWNER",
        "ALERTS",
    ];
    let opt = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
    let mut rows: Vec<Vec<String>> = vec![head.iter().map(|h| h.to_string()).collect()];
    for c in &r.centers {
        rows.push(vec![
            c.id.clone(),
            if c.up { "up" } else { "DOWN" }.into(),
            if c.leader { "leader" } else { "-" }.into(),
            opt(c.epoch),
            opt(c.seq_applied),
            opt(c.seq_committed),
            opt(c.seq_final),
            opt(c.lag_entries),
            c.halted.map_or("-", |h| if h { "HALTED" } else { "no" }).into(),
            opt(c.gap_pulls),
            c.plugin_owner.clone().unwrap_or_else(|| "-".into()),
            if c.up { c.alerts.len().to_string() } else { "-".into() },
        ]);
    }
    let widths: Vec<usize> =
        (0..head.len()).map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for row in &rows {
        let cells: Vec<String> = row.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    for c in r.centers.iter().filter(|c| !c.up) {
        out.push_str(&format!("{} at {}: {}\n", c.id, c.address, c.error.as_deref().unwrap_or("down")));
    }
    let halted: Vec<&str> =
        r.centers.iter().filter(|c| c.halted == Some(true)).map(|c| c.id.as_str()).collect();
    out.push_str(&if r.ok {
        format!("OK: {} of {} centers up, none halted", r.centers_up, r.centers.len())
    } else if halted.is_empty() {
        format!("NOT OK: {} of {} centers up", r.centers_up, r.centers.len())
    } else {
        format!(
            "NOT OK: {} of {} centers up; finality HALTED at {}",
            r.centers_up,
            r.centers.len(),
            halted.join(", ")
        )
    });
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtgs_api::cluster::summarize;
    use serde_json::{json, Value};

    /// The status of center `n` as its node answers (the figures `rtgs_api::cluster`'s own tests
    /// check; here only what the table prints of them).
    fn answer(n: u16, halted: bool) -> Result<Value, String> {
        Ok(json!({"center": format!("DC{n}"), "leader": n == 1, "epoch": 2, "seq_sequenced": 50,
                  "seq_applied": 50, "seq_committed": 50, "seq_final": 50, "halted": halted,
                  "gap_pulls": 0, "seq_acked": [50, 50, 50], "alerts": []}))
    }

    #[test]
    fn the_table_names_a_down_center_and_a_halt() {
        let addrs: Vec<SocketAddr> = (0..3).map(|i| SocketAddr::from(([127, 0, 0, 1], 9100 + i))).collect();
        let r = summarize(&addrs, vec![answer(1, false), answer(2, false), Err("no".into())]);
        let text = table(&r);
        assert!(
            text.contains("DC3 at 127.0.0.1:9102: no") && text.ends_with("NOT OK: 2 of 3 centers up\n"),
            "{text}"
        );
        let r = summarize(&addrs, vec![answer(1, false), answer(2, false), answer(3, true)]);
        assert!(!r.ok);
        assert!(table(&r).contains("finality HALTED at DC3"), "{}", table(&r));
        let r = summarize(&addrs, (1..=3).map(|n| answer(n, false)).collect());
        assert!(r.ok, "{}", table(&r));
    }
}
