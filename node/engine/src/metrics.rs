//! The node's Prometheus metrics: `GET /metrics` on `127.0.0.1:(9100 + PORT_OFFSET)` by default
//! (`--metrics-listen` / `RTGS_METRICS_LISTEN`), loopback callers only (403 otherwise). The same
//! listener serves `GET /status`: the node's status JSON ([`Status::json`], what
//! `RTGS_STATUS_FILE` holds), read by `rtgs status`; loopback callers only too.
//!
//! 9100 + N, not 8080 + N: `rtgs serve` and the node's own HTTP API (`--api-config`) own
//! 8080 + N, and the API serves its own `/metrics` there (job `rtgs` in `deploy/`). (9100 is also
//! node_exporter's default port: a host running one moves either.)
//!
//! One recorder per node (not the process-global one): no hidden global state, and tests can
//! hold several. Every series carries `center` — the center the figure is about: this node's
//! own center, except for `rtgs_journal_lag_entries`, which this node reports for every center
//! (the reporter is then Prometheus' `instance`). Names: `rtgs_<thing>_<unit>[_total]`.
//!
//! * Counters and gauges go through `metrics-exporter-prometheus`. Most are mirrors of the
//!   figures in [`Status`], read when scraped, so the tasks pay nothing extra for them; the
//!   sequencer's entry count and finality by status are added once per batch.
//! * Histograms are [`BatchHistogram`]s: fixed buckets of atomic counters, observed once per run
//!   of entries sharing one sequencer timestamp (all of one sequenced batch), never once per
//!   entry. Measured (release, this VM): the exporter's histogram keeps every sample — 67 ns to
//!   record one, 13 ns to fold it in later, and 24 bytes each held in memory until a scrape or an
//!   upkeep drains it; at 140,000 entries/s and two latency histograms that is ≈ 2 % of a core
//!   and 7 MB/s of garbage. Here an observation of a whole run costs one bucket search: ≈ 2 ns
//!   per entry measured (the scan for runs included; jobs of 8,192 entries in runs of 500).
//!
//! Quorum latency needs an entry's timestamp when its seq becomes final, but acks carry no
//! timestamps; the center task stamps each applied run into its [`Timeline`], and whichever side
//! comes second (final after applied, or applied after final — a center that is behind) observes
//! `final time − timestamp`. Finality by outcome is read, for the seqs that just became final,
//! from the `Center`'s tally window (which still holds them: `limits`). Latencies are measured against the sequencer
//! leader's clock (the entry's timestamp): across hosts they include the clocks' skew.

use crate::error::EngineError;
use crate::status::{lock, HostView, Status};
use metrics::{Counter, Gauge, Key, Label, Level, Metadata, Recorder};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle, PrometheusRecorder};
use rtgs_core::entry::{Entry, Seq};
use std::collections::VecDeque;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// `/metrics` listens on `127.0.0.1:(METRICS_PORT_BASE + PORT_OFFSET)` unless told otherwise.
pub const METRICS_PORT_BASE: u16 = 9100;
/// Latencies of entries (seconds): milliseconds when idle, up to seconds under a flood (queueing);
/// the tail shows failovers (≈ 8 s) and catch-up.
const LATENCY_BUCKETS_S: [f64; 15] =
    [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 120.0];
/// One PostgreSQL batch transaction (seconds).
const COMMIT_BUCKETS_S: [f64; 13] =
    [0.000_5, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0];
/// Entries per sequenced batch: powers of two up to the sequencer's batch maximum (8,192).
const BATCH_BUCKETS: [f64; 14] =
    [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0];
const _: () = assert!(rtgs_core::limits::SEQUENCER_BATCH_ENTRIES_MAX as f64 <= BATCH_BUCKETS[13]);

const METADATA: Metadata<'static> = Metadata::new("rtgs_node", Level::INFO, Some(module_path!()));

