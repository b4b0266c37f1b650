//! One data center of the production engine: the core's [`Center`] and the tasks that move its
//! bytes and its time. **The `Center` decides; these tasks do not.** What to apply, when a hole
//! or a lost tail is pulled, when acks go out (only after their commit), what happens to acks
//! beyond the tally window (dropped, read again), when finality that stands still asks for acks
//! again, which notices are due, when the plugins go live, who proposes itself as a plugin's
//! owner: all of it is `rtgs_core::center`, and the simulator runs the very same code.
//!
//! # Tasks
//! * the **center task** ([`Driver`]) owns the `Center`: it feeds it what arrived — journal
//!   messages with their offsets, every center's ack messages with theirs, the committer's and
//!   the publisher's answers, the passing of time — and carries out what it asks
//!   (`Outputs`): commits to the committer, acks / re-ack requests / notices / owner proposals to
//!   the publisher, ack rewinds to the stream reader, gap pulls (read from the sequencer's outbox
//!   right here), effects to the plugins' adapters.
//! * [`streams`] — reads the journal and the applied-acks topics from their resume positions
//!   through one consumer (one fetch for both), decodes them, and seeks the acks back when the
//!   `Center` asks to read them again; [`journal`] and [`acks`] hold what it hands over.
//! * [`committer`] — one PostgreSQL transaction per commit (what queued up behind a running one
//!   merged), then tells the center task how far it is durable.
//! * [`publisher`] — the center's messages to the broker, each repeated until confirmed.
//!
//! Answers come back through `watch` channels (a position that only grows), never through a
//! bounded queue the center task also feeds: no cycle of full queues can stall the node.

mod acks;
mod committer;
mod journal;
mod publisher;
mod streams;

use crate::broker::Broker;
use crate::clock::{wall_us, Clock};
use crate::error::{EngineError, Invariant};
use crate::limits::PUSH_ACKS_MAX;
use crate::limits::{
    ACK_QUEUE_BATCHES, COMMIT_QUEUE_COMMITS, JOURNAL_QUEUE_BATCHES, MERGED_COMMIT_ENTRIES_MAX,
    PUBLISH_QUEUE_ITEMS, PUSHED_STREAM_FETCH_WAIT, STREAM_FETCH_WAIT, TIMELINE_RUNS_MAX,
};
use crate::metrics::{Metrics, Timeline};
use crate::pg::PgRetry;
use crate::plugins::{Router, StoredPlugins};
use crate::status::{lock, CenterView, CommitStats, PublishStats};
use crate::Task;
use rtgs_core::center::{Awaiting, Center, CenterConfig, Commit, Outputs, Pull, Restore};
use rtgs_core::codec;
use rtgs_core::entry::{CenterId, Entry, Outcome, Seq};
use rtgs_core::finalizer::{Finalizer, SeqStatus};
use rtgs_core::limits::{FINALIZER_WINDOW_SEQS, GAP_BUFFER_SLOTS};

/// Pushed entries further than this ahead of the next seq to apply are left to the journal.
const PUSHED_AHEAD_MAX: u64 = GAP_BUFFER_SLOTS as u64 / 4;
use rtgs_pg::center_store::CenterStore;
use rtgs_pg::sequencer_store::SequencerStore;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch};

use acks::AckBatch;
pub use acks::Rewind;
use committer::CommitJob;
use journal::JournalMessage;
use publisher::Outgoing;

/// Fault injection for the drills (off in production).
#[derive(Clone, Copy, Debug, Default)]
pub struct Faults {
    /// Drop one in N journal messages as if lost in transit: gap pulls must recover them.
    pub drop_journal_one_in: u64,
    /// Do not publish one in N of this center's ack messages: re-acks must recover them.
    pub drop_acks_one_in: u64,
    /// Ack this seq with a state hash that differs from the one this center computed, as a
    /// center whose state diverged would (0: off): finality must halt, nothing wrong final.
    pub diverge_at_seq: u64,
    /// This center's acks go only by the push path, never to the topic (and the published mark
    /// does not move), as if its node died each time before the broker confirmed them: a
    /// restart without the fault must publish them all (ARCHITECTURE.md "The push path").
    pub acks_push_only: bool,
}

