//! Plugins in the production engine (`--collection`): the journal reader's plugin host, the
//! owner's adapter task and the ownership failure detector.
//!
//! * **Host** ([`ReaderPlugins`], owned by the center's journal reader): every applied entry
//!   goes to the core's `PluginHost` right after the ledger, and the step digest is folded into
//!   the ledger's chained hash — so the applied-acks, and through them the quorum finalizer,
//!   compare plugin state across the centers at every seq, exactly as in the embedded engine.
//!   After a batch in which a plugin took an entry, the reader takes the host's checkpoints and
//!   hands them to the committer with the batch: they are written in the batch's own
//!   transaction (`CenterStore::commit_batch_with`), so the stored plugin state and the ledger
//!   watermark always move together; a batch no plugin looked at only moves the stored rows'
//!   seq. A restart resumes from those rows and refuses to start if they are not at the
//!   watermark, or if the stored plugin set and `--collection` disagree.
//! * **Adapter** ([`run`]): the owner center, once its reader has caught up with the journal
//!   (never while it replays at start: `PluginHost::set_live`), hands its effects over a bounded
//!   queue to this task, which executes them with `rtgs_collection::adapter::NodeAdapter` over the
//!   chain simulator and submits the results to the inbound topic as commands (origin this
//!   center), like `rtgs load` submits transfers. A new or restarted owner re-executes every
//!   pending effect: harmless, the results' `bmi`s derive from the effect ids and the sequencer
//!   dedupes them.
//! * **Failure detector** (in [`run`]): ownership is plugin state moved by journaled `SetOwner`
//!   entries. A live center that is not the owner proposes itself (`SetOwner { term + 1, me }`,
//!   `bmi` `OWNER-<kind>-<term+1>`) when the owner's acks have not advanced for
//!   `--owner-silence-s` while this center applied past them, and it is the lowest-numbered
//!   center, other than the owner, whose acks still advance. Two proposals for one term carry one
//!   `bmi`: the sequencer keeps the first and refuses the other (DUPL), and the host refuses a
//!   stale term, so a wrong suspicion costs a needless move, never two owners at one seq.
//!
//! **Each process has its own chain simulator.** The simulator stands in for a chain RPC, and
//! here every `rtgs node` builds its own (same seed, same deposits), whereas a real deployment
//! points every center at the same chain. After a failover the new owner's simulated chain has
//! not seen what the old owner broadcast: the plugin state stays identical across centers (it is
//! decided by the journal), but "no sweep broadcast twice" cannot be shown across processes. That
//! proof stays with the embedded engine and the simulator (`rtgs sim --collection`), whose
//! centers share one chain simulator.