/// A Prometheus histogram with fixed buckets over integer observations (µs, entries), observed
/// a run at a time.
pub struct BatchHistogram {
    name: &'static str,
    help: &'static str,
    /// Upper bounds in observation units (inclusive, as Prometheus' `le`).
    bounds: Vec<u64>,
    /// The bounds as Prometheus prints them.
    bounds_text: Vec<String>,
    /// Per bucket (not cumulative); the last is above every bound.
    counts: Vec<AtomicU64>,
    sum: AtomicU64,
    /// Observation units per exposed unit (1,000,000 µs per second; 1 for entries).
    units_per: f64,
}

impl BatchHistogram {
    fn new(name: &'static str, help: &'static str, bounds: &[f64], units_per: f64) -> BatchHistogram {
        BatchHistogram {
            name,
            help,
            bounds: bounds.iter().map(|b| (b * units_per).round() as u64).collect(),
            bounds_text: bounds.iter().map(|b| b.to_string()).collect(),
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0),
            units_per,
        }
    }

    /// `n` observations of `value` (observation units).
    pub fn observe_n(&self, value: u64, n: u64) {
        if n == 0 {
            return;
        }
        let bucket = self.bounds.partition_point(|&b| b < value);
        self.counts[bucket].fetch_add(n, Ordering::Relaxed);
        self.sum.fetch_add(value.saturating_mul(n), Ordering::Relaxed);
    }

    /// The count of each bucket (not cumulative; the last is above every bound).
    pub fn counts(&self) -> Vec<u64> {
        self.counts.iter().map(|c| c.load(Ordering::Relaxed)).collect()
    }

    /// The bucket bounds, in observation units.
    pub fn bounds(&self) -> &[u64] {
        &self.bounds
    }

    /// Appends the exposition (`_bucket` cumulative, `_sum`, `_count`; count = the `+Inf` bucket).
    fn render(&self, labels: &str, out: &mut String) {
        let (name, help) = (self.name, self.help);
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cumulative = 0u64;
        for (i, count) in self.counts.iter().enumerate() {
            cumulative += count.load(Ordering::Relaxed);
            let le = self.bounds_text.get(i).map_or("+Inf", String::as_str);
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{le}\"}} {cumulative}");
        }
        let sum = self.sum.load(Ordering::Relaxed) as f64 / self.units_per;
        let _ = writeln!(out, "{name}_sum{{{labels}}} {sum}\n{name}_count{{{labels}}} {cumulative}");
    }
}

/// Runs of applied entries waiting for finality, and finality advances waiting for entries
/// (see the module docs). Both in seq order.
#[derive(Default)]
pub struct Timeline {
    /// `(seq_first, seq_last, timestamp_us)` applied here, not final yet.
    runs: VecDeque<(Seq, Seq, u64)>,
    /// `(seq_unfinal_first, at_us)`: at `at_us` every seq below was final, and some of them
    /// were not applied here yet.
    finals: VecDeque<(Seq, u64)>,
    final_below: Seq,
    stamped_through: Seq,
    /// Runs (and advances) remembered at most.
    max: usize,
}

impl Timeline {
    /// A timeline remembering `n` runs (allocated now). Beyond it the oldest are forgotten: a
    /// forgotten run's quorum latency is never observed; for seqs of a forgotten advance the time
    /// they are applied stands in (overstated).
    /// [`TIMELINE_RUNS_MAX`](crate::limits::TIMELINE_RUNS_MAX): minutes of traffic while
    /// finality is halted.
    pub fn with_capacity(n: usize) -> Timeline {
        let max = n.max(1);
        Timeline {
            runs: VecDeque::with_capacity(max),
            finals: VecDeque::with_capacity(max),
            max,
            ..Timeline::default()
        }
    }

    /// `entries` (in seq order) are applied here at `now_us`.
    pub fn applied(&mut self, entries: &[Entry], now_us: u64, h: &BatchHistogram) {
        for (first, last, ts) in runs(entries) {
            self.stamped(first, last, ts, now_us, h);
        }
    }