/// What the center's tasks are given.
pub struct CenterInputs {
    pub name: String,
    pub center: CenterId,
    pub center_count: usize,
    /// The plugin owner failure detector's silence (the `Center`'s setting).
    pub owner_silence: Duration,
    /// Commits carry their statement lines (`NodeConfig::statement_history`).
    pub statement_history: bool,
    pub broker: Broker,
    pub faults: Faults,
    pub store: CenterStore,
    /// The sequencer's outbox: gap pulls read it.
    pub outbox: SequencerStore,
    /// What the push path heard (`crate::push`; `None`: off).
    pub pushed: Option<mpsc::Receiver<crate::push::Pushed>>,
    /// This center's ack notices, to the push path (`None`: off, or the ack drop drill runs).
    pub push_acks: Option<mpsc::Sender<crate::push::Outgoing>>,
    /// Final notices straight to this node's API (`None`: no API).
    pub local_notices: Option<Arc<crate::api::LocalNotices>>,
    pub retry: PgRetry,
    pub plugins: Option<Router>,
    /// Every committed entry, in seq order, for the API's read model.
    pub feed: Option<mpsc::Sender<Vec<Entry>>>,
    /// Every seq up to here is final (the API's read model applies up to it).
    pub final_through: Arc<AtomicU64>,
    pub view: Arc<Mutex<CenterView>>,
    pub commit_stats: Arc<CommitStats>,
    pub publish_stats: Arc<PublishStats>,
    pub metrics: Arc<Metrics>,
    pub clock: Clock,
}

/// The center restored from its database, its tasks ready to run.
pub struct Started {
    pub tasks: Vec<Task>,
    /// The ledger as stored (the API's read model starts from it).
    pub ledger: rtgs_core::ledger::Ledger,
    /// The plugin state restored with it, at the same seq (the read model's plugin replica
    /// starts from it); empty without plugins or on a fresh center.
    pub plugins: Vec<rtgs_core::plugin_host::PluginCheckpoint>,
}

