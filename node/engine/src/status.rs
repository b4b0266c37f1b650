//! What the node shows: each task writes its own figures here, the status reporter and
//! `/metrics` read them. **Counters observe, they do not decide**: nothing in the engine reads a
//! figure of this module back to take a decision (what a task needs from another is handed to it
//! explicitly: a channel, a `watch`).
//!
//! The status is JSON in `RTGS_STATUS_FILE` (every [`STATUS_INTERVAL`]), the same JSON at
//! `GET /status` on the `/metrics` listener (loopback only; what `rtgs status` reads), and a line
//! on stderr every `RTGS_STATUS_INTERVAL_S`. Its top-level fields are read by the drills,
//! `bench/`, `rtgs status` and scripts: renaming one breaks them.

use crate::limits::STATUS_INTERVAL;
use rtgs_core::center::CenterStats;
use rtgs_core::entry::{PluginKind, Seq};
use rtgs_core::limits::CENTER_COUNT_MAX;
use rtgs_core::plugin::PluginAlert;
use serde_json::{Map, Value};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// Locks a figures mutex; a writer that panicked left figures, not broken state.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The sequencer task's figures.
#[derive(Default)]
pub struct SequencerStats {
    pub leader: AtomicBool,
    pub epoch: AtomicU64,
    pub takeovers: AtomicU64,
    pub seq_sequenced: AtomicU64,
    /// Commands not journaled, answered on the notify topic: conflicts (DUPL) and retries.
    pub refusals: AtomicU64,
    pub malformed_inbound: AtomicU64,
    /// Inbound messages taken from the push path (an API's, before the broker stored them).
    pub inbound_pushed: AtomicU64,
    /// Commands in inbound topic messages dropped as copies of commands taken from the push path
    /// (their twins were admitted already).
    pub inbound_copies_skipped: AtomicU64,
    /// Groups sequenced a second time because a `bmi` in them was sequenced before.
    pub bmi_rounds: AtomicU64,
    /// Entries sequenced as leader, idle ticks included (metrics).
    pub entries: AtomicU64,
    /// This node's last claim of the lease (`None`: it never led in this process).
    pub last_takeover: Mutex<Option<TakeoverRecord>>,
}

/// One claim of the sequencer lease, as the node that claimed it saw it.
#[derive(Clone, Debug, PartialEq)]
pub struct TakeoverRecord {
    pub epoch: u64,
    /// When this node led (its wall clock).
    pub at_unix_ms: u64,
    /// Who held the lease before (this node itself after a restart; `None`: nobody ever led).
    pub previous_leader: Option<String>,
    /// How long the lease had been silent when it was claimed (the database's clock): the
    /// leader's silence the takeover waited out.
    pub leader_silent_ms: Option<u64>,
    /// From the claim to leading (rebuild from the outbox, republish).
    pub rebuild_ms: u64,
}

impl TakeoverRecord {
    fn json(&self) -> Value {
        serde_json::json!({
            "epoch": self.epoch,
            "at_unix_ms": self.at_unix_ms,
            "previous_leader": self.previous_leader,
            "leader_silent_ms": self.leader_silent_ms,
            "rebuild_ms": self.rebuild_ms,
            // What an operator reads as "how long it took": the silence plus the rebuild.
            "took_ms": self.leader_silent_ms.map(|s| s + self.rebuild_ms),
        })
    }
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// The last minute of finality, sampled once a second by the reporter (what the operator
/// console charts): entries final per second, and submit → final latency from the quorum
/// latency histogram's bucket counts (their differences over the minute).
#[derive(Debug, Default)]
pub struct LastMinute {
    /// `(finalized, quorum latency bucket counts)` once a second, oldest first.
    samples: VecDeque<(u64, Vec<u64>)>,
    /// The histogram's bucket bounds (µs; the last bucket is above them all).
    bounds_us: Vec<u64>,
}

impl LastMinute {
    /// Samples kept: a minute of differences.
    pub const SAMPLES_MAX: usize = 61;