    /// Every seq below `unfinal` is final at `now_us`.
    pub fn finalized(&mut self, unfinal: Seq, now_us: u64, h: &BatchHistogram) {
        if unfinal <= self.final_below {
            return;
        }
        self.final_below = unfinal;
        while let Some(run) = self.runs.front_mut() {
            if run.0 >= unfinal {
                break;
            }
            let last = run.1.min(unfinal - 1);
            h.observe_n(now_us.saturating_sub(run.2), last - run.0 + 1);
            if last == run.1 {
                self.runs.pop_front();
            } else {
                run.0 = last + 1;
            }
        }
        if unfinal - 1 > self.stamped_through {
            if self.finals.len() == self.max {
                self.finals.pop_front();
            }
            self.finals.push_back((unfinal, now_us));
        }
    }

    /// Entries `seq_first..=seq_last`, sequenced at `ts_us`, are applied here at `now_us`.
    fn stamped(&mut self, mut seq_first: Seq, seq_last: Seq, ts_us: u64, now_us: u64, h: &BatchHistogram) {
        self.stamped_through = self.stamped_through.max(seq_last);
        // Final before they were applied here: observed with the time they became final.
        while seq_first <= seq_last && seq_first < self.final_below {
            while self.finals.front().is_some_and(|f| f.0 <= seq_first) {
                self.finals.pop_front();
            }
            // Forgotten (the deque overflowed): at the latest, now.
            let (below, at_us) = self.finals.front().copied().unwrap_or((self.final_below, now_us));
            let last = seq_last.min(below - 1);
            h.observe_n(at_us.saturating_sub(ts_us), last - seq_first + 1);
            seq_first = last + 1;
        }
        // Advances whose seqs are all applied here now are spent.
        while self.finals.front().is_some_and(|f| f.0 <= self.stamped_through + 1) {
            self.finals.pop_front();
        }
        if seq_first > seq_last {
            return;
        }
        match self.runs.back_mut() {
            Some(back) if back.2 == ts_us && back.1 + 1 == seq_first => back.1 = seq_last,
            _ => {
                if self.runs.len() == self.max {
                    self.runs.pop_front(); // its latency is never observed (documented bound)
                }
                self.runs.push_back((seq_first, seq_last, ts_us));
            }
        }
    }
}

/// Runs of consecutive entries with one timestamp: `(seq_first, seq_last, timestamp_us)`.
fn runs(entries: &[Entry]) -> impl Iterator<Item = (Seq, Seq, u64)> + '_ {
    entries.chunk_by(|a, b| a.timestamp_us == b.timestamp_us && a.seq + 1 == b.seq).filter_map(|run| {
        let (first, last) = (run.first()?, run.last()?);
        Some((first.seq, last.seq, first.timestamp_us))
    })
}

/// One node's metrics.
pub struct Metrics {
    labels: String,
    recorder: PrometheusRecorder,
    handle: PrometheusHandle,
    sequencer_entries: Counter,
    finality_settled: Counter,
    finality_rejected: Counter,
    /// `rtgs_journal_lag_entries`, index = center - 1.
    lag: Vec<Gauge>,
    batch_entries: BatchHistogram,
    record_batch: BatchHistogram,
    apply_latency: BatchHistogram,
    quorum_latency: BatchHistogram,
    commit_batch: BatchHistogram,
    api_submit: BatchHistogram,
}