/// Restores the center from its database and builds its tasks (see the module docs).
pub async fn start(i: CenterInputs) -> Result<Started, EngineError> {
    let store = Arc::new(i.store);
    let stored = i.retry.get("load center state", || store.load()).await?;
    let seq_applied = stored.ledger.seq_applied();
    tracing::info!(
        center = %i.name,
        seq = seq_applied,
        "center resumes after seq {seq_applied} (journal offset {}), finality from seq {} (ack offset {})", stored.journal_offset, stored.seq_unfinal_first, stored.ack_offset
    );
    let mut plugins = i.plugins;
    let host = match plugins.as_mut() {
        Some(router) => router.restore(&store, &i.retry, seq_applied).await?,
        None => crate::plugins::refuse_stored(&i.name, i.center, &store, &i.retry).await?,
    };
    // Own entries applied but not announced before the restart: their notices are owed.
    let owed = i.retry.get("read owed notices", || store.applied_since(stored.seq_notice_from)).await?;
    let awaiting: Vec<Awaiting> = owed
        .into_iter()
        .filter(|(_, origin, bmi)| *origin == i.center && !bmi.is_none())
        .map(|(a, _, bmi)| Awaiting { seq: a.seq, bmi, outcome: a.outcome, submitted_at_us: 0 })
        .collect();
    if !awaiting.is_empty() {
        tracing::info!(center = %i.name, "{} notices owed from before the restart", awaiting.len());
    }
    let ledger = stored.ledger.clone();
    let plugin_checkpoints = if host.is_empty() { Vec::new() } else { host.checkpoints() };
    let (journal_next, ack_next) = (stored.journal_next(), stored.ack_next());
    let config = CenterConfig {
        commit_rows: true,
        // Every account's whole history, stored with the commit: statements read it.
        commit_lines: i.statement_history,
        owner_silence_us: u64::try_from(i.owner_silence.as_micros()).unwrap_or(u64::MAX),
        ..CenterConfig::new(i.center, i.center_count)
    };
    let restore = Restore {
        finalizer: Finalizer::with_window(i.center_count, FINALIZER_WINDOW_SEQS, stored.seq_unfinal_first),
        ledger: stored.ledger,
        host,
        awaiting,
        journal_next: Some(journal_next),
        ack_next,
        catch_up_seq: None,
        acks_published_through: stored.acks_published_through,
    };
    // With the push path beside them, the journal and the acks topics are the record and the
    // backstop, not the fast path: they may wait long per fetch (`limits`).
    let stream_wait = if i.pushed.is_some() { PUSHED_STREAM_FETCH_WAIT } else { STREAM_FETCH_WAIT };
    let ack_offset = i64::try_from(ack_next).map_err(|_| Invariant(format!("ack position {ack_next}")))?;
    // One consumer for both streams: one fetch for both each wait (`streams`).
    let consumer = i.broker.assigned_consumer(
        &format!("streams-{}", i.name),
        &format!("{}-streams", i.name),
        &[(&i.broker.topics.journal, stored.journal_offset + 1), (&i.broker.topics.applied, ack_offset)],
        stream_wait,
    )?;
    let journal_end = journal::end(&consumer, &i.broker.topics.journal);
    let mut center = Center::new(config, restore, i.clock.now_us());
    match journal_end {
        // The plugins go live once the center has read the journal as far as it went now.
        Ok(end) => center.handle_journal_end(end, i.clock.now_us()),
        Err(e) => {
            tracing::warn!(center = %i.name, "journal end unknown ({e}): plugins go live when it is quiet")
        }
    }
    let (journal_tx, journal_rx) = mpsc::channel(JOURNAL_QUEUE_BATCHES);
    let (acks_tx, acks_rx) = mpsc::channel(ACK_QUEUE_BATCHES);
    let (commit_tx, commit_rx) = mpsc::channel(COMMIT_QUEUE_COMMITS);
    let (publish_tx, publish_rx) = mpsc::channel(PUBLISH_QUEUE_ITEMS);
    // This center's acks the broker confirmed (ARCHITECTURE.md "The push path"), the mark the
    // committer stores: pushed acks can make a seq final before this center's ack of it is in
    // the topic. What a restart publishes again is the core's decision (`Outputs::republish`,
    // from this mark); the mark moves only once those are confirmed. Where it starts is the
    // core's too (`Center::acks_published_at_start`: a database from before migration 0008,
    // whose node pushed no acks, has no mark).
    let acks_confirmed = Arc::new(AtomicU64::new(center.acks_published_at_start()));
    let (committed_tx, committed_rx) = watch::channel(seq_applied);
    let (announced_tx, announced_rx) = watch::channel(0);
    let (rewind_tx, rewind_rx) = watch::channel(Rewind { generation: 0, position: ack_next });
    let reader = streams::Reader {
        name: i.name.clone(),
        consumer,
        journal_topic: i.broker.topics.journal.clone(),
        acks_topic: i.broker.topics.applied.clone(),
        faults: i.faults,
        journal: journal_tx,
        acks: acks_tx,
        rewind: rewind_rx,
    };
    // Everything applied is committed (the watermark is the stored one).
    i.commit_stats.seq_committed.store(seq_applied, Ordering::Relaxed);
    let committer = committer::Committer {
        name: i.name.clone(),
        store: Arc::clone(&store),
        retry: i.retry.clone(),
        rx: commit_rx,
        committed: committed_tx,
        feed: i.feed,
        stats: i.commit_stats,
        metrics: Arc::clone(&i.metrics),
        acks_confirmed: Arc::clone(&acks_confirmed),
    };
    let publisher = publisher::Publisher {
        name: i.name.clone(),
        center: i.center,
        producer: i.broker.producer(&format!("{}-center", i.name))?,
        broker: i.broker,
        store,
        retry: i.retry.clone(),
        faults: i.faults,
        ack_messages: 0,
        rx: publish_rx,
        announced: announced_tx,
        stats: i.publish_stats,
        acks_confirmed,
    };
    let driver = Driver {
        name: i.name,
        center,
        clock: i.clock,
        out: Outputs::default(),
        journal: journal_rx,
        acks: acks_rx,
        pushed: i.pushed,
        push_acks: i.push_acks,
        local_notices: i.local_notices,
        journal_turn: true,
        committed: committed_rx,
        announced: announced_rx,
        rewind: rewind_tx,
        ack_generation: 0,
        commits: commit_tx,
        pending: None,
        publish: publish_tx,
        outbox: i.outbox,
        retry: i.retry,
        plugins,
        timeline: Timeline::with_capacity(TIMELINE_RUNS_MAX),
        metrics: i.metrics,
        local: CenterView::default(),
        view: i.view,
        final_through: i.final_through,
        halted_reported: false,
    };
    let tasks: Vec<Task> = vec![
        Box::pin(driver.run()),
        Box::pin(reader.run()),
        Box::pin(committer.run()),
        Box::pin(publisher.run()),
    ];
    Ok(Started { tasks, ledger, plugins: plugin_checkpoints })
}