use super::{now_us, Node};
use clap::Args;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rtgs_collection::adapter::{NodeAdapter, Workload};
use rtgs_collection::chain_sim::{ChainConfig, ChainSim};
use rtgs_core::codec;
use rtgs_core::entry::{CenterId, Command, Entry, Payload, PluginKind};
use rtgs_core::limits::CENTER_COUNT_MAX;
use rtgs_core::plugin::{Effect, EffectAdapter, Plugin};
use rtgs_core::plugin_host::{PluginCheckpoint, PluginHost, SetOwner};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Batches of effects between the reader and the adapter task (bounded; what does not fit waits
/// in the reader's own outbox, so a slow adapter never stalls the journal).
pub const EFFECT_QUEUE_BATCHES: usize = 64;
/// The adapter task's pace: waits this long for effects, then polls the chain.
const ADAPTER_POLL_INTERVAL: Duration = Duration::from_millis(10);
/// Results per inbound message.
const RESULTS_PER_MESSAGE: usize = 2_048;
/// How often the failure detector looks at the centers' acks.
const DETECTOR_INTERVAL: Duration = Duration::from_millis(500);
/// Where the simulated chain's clock starts (µs), as in `rtgs demo --collection`.
const CHAIN_START_US: u64 = 1_000_000;

/// `rtgs node` options of the plugins.
#[derive(Args, Clone, Debug)]
pub struct PluginArgs {
    /// Host the collection plugin (its effects go to a chain simulator in this process). Every
    /// center must agree: the plugin's step digests are in the state hash.
    #[arg(long, env = "RTGS_COLLECTION")]
    pub collection: bool,
    /// Deposit wallets on the simulated chain (one deposit each; `rtgs collect --wallets` must
    /// say the same).
    #[arg(long, env = "RTGS_COLLECTION_WALLETS", default_value_t = 500)]
    pub collection_wallets: u64,
    /// Funded relayer accounts on the simulated chain (registered by `rtgs collect`).
    #[arg(long, env = "RTGS_COLLECTION_RELAYERS", default_value_t = 20)]
    pub collection_relayers: u64,
    /// How much faster the simulated chain's clock runs than the wall clock (12 s blocks).
    #[arg(long, env = "RTGS_CHAIN_TIME_SCALE", default_value_t = 1_000)]
    pub chain_time_scale: u64,
    /// Seed of the simulated chain (the same on every center).
    #[arg(long, env = "RTGS_CHAIN_SEED", default_value_t = 1)]
    pub chain_seed: u64,
    /// A center proposes itself as owner when the owner's acks have not advanced for this long.
    #[arg(long, env = "RTGS_OWNER_SILENCE_S", default_value_t = 5)]
    pub owner_silence_s: u64,
}

/// The one plugin hosted today.
pub const KIND: PluginKind = rtgs_collection::CollectionPlugin::KIND;

/// Plugin figures for the status (written by the reader and the adapter task).
#[derive(Default)]
pub struct PluginStats {
    pub enabled: AtomicBool,
    /// Caught up with the journal (effects are executed from then on, by the owner).
    pub live: AtomicBool,
    pub owner: AtomicU64,
    pub term: AtomicU64,
    /// The plugin's whole-state hash at the last snapshot (what `plugin_state.state_hash` holds).
    pub state_hash: AtomicU64,
    /// Seq of the last snapshot.
    pub seq_snapshot: AtomicU64,
    pub snapshots: AtomicU64,
    pub effects_handed: AtomicU64,
    pub results_submitted: AtomicU64,
    pub owner_proposals: AtomicU64,
    /// Highest seq each center acked (the failure detector's input), index = center - 1.
    pub acked_seq_max: [AtomicU64; CENTER_COUNT_MAX],
    pub figures: Mutex<Vec<(&'static str, u64)>>,
    pub adapter_figures: Mutex<Vec<(&'static str, u64)>>,
}

impl PluginStats {
    pub fn status(&self) -> serde_json::Value {
        let mut map = serde_json::Map::new();
        let flags = [("live", &self.live)];
        for (k, v) in flags {
            map.insert(k.into(), v.load(Ordering::Relaxed).into());
        }
        let counters = [
            ("owner_center", &self.owner),
            ("owner_term", &self.term),
            ("plugin_state_hash", &self.state_hash),
            ("seq_snapshot", &self.seq_snapshot),
            ("snapshots", &self.snapshots),
            ("effects_handed", &self.effects_handed),
            ("results_submitted", &self.results_submitted),
            ("owner_proposals", &self.owner_proposals),
        ];
        for (k, v) in counters {
            map.insert(k.into(), v.load(Ordering::Relaxed).into());
        }
        for figures in [&self.figures, &self.adapter_figures] {
            let f = figures.lock().unwrap_or_else(|p| p.into_inner());
            for (k, v) in f.iter() {
                // The host's owner/term figures are the same as the counters above.
                map.entry(*k).or_insert_with(|| (*v).into());
            }
        }
        serde_json::Value::Object(map)
    }
}

/// A fresh host with the plugins `args` enable (`None`: plugins off).
pub fn host(center: CenterId, args: &PluginArgs) -> Option<PluginHost> {
    if !args.collection {
        return None;
    }
    // One plugin of one kind: `new` cannot refuse it.
    PluginHost::new(center, vec![Box::new(rtgs_collection::CollectionPlugin::new())]).ok()
}

/// What the committer writes of the plugin state with a batch.
pub enum JobPlugins {
    None,
    Advance,
    Snapshot(Vec<PluginCheckpoint>),
}

impl JobPlugins {
    /// `self` then `next` as one batch: the later snapshot wins, and a snapshot followed by
    /// batches no plugin looked at is still the state at the end.
    pub fn merge(&mut self, next: JobPlugins) {
        match next {
            JobPlugins::None => {}
            JobPlugins::Advance => {
                if let JobPlugins::None = self {
                    *self = JobPlugins::Advance;
                }
            }
            snapshot @ JobPlugins::Snapshot(_) => *self = snapshot,
        }
    }

    pub fn as_save(&self) -> rtgs_pg::center_store::PluginSave<'_> {
        use rtgs_pg::center_store::PluginSave;
        match self {
            JobPlugins::None => PluginSave::None,
            JobPlugins::Advance => PluginSave::Advance,
            JobPlugins::Snapshot(cps) => PluginSave::Snapshot(cps),
        }
    }
}

/// The journal reader's plugin host and its hand-over to the adapter task.
pub struct ReaderPlugins {
    host: PluginHost,
    /// A plugin took an entry since the last snapshot (or nothing is stored yet).
    dirty: bool,
    effects_tx: mpsc::Sender<Vec<Effect>>,
    /// Effects that did not fit the queue yet.
    outbox: VecDeque<Vec<Effect>>,
    /// The journal's end when the reader started: applied through it, the reader is caught up.
    live_from_offset: i64,
}

impl ReaderPlugins {
    /// `host` restored from the stored rows (`stored`: something was stored).
    pub fn new(host: PluginHost, stored: bool, effects_tx: mpsc::Sender<Vec<Effect>>) -> Self {
        ReaderPlugins {
            host,
            dirty: !stored,
            effects_tx,
            outbox: VecDeque::new(),
            live_from_offset: i64::MAX,
        }
    }

    /// The journal's end offset at start (the reader is live once it has applied every message
    /// before it, or once the journal is quiet).
    pub fn set_live_from(&mut self, high_offset: i64) {
        self.live_from_offset = high_offset;
    }

    /// Applies one entry (after the ledger); the step digest to fold, if a plugin took it.
    #[inline]
    pub fn apply(&mut self, entry: &Entry, ledger: &mut rtgs_core::ledger::Ledger) -> Option<u64> {
        let digest = self.host.apply(entry, ledger);
        self.dirty |= digest.is_some();
        digest
    }

    /// After a run was applied: goes live once caught up, hands the owner's effects to the
    /// adapter, publishes owner and term.
    pub fn after_apply(&mut self, node: &Node, journal_offset: i64, quiet: bool) {
        let stats = &node.stats.plugins;
        if !self.host.is_live() && (quiet || journal_offset.saturating_add(1) >= self.live_from_offset) {
            // Caught up: from now on the owner executes, starting with everything pending.
            self.host.set_live();
            stats.live.store(true, Ordering::Relaxed);
            eprintln!("{}: plugins live (caught up with the journal at offset {journal_offset})", node.name);
        }
        if let Some((owner, term)) = self.host.owner(KIND) {
            stats.owner.store(u64::from(owner.0), Ordering::Relaxed);
            stats.term.store(u64::from(term), Ordering::Relaxed);
        }
        if self.host.has_effects() {
            let mut effects = Vec::new();
            self.host.take_effects(&mut effects);
            stats.effects_handed.fetch_add(effects.len() as u64, Ordering::Relaxed);
            self.outbox.push_back(effects);
        }
        while let Some(batch) = self.outbox.pop_front() {
            match self.effects_tx.try_send(batch) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(batch)) => {
                    self.outbox.push_front(batch);
                    break;
                }
                // The adapter task is gone: the node is stopping; the effects stay pending in
                // the plugin state and are executed again after a restart.
                Err(mpsc::error::TrySendError::Closed(_)) => {
                    self.outbox.clear();
                    break;
                }
            }
        }
    }

    /// What to commit with the batch that ends at `seq`: the checkpoints if the state changed
    /// (O(state): encode and whole-state hash), otherwise only the stored seq moves.
    pub fn save(&mut self, node: &Node, seq: u64) -> JobPlugins {
        if !self.dirty {
            return JobPlugins::Advance;
        }
        self.dirty = false;
        let cps = self.host.checkpoints();
        self.publish(node, &cps, seq);
        node.stats.plugins.snapshots.fetch_add(1, Ordering::Relaxed);
        JobPlugins::Snapshot(cps)
    }

    /// Publishes the state as restored at start (the status shows it before any new entry).
    pub fn publish_restored(&self, node: &Node, seq: u64) {
        self.publish(node, &self.host.checkpoints(), seq);
    }

    fn publish(&self, node: &Node, cps: &[PluginCheckpoint], seq: u64) {
        let stats = &node.stats.plugins;
        if let Some(cp) = cps.iter().find(|c| c.kind == KIND) {
            stats.state_hash.store(cp.state_hash, Ordering::Relaxed);
        }
        if let Some((owner, term)) = self.host.owner(KIND) {
            stats.owner.store(u64::from(owner.0), Ordering::Relaxed);
            stats.term.store(u64::from(term), Ordering::Relaxed);
        }
        stats.seq_snapshot.store(seq, Ordering::Relaxed);
        let mut figures = Vec::new();
        self.host.figures(&mut figures);
        *stats.figures.lock().unwrap_or_else(|p| p.into_inner()) = figures;
    }
}