/// Counters mirrored from [`Status`] when scraped: (name, help).
const MIRRORED_COUNTERS: [(&str, &str); 8] = [
    ("rtgs_sequencer_leader_changes_total", "Times this node became the sequencer leader (takeovers)."),
    (
        "rtgs_gap_timeouts_total",
        "Journal gaps pulled from the outbox (older than 200 ms, too wide, or a lost tail).",
    ),
    ("rtgs_gap_entries_pulled_total", "Entries recovered by gap pulls."),
    ("rtgs_divergence_total", "Divergences seen by this center's finalizer (finality halts at the first)."),
    ("rtgs_pg_retries_total", "PostgreSQL calls retried (server unreachable or failing)."),
    ("rtgs_notices_total", "Final notices published to this center's participants."),
    ("rtgs_reacks_total", "Times finality stood still and this center published its acks again."),
    (
        "rtgs_ack_rewinds_total",
        "Times the finality task read the acks again (acks beyond its window, or a stall).",
    ),
];
/// Gauges read from [`Status`] when scraped: (name, help).
const GAUGES: [(&str, &str); 6] = [
    ("rtgs_sequencer_leader", "1 while this node leads the sequencer, else 0."),
    ("rtgs_sequencer_epoch", "The sequencer epoch this node last led at (0: never led)."),
    ("rtgs_journal_applied_seq", "Highest seq applied to this center's ledger."),
    ("rtgs_journal_committed_seq", "Highest seq committed to this center's database."),
    ("rtgs_finality_halted", "1 once a divergence halted finality here (an operator must intervene)."),
    (
        "rtgs_broker_data_lost",
        "1 while this node is halted because the broker lost data it had read (run rtgs rebuild-journal).",
    ),
];
/// Counters added to by the tasks: (name, help).
const COUNTERS: [(&str, &str); 2] = [
    ("rtgs_sequencer_entries_total", "Entries this node sequenced as leader (idle ticks included)."),
    ("rtgs_finality_total", "Seqs final at this center by outcome: every journal entry, idle ticks as ACCC."),
];
const LAG_HELP: &str = "Seqs a center's acks are behind the highest seq known here (grows while it is down).";

fn key(name: &'static str, labels: &[(&'static str, String)]) -> Key {
    Key::from_parts(name, labels.iter().map(|(k, v)| Label::new(*k, v.clone())).collect::<Vec<_>>())
}