/// The center task (see the module docs).
struct Driver {
    name: String,
    center: Center,
    clock: Clock,
    /// Caller-owned outputs, reused.
    out: Outputs,
    journal: mpsc::Receiver<Vec<JournalMessage>>,
    acks: mpsc::Receiver<AckBatch>,
    /// What the push path heard (`crate::push`).
    pushed: Option<mpsc::Receiver<crate::push::Pushed>>,
    /// This center's ack notices, to the push path.
    push_acks: Option<mpsc::Sender<crate::push::Outgoing>>,
    /// Final notices straight to this node's API.
    local_notices: Option<Arc<crate::api::LocalNotices>>,
    /// Journal and acks take turns when both are ready (neither starves the other).
    journal_turn: bool,
    /// The committer's answer: durable through this seq.
    committed: watch::Receiver<Seq>,
    /// The publisher's answer: notices confirmed through this seq.
    announced: watch::Receiver<Seq>,
    /// To the stream reader: read the acks again from a position.
    rewind: watch::Sender<Rewind>,
    /// Ack batches of an older generation were read before a rewind: dropped.
    ack_generation: u64,
    commits: mpsc::Sender<CommitJob>,
    /// Commits merged here while the committer's queue is full (one transaction when it has
    /// room: batch on every hop).
    pending: Option<CommitJob>,
    publish: mpsc::Sender<Outgoing>,
    outbox: SequencerStore,
    retry: PgRetry,
    plugins: Option<Router>,
    timeline: Timeline,
    metrics: Arc<Metrics>,
    /// What this task shows, kept here and copied to `view` after every round.
    local: CenterView,
    view: Arc<Mutex<CenterView>>,
    final_through: Arc<AtomicU64>,
    halted_reported: bool,
}

impl Driver {
    async fn run(mut self) -> Result<(), EngineError> {
        self.drain().await?;
        self.show();
        loop {
            let wake = self.clock.instant(self.center.poll_timeout());
            let journal_turn = self.journal_turn;
            self.journal_turn = !journal_turn;
            // A handle of its own: its permit must not borrow `self` while the other arms do.
            let commits = self.commits.clone();
            // Answers first (cheap, and they release acks and notices); the timer last, so that
            // after a stall what arrived is seen before a quiet journal is concluded.
            tokio::select! {
                biased;
                changed = self.committed.changed() => {
                    changed.map_err(|_| EngineError::TaskGone("committer"))?;
                    let seq = *self.committed.borrow_and_update();
                    self.center.handle_committed(seq);
                }
                changed = self.announced.changed() => {
                    changed.map_err(|_| EngineError::TaskGone("publisher"))?;
                    let seq = *self.announced.borrow_and_update();
                    self.center.handle_announced(seq);
                }
                permit = commits.reserve(), if self.pending.is_some() => {
                    let permit = permit.map_err(|_| EngineError::TaskGone("committer"))?;
                    if let Some(job) = self.pending.take() {
                        permit.send(job);
                    }
                }
                input = next_input(&mut self.journal, &mut self.acks, journal_turn) => match input {
                    Input::Journal(batch) => self.on_journal(batch.ok_or(EngineError::TaskGone("stream reader"))?),
                    Input::Acks(batch) => self.on_acks(batch.ok_or(EngineError::TaskGone("stream reader"))?),
                },
                Some(pushed) = next_pushed(&mut self.pushed) => self.on_pushed(pushed),
                () = tokio::time::sleep_until(wake) => self.center.handle_timeout(self.clock.now_us()),
            }
            self.drain().await?;
            self.show();
        }
    }

