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
    /// Groups sequenced a second time because a `bmi` in them was sequenced before.
    pub bmi_rounds: AtomicU64,
    /// Entries sequenced as leader, idle ticks included (metrics).
    pub entries: AtomicU64,
}

/// The center task's view, published after every round of its loop.
#[derive(Clone, Debug, Default)]
pub struct CenterView {
    pub seq_applied: Seq,
    pub seq_unfinal_first: Seq,
    pub finalized: u64,
    pub halted: bool,
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
        let fields: [(&str, Value); 19] = [
            ("epoch", load(&q.epoch)),
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
    pub async fn report(self: Arc<Self>, file: Option<PathBuf>, line_every: Option<Duration>) {
        let mut tick = tokio::time::interval(STATUS_INTERVAL);
        let mut last_line = Instant::now();
        loop {
            tick.tick().await;
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