impl Metrics {
    /// Registers every series: counters exist at 0 from the start (absent ≠ zero for `rate()`
    /// and the alert rules).
    pub fn new(center: &str, center_count: usize) -> Metrics {
        let recorder = PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        for (name, help) in MIRRORED_COUNTERS.into_iter().chain(COUNTERS) {
            recorder.describe_counter(name.into(), None, help.into());
        }
        for (name, help) in GAUGES.into_iter().chain([("rtgs_journal_lag_entries", LAG_HELP)]) {
            recorder.describe_gauge(name.into(), None, help.into());
        }
        let own = [("center", center.to_string())];
        let counter = |name: &'static str, extra: Option<(&'static str, &str)>| {
            let mut labels = own.to_vec();
            labels.extend(extra.map(|(k, v)| (k, v.to_string())));
            let c = recorder.register_counter(&key(name, &labels), &METADATA);
            c.increment(0);
            c
        };
        let sequencer_entries = counter("rtgs_sequencer_entries_total", None);
        let finality_settled = counter("rtgs_finality_total", Some(("status", "ACCC")));
        let finality_rejected = counter("rtgs_finality_total", Some(("status", "RJCT")));
        for (name, _) in MIRRORED_COUNTERS {
            let _ = counter(name, None);
        }
        let lag = (1..=center_count)
            .map(|c| {
                recorder.register_gauge(
                    &key("rtgs_journal_lag_entries", &[("center", format!("DC{c}"))]),
                    &METADATA,
                )
            })
            .collect();
        let us = 1_000_000.0;
        Metrics {
            labels: format!("center=\"{center}\""),
            sequencer_entries,
            finality_settled,
            finality_rejected,
            lag,
            batch_entries: BatchHistogram::new(
                "rtgs_sequencer_batch_entries",
                "Entries per batch this node sequenced (as leader).",
                &BATCH_BUCKETS,
                1.0,
            ),
            record_batch: BatchHistogram::new(
                "rtgs_sequencer_record_seconds",
                "The leader's wait for one batch's durable record in the sequencer database (outbox \
                 row, bmis, fence; retries included): the sequencer's pace under load.",
                &COMMIT_BUCKETS_S,
                us,
            ),
            apply_latency: BatchHistogram::new(
                "rtgs_apply_latency_seconds",
                "Entry timestamp (sequenced) to committed in this center's database.",
                &LATENCY_BUCKETS_S,
                us,
            ),
            quorum_latency: BatchHistogram::new(
                "rtgs_quorum_latency_seconds",
                "Entry timestamp (sequenced) to final (quorum of acks) at this center.",
                &LATENCY_BUCKETS_S,
                us,
            ),
            commit_batch: BatchHistogram::new(
                "rtgs_commit_batch_seconds",
                "One PostgreSQL transaction of an applied batch (the attempt that succeeded).",
                &COMMIT_BUCKETS_S,
                us,
            ),
            api_submit: BatchHistogram::new(
                "rtgs_api_submit_seconds",
                "The API's wait for the broker to store one round of this node's submissions (the \
                 inbound hop before the sequencer leader can take them; retries included).",
                &COMMIT_BUCKETS_S,
                us,
            ),
            recorder,
            handle,
        }
    }

    /// One batch sequenced by this node (leader), whose record took `recorded`.
    pub fn sequenced(&self, entries: usize, recorded: Duration) {
        self.batch_entries.observe_n(entries as u64, 1);
        self.record_batch.observe_n(recorded.as_micros() as u64, 1);
        self.sequencer_entries.increment(entries as u64);
    }

    /// The quorum latency histogram (the center task's [`Timeline`] observes it).
    pub fn quorum_latency(&self) -> &BatchHistogram {
        &self.quorum_latency
    }

    /// The API's broker stored one round of submissions after `took`.
    pub fn api_stored(&self, took: Duration) {
        self.api_submit.observe_n(took.as_micros() as u64, 1);
    }

    /// The committer wrote `entries` in one transaction that took `took`, done at `now_us`.
    pub fn committed(&self, entries: &[Entry], took: Duration, now_us: u64) {
        self.commit_batch.observe_n(took.as_micros() as u64, 1);
        for (first, last, ts) in runs(entries) {
            self.apply_latency.observe_n(now_us.saturating_sub(ts), last - first + 1);
        }
    }

    /// `settled` + `rejected` seqs became final here.
    pub fn finalized(&self, settled: u64, rejected: u64) {
        self.finality_settled.increment(settled);
        self.finality_rejected.increment(rejected);
    }

    /// The text exposition, with the mirrored counters and the gauges read from `status` first.
    pub fn render(&self, status: &Status) -> String {
        let own = [("center", status.name.clone())];
        let c = lock(&status.center).clone();
        let q = &status.sequencer;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let mirrored = [
            load(&q.takeovers),
            c.stats.gap_pulls,
            c.gap_entries_pulled,
            c.stats.divergences,
            load(&status.pg_retries),
            load(&status.publish.notices),
            c.stats.reacks,
            c.stats.ack_rewinds,
        ];
        for ((name, _), value) in MIRRORED_COUNTERS.into_iter().zip(mirrored) {
            self.recorder.register_counter(&key(name, &own), &METADATA).absolute(value);
        }
        let gauges = [
            u64::from(q.leader.load(Ordering::Relaxed)),
            load(&q.epoch),
            c.seq_applied,
            load(&status.commits.seq_committed),
            u64::from(c.halted),
            u64::from(crate::status::lock(&status.broker_lost).is_some()),
        ];
        for ((name, _), value) in GAUGES.into_iter().zip(gauges) {
            self.recorder.register_gauge(&key(name, &own), &METADATA).set(value as f64);
        }
        // Lag: behind the highest seq known here (any center's ack, or this node's own work).
        let acked = &c.seq_acked[..self.lag.len()];
        let known = acked.iter().copied().chain([c.seq_applied, load(&q.seq_sequenced)]).max().unwrap_or(0);
        for (gauge, acked) in self.lag.iter().zip(acked) {
            gauge.set(known.saturating_sub(*acked) as f64);
        }
        let mut out = self.handle.render();
        for h in [
            &self.batch_entries,
            &self.record_batch,
            &self.apply_latency,
            &self.quorum_latency,
            &self.commit_batch,
            &self.api_submit,
        ] {
            h.render(&self.labels, &mut out);
        }
        if let Some(p) = &status.plugins {
            render_plugins(&self.labels, &lock(&p.host), &mut out);
        }
        out
    }
}