    fn on_journal(&mut self, batch: Vec<JournalMessage>) {
        let now = self.clock.now_us();
        for m in batch {
            self.note_epoch(&m.entries);
            self.center.handle_entries(m.entries.into_iter().map(|e| (e, 0)), Some(m.offset), now);
        }
    }

    /// The epoch of the newest entries read (the status shows it; nothing decides on it).
    fn note_epoch(&mut self, entries: &[Entry]) {
        if let Some(e) = entries.last() {
            self.local.journal_epoch = self.local.journal_epoch.max(e.epoch);
        }
    }

    /// What the push path heard: entries as from the journal (without a position), acks beside
    /// the stream (`Center::handle_acks_pushed`).
    fn on_pushed(&mut self, pushed: crate::push::Pushed) {
        let now = self.clock.now_us();
        match pushed {
            crate::push::Pushed::Entries(entries) => {
                // A center catching up reads the journal; entries far ahead of it would only
                // crowd its gap buffer (and be dropped and pulled): the journal brings them.
                let ahead = entries.first().map_or(0, |e| e.seq.saturating_sub(self.center.seq_next()));
                if ahead <= PUSHED_AHEAD_MAX {
                    self.note_epoch(&entries);
                    self.center.handle_entries(entries.into_iter().map(|e| (e, 0)), None, now)
                }
            }
            crate::push::Pushed::Acks(from, acks) => {
                let before = self.center.seq_unfinal_first();
                self.center.handle_acks_pushed(from, &acks, now);
                self.note_acked(from, &acks);
                let after = self.center.seq_unfinal_first();
                if after > before {
                    self.finalized(before, after);
                }
            }
        }
    }

    /// How far each center acked, for the lag metric (an invalid sender is the `Center`'s
    /// alarm, not a figure).
    fn note_acked(&mut self, from: CenterId, acks: &[rtgs_core::ledger::Applied]) {
        let index = usize::from(from.0).checked_sub(1);
        if let (Some(seen), Some(last)) = (index.and_then(|i| self.local.seq_acked.get_mut(i)), acks.last()) {
            *seen = (*seen).max(last.seq);
        }
    }

    /// Feeds ack messages one at a time: when one makes the `Center` ask to read the stream
    /// again, the rest of the batch is dropped (it is read again after the seek).
    fn on_acks(&mut self, batch: AckBatch) {
        if batch.generation != self.ack_generation {
            return; // read before a rewind: read again after it
        }
        for m in batch.messages {
            let before = self.center.seq_unfinal_first();
            self.center.handle_acks(m.from, &m.acks, m.offset, self.clock.now_us());
            self.note_acked(m.from, &m.acks);
            let after = self.center.seq_unfinal_first();
            if after > before {
                self.finalized(before, after);
            }
            self.center.poll_output(&mut self.out);
            if self.out.ack_rewind.is_some() {
                break;
            }
        }
    }

    /// Metrics of seqs `from..to` that just became final: by outcome (read back from the tally
    /// window, which still holds them: `limits`), and the quorum latency.
    fn finalized(&mut self, from: Seq, to: Seq) {
        let (mut settled, mut rejected) = (0, 0);
        let finalizer = self.center.finalizer();
        for seq in from..to {
            match finalizer.status(seq) {
                SeqStatus::Final(Outcome::Accepted) => settled += 1,
                SeqStatus::Final(Outcome::Rejected(_)) => rejected += 1,
                _ => {}
            }
        }
        self.metrics.finalized(settled, rejected);
        self.timeline.finalized(to, wall_us(), self.metrics.quorum_latency());
    }