    pub fn sample(&mut self, finalized: u64, buckets: Vec<u64>, bounds_us: &[u64]) {
        if self.bounds_us.len() != bounds_us.len() {
            self.bounds_us = bounds_us.to_vec();
        }
        if self.samples.len() == Self::SAMPLES_MAX {
            self.samples.pop_front();
        }
        self.samples.push_back((finalized, buckets));
    }

    /// `{"seconds", "finalized_per_s": [...], "finality_per_s", "finals", "final_p99_ms"}`:
    /// `final_p99_ms` interpolated within its bucket as Prometheus' `histogram_quantile` does
    /// (null without finals in the minute; the top bound when above every bound).
    pub fn json(&self) -> Value {
        let per_s: Vec<u64> = self
            .samples
            .iter()
            .zip(self.samples.iter().skip(1))
            .map(|(a, b)| b.0.saturating_sub(a.0))
            .collect();
        let seconds = per_s.len();
        let rate = if seconds == 0 { 0.0 } else { per_s.iter().sum::<u64>() as f64 / seconds as f64 };
        let deltas: Vec<u64> = match (self.samples.front(), self.samples.back()) {
            (Some(a), Some(b)) if a.1.len() == b.1.len() => {
                a.1.iter().zip(&b.1).map(|(x, y)| y.saturating_sub(*x)).collect()
            }
            _ => Vec::new(),
        };
        let finals: u64 = deltas.iter().sum();
        serde_json::json!({
            "seconds": seconds,
            "finalized_per_s": per_s,
            "finality_per_s": (rate * 10.0).round() / 10.0,
            "finals": finals,
            "final_p99_ms": quantile_ms(0.99, &deltas, &self.bounds_us),
        })
    }
}

/// The `q` quantile (ms) of observations counted per bucket (`counts[i]` ≤ `bounds_us[i]`, the
/// last above every bound), linear within the bucket.
fn quantile_ms(q: f64, counts: &[u64], bounds_us: &[u64]) -> Option<f64> {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = q * total as f64;
    let mut below = 0u64;
    for (i, &n) in counts.iter().enumerate() {
        if n > 0 && (below + n) as f64 >= rank {
            let Some(&hi) = bounds_us.get(i) else { return bounds_us.last().map(|&b| b as f64 / 1e3) };
            let lo = if i == 0 { 0 } else { bounds_us[i - 1] };
            let within = (rank - below as f64) / n as f64;
            let us = lo as f64 + (hi - lo) as f64 * within;
            return Some((us / 10.0).round() / 100.0);
        }
        below += n;
    }
    None
}

/// The center task's view, published after every round of its loop.
#[derive(Clone, Debug, Default)]
pub struct CenterView {
    pub seq_applied: Seq,
    pub seq_unfinal_first: Seq,
    pub finalized: u64,
    pub halted: bool,
    /// The highest epoch among the journal entries this center has read: the epoch of the
    /// leader that sequenced them, which a follower shows as the cluster's epoch (figure only).
    pub journal_epoch: u32,
    /// The core's own counters (`Center::stats`).
    pub stats: CenterStats,
    /// Entries read back from the outbox by gap pulls.
    pub gap_entries_pulled: u64,
    /// Highest seq each center acked, as read here (index = center − 1).
    pub seq_acked: [Seq; CENTER_COUNT_MAX],
}

/// The committer's figures.
#[derive(Default)]
pub struct CommitStats {
    pub seq_committed: AtomicU64,
    pub batches_committed: AtomicU64,
}

/// The publisher's figures.
#[derive(Default)]
pub struct PublishStats {
    /// Final notices published to this center's participants.
    pub notices: AtomicU64,
}

/// The plugins' figures (present with plugins enabled).
#[derive(Default)]
pub struct PluginStatus {
    /// Written by the center task.
    pub host: Mutex<HostView>,
    /// Written by the adapter tasks.
    pub results_submitted: AtomicU64,
    pub adapter_figures: Mutex<Vec<(&'static str, u64)>>,
}

/// The plugin host as the center task sees it.
#[derive(Clone, Debug, Default)]
pub struct HostView {
    pub live: bool,
    pub owner: u64,
    pub term: u64,
    /// The plugin's whole-state hash at the last snapshot (what `plugin_state` holds).
    pub state_hash: u64,
    pub seq_snapshot: Seq,
    pub snapshots: u64,
    pub effects_handed: u64,
    pub figures: Vec<(&'static str, u64)>,
    /// The plugins' open alerts at the last snapshot (the same on every center at one seq).
    pub alerts: Vec<PluginAlert>,
    /// Every `(plugin, kind)` an alert may have: their series exist at 0.
    pub alert_kinds: Vec<(PluginKind, &'static str)>,
}

/// Every figure of the node, for the reporter and `/metrics`.
pub struct Status {
    pub name: String,
    pub center_count: usize,
    pub metrics_listen: OnceLock<SocketAddr>,
    pub sequencer: Arc<SequencerStats>,
    pub center: Arc<Mutex<CenterView>>,
    pub commits: Arc<CommitStats>,
    pub publish: Arc<PublishStats>,
    /// PostgreSQL calls repeated ([`crate::pg::PgRetry`]).
    pub pg_retries: Arc<AtomicU64>,
    pub plugins: Option<Arc<PluginStatus>>,
    /// Why the node is halted at start because the broker lost data (`broker_loss`).
    pub broker_lost: Mutex<Option<String>>,
    /// The push path's counters (`push`); all zero when it is off.
    pub push: Arc<crate::push::PushStats>,
    /// The last minute of finality (the reporter samples it).
    pub minute: Mutex<LastMinute>,
}

impl Status {
    pub fn new(name: &str, center_count: usize, plugins: bool) -> Self {
        Status {
            name: name.to_string(),
            center_count,
            metrics_listen: OnceLock::new(),
            sequencer: Arc::default(),
            center: Arc::default(),
            commits: Arc::default(),
            publish: Arc::default(),
            pg_retries: Arc::default(),
            plugins: plugins.then(Arc::default),
            broker_lost: Mutex::new(None),
            push: Arc::default(),
            minute: Mutex::new(LastMinute::default()),
        }
    }

    /// The status as JSON: every figure under its own name, the core's counters under `center`.
    pub fn json(&self) -> Value {
        let (q, c) = (&self.sequencer, lock(&self.center).clone());
        let load = |a: &AtomicU64| Value::from(a.load(Ordering::Relaxed));
        let mut map = Map::new();
        map.insert("center".into(), self.name.clone().into());
        map.insert("pid".into(), std::process::id().into());
        map.insert("leader".into(), q.leader.load(Ordering::Relaxed).into());
        let broker_lost = lock(&self.broker_lost).clone();
        map.insert("halted".into(), (c.halted || broker_lost.is_some()).into());
        map.insert(
            "halted_reason".into(),
            match (&broker_lost, c.halted) {
                (Some(why), _) => format!("the broker lost data: {why}").into(),
                (None, true) => "divergence".into(),
                (None, false) => Value::Null,
            },
        );
        map.insert("broker_data_lost".into(), broker_lost.is_some().into());
        map.insert("metrics_listen".into(), self.metrics_listen.get().map(|a| a.to_string()).into());
        map.insert("center_count".into(), self.center_count.into());
        let fields: [(&str, Value); 22] = [
            ("epoch", load(&q.epoch)),
            ("journal_epoch", c.journal_epoch.into()),
            ("takeovers", load(&q.takeovers)),
            ("seq_sequenced", load(&q.seq_sequenced)),
            ("seq_applied", c.seq_applied.into()),
            ("seq_committed", load(&self.commits.seq_committed)),
            ("seq_unfinal_first", c.seq_unfinal_first.into()),
            // Every seq up to here is final at this center.
            ("seq_final", c.seq_unfinal_first.saturating_sub(1).into()),
            ("finalized", c.finalized.into()),
            ("divergences", c.stats.divergences.into()),
            ("gap_pulls", c.stats.gap_pulls.into()),
            ("gap_entries_pulled", c.gap_entries_pulled.into()),
            ("notices", load(&self.publish.notices)),
            ("refusals", load(&q.refusals)),
            ("batches_committed", load(&self.commits.batches_committed)),
            ("pg_retries", load(&self.pg_retries)),
            ("malformed_inbound", load(&q.malformed_inbound)),
            ("inbound_pushed", load(&q.inbound_pushed)),
            ("inbound_copies_skipped", load(&q.inbound_copies_skipped)),
            ("bmi_rounds", load(&q.bmi_rounds)),
            ("reacks", c.stats.reacks.into()),
            ("ack_rewinds", c.stats.ack_rewinds.into()),
        ];
        for (name, value) in fields {
            map.insert(name.into(), value);
        }
        // Highest seq each center acked, as this node last read it (index = center − 1): how far
        // a center that does not answer is behind, seen from the others.
        let acked = &c.seq_acked[..self.center_count.min(CENTER_COUNT_MAX)];
        map.insert("seq_acked".into(), acked.iter().map(|&s| Value::from(s)).collect());
        // Open operator alerts: the plugins' (held in their replicated state, so every center
        // lists the same ones at the same seq), as of the last plugin snapshot.
        map.insert("alerts".into(), self.alerts_json());
        map.insert("center_stats".into(), center_stats_json(&c.stats));
        let push = &self.push;
        map.insert(
            "push".into(),
            serde_json::json!({
                "journal_notices": push.journal_notices.load(Ordering::Relaxed),
                "ack_notices": push.ack_notices.load(Ordering::Relaxed),
                "skipped": push.skipped.load(Ordering::Relaxed),
                "reconnects": push.reconnects.load(Ordering::Relaxed),
                "listening": push.listening.load(Ordering::Relaxed),
            }),
        );
        map.insert("last_minute".into(), lock(&self.minute).json());
        map.insert(
            "last_takeover".into(),
            lock(&q.last_takeover).as_ref().map_or(Value::Null, TakeoverRecord::json),
        );
        map.insert("unix_ms".into(), unix_ms().into());
        if let Some(p) = &self.plugins {
            map.insert("plugins".into(), plugins_json(p, &c.stats));
        }
        Value::Object(map)
    }

    fn alerts_json(&self) -> Value {
        let Some(p) = &self.plugins else { return Value::Array(Vec::new()) };
        let alerts = lock(&p.host).alerts.clone();
        alerts
            .iter()
            .map(|a| {
                serde_json::json!({
                    "plugin": a.plugin.name(),
                    "id": a.id,
                    "kind": a.kind,
                    "subject": a.subject,
                    "since_us": a.since_us,
                })
            })
            .collect()
    }

    /// Writes the status file (atomically: a temporary file renamed over it).
    pub fn write(&self, file: &Path) {
        let tmp = file.with_extension("tmp");
        if let Ok(json) = serde_json::to_vec(&self.json()) {
            if std::fs::write(&tmp, json).is_ok() {
                let _ = std::fs::rename(&tmp, file);
            }
        }
    }

    /// The reporter task: the file every [`STATUS_INTERVAL`], a line every `line_every`.
    /// The reporter also samples [`LastMinute`] once a second from `metrics`.
    pub async fn report(
        self: Arc<Self>,
        metrics: Arc<crate::metrics::Metrics>,
        file: Option<PathBuf>,
        line_every: Option<Duration>,
    ) {
        let mut tick = tokio::time::interval(STATUS_INTERVAL);
        let mut last_line = Instant::now();
        let mut last_sample: Option<Instant> = None;
        loop {
            tick.tick().await;
            if last_sample.is_none_or(|at| at.elapsed() >= Duration::from_secs(1)) {
                last_sample = Some(Instant::now());
                let finalized = lock(&self.center).finalized;
                let h = metrics.quorum_latency();
                lock(&self.minute).sample(finalized, h.counts(), h.bounds());
            }
            if let Some(file) = &file {
                self.write(file);
            }
            if line_every.is_some_and(|every| last_line.elapsed() >= every) {
                last_line = Instant::now();
                tracing::info!(center = %self.name, "{}", self.line_fields());
            }
        }
    }

    /// The status line without the center's name (the log's `center` field carries it).
    fn line_fields(&self) -> String {
        let s = self.json();
        let v = |k: &str| s[k].to_string();
        format!(
            "leader={} epoch={} sequenced={} applied={} committed={} final<{} finalized={} gap_pulls={} \
             notices={} pg_retries={}{}",
            v("leader"),
            v("epoch"),
            v("seq_sequenced"),
            v("seq_applied"),
            v("seq_committed"),
            v("seq_unfinal_first"),
            v("finalized"),
            v("gap_pulls"),
            v("notices"),
            v("pg_retries"),
            match s["halted_reason"].as_str() {
                Some(why) => format!(" HALTED ({why})"),
                None => String::new(),
            }
        )
    }
}

fn center_stats_json(s: &CenterStats) -> Value {
    let fields: [(&str, u64); 11] = [
        ("gap_pulls", s.gap_pulls),
        ("gap_timeouts", s.gap_timeouts),
        ("entries_dropped_for_room", s.entries_dropped_for_room),
        ("reacks", s.reacks),
        ("ack_rewinds", s.ack_rewinds),
        ("acks_dropped_beyond_window", s.acks_dropped_beyond_window),
        ("owner_proposals", s.owner_proposals),
        ("notices", s.notices),
        ("divergences", s.divergences),
        ("seq_acked_elsewhere", s.seq_acked_elsewhere),
        ("checkpoints", s.checkpoints),
    ];
    Value::Object(fields.into_iter().map(|(k, v)| (k.to_string(), v.into())).collect())
}

fn plugins_json(p: &PluginStatus, center: &CenterStats) -> Value {
    let h = lock(&p.host).clone();
    let mut map = Map::new();
    map.insert("live".into(), h.live.into());
    let counters: [(&str, u64); 8] = [
        ("owner_center", h.owner),
        ("owner_term", h.term),
        ("plugin_state_hash", h.state_hash),
        ("seq_snapshot", h.seq_snapshot),
        ("snapshots", h.snapshots),
        ("effects_handed", h.effects_handed),
        ("results_submitted", p.results_submitted.load(Ordering::Relaxed)),
        ("owner_proposals", center.owner_proposals),
    ];
    for (k, v) in counters {
        map.insert(k.into(), v.into());
    }
    for (k, v) in h.figures.iter().chain(lock(&p.adapter_figures).iter()) {
        // The host's owner/term figures are the same as the counters above.
        map.entry(*k).or_insert_with(|| (*v).into());
    }
    Value::Object(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_minute_rates_and_p99_come_from_differences() {
        let bounds = [1_000, 2_000, 5_000];
        let mut m = LastMinute::default();
        assert_eq!(m.json()["final_p99_ms"], Value::Null, "no samples, no figure");
        // Before the minute: 1,000 finals in the lowest bucket, which do not count.
        m.sample(1_000, vec![1_000, 0, 0, 0], &bounds);
        m.sample(1_100, vec![1_000, 100, 0, 0], &bounds);
        m.sample(1_300, vec![1_000, 298, 2, 0], &bounds);
        let j = m.json();
        assert_eq!(j["finalized_per_s"], serde_json::json!([100, 200]));
        assert_eq!((j["seconds"].as_u64(), j["finality_per_s"].as_f64()), (Some(2), Some(150.0)));
        assert_eq!(j["finals"].as_u64(), Some(300));
        // Rank 297 of 300: in the (1, 2] ms bucket, 297/298 of the way.
        let p99 = j["final_p99_ms"].as_f64().unwrap_or(0.0);
        assert!((1.99..=2.0).contains(&p99), "{p99}");
        for i in 0..LastMinute::SAMPLES_MAX + 5 {
            m.sample(1_300 + i as u64, vec![1_000, 298, 2, 1], &bounds);
        }
        let j = m.json();
        assert_eq!(j["seconds"].as_u64(), Some(60), "a minute of differences is kept");
        assert_eq!(j["final_p99_ms"].as_f64(), None, "nothing final in the minute: {j}");
    }

    #[test]
    fn a_quantile_above_every_bound_is_the_top_bound() {
        assert_eq!(quantile_ms(0.99, &[0, 0, 5], &[1_000, 2_000]), Some(2.0));
        assert_eq!(quantile_ms(0.5, &[4, 0, 0], &[1_000, 2_000]), Some(0.5));
    }
}