/// The plugins' series, as of their last snapshot (written here, not through the recorder: the
/// set of open alerts comes and goes, and a closed one must vanish, not stay at its last value).
///
/// * `rtgs_plugin_alerts_open{plugin, kind}` — open alerts per kind, every kind present (0 when
///   none is open);
/// * `rtgs_plugin_alert_since_seconds{plugin, kind, subject, alert_id}` — one series per open
///   alert, its value the journal time it opened: what the `RtgsPluginAlert` rule fires on, one
///   alert per plugin alert whichever centers report it;
/// * `rtgs_plugin_figure{figure}` — every figure the plugins report (`collection_batches_stale`,
///   `collection_batches_waiting`, `collection_groups_skipped`, ...).
fn render_plugins(labels: &str, host: &HostView, out: &mut String) {
    let _ = writeln!(
        out,
        "# HELP rtgs_plugin_alerts_open Alerts open in a plugin's replicated state, by kind.\n\
         # TYPE rtgs_plugin_alerts_open gauge"
    );
    for (plugin, kind) in &host.alert_kinds {
        let n = host.alerts.iter().filter(|a| a.plugin == *plugin && a.kind == *kind).count();
        let plugin = plugin.name();
        let _ = writeln!(out, "rtgs_plugin_alerts_open{{{labels},plugin=\"{plugin}\",kind=\"{kind}\"}} {n}");
    }
    let _ = writeln!(
        out,
        "# HELP rtgs_plugin_alert_since_seconds One series per open plugin alert: the journal time it opened.\n\
         # TYPE rtgs_plugin_alert_since_seconds gauge"
    );
    for a in &host.alerts {
        let (plugin, kind, subject, id) = (a.plugin.name(), a.kind, label_value(&a.subject), a.id);
        let since = a.since_us as f64 / 1e6;
        let _ = writeln!(
            out,
            "rtgs_plugin_alert_since_seconds{{{labels},plugin=\"{plugin}\",kind=\"{kind}\",subject=\"{subject}\",alert_id=\"{id}\"}} {since}"
        );
    }
    let _ = writeln!(
        out,
        "# HELP rtgs_plugin_figure The plugins' figures (counts) at their last snapshot.\n\
         # TYPE rtgs_plugin_figure gauge"
    );
    // The host names its owner/term figures once per plugin: the first of a name is shown.
    let mut seen = std::collections::BTreeSet::new();
    for (name, value) in host.figures.iter().filter(|(name, _)| seen.insert(*name)) {
        let _ = writeln!(out, "rtgs_plugin_figure{{{labels},figure=\"{name}\"}} {value}");
    }
}