/// The adapter over this process's chain simulator (see the module docs), the same on every
/// center: same seed, same deposits, same funded relayers.
pub fn adapter(args: &PluginArgs) -> NodeAdapter<ChainSim> {
    let workload = Workload::new(args.collection_wallets, args.collection_relayers);
    let chain = workload.chain(ChainConfig::default(), args.chain_seed, CHAIN_START_US);
    NodeAdapter::new(chain, CHAIN_START_US, args.chain_time_scale)
}

/// The adapter task and the failure detector (see the module docs).
pub async fn run(
    node: Arc<Node>,
    args: PluginArgs,
    mut effects_rx: mpsc::Receiver<Vec<Effect>>,
) -> anyhow::Result<()> {
    let mut adapter = adapter(&args);
    let producer = rtgs_kafka::clients::producer(&node.bootstrap, &format!("{}-plugins", node.name))?;
    let mut detector = Detector::new(Duration::from_secs(args.owner_silence_s.max(1)));
    let mut results = Vec::new();
    let mut last_detect = Instant::now();
    let mut last_figures = Instant::now();
    loop {
        match tokio::time::timeout(ADAPTER_POLL_INTERVAL, effects_rx.recv()).await {
            Ok(Some(effects)) => {
                let now = now_us();
                for e in &effects {
                    adapter.execute(e, now);
                }
            }
            Ok(None) => anyhow::bail!("the journal reader stopped"),
            Err(_) => {}
        }
        // Only the live owner talks to the chain: the others' results would be duplicates.
        if is_live_owner(&node) {
            results.clear();
            adapter.poll(now_us(), &mut results);
            let commands: Vec<Command> = results
                .drain(..)
                .map(|(bmi, c)| Command { origin: node.center, bmi, payload: Payload::Plugin(c) })
                .collect();
            for chunk in commands.chunks(RESULTS_PER_MESSAGE) {
                submit(&node, &producer, chunk).await;
                node.stats.plugins.results_submitted.fetch_add(chunk.len() as u64, Ordering::Relaxed);
            }
        }
        if last_detect.elapsed() >= DETECTOR_INTERVAL {
            last_detect = Instant::now();
            if let Some(proposal) = detector.check(&node) {
                eprintln!(
                    "{}: the owner DC{} of the plugins is silent: proposing DC{} as owner, term {}",
                    node.name,
                    node.stats.plugins.owner.load(Ordering::Relaxed),
                    node.center.0,
                    proposal.term
                );
                let command = Command {
                    origin: node.center,
                    bmi: SetOwner::bmi(KIND, proposal.term)?,
                    payload: Payload::Plugin(proposal.to_command(KIND)?),
                };
                submit(&node, &producer, &[command]).await;
                node.stats.plugins.owner_proposals.fetch_add(1, Ordering::Relaxed);
            }
        }
        if last_figures.elapsed() >= Duration::from_millis(200) {
            last_figures = Instant::now();
            let mut figures = Vec::new();
            adapter.figures(&mut figures);
            *node.stats.plugins.adapter_figures.lock().unwrap_or_else(|p| p.into_inner()) = figures;
        }
    }
}