    /// Polls the `Center` and carries out what it asks until it asks nothing more.
    async fn drain(&mut self) -> Result<(), EngineError> {
        loop {
            self.center.poll_output(&mut self.out);
            if self.out.is_empty() {
                return Ok(());
            }
            self.dispatch().await?;
        }
    }

    async fn dispatch(&mut self) -> Result<(), EngineError> {
        // Commits first: a plugin snapshot taken now is the state at the commit's last seq.
        for commit in std::mem::take(&mut self.out.commits) {
            self.send_commit(commit).await?;
        }
        if let Some(position) = self.out.ack_rewind.take() {
            self.ack_generation += 1;
            let rewind = Rewind { generation: self.ack_generation, position };
            self.rewind.send(rewind).map_err(|_| EngineError::TaskGone("stream reader"))?;
        }
        let mut outgoing = Vec::new();
        if let Some((from, through)) = self.out.republish.take() {
            // First: a newer ack confirmed before these would move the published mark past them.
            tracing::info!(
                center = %self.name,
                seq = from,
                "acks of seqs {from}..={through} published again (not confirmed in the topic before the restart)"
            );
            outgoing.push(Outgoing::ReackThrough(from, through));
        }
        let mut acks_pushed = false;
        if let (Some(push), 1..=PUSH_ACKS_MAX) = (&self.push_acks, self.out.acks.len()) {
            // Pushed here, not by the publisher: they must not queue behind its broker round
            // trips. A full queue skips them, and many at once are left to the broker (a load
            // that big does not wait on this hop): the broker carries them anyway.
            acks_pushed = true;
            for notice in crate::push::ack_notices(self.center.config().center, &self.out.acks) {
                acks_pushed &= push.try_send((rtgs_pg::sequencer_store::ACKS_CHANNEL, notice)).is_ok();
            }
        }
        if !self.out.acks.is_empty() {
            outgoing.push(Outgoing::Acks(std::mem::take(&mut self.out.acks), acks_pushed));
        }
        if let Some(from) = self.out.reack_from.take() {
            tracing::warn!(
                center = %self.name,
                "publishing this center's acks from seq {from} again (finality stands there with it \
                 committed here, or this center restarted)");
            outgoing.push(Outgoing::Reack(from));
        }
        if !self.out.notices.is_empty() {
            // This node's API first, in-process (before the publisher: the topic's copy is
            // then recognised as delivered).
            let handed = self.local_notices.as_ref().is_some_and(|local| local.deliver(&self.out.notices));
            outgoing.push(Outgoing::Notices(std::mem::take(&mut self.out.notices), handed));
        }
        if !self.out.commands.is_empty() {
            outgoing.push(Outgoing::Commands(std::mem::take(&mut self.out.commands)));
        }
        for item in outgoing {
            self.publish.send(item).await.map_err(|_| EngineError::TaskGone("publisher"))?;
        }
        let effects = std::mem::take(&mut self.out.effects);
        if !effects.is_empty() {
            let router = self
                .plugins
                .as_mut()
                .ok_or_else(|| Invariant(format!("{} effects without plugins", effects.len())))?;
            router.route(effects).await?;
        }
        for alarm in self.out.alarms.drain(..) {
            tracing::error!(center = %self.name, "ALARM: {alarm}");
        }
        self.out.checkpoint_due = false; // commits are whole durable states: no checkpoints
        for pull in std::mem::take(&mut self.out.pulls) {
            self.pull(pull).await?;
        }
        Ok(())
    }