/// A label value with `\`, `"` and newlines escaped (the exposition format's rule).
fn label_value(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// Binds `/metrics` (before the node does anything else: a port in use is a configuration error
/// to see at once).
pub async fn bind(addr: SocketAddr) -> Result<tokio::net::TcpListener, EngineError> {
    tokio::net::TcpListener::bind(addr).await.map_err(|e| {
        EngineError::io(
            format!(
                "cannot listen for /metrics on {addr} (in use? set --metrics-listen / RTGS_METRICS_LISTEN)"
            ),
            e,
        )
    })
}

/// Serves `GET /metrics` until the node stops.
pub async fn serve(
    metrics: Arc<Metrics>,
    status: Arc<Status>,
    listener: tokio::net::TcpListener,
) -> Result<(), EngineError> {
    use axum::extract::{ConnectInfo, State};
    use axum::http::{header, StatusCode};
    use axum::response::IntoResponse;
    let addr = listener.local_addr().map_err(|e| EngineError::io("the metrics listener", e))?;
    let _ = status.metrics_listen.set(addr);
    tracing::info!(center = %status.name, "metrics on http://{addr}/metrics, status on http://{addr}/status");
    type Shared = (Arc<Metrics>, Arc<Status>);
    async fn get(
        State((m, s)): State<Shared>,
        ConnectInfo(peer): ConnectInfo<SocketAddr>,
    ) -> impl IntoResponse {
        if !is_loopback(peer) {
            return (StatusCode::FORBIDDEN, "metrics answer loopback callers only\n".to_string())
                .into_response();
        }
        ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], m.render(&s)).into_response()
    }
    async fn get_status(
        State((_, s)): State<Shared>,
        ConnectInfo(peer): ConnectInfo<SocketAddr>,
    ) -> impl IntoResponse {
        if !is_loopback(peer) {
            return (StatusCode::FORBIDDEN, "status answers loopback callers only\n".to_string())
                .into_response();
        }
        ([(header::CONTENT_TYPE, "application/json")], s.json().to_string()).into_response()
    }
    let app = axum::Router::new()
        .route("/metrics", axum::routing::get(get))
        .route("/status", axum::routing::get(get_status))
        .with_state((metrics, status));
    axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>())
        .await
        .map_err(|e| EngineError::io("metrics server", e))
}