fn is_live_owner(node: &Node) -> bool {
    let p = &node.stats.plugins;
    p.live.load(Ordering::Relaxed) && p.owner.load(Ordering::Relaxed) == u64::from(node.center.0)
}

/// Publishes commands to the inbound topic, again until the broker takes them.
async fn submit(node: &Node, producer: &FutureProducer, commands: &[Command]) {
    let mut body = Vec::with_capacity(commands.len() * 96);
    codec::encode_commands_frame(commands, &mut body);
    let key = [node.center.0];
    loop {
        let record = FutureRecord::to(&node.topics.inbound).payload(&body).key(&key[..]);
        match producer.send(record, Duration::from_secs(10)).await {
            Ok(_) => return,
            Err((e, _)) => {
                eprintln!("{}: submitting plugin commands: {e}; again", node.name);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// When to propose a takeover (see the module docs): watches how far each center acked.
struct Detector {
    silence: Duration,
    /// Per center: highest seq acked and when it last advanced.
    seen: [(u64, Instant); CENTER_COUNT_MAX],
    /// The term last proposed and when (proposed again only after twice the silence).
    proposed: Option<(u32, Instant)>,
}

impl Detector {
    fn new(silence: Duration) -> Self {
        Detector { silence, seen: [(0, Instant::now()); CENTER_COUNT_MAX], proposed: None }
    }

    fn check(&mut self, node: &Node) -> Option<SetOwner> {
        let p = &node.stats.plugins;
        for (i, seen) in self.seen.iter_mut().enumerate().take(node.center_count) {
            let acked = p.acked_seq_max[i].load(Ordering::Relaxed);
            if acked > seen.0 {
                *seen = (acked, Instant::now());
            }
        }
        if !p.live.load(Ordering::Relaxed) {
            return None;
        }
        let owner = usize::try_from(p.owner.load(Ordering::Relaxed))
            .ok()
            .filter(|o| (1..=node.center_count).contains(o))?;
        let term = u32::try_from(p.term.load(Ordering::Relaxed)).ok()?;
        let me = usize::from(node.center.0);
        let (owner_acked, owner_since) = self.seen[owner - 1];
        let silent = owner_since.elapsed() >= self.silence
            && node.stats.seq_committed.load(Ordering::Relaxed) > owner_acked;
        if owner == me || !silent {
            return None;
        }
        // The lowest-numbered center, other than the owner, whose acks still advance.
        let candidate =
            (1..=node.center_count).find(|&c| c != owner && self.seen[c - 1].1.elapsed() < self.silence)?;
        if candidate != me {
            return None;
        }
        let next = term.checked_add(1)?;
        if self.proposed.is_some_and(|(t, at)| t == next && at.elapsed() < 2 * self.silence) {
            return None;
        }
        self.proposed = Some((next, Instant::now()));
        Some(SetOwner { term: next, owner: node.center })
    }
}
