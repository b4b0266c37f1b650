//! The embedded runtime: a whole cluster in one process, as a pipeline of threads joined by
//! bounded crossbeam queues.
//!
//! ```text
//! submitters ─▶ [submit q] ─▶ SEQUENCER ─▶ [write q] ─▶ JOURNAL WRITER (append, fdatasync)
//!                                                          │ (only after the fsync)
//!                          ┌───────────────────────────────┼───────────────────────────┐
//!                          ▼                               ▼                           ▼
//!                    [journal q DC1]                 [journal q DC2]             [journal q DC3]
//!                    CENTER DC1 ◀── acks ──▶ CENTER DC2 ◀── acks ──▶ CENTER DC3   (each: gap buffer,
//!                          │                                                       ledger, finalizer)
//!                          └──── own-origin finals ──▶ [event q] ─▶ client     CHECKPOINTER (fsync)
//! ```
//!
//! Each center thread applies the journal and runs its own finalizer over the acks of all three
//! centers; acks go to peers only after they are computed, finality is announced only by the
//! entry's origin center. More cores ⇒ the stages run in parallel.
//!
//! **Restart**: every journal frame is checked (a torn tail past the durable end is cut, never
//! below a center's checkpoint; corruption refuses to start; a mirror repairs one copy from the
//! other); each center loads its checkpoint (ledger at its durable watermark, finalizer tallies,
//! its own acks some finalizer may still need, own-origin outcomes not yet announced), re-sends
//! those acks, replays the journal from the watermark + 1, and goes on. The sequencer resumes
//! after the journal's last seq at the next epoch; its `bmi` index reopens (runs on disk, the
//! journal after them replayed into memory). Nothing is applied twice: the watermark and the
//! state are in one atomic file.
//!
//! **Plugins** (optional, [`PluginSetup`]): each center thread runs a [`PluginHost`] over the
//! entries it applies and folds the host's step digests into its state hash. The owner center
//! hands its effects to the adapter thread through a bounded queue (`try_send`: what does not
//! fit waits in the center's own effect outbox, so a slow adapter never stalls the journal);
//! the adapter executes them and submits their results through the normal submit path, as
//! plugin commands with `bmi`s derived from the effect ids. A center executes nothing while it
//! replays the journal at start; once caught up, an owner re-executes everything its plugins
//! hold pending. The host's state is part of the center's checkpoint.
//!
//! **Ack retention**: a center keeps its acks for seqs at or above the lowest *durable*
//! `seq_unfinal_first` of all finalizers; any finalizer restored from any checkpoint therefore
//! finds every ack it lacks either in those retained acks or in the replay.

use crate::bmi_index::{BmiIndex, BmiIndexConfig, BmiIndexError, BmiIndexStats};
use crate::center_thread::{CenterLinks, CenterSetup, CenterThread};
use crate::checkpoint::{self, Awaiting};
use crate::journal::{Journal, JournalError, JournalOpen, JournalTail, SyncTimes};
use crate::limits::*;
use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender, TryRecvError, TrySendError};
use rtgs_core::center::CenterConfig;
use rtgs_core::codec;
use rtgs_core::entry::{Bmi, CenterId, Command, Entry, Seq};
use rtgs_core::ledger::Applied;
use rtgs_core::limits::SEQUENCER_BATCH_ENTRIES_MAX;
use rtgs_core::plugin::{Effect, EffectAdapter, HostedPlugin};
use rtgs_core::plugin_host::PluginHost;
use rtgs_core::sequencer::{Admission, Sequencer};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How the cluster is laid out on disk and how often it checkpoints.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    pub data_dir: PathBuf,
    /// A second copy of the journal (another disk): every sync group is durable in both before
    /// any center sees it; a frame damaged in one copy is repaired from the other at start.
    pub journal_mirror: Option<PathBuf>,
    pub centers: usize,
    pub checkpoint_interval_entries: u64,
    pub segment_bytes_max: u64,
    pub bmi_index: BmiIndexConfig,
}

impl ClusterConfig {
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        ClusterConfig {
            data_dir: data_dir.into(),
            journal_mirror: None,
            centers: 3,
            checkpoint_interval_entries: CHECKPOINT_INTERVAL_ENTRIES,
            segment_bytes_max: SEGMENT_BYTES_MAX,
            bmi_index: BmiIndexConfig::default(),
        }
    }
}

/// Plugins to run in every center, and the adapter that executes the owner's effects.
pub struct PluginSetup {
    /// Builds one center's plugins (called once per center; every center must get the same set).
    pub make: Box<dyn Fn() -> Vec<Box<dyn HostedPlugin>> + Send + Sync>,
    /// The outside world of the plugins, run on its own thread.
    pub adapter: Box<dyn EffectAdapter>,
}