/// 127.0.0.0/8 and ::1, also as IPv4-mapped IPv6 (a dual-stack listener's view of 127.0.0.1).
pub fn is_loopback(peer: SocketAddr) -> bool {
    peer.ip().to_canonical().is_loopback()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist() -> BatchHistogram {
        BatchHistogram::new("h", "help", &LATENCY_BUCKETS_S, 1_000_000.0)
    }

    fn counts(h: &BatchHistogram) -> (u64, u64) {
        (h.counts.iter().map(|c| c.load(Ordering::Relaxed)).sum(), h.sum.load(Ordering::Relaxed))
    }

    #[test]
    fn a_histogram_puts_a_bound_in_its_own_bucket_and_renders_cumulatively() {
        let h = hist();
        h.observe_n(1_000, 3); // exactly 1 ms: le="0.001"
        h.observe_n(1_001, 1);
        h.observe_n(500_000_000, 2); // above every bound: +Inf only
        let mut out = String::new();
        h.render("center=\"DC1\"", &mut out);
        assert!(out.contains("h_bucket{center=\"DC1\",le=\"0.001\"} 3\n"), "{out}");
        assert!(out.contains("h_bucket{center=\"DC1\",le=\"0.002\"} 4\n"), "{out}");
        assert!(out.contains("h_bucket{center=\"DC1\",le=\"120\"} 4\n"), "{out}");
        assert!(out.contains("h_bucket{center=\"DC1\",le=\"+Inf\"} 6\n"), "{out}");
        assert!(out.contains("h_count{center=\"DC1\"} 6\n"), "{out}");
        assert!(out.contains("h_sum{center=\"DC1\"} 1000.004001\n"), "{out}");
    }

    #[test]
    fn quorum_latency_is_observed_by_whichever_side_comes_second() {
        let h = hist();
        let mut t = Timeline::with_capacity(8);
        // Applied first (seqs 1..=10 at ts 100, 11..=12 at ts 200), then final through 11.
        t.stamped(1, 10, 100, 150, &h);
        t.stamped(11, 12, 200, 250, &h);
        assert_eq!(counts(&h), (0, 0));
        t.finalized(12, 1_100, &h);
        assert_eq!(counts(&h), (11, 10 * 1_000 + 900));
        // Final before applied here (this center is behind): the time it became final counts.
        t.finalized(20, 2_000, &h);
        assert_eq!(counts(&h).0, 12);
        t.finalized(30, 3_000, &h);
        t.stamped(13, 25, 1_000, 5_000, &h);
        // 13 (rest of the run) and 13..=19 at 2,000; 20..=25 at 3,000.
        assert_eq!(counts(&h).0, 12 + 7 + 6);
        assert_eq!(counts(&h).1, 12_700 + 7 * 1_000 + 6 * 2_000);
        // Still unfinal: waits; nothing is observed twice.
        t.stamped(30, 31, 4_000, 6_000, &h);
        t.finalized(30, 9_000, &h);
        assert_eq!(counts(&h).0, 25);
        t.finalized(32, 9_000, &h);
        assert_eq!(counts(&h).0, 27);
        assert!(t.runs.is_empty() && t.finals.is_empty());
    }

    #[test]
    fn runs_split_on_timestamp_and_seq() {
        let e = |seq, ts| Entry::tick(seq, 1, ts, rtgs_core::entry::CenterId(1));
        let entries = [e(1, 5), e(2, 5), e(3, 6), e(5, 6)];
        assert_eq!(runs(&entries).collect::<Vec<_>>(), [(1, 2, 5), (3, 3, 6), (5, 5, 6)]);
    }

    #[test]
    fn plugin_series_show_every_kind_each_open_alert_and_each_figure_once() {
        use rtgs_core::entry::PluginKind;
        use rtgs_core::plugin::PluginAlert;
        let alert = |id, kind, subject: &str| PluginAlert {
            plugin: PluginKind::Collection,
            id,
            kind,
            subject: subject.to_string(),
            since_us: 1_500_000,
        };
        let host = HostView {
            alerts: vec![alert(3, "stuck_tx", "batch:7"), alert(4, "stuck_tx", "batch:\"9")],
            alert_kinds: vec![(PluginKind::Collection, "stuck_tx"), (PluginKind::Collection, "reverted")],
            figures: vec![("owner_center", 2), ("collection_batches_stale", 2), ("owner_center", 2)],
            ..HostView::default()
        };
        let mut out = String::new();
        render_plugins("center=\"DC1\"", &host, &mut out);
        for line in [
            "rtgs_plugin_alerts_open{center=\"DC1\",plugin=\"collection\",kind=\"stuck_tx\"} 2\n",
            "rtgs_plugin_alerts_open{center=\"DC1\",plugin=\"collection\",kind=\"reverted\"} 0\n",
            "rtgs_plugin_alert_since_seconds{center=\"DC1\",plugin=\"collection\",kind=\"stuck_tx\",subject=\"batch:7\",alert_id=\"3\"} 1.5\n",
            "subject=\"batch:\\\"9\",alert_id=\"4\"} 1.5\n",
            "rtgs_plugin_figure{center=\"DC1\",figure=\"collection_batches_stale\"} 2\n",
        ] {
            assert!(out.contains(line), "{line} missing:\n{out}");
        }
        assert_eq!(out.matches("figure=\"owner_center\"").count(), 1, "{out}");
    }

    #[test]
    fn loopback_is_v4_v6_and_mapped() {
        for a in ["127.0.0.1:1", "127.9.9.9:1", "[::1]:1", "[::ffff:127.0.0.1]:1"] {
            assert!(is_loopback(a.parse().unwrap_or_else(|e| panic!("{a}: {e}"))), "{a}");
        }
        for a in ["10.0.0.1:1", "[::ffff:10.0.0.1]:1", "[2001:db8::1]:1", "0.0.0.0:1"] {
            assert!(!is_loopback(a.parse().unwrap_or_else(|e| panic!("{a}: {e}"))), "{a}");
        }
    }
}