    /// Hands a commit to the committer, or merges it into the one waiting for room there. Beyond
    /// [`MERGED_COMMIT_ENTRIES_MAX`] entries waiting, this task waits for the committer
    /// (back-pressure: the center runs no further ahead of what is durable).
    async fn send_commit(&mut self, commit: Commit) -> Result<(), EngineError> {
        let plugins = match (self.plugins.as_mut(), commit.seq_last()) {
            (Some(router), Some(last)) => router.save(self.center.host(), last, commit.plugins_changed),
            _ => StoredPlugins::None,
        };
        // Applied now: their timestamps go on the quorum timeline.
        self.timeline.applied(&commit.entries, wall_us(), self.metrics.quorum_latency());
        let job = CommitJob { commit, plugins };
        let job = match self.pending.take() {
            Some(mut pending) => {
                pending.merge(job);
                pending
            }
            None => job,
        };
        match self.commits.try_send(job) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Full(job))
                if job.commit.applied.len() >= MERGED_COMMIT_ENTRIES_MAX =>
            {
                self.commits.send(job).await.map_err(|_| EngineError::TaskGone("committer"))
            }
            Err(mpsc::error::TrySendError::Full(job)) => {
                self.pending = Some(job);
                Ok(())
            }
            Err(mpsc::error::TrySendError::Closed(_)) => Err(EngineError::TaskGone("committer")),
        }
    }

    /// Reads `pull` back from the sequencer's outbox and hands it to the `Center`.
    async fn pull(&mut self, pull: Pull) -> Result<(), EngineError> {
        let outbox = &self.outbox;
        let batches = self.retry.get("gap pull", || outbox.batches(pull.from, pull.to)).await?;
        let mut entries = Vec::new();
        for b in &batches {
            codec::decode_frames(&b.frames, &mut entries)
                .map_err(|e| Invariant(format!("outbox batch {} does not decode: {e}", b.seq_first)))?;
        }
        entries.retain(|e| (pull.from..=pull.to).contains(&e.seq));
        let next = self.center.seq_next();
        let useful = entries.iter().filter(|e| e.seq >= next).count() as u64;
        self.local.gap_entries_pulled += useful;
        tracing::info!(
            center = %self.name,
            seq = pull.from,
            "{:?}: seqs {}..={} pulled from the outbox ({useful} entries)", pull.why, pull.from, pull.to
        );
        self.center.handle_entries(entries.into_iter().map(|e| (e, 0)), None, self.clock.now_us());
        Ok(())
    }

    /// Publishes what this task shows (status, metrics, the API's finality watermark).
    fn show(&mut self) {
        let c = &self.center;
        let halted = c.finalizer().is_halted();
        if halted && !self.halted_reported {
            self.halted_reported = true;
            tracing::error!(
                center = %self.name,
                "FINALITY HALTED (divergence): nothing more is final until an operator intervenes");
        }
        self.local.seq_applied = c.seq_applied();
        self.local.seq_unfinal_first = c.seq_unfinal_first();
        self.local.finalized = c.finalizer().finalized_total();
        self.local.halted = halted;
        self.local.stats.clone_from(c.stats());
        self.final_through.store(c.seq_unfinal_first().saturating_sub(1), Ordering::Relaxed);
        if let Some(router) = self.plugins.as_mut() {
            router.observe(c.host());
        }
        lock(&self.view).clone_from(&self.local);
    }
}

enum Input {
    Journal(Option<Vec<JournalMessage>>),
    Acks(Option<AckBatch>),
}

/// The next item the push path heard (never, without one).
async fn next_pushed(
    pushed: &mut Option<mpsc::Receiver<crate::push::Pushed>>,
) -> Option<crate::push::Pushed> {
    match pushed {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// The next journal or ack batch, `journal_first` saying which is taken when both are ready:
/// the center task alternates, so that neither a journal backlog nor an ack backlog starves the
/// other.
async fn next_input(
    journal: &mut mpsc::Receiver<Vec<JournalMessage>>,
    acks: &mut mpsc::Receiver<AckBatch>,
    journal_first: bool,
) -> Input {
    if journal_first {
        tokio::select! {
            biased;
            batch = journal.recv() => Input::Journal(batch),
            batch = acks.recv() => Input::Acks(batch),
        }
    } else {
        tokio::select! {
            biased;
            batch = acks.recv() => Input::Acks(batch),
            batch = journal.recv() => Input::Journal(batch),
        }
    }
}