/// Named figures (plugin counters, adapter counters).
pub type Figures = Vec<(&'static str, u64)>;

/// The cluster's clock: wall-clock microseconds that never run backwards (monotonic from start).
pub struct Clock {
    start: Instant,
    wall_us_at_start: u64,
}

impl Clock {
    pub fn new() -> Self {
        let wall = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0);
        Clock { start: Instant::now(), wall_us_at_start: wall }
    }
    pub fn now_us(&self) -> u64 {
        self.wall_us_at_start + self.start.elapsed().as_micros() as u64
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

/// Commands handed to the sequencer together, with their submit times (cluster clock, µs).
pub struct Submission {
    pub commands: Vec<Command>,
    pub submitted_at_us: Vec<u64>,
}

/// The answer to a [`BmiQueries::ask`]: the seq of the entry sequenced under the `bmi`, `None` if
/// none ever was (`Err`: the index could not be read).
pub type BmiAnswer = Result<Option<Seq>, String>;

/// A status question for the sequencer thread, which owns the index of every `bmi` ever
/// sequenced (`BmiIndex`): answered between two of its batches.
struct BmiQuery {
    bmi: Bmi,
    reply: Sender<BmiAnswer>,
}

/// The answer when [`BMI_QUERY_QUEUE`] status questions already wait.
const QUESTIONS_FULL: &str = "too many status questions are waiting; try again";

/// Status questions in the sequencer thread: answered from the index, a seq only once it is final
/// (durable: a crash before its sync would lose the entry and give its seq to another); until
/// then the answer waits here, at most [`BMI_QUERY_QUEUE`] of them ("try again" beyond).
#[derive(Default)]
struct Questions {
    waiting: Vec<(Sender<BmiAnswer>, Seq)>,
}

impl Questions {
    fn ask(&mut self, index: &mut BmiIndex, q: BmiQuery, final_through: Seq) {
        let answer = match index.known(&q.bmi) {
            Ok(Some(k)) if k.seq > final_through => {
                if self.waiting.len() < BMI_QUERY_QUEUE {
                    self.waiting.push((q.reply, k.seq));
                    return;
                }
                Err(QUESTIONS_FULL.to_string())
            }
            known => known.map(|k| k.map(|k| k.seq)).map_err(|e| e.to_string()),
        };
        let _ = q.reply.send(answer); // the asker may have given up
    }

    fn release(&mut self, final_through: Seq) {
        self.waiting.retain(|(reply, seq)| {
            let due = *seq <= final_through;
            if due {
                let _ = reply.send(Ok(Some(*seq)));
            }
            !due
        });
    }
}

/// Asks the sequencer thread what was sequenced under a `bmi` (a client's status query for an
/// entry it did not submit, or submitted before a restart).
#[derive(Clone)]
pub struct BmiQueries {
    tx: Sender<BmiQuery>,
}

impl BmiQueries {
    /// The answer comes on the returned receiver; `Err` when the queue of questions is full
    /// ([`BMI_QUERY_QUEUE`]) or the cluster stopped.
    pub fn ask(&self, bmi: Bmi) -> Result<Receiver<BmiAnswer>, String> {
        let (reply, answer) = bounded(1);
        self.tx.try_send(BmiQuery { bmi, reply }).map_err(|e| match e {
            TrySendError::Full(_) => QUESTIONS_FULL.to_string(),
            TrySendError::Disconnected(_) => "the engine is stopped".to_string(),
        })?;
        Ok(answer)
    }
}

/// A durable batch as delivered to every center.
pub struct JournalBatch {
    pub entries: Vec<Entry>,
    /// Per entry: when it was submitted (0 for sequencer-made entries). Not part of the journal.
    pub submitted_at_us: Vec<u64>,
}

struct WriteJob {
    frames: Vec<u8>,
    batch: Arc<JournalBatch>,
}

pub(crate) struct AckBatch {
    pub center: CenterId,
    pub items: Vec<Applied>,
}

pub use rtgs_core::client::{ClientEvent, Notice, Refusal};

pub use crate::center_thread::CenterReport;

#[derive(Clone, Debug)]
pub struct ClusterReport {
    pub centers: Vec<CenterReport>,
    pub journal_seq_last: Seq,
    /// `Tick` entries the sequencer journaled during this run.
    pub ticks: u64,
    /// What the sequencer's `bmi` index did (default if the sequencer failed).
    pub bmi_index: BmiIndexStats,
    /// How long the journal writer's `fdatasync`s took this run (if the writer failed, as of its
    /// last republication).
    pub journal_syncs: SyncTimes,
    /// Fatal errors of any thread (I/O failures, invariant violations).
    pub errors: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error(
        "{0}. Nothing was changed. Options: restore the file from a backup; or move every center's \
         checkpoint aside to rebuild all centers from the journal (a full replay, final notices repeated)"
    )]
    Checkpoint(#[from] checkpoint::CheckpointError),
    #[error(transparent)]
    BmiIndex(#[from] BmiIndexError),
    #[error("center {center} checkpoint is at seq {checkpoint} but the journal ends at {journal}: journal lost durable entries")]
    AheadOfJournal { center: CenterId, checkpoint: Seq, journal: Seq },
    #[error("centers must be 1 to {max}", max = rtgs_core::limits::CENTER_COUNT_MAX)]
    Centers,
    #[error("cannot start thread: {0}")]
    Thread(std::io::Error),
    #[error("center {center}: {reason}")]
    Plugins { center: CenterId, reason: String },
}

pub(crate) struct Shared {
    /// Per finalizer: `seq_unfinal_first` as of its latest durable checkpoint.
    durable_unfinal_first: Vec<AtomicU64>,
    /// The highest seq final in any center (for clients' read models; observes only).
    pub final_through: AtomicU64,
    pub diverged: AtomicBool,
    /// Per center: its plugins' figures as of its last plugin entry (published at most every
    /// 100 ms, never per transfer).
    pub plugin_figures: Vec<Mutex<Figures>>,
    adapter_figures: Mutex<Figures>,
    adapter_stop: AtomicBool,
    /// The journal writer's sync times since start, republished at most every
    /// [`FIGURES_INTERVAL`] (and at least with each `Tick`'s group).
    journal_syncs: Mutex<SyncTimes>,
}

/// How often the adapter republishes its figures (and the writer its sync times).
const FIGURES_INTERVAL: Duration = Duration::from_millis(100);

/// What a center hands to the adapter thread: the effects it must execute as the live owner,
/// and commands to submit (its owner proposals).
pub(crate) enum ToAdapter {
    Effects(CenterId, Vec<Effect>),
    Submit(Vec<Command>),
    /// The owner's open plugin alerts, sent with its effects.
    Alerts(Vec<rtgs_core::plugin::PluginAlert>),
}

pub(crate) fn publish(slot: &Mutex<Figures>, figures: Figures) {
    if let Ok(mut f) = slot.lock() {
        *f = figures;
    }
}

impl Shared {
    #[cfg(test)]
    pub(crate) fn for_tests(centers: usize) -> Self {
        Shared {
            durable_unfinal_first: (0..centers).map(|_| AtomicU64::new(1)).collect(),
            final_through: AtomicU64::new(0),
            diverged: AtomicBool::new(false),
            plugin_figures: (0..centers).map(|_| Mutex::new(Vec::new())).collect(),
            adapter_figures: Mutex::new(Vec::new()),
            adapter_stop: AtomicBool::new(false),
            journal_syncs: Mutex::new(SyncTimes::default()),
        }
    }

    pub(crate) fn ack_floor(&self) -> Seq {
        self.durable_unfinal_first.iter().map(|a| a.load(Ordering::Acquire)).min().unwrap_or(1)
    }
}

/// Hands commands to the sequencer. Clone freely; the cluster drains when every clone is dropped.
#[derive(Clone)]
pub struct Submitter {
    tx: Sender<Submission>,
    clock: Arc<Clock>,
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum SubmitError {
    #[error("the cluster is not accepting submissions (stopped or failed)")]
    Closed,
    #[error("a submission holds at most {max} commands, not {0}", max = SUBMISSION_COMMANDS_MAX)]
    TooMany(usize),
    #[error("{commands} commands but {times} submit times")]
    TimesMismatch { commands: usize, times: usize },
}

impl Submitter {
    /// Submits up to [`SUBMISSION_COMMANDS_MAX`] commands stamped now; blocks while the queue is
    /// full (back-pressure).
    pub fn submit(&self, commands: Vec<Command>) -> Result<(), SubmitError> {
        let now = self.clock.now_us();
        let submitted_at_us = vec![now; commands.len()];
        self.submit_at(commands, submitted_at_us)
    }

    /// [`Submitter::submit`] without blocking: `Err(Some(commands))` gives them back when the
    /// queue is full (retry with the blocking `submit` off any async runtime worker), `Err(None)`
    /// when the cluster is closed or there are too many.
    pub fn try_submit(&self, commands: Vec<Command>) -> Result<(), Option<Vec<Command>>> {
        if commands.len() > SUBMISSION_COMMANDS_MAX {
            return Err(None);
        }
        let now = self.clock.now_us();
        let submitted_at_us = vec![now; commands.len()];
        match self.tx.try_send(Submission { commands, submitted_at_us }) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(s)) => Err(Some(s.commands)),
            Err(TrySendError::Disconnected(_)) => Err(None),
        }
    }

    /// Submits with explicit submit times (open-loop load generators use the intended time).
    pub fn submit_at(&self, commands: Vec<Command>, submitted_at_us: Vec<u64>) -> Result<(), SubmitError> {
        if commands.len() != submitted_at_us.len() {
            return Err(SubmitError::TimesMismatch {
                commands: commands.len(),
                times: submitted_at_us.len(),
            });
        }
        if commands.len() > SUBMISSION_COMMANDS_MAX {
            return Err(SubmitError::TooMany(commands.len()));
        }
        self.tx.send(Submission { commands, submitted_at_us }).map_err(|_| SubmitError::Closed)
    }

    pub fn clock(&self) -> &Clock {
        &self.clock
    }
}

/// What was found on disk at start.
#[derive(Clone, Debug)]
pub struct Recovery {
    pub journal: JournalTail,
    /// Per center: the seq its checkpoint was at (0: none).
    pub center_watermarks: Vec<Seq>,
    pub epoch: u32,
}

pub struct Cluster {
    journal_dir: PathBuf,
    submitter: Option<Submitter>,
    events: Receiver<ClientEvent>,
    bmi_queries: BmiQueries,
    sequencer: Option<JoinHandle<Result<(BmiIndexStats, u64), String>>>,
    writer: Option<JoinHandle<Result<Seq, String>>>,
    centers: Vec<JoinHandle<Result<CenterReport, String>>>,
    checkpointer: Option<JoinHandle<Result<(), String>>>,
    adapter: Option<JoinHandle<Result<(), String>>>,
    shared: Arc<Shared>,
    recovery: Recovery,
}

impl Cluster {
    /// Starts (or restarts from `data_dir`) the cluster.
    pub fn start(config: &ClusterConfig) -> Result<Cluster, StartError> {
        Self::start_with(config, None)
    }

    /// Starts the cluster with plugins in every center and their adapter.
    pub fn start_with_plugins(config: &ClusterConfig, plugins: PluginSetup) -> Result<Cluster, StartError> {
        Self::start_with(config, Some(plugins))
    }

    fn start_with(config: &ClusterConfig, plugins: Option<PluginSetup>) -> Result<Cluster, StartError> {
        if config.centers == 0 || config.centers > rtgs_core::limits::CENTER_COUNT_MAX {
            return Err(StartError::Centers);
        }
        let journal_dir = config.data_dir.join("journal");
        // Checkpoints first: what a center applied is the floor below which the journal may
        // never be cut as a torn tail.
        let mut restored = Vec::new();
        for index in 0..config.centers {
            let id = CenterId::from_index(index);
            restored.push(checkpoint::read(&checkpoint::path_for(&config.data_dir, id))?);
        }
        let seq_floor = restored.iter().flatten().map(|c| c.ledger.seq_applied()).max().unwrap_or(0);
        let options = JournalOpen {
            mirror: config.journal_mirror.clone(),
            segment_bytes_max: config.segment_bytes_max,
            seq_floor,
        };
        let (journal, tail) = Journal::open_with(&journal_dir, &options)?;
        let clock = Arc::new(Clock::new());
        for (index, ckpt) in restored.iter().enumerate() {
            if let Some(c) = ckpt {
                if c.ledger.seq_applied() > tail.seq_last {
                    return Err(StartError::AheadOfJournal {
                        center: CenterId::from_index(index),
                        checkpoint: c.ledger.seq_applied(),
                        journal: tail.seq_last,
                    });
                }
            }
        }
        let sequencer = recover_sequencer(&tail, clock.now_us());
        let seq_written = Arc::new(AtomicU64::new(tail.seq_last));
        let index = BmiIndex::open(
            &config.data_dir,
            &journal_dir,
            tail.seq_last,
            Arc::clone(&seq_written),
            config.bmi_index,
        )?;
        let recovery = Recovery {
            journal: tail.clone(),
            center_watermarks: restored
                .iter()
                .map(|c| c.as_ref().map_or(0, |c| c.ledger.seq_applied()))
                .collect(),
            epoch: sequencer.epoch(),
        };

        let shared = Arc::new(Shared {
            // What the journal held at start is durable (its torn tail was cut): no crash can
            // take it back, whether or not it is final yet.
            final_through: AtomicU64::new(tail.seq_last),
            durable_unfinal_first: restored
                .iter()
                .map(|c| AtomicU64::new(c.as_ref().map_or(1, |c| c.finalizer.seq_unfinal_first())))
                .collect(),
            diverged: AtomicBool::new(false),
            plugin_figures: (0..config.centers).map(|_| Mutex::new(Vec::new())).collect(),
            adapter_figures: Mutex::new(Vec::new()),
            adapter_stop: AtomicBool::new(false),
            journal_syncs: Mutex::new(SyncTimes::default()),
        });
        let (make, adapter) = match plugins {
            Some(p) => (Some(p.make), Some(p.adapter)),
            None => (None, None),
        };
        let (effects_tx, effects_rx) = bounded::<ToAdapter>(EFFECT_QUEUE_BATCHES);

        let (submit_tx, submit_rx) = bounded(SUBMIT_QUEUE_SUBMISSIONS);
        let (query_tx, query_rx) = bounded(BMI_QUERY_QUEUE);
        let (write_tx, write_rx) = bounded(WRITE_QUEUE_BATCHES);
        let (events_tx, events_rx) = bounded(EVENT_QUEUE_BATCHES);
        let (ckpt_tx, ckpt_rx) = bounded::<CheckpointJob>(config.centers);
        let (journal_txs, journal_rxs): (Vec<_>, Vec<_>) =
            (0..config.centers).map(|_| bounded(JOURNAL_QUEUE_BATCHES)).unzip();
        let (ack_txs, ack_rxs): (Vec<_>, Vec<_>) =
            (0..config.centers).map(|_| bounded(ACK_QUEUE_BATCHES)).unzip();

        let spawn = |name: String| std::thread::Builder::new().name(name);
        let seq_thread = {
            let links = SequencerLinks {
                submissions: submit_rx,
                queries: query_rx,
                journal: write_tx,
                events: events_tx.clone(),
                clock: Arc::clone(&clock),
                shared: Arc::clone(&shared),
            };
            spawn("sequencer".into())
                .spawn(move || run_sequencer(sequencer, index, links))
                .map_err(StartError::Thread)?
        };
        let writer_thread = {
            let shared = Arc::clone(&shared);
            spawn("journal".into())
                .spawn(move || run_writer(journal, seq_written, write_rx, journal_txs, &shared))
                .map_err(StartError::Thread)?
        };
        let ckpt_thread = {
            let shared = Arc::clone(&shared);
            spawn("checkpointer".into())
                .spawn(move || run_checkpointer(ckpt_rx, shared))
                .map_err(StartError::Thread)?
        };
        let submitter = Submitter { tx: submit_tx, clock: Arc::clone(&clock) };
        let bmi_queries = BmiQueries { tx: query_tx };
        let adapter_thread = match adapter {
            Some(adapter) => {
                let (submitter, shared) = (submitter.clone(), Arc::clone(&shared));
                Some(
                    spawn("adapter".into())
                        .spawn(move || run_adapter(adapter, effects_rx, submitter, shared))
                        .map_err(StartError::Thread)?,
                )
            }
            None => None,
        };
        let mut centers = Vec::new();
        for (index, (journal_rx, (ack_rx, ckpt))) in
            journal_rxs.into_iter().zip(ack_rxs.into_iter().zip(restored)).enumerate()
        {
            let id = CenterId::from_index(index);
            let peers =
                ack_txs.iter().enumerate().filter(|(i, _)| *i != index).map(|(_, t)| t.clone()).collect();
            let host = make_host(id, make.as_deref(), ckpt.as_ref())?;
            let center_config = CenterConfig {
                commit_on_apply: true,
                checkpoint_interval_entries: Some(config.checkpoint_interval_entries),
                ..CenterConfig::new(id, config.centers)
            };
            let center = CenterThread::new(CenterSetup {
                config: center_config,
                host,
                checkpoint: ckpt,
                journal_dir: journal_dir.clone(),
                checkpoint_path: checkpoint::path_for(&config.data_dir, id),
                replay_until: tail.seq_last,
                links: CenterLinks {
                    journal_rx,
                    ack_rx,
                    peers,
                    events_tx: events_tx.clone(),
                    checkpoint_tx: ckpt_tx.clone(),
                    adapter_tx: adapter_thread.as_ref().map(|_| effects_tx.clone()),
                    shared: Arc::clone(&shared),
                    clock: Arc::clone(&clock),
                },
            })?;
            centers
                .push(spawn(format!("center-{id}")).spawn(move || center.run()).map_err(StartError::Thread)?);
        }
        drop((ack_txs, events_tx, ckpt_tx, effects_tx));
        Ok(Cluster {
            journal_dir,
            submitter: Some(submitter),
            adapter: adapter_thread,
            shared,
            events: events_rx,
            bmi_queries,
            sequencer: Some(seq_thread),
            writer: Some(writer_thread),
            centers,
            checkpointer: Some(ckpt_thread),
            recovery,
        })
    }

    pub fn submitter(&self) -> Submitter {
        match &self.submitter {
            Some(s) => s.clone(),
            None => unreachable!("submitter is only taken by shutdown, which consumes the cluster"),
        }
    }

    /// The clock submit times and entry timestamps are taken from.
    pub fn clock(&self) -> &Clock {
        match &self.submitter {
            Some(s) => &s.clock,
            None => unreachable!("submitter is only taken by shutdown, which consumes the cluster"),
        }
    }

    pub fn events(&self) -> &Receiver<ClientEvent> {
        &self.events
    }

    /// Status questions by `bmi` to the sequencer thread.
    pub fn bmi_queries(&self) -> BmiQueries {
        self.bmi_queries.clone()
    }

    pub fn recovery(&self) -> &Recovery {
        &self.recovery
    }

    pub fn journal_dir(&self) -> PathBuf {
        self.journal_dir.clone()
    }

    /// The highest seq final in any center (or durable in the journal at start).
    pub fn final_through(&self) -> Arc<dyn Fn() -> Seq + Send + Sync> {
        let shared = Arc::clone(&self.shared);
        Arc::new(move || shared.final_through.load(Ordering::Acquire))
    }

    /// The journal writer's sync times since start, as last republished (at most every 100 ms,
    /// at least once a second under any load: each `Tick` is a group of its own when idle).
    pub fn journal_syncs(&self) -> Arc<dyn Fn() -> SyncTimes + Send + Sync> {
        let shared = Arc::clone(&self.shared);
        Arc::new(move || shared.journal_syncs.lock().map(|t| t.clone()).unwrap_or_default())
    }

    /// A center's plugin figures as last published (empty without plugins).
    pub fn plugin_figures(&self, center: CenterId) -> Figures {
        let slot = self.shared.plugin_figures.get(center.index());
        slot.and_then(|m| m.lock().ok().map(|f| f.clone())).unwrap_or_default()
    }

    /// The adapter's figures as last published.
    pub fn adapter_figures(&self) -> Figures {
        self.shared.adapter_figures.lock().map(|f| f.clone()).unwrap_or_default()
    }

    /// Stops accepting work, lets every center apply and finalize what was journaled, writes
    /// final checkpoints and reports. Events still queued are discarded. Every other
    /// [`Submitter`] clone must be dropped first, or this waits for them.
    pub fn shutdown(mut self) -> ClusterReport {
        // The adapter holds a submitter: stop it first. What it had not submitted stays pending
        // in the plugins and is executed again after a restart.
        self.shared.adapter_stop.store(true, Ordering::Release);
        let adapter_result = self.adapter.take().map(|h| h.join());
        self.submitter = None;
        while self.events.recv().is_ok() {}
        let mut errors = Vec::new();
        /// A thread's result, its failure noted in `errors`.
        fn join<T>(
            errors: &mut Vec<String>,
            name: &str,
            r: std::thread::Result<Result<T, String>>,
        ) -> Option<T> {
            match r {
                Ok(Ok(value)) => Some(value),
                Ok(Err(e)) => {
                    errors.push(format!("{name}: {e}"));
                    None
                }
                Err(_) => {
                    errors.push(format!("{name}: thread panicked"));
                    None
                }
            }
        }
        if let Some(r) = adapter_result {
            join(&mut errors, "adapter", r);
        }
        let (bmi_index, ticks) =
            self.sequencer.take().and_then(|h| join(&mut errors, "sequencer", h.join())).unwrap_or_default();
        let mut journal_seq_last = self.recovery.journal.seq_last;
        if let Some(s) = self.writer.take().and_then(|h| join(&mut errors, "journal", h.join())) {
            journal_seq_last = s;
        }
        // The writer republished them as it stopped (or, if it failed, at most 100 ms before).
        let journal_syncs = self.shared.journal_syncs.lock().map(|t| t.clone()).unwrap_or_default();
        let mut centers = Vec::new();
        for (i, h) in self.centers.drain(..).enumerate() {
            match h.join() {
                Ok(Ok(report)) => centers.push(report),
                Ok(Err(e)) => errors.push(format!("center DC{}: {e}", i + 1)),
                Err(_) => errors.push(format!("center DC{}: thread panicked", i + 1)),
            }
        }
        if let Some(h) = self.checkpointer.take() {
            join(&mut errors, "checkpointer", h.join());
        }
        ClusterReport { centers, journal_seq_last, ticks, bmi_index, journal_syncs, errors }
    }
}

/// The sequencer resumes after the durable journal (its `bmi` index is opened beside it). Its
/// first `Tick` is stamped at once: time moved while the cluster was down, and plugin timers
/// that expired meanwhile fire now rather than a second later.
fn recover_sequencer(tail: &JournalTail, now_us: u64) -> Sequencer {
    let mut sequencer = Sequencer::new(CenterId(1), 0);
    sequencer.resume_at(tail.seq_last + 1, tail.epoch_last, tail.timestamp_last_us.max(now_us));
    // Every start is a new leader term; the epoch fences whatever ran before.
    sequencer.begin_epoch(tail.epoch_last + 1);
    sequencer
}

/// What the sequencer thread reads from and writes to.
struct SequencerLinks {
    submissions: Receiver<Submission>,
    queries: Receiver<BmiQuery>,
    journal: Sender<WriteJob>,
    events: Sender<ClientEvent>,
    clock: Arc<Clock>,
    shared: Arc<Shared>,
}

fn run_sequencer(
    mut sequencer: Sequencer,
    mut index: BmiIndex,
    links: SequencerLinks,
) -> Result<(BmiIndexStats, u64), String> {
    let SequencerLinks { submissions: rx, mut queries, journal: tx, events, clock, shared } = links;
    let mut admissions = Vec::new();
    let mut bmis = Vec::new();
    let mut lookups = Vec::new();
    let mut new_keys = Vec::new();
    let mut last_batch = 0usize;
    let mut ticks = 0u64;
    // A status question sees every batch sequenced before it (the index records each at once).
    let mut questions = Questions::default();
    let final_through = || shared.final_through.load(Ordering::Acquire);
    loop {
        // Answers waiting for finality are looked at again soon, not at the idle pace.
        let idle =
            if questions.waiting.is_empty() { Duration::from_millis(100) } else { Duration::from_millis(2) };
        let first = crossbeam_channel::select! {
            recv(rx) -> s => match s {
                Ok(s) => Some(s),
                Err(_) => return Ok((index.stats(), ticks)),
            },
            recv(queries) -> q => {
                match q {
                    Ok(q) => questions.ask(&mut index, q, final_through()),
                    // Nobody can ask any more: stop listening.
                    Err(_) => queries = crossbeam_channel::never(),
                }
                None
            },
            default(idle) => None,
        };
        let now = clock.now_us();
        // Sized from the batch before (a quarter more, capped): grown by doubling from empty, a
        // full batch was copied about once more (its reallocations ≈ 1 % of the demo's samples).
        let capacity = (last_batch + last_batch / 4 + 16).min(BATCH_ENTRIES_MAX + 1);
        let mut entries = Vec::with_capacity(capacity);
        let mut submitted_at_us = Vec::with_capacity(capacity);
        let mut refusals = Vec::new();
        let mut next = first;
        while let Some(sub) = next {
            admissions.clear();
            bmis.clear();
            bmis.extend(sub.commands.iter().map(|c| c.bmi));
            // Every bmi ever sequenced is in the index: look the submission up, sequence it,
            // remember what was new.
            lookups.clear();
            let resolved = index.resolve(&sub.commands, &mut lookups).map_err(|e| e.to_string())?;
            let before = entries.len();
            sequencer.handle_commands(now, sub.commands, &lookups, &mut entries, &mut admissions);
            new_keys.clear();
            new_keys.extend(
                admissions
                    .iter()
                    .zip(&lookups)
                    .filter(|(a, _)| matches!(a, Admission::Sequenced(_)))
                    .map(|(_, l)| l.key),
            );
            index.record(resolved, &entries[before..], &new_keys).map_err(|e| e.to_string())?;
            for ((admission, bmi), at) in admissions.iter().zip(&bmis).zip(&sub.submitted_at_us) {
                match admission {
                    Admission::Sequenced(_) => submitted_at_us.push(*at),
                    other => refusals.push(Refusal { bmi: *bmi, admission: *other, submitted_at_us: *at }),
                }
            }
            next = if entries.len() < SEQUENCER_BATCH_ENTRIES_MAX { rx.try_recv().ok() } else { None };
        }
        // Questions that came under load, a bounded number per batch.
        for q in queries.try_iter().take(BMI_QUERY_QUEUE) {
            questions.ask(&mut index, q, final_through());
        }
        questions.release(final_through());
        // Time never stops: a tick at least every interval, with a full batch as when idle.
        if let Some(tick) = sequencer.poll_tick(now) {
            entries.push(tick);
            submitted_at_us.push(0);
            ticks += 1;
        }
        if !refusals.is_empty() {
            events.send(ClientEvent::Refused(refusals)).map_err(|_| "client gone".to_string())?;
        }
        if entries.is_empty() {
            continue;
        }
        last_batch = entries.len();
        let frames = encode_frames(&entries);
        let batch = Arc::new(JournalBatch { entries, submitted_at_us });
        if tx.send(WriteJob { frames, batch }).is_err() {
            return Err("journal writer stopped; sequenced entries were not made durable".into());
        }
    }
}

/// Encodes a sequencer batch as one or more frames of at most ~FRAME_BODY_BYTES_TARGET.
pub(crate) fn encode_frames(entries: &[Entry]) -> Vec<u8> {
    let mut out = Vec::with_capacity(entries.len() * 72);
    let mut start = 0;
    let mut bytes = 0usize;
    for (i, e) in entries.iter().enumerate() {
        let size = 64
            + match &e.payload {
                rtgs_core::entry::Payload::Plugin(c) => c.body.len(),
                _ => 0,
            };
        if bytes + size > FRAME_BODY_BYTES_TARGET && i > start {
            codec::encode_frame(&entries[start..i], &mut out);
            start = i;
            bytes = 0;
        }
        bytes += size;
    }
    codec::encode_frame(&entries[start..], &mut out);
    out
}

/// Appends and fsyncs groups of batches; hands a batch to the centers only once a durable mark
/// after it is durable (`Journal::sync` / `seal`). Under load each group's `fdatasync` also makes
/// the previous group's mark durable; when nothing else is waiting, the group is sealed at once.
fn run_writer(
    mut journal: Journal,
    seq_written: Arc<AtomicU64>,
    rx: Receiver<WriteJob>,
    centers: Vec<Sender<Arc<JournalBatch>>>,
    shared: &Shared,
) -> Result<Seq, String> {
    const GROUP_BATCHES_MAX: usize = WRITE_QUEUE_BATCHES;
    let mut syncs_published = Instant::now();
    let publish_syncs = |journal: &Journal| {
        if let Ok(mut t) = shared.journal_syncs.lock() {
            t.clone_from(journal.sync_times());
        }
    };
    let mut group = Vec::with_capacity(GROUP_BATCHES_MAX);
    // Durable, waiting for their mark to be.
    let mut unmarked: VecDeque<Arc<JournalBatch>> = VecDeque::new();
    let publish = |unmarked: &mut VecDeque<Arc<JournalBatch>>, marked: Seq| -> Result<(), String> {
        while unmarked.front().is_some_and(|b| b.entries.last().is_none_or(|e| e.seq <= marked)) {
            if let Some(b) = unmarked.pop_front() {
                for tx in &centers {
                    tx.send(Arc::clone(&b)).map_err(|_| "a center stopped".to_string())?;
                }
            }
        }
        Ok(())
    };
    loop {
        let job = if unmarked.is_empty() {
            rx.recv().ok()
        } else {
            match rx.try_recv() {
                Ok(j) => Some(j),
                Err(TryRecvError::Empty) => {
                    let marked = journal.seal().map_err(|e| e.to_string())?;
                    publish(&mut unmarked, marked)?;
                    continue;
                }
                Err(TryRecvError::Disconnected) => None,
            }
        };
        let Some(job) = job else { break };
        group.push(job);
        while group.len() < GROUP_BATCHES_MAX {
            match rx.try_recv() {
                Ok(j) => group.push(j),
                Err(_) => break,
            }
        }
        for j in &group {
            let (first, last) = match (j.batch.entries.first(), j.batch.entries.last()) {
                (Some(f), Some(l)) => (f.seq, l.seq),
                _ => continue,
            };
            journal.append(&j.frames, first, last).map_err(|e| e.to_string())?;
            seq_written.store(last, Ordering::Release);
        }
        let marked = journal.sync().map_err(|e| e.to_string())?;
        unmarked.extend(group.drain(..).map(|j| j.batch));
        publish(&mut unmarked, marked)?;
        if syncs_published.elapsed() >= FIGURES_INTERVAL {
            publish_syncs(&journal);
            syncs_published = Instant::now();
        }
    }
    let marked = journal.seal().map_err(|e| e.to_string())?;
    publish(&mut unmarked, marked)?;
    publish_syncs(&journal);
    Ok(journal.seq_last())
}

/// Everything one checkpoint needs, cheap to make on the center's thread: the encoded ledger and
/// finalizer, and shared pointers to the retained ack batches (encoded by the checkpointer).
pub(crate) struct CheckpointJob {
    pub center_index: usize,
    pub path: PathBuf,
    pub state: Vec<u8>,
    pub ack_log: Vec<Arc<AckBatch>>,
    pub awaiting: Vec<Awaiting>,
    /// The plugin state file this checkpoint references, and its bytes if it must be written.
    pub plugins: Option<(checkpoint::PluginRef, Option<Vec<u8>>)>,
    pub seq_unfinal_first: Seq,
}

/// Writes every checkpoint of every center (one writer per file: no races on the temp file).
fn run_checkpointer(rx: Receiver<CheckpointJob>, shared: Arc<Shared>) -> Result<(), String> {
    while let Ok(job) = rx.recv() {
        // The plugin file first: the checkpoint must never reference one that is not durable.
        if let Some((at, Some(host))) = &job.plugins {
            checkpoint::write_plugins(&job.path, *at, host).map_err(|e| e.to_string())?;
        }
        let bytes = checkpoint::encode(
            &job.state,
            job.ack_log.iter().flat_map(|b| b.items.iter()),
            &job.awaiting,
            job.plugins.as_ref().map(|(at, _)| *at),
        );
        checkpoint::write(&job.path, &bytes).map_err(|e| e.to_string())?;
        if let Some((at, Some(_))) = &job.plugins {
            checkpoint::remove_plugins_before(&job.path, at.seq).map_err(|e| e.to_string())?;
        }
        shared.durable_unfinal_first[job.center_index].fetch_max(job.seq_unfinal_first, Ordering::AcqRel);
    }
    Ok(())
}

/// A center's plugin host, restored from its checkpoint; the checkpoint and the configuration
/// must agree on whether there are plugins (their step digests are in the state hash).
fn make_host(
    id: CenterId,
    make: Option<&(dyn Fn() -> Vec<Box<dyn HostedPlugin>> + Send + Sync)>,
    ckpt: Option<&checkpoint::CenterCheckpoint>,
) -> Result<PluginHost, StartError> {
    let err = |reason: String| StartError::Plugins { center: id, reason };
    let mut host = match make {
        Some(make) => PluginHost::new(id, make()).map_err(|e| err(e.to_string()))?,
        None => PluginHost::empty(id),
    };
    match ckpt {
        None => {}
        Some(c) => match (&c.plugins, host.is_empty()) {
            (Some((at, bytes)), false) => {
                host.restore(bytes).map_err(|e| err(e.to_string()))?;
                if host.state_hash() != at.state_hash {
                    return Err(err("its plugin state file does not match the checkpoint".into()));
                }
            }
            (None, true) => {}
            (None, false) if c.ledger.seq_applied() == 0 => {}
            (None, false) => {
                return Err(err("plugins are enabled but its checkpoint has no plugin state".into()))
            }
            (Some(_), true) => {
                return Err(err("its checkpoint has plugin state but plugins are not enabled".into()))
            }
        },
    }
    Ok(host)
}

/// The adapter thread: executes the owner's effects, submits their results as commands whose
/// origin is the center that sent the effects.
fn run_adapter(
    mut adapter: Box<dyn EffectAdapter>,
    rx: Receiver<ToAdapter>,
    submitter: Submitter,
    shared: Arc<Shared>,
) -> Result<(), String> {
    let mut origin = rtgs_core::plugin_host::OWNER_INITIAL;
    let mut results = Vec::new();
    let mut published = Instant::now();
    while !shared.adapter_stop.load(Ordering::Acquire) {
        match rx.recv_timeout(ADAPTER_POLL_INTERVAL) {
            Ok(ToAdapter::Effects(from, effects)) => {
                origin = from;
                let now = submitter.clock().now_us();
                for e in &effects {
                    adapter.execute(e, now);
                }
            }
            Ok(ToAdapter::Alerts(alerts)) => adapter.alerts_seen(&alerts, submitter.clock().now_us()),
            Ok(ToAdapter::Submit(commands)) => {
                for chunk in commands.chunks(SUBMISSION_COMMANDS_MAX) {
                    submitter.submit(chunk.to_vec()).map_err(|e| e.to_string())?;
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        results.clear();
        adapter.poll(submitter.clock().now_us(), &mut results);
        let mut commands: Vec<Command> = results
            .drain(..)
            .map(|(bmi, c)| Command { origin, bmi, payload: rtgs_core::entry::Payload::Plugin(c) })
            .collect();
        while !commands.is_empty() {
            let rest = commands.split_off(commands.len().min(SUBMISSION_COMMANDS_MAX));
            submitter.submit(commands).map_err(|e| e.to_string())?;
            commands = rest;
        }
        if published.elapsed() >= FIGURES_INTERVAL {
            published = Instant::now();
            let mut figures = Vec::new();
            adapter.figures(&mut figures);
            publish(&shared.adapter_figures, figures);
        }
    }
    let mut figures = Vec::new();
    adapter.figures(&mut figures);
    publish(&shared.adapter_figures, figures);
    Ok(())
}
