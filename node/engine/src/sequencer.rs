//! The sequencer instance of one center: leads while it holds the lease in PostgreSQL.
//!
//! Leadership is the `sequencer` row's lease, not a broker group: the leader renews
//! `updated_at` (every recorded batch, and its lease task every [`LEASE_INTERVAL`] when no batch
//! did), and a survivor that finds the lease silent for [`LEADER_SILENCE_MAX`] (plus a stagger
//! per center number) claims it with a conditional update that bumps the epoch — which fences
//! the old leader — and then reads the inbound partition itself (assigned, never subscribed), from
//! the recorded offset. Takeover after a `kill -9` therefore takes the silence threshold plus one
//! transaction, instead of a group session timeout plus a rebalance (7–14 s with tansu). The
//! lease is renewed by its own task so a leader busy waiting for the broker or PostgreSQL is not
//! taken for dead; a process that is stopped (SIGSTOP, a VM pause) or cut from PostgreSQL stops
//! renewing, is replaced, and is fenced when it comes back.
//!
//! Leading, per batch of inbound messages (up to `SEQUENCER_BATCH_ENTRIES_MAX` entries per frame):
//! sequence (core [`Sequencer`], a `Tick` whenever one is due, under load too) → record the
//! frames in the outbox with the fenced conditional update → publish them to the journal →
//! (every few batches) mark them published. A fenced record ([`LeadError::Fenced`]) means
//! another instance took over: this one steps down at once and forgets its state.
//!
//! Where to resume the inbound topic is PostgreSQL's `sequencer.inbound_offset`, recorded in the
//! same transaction as each batch, so a new leader neither skips nor re-reads a sequenced
//! message; nothing is committed to the broker.
//!
//! A `bmi` is paid at most once, ever: a group's `bmi`s are written in its record transaction
//! into `sequenced_bmi`, under a unique index (optimistically: nearly every `bmi` is new); if one
//! was sequenced before, nothing of the transaction stays, the leader asks PostgreSQL what it
//! knows of the group's `bmi`s (one query) and the core sequencer answers a retry with the
//! original seq and refuses other content under a known `bmi` (DUPL, with a notice). A failover
//! loses nothing of it and needs no replay window: the table is the whole history (a database
//! from before migration `0003` is backfilled from the outbox at takeover).

use crate::broker::{recv_batch, Broker};
use crate::clock::wall_us;
use crate::error::{EngineError, Invariant, LeadError};
use crate::frames;
use crate::limits::{
    BACKSTOP_PACE, INBOUND_RECV_BYTES_MAX, INBOUND_WAIT_LEADING, IN_FLIGHT_MAX, JOURNAL_MESSAGE_ENTRIES_MAX,
    LEADER_SILENCE_MAX, LEADER_SILENCE_STAGGER, LEASE_CHECK_INTERVAL, LEASE_INTERVAL, MARK_INTERVAL,
    PRODUCER_FULL_PAUSE, PUBLISH_RETRY_PAUSE, PUSHED_STREAM_FETCH_WAIT, PUSH_INBOUND_HELD_MAX,
    STREAM_FETCH_WAIT,
};
use crate::metrics::Metrics;
use crate::pg::PgRetry;
use crate::push::InboundPushed;
use crate::status::SequencerStats;
use futures_util::FutureExt;
use rdkafka::consumer::{Consumer, DefaultConsumerContext, StreamConsumer};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};
use rtgs_core::codec;
use rtgs_core::entry::{Bmi, CenterId, Command, Entry, Seq};
use rtgs_core::hash::siphash24;
use rtgs_core::limits::SEQUENCER_BATCH_ENTRIES_MAX;
use rtgs_core::sequencer::{Admission, Lookup, Sequencer};
use rtgs_kafka::wire::{self, Notice, NoticeStatus};
use rtgs_pg::sequencer_store::{OutboxBatch, SequencerStore};
use rtgs_pg::StoreError;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// What the sequencer task is given.
pub struct SequencerInputs {
    pub name: String,
    pub center: CenterId,
    pub broker: Broker,
    /// `Tick`s also when nothing is sequenced (off only in drills that compare quiescent
    /// databases: plugin timers need them).
    pub idle_tick: bool,
    pub store: SequencerStore,
    /// The lease task's own connection ([`crate::limits::LEASE_POOL_CONNECTIONS`]).
    pub lease_store: SequencerStore,
    pub retry: PgRetry,
    pub stats: Arc<SequencerStats>,
    pub metrics: Arc<Metrics>,
    /// Inbound messages pushed by the APIs (`crate::push`; `None`: off).
    pub pushed: Option<mpsc::Receiver<InboundPushed>>,
}

/// Inbound messages an API pushed *before* the broker stored them (`crate::push`): the leader
/// sequences them at once, in the next round, instead of waiting for the broker's store and the
/// topic's fetch (≈ 14 ms at 2,000/s here). Safe because admission is by `bmi`, forever
/// (`sequenced_bmi`): whichever copy of a command comes first is sequenced, any later one is
/// a retry. The topic's copy of a command taken this way is recognised ([`EarlyCopies`]) and
/// dropped silently; one that is not recognised (after a takeover, or forgotten) is admitted
/// as any retry — answered with its original seq, never sequenced again.
struct PushedInbound {
    rx: mpsc::Receiver<InboundPushed>,
    /// Heard, not yet sequenced (at most [`PUSH_INBOUND_HELD_MAX`]: beyond, the newest are
    /// dropped — the topic brings them).
    early: Vec<Vec<u8>>,
}

impl PushedInbound {
    /// Waits for the next pushed message (never, when the push path is off).
    async fn arrived(pushed: &mut Option<PushedInbound>) {
        match pushed {
            Some(p) => match p.rx.recv().await {
                Some(body) => p.hold(body),
                None => std::future::pending().await,
            },
            None => std::future::pending().await,
        }
    }

    fn hold(&mut self, body: Vec<u8>) {
        if self.early.len() < PUSH_INBOUND_HELD_MAX {
            self.early.push(body);
        }
    }

    /// Takes what arrived meanwhile.
    fn take(&mut self) {
        while let Ok(body) = self.rx.try_recv() {
            self.hold(body);
        }
    }
}

/// Commands taken from the push path whose topic copies have not come yet, by `bmi` (under the
/// standard library's randomly keyed SipHash: participants choose `bmi`s) with the whole command
/// to compare: a topic command equal to one of them is dropped silently — its twin was admitted
/// (sequenced, or answered as a retry or conflict). With multiplicity: a command pushed twice
/// (a participant's retry) has two copies to drop. Bounded by [`EARLY_COPIES_MAX`], the oldest
/// forgotten first; a forgotten copy is admitted as a retry — answered again, never sequenced
/// again. Commands without a `bmi` are never matched.
#[derive(Default)]
struct EarlyCopies {
    awaited: HashMap<Bmi, (Command, u32)>,
    order: VecDeque<Bmi>,
}

/// Topic copies awaited at most (at 2,000/s a copy comes within ~100 ms: a few hundred).
const EARLY_COPIES_MAX: usize = 65_536;

impl EarlyCopies {
    fn is_empty(&self) -> bool {
        self.awaited.is_empty()
    }

    fn insert(&mut self, command: &Command) {
        if command.bmi == Bmi::NONE {
            return;
        }
        match self.awaited.get_mut(&command.bmi) {
            Some((twin, copies)) if twin == command => *copies += 1,
            // Other content under a pushed bmi (a conflict): its copy is answered again.
            Some(_) => return,
            None => {
                self.awaited.insert(command.bmi, (command.clone(), 1));
            }
        }
        self.order.push_back(command.bmi);
        while self.order.len() > EARLY_COPIES_MAX {
            let Some(oldest) = self.order.pop_front() else { break };
            self.forget(oldest);
        }
    }

    fn forget(&mut self, bmi: Bmi) {
        if let Some((_, copies)) = self.awaited.get_mut(&bmi) {
            *copies -= 1;
            if *copies == 0 {
                self.awaited.remove(&bmi);
            }
        }
    }

    /// Whether `command` is the copy of one taken from the push path (it is not awaited any more).
    fn remove(&mut self, command: &Command) -> bool {
        match self.awaited.get(&command.bmi) {
            Some((twin, _)) if twin == command => {
                self.forget(command.bmi);
                true
            }
            _ => false,
        }
    }
}

struct InFlight {
    seq_first: Seq,
    frames: Arc<Vec<u8>>,
    delivery: DeliveryFuture,
}

/// The state of a leading instance.
struct Leader {
    sequencer: Sequencer,
    /// Keys the core's look-up of repeats within a group (random per leader: participants choose
    /// `bmi`s, so they must not be able to pile them into one bucket).
    hash_key: [u64; 2],
    epoch: u32,
    /// Recorded in the outbox: messages at or below it are sequenced.
    inbound_offset: i64,
    in_flight: VecDeque<InFlight>,
    /// Recorded batches the push path announced, not yet handed to the producer (at most
    /// [`BACKSTOP_PACE`] old, in seq order: `Instance::publish_paced`).
    held: Vec<(Seq, Arc<Vec<u8>>)>,
    /// When the oldest of `held` was recorded.
    held_since: Option<Instant>,
    /// Highest `seq_first` whose publish (and every earlier one) the broker confirmed.
    delivered_seq_first: Option<Seq>,
    last_mark: Instant,
    /// Messages sequenced from the push path whose topic copies are still to come.
    early: EarlyCopies,
}

/// The leader's lease, shared by the main loop and the lease task: the loop says at which epoch
/// it leads and when a recorded batch renewed the lease; the task renews it when no batch did and
/// says when it found that epoch fenced.
struct Lease {
    base: Instant,
    /// The epoch this instance leads at; 0: not leading.
    epoch: AtomicU64,
    /// Milliseconds after `base` of the last renewal.
    renewed_ms: AtomicU64,
    /// An epoch the lease task found fenced (0: none).
    fenced: AtomicU64,
}

impl Lease {
    fn now_ms(&self) -> u64 {
        self.base.elapsed().as_millis() as u64
    }
    fn renewed(&self) {
        self.renewed_ms.store(self.now_ms(), Ordering::Release);
    }
    fn lead(&self, epoch: u32) {
        self.renewed();
        self.fenced.store(0, Ordering::Release);
        self.epoch.store(u64::from(epoch), Ordering::Release);
    }
    fn is_fenced(&self, epoch: u32) -> bool {
        self.fenced.load(Ordering::Acquire) == u64::from(epoch)
    }
}

/// Renews the lease every [`LEASE_INTERVAL`] in which no batch did, while this instance leads.
/// A PostgreSQL that does not answer is reported (once per silence) and tried again: the
/// survivors cannot take over without it either.
async fn keep_lease(name: String, store: SequencerStore, lease: Arc<Lease>) {
    let mut unreachable_since: Option<Instant> = None;
    loop {
        tokio::time::sleep(LEASE_INTERVAL / 4).await;
        let epoch = lease.epoch.load(Ordering::Acquire);
        let due = lease.now_ms().saturating_sub(lease.renewed_ms.load(Ordering::Acquire))
            >= LEASE_INTERVAL.as_millis() as u64;
        let Ok(epoch) = u32::try_from(epoch) else { continue };
        if epoch == 0 || !due || lease.is_fenced(epoch) {
            continue;
        }
        match store.heartbeat(epoch).await {
            Ok(true) => {
                lease.renewed();
                if let Some(since) = unreachable_since.take() {
                    tracing::info!(
                        center = %name,
                        "sequencer: lease renewed again after {:.1} s",
                        since.elapsed().as_secs_f64()
                    );
                }
            }
            Ok(false) => {
                lease.fenced.store(u64::from(epoch), Ordering::Release);
            }
            Err(e) => {
                if unreachable_since.is_none() {
                    tracing::warn!(center = %name, "sequencer: cannot renew the lease: {e}; again");
                    unreachable_since = Some(Instant::now());
                }
            }
        }
    }
}

/// The sequencer task: its inputs, its producer, its inbound consumer (assigned while leading).
struct Instance {
    i: SequencerInputs,
    producer: FutureProducer,
    consumer: StreamConsumer,
    lease: Arc<Lease>,
    /// The push path is on: the batches it announces go to the broker paced (`publish_paced`).
    paced: bool,
}

pub async fn run(mut i: SequencerInputs) -> Result<(), EngineError> {
    let producer = i.broker.producer(&format!("{}-sequencer", i.name))?;
    // Never subscribed: the partition is assigned when this instance leads. The group id only
    // names the client; progress is PostgreSQL's `inbound_offset`.
    // With the push path the topic is the backstop and the path of large messages: it waits as
    // long as the centers' stream readers do (each fetch costs the broker CPU, answered or not).
    let fetch_wait = if i.pushed.is_some() { PUSHED_STREAM_FETCH_WAIT } else { STREAM_FETCH_WAIT };
    let consumer: StreamConsumer = rtgs_kafka::clients::consumer_waiting(
        &i.broker.bootstrap,
        &i.broker.group("sequencer"),
        &format!("{}-sequencer", i.name),
        DefaultConsumerContext,
        fetch_wait.as_millis() as u64,
    )
    .map_err(|e| EngineError::kafka("the sequencer's consumer", e))?;
    let lease = Arc::new(Lease {
        base: Instant::now(),
        epoch: AtomicU64::new(0),
        renewed_ms: AtomicU64::new(0),
        fenced: AtomicU64::new(0),
    });
    let keeper = tokio::spawn(keep_lease(i.name.clone(), i.lease_store.clone(), lease.clone()));
    let _stop_keeper = AbortOnDrop(keeper);
    let mut pushed = i.pushed.take().map(|rx| PushedInbound { rx, early: Vec::new() });
    let paced = pushed.is_some();
    let s = Instance { i, producer, consumer, lease, paced };
    let mut leader: Option<Leader> = None;
    // The first claim may take back this center's own lease: this process is its next life.
    let mut restarting = true;
    loop {
        let Some(l) = leader.as_mut() else {
            leader = s.claim(restarting).await?;
            restarting = false;
            // What was pushed while following is not this instance's to sequence.
            if let Some(p) = pushed.as_mut() {
                p.take();
                p.early.clear();
            }
            if leader.is_none() {
                tokio::time::sleep(LEASE_CHECK_INTERVAL).await;
            }
            continue;
        };
        if s.lease.is_fenced(l.epoch) {
            tracing::warn!(center = %s.i.name, "sequencer: fenced by a newer leader (lease); stepping down");
            leader = s.step_down();
            continue;
        }
        let who = format!("{}: sequencer: inbound", s.i.name);
        // The topic, or the push path if it brings a message sooner.
        let batch = tokio::select! {
            batch = recv_batch(&s.consumer, INBOUND_WAIT_LEADING, INBOUND_RECV_BYTES_MAX, &who) => batch,
            () = PushedInbound::arrived(&mut pushed) => Vec::new(),
        };
        let early = match pushed.as_mut() {
            Some(p) => {
                p.take();
                std::mem::take(&mut p.early)
            }
            None => Vec::new(),
        };
        match s.lead(l, &batch, &early).await {
            Ok(()) => {}
            Err(LeadError::Fenced { epoch, seq_first }) => {
                tracing::warn!(
                    center = %s.i.name,
                    epoch,
                    seq = seq_first,
                    "sequencer: fenced by a newer leader (epoch {epoch} at seq {seq_first}); stepping down");
                leader = s.step_down();
            }
            Err(LeadError::Stop(e)) => return Err(e),
        }
    }
}

/// Aborts a task when dropped (the lease task ends with the sequencer task).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Instance {
    fn step_down(&self) -> Option<Leader> {
        self.lease.epoch.store(0, Ordering::Release);
        if let Err(e) = self.consumer.unassign() {
            tracing::warn!(center = %self.i.name, "sequencer: cannot unassign the inbound topic: {e}");
        }
        self.i.stats.leader.store(false, Ordering::Relaxed);
        None
    }

    /// Takes the lease if it is free: nobody ever led, the leader has been silent for this
    /// center's threshold ([`LEADER_SILENCE_MAX`] plus [`LEADER_SILENCE_STAGGER`] per center
    /// number, so the survivors do not all claim at once), or — at start — the lease is this
    /// center's own from before a restart.
    async fn claim(&self, restarting: bool) -> Result<Option<Leader>, EngineError> {
        let (i, store) = (&self.i, &self.i.store);
        let stagger = LEADER_SILENCE_STAGGER.as_secs_f64() * f64::from(i.center.0.saturating_sub(1));
        let threshold = LEADER_SILENCE_MAX.as_secs_f64() + stagger;
        let claimed = i
            .retry
            .get("sequencer lease claim", || store.take_over_if_free(&i.name, threshold, restarting))
            .await?;
        match claimed {
            None => Ok(None),
            Some(t) => Ok(Some(self.take_over(t).await?)),
        }
    }

    /// Leads from a claimed lease (the epoch is bumped already): rebuild the sequencer from the
    /// outbox, republish what was recorded but not published, read the inbound topic on from
    /// the recorded offset.
    async fn take_over(&self, t: rtgs_pg::sequencer_store::Takeover) -> Result<Leader, EngineError> {
        let (i, started) = (&self.i, Instant::now());
        let store = &i.store;
        // The lease task renews from now on: republishing may wait for the broker.
        self.lease.lead(t.epoch);
        let mut sequencer = Sequencer::new(i.center, 0);
        if t.last_seq > 0 {
            // Only the last batch: where seqs and time resume. Dedupe needs no replay: the
            // `sequenced_bmi` table holds every bmi.
            let batches = i.retry.get("outbox read", || store.batches(t.last_seq, t.last_seq)).await?;
            resume(&mut sequencer, &batches, t.last_seq)?;
        }
        if t.bmi_through < t.last_seq {
            let (epoch, from, to) = (t.epoch, t.bmi_through, t.last_seq);
            let added = i.retry.get("bmi backfill", || store.backfill_bmis(epoch, from, to)).await?;
            tracing::info!(
                center = %i.name,
                "sequencer: indexed {added} bmis of seqs {}..={to} recorded before sequenced_bmi existed",
                from + 1
            );
        }
        sequencer.begin_epoch(t.epoch);
        for b in &t.unpublished {
            let frames = Arc::new(b.frames.clone());
            self.publish_confirmed(b.seq_first, &frames).await;
        }
        if let Some(last) = t.unpublished.last() {
            i.retry.get("mark republished", || store.mark_published(last.seq_first)).await?;
        }
        i.stats.epoch.store(u64::from(t.epoch), Ordering::Relaxed);
        self.assign(t.inbound_offset + 1)?;
        i.stats.seq_sequenced.store(t.last_seq, Ordering::Relaxed);
        i.stats.takeovers.fetch_add(1, Ordering::Relaxed);
        let rebuild_ms = started.elapsed().as_millis() as u64;
        *crate::status::lock(&i.stats.last_takeover) = Some(crate::status::TakeoverRecord {
            epoch: u64::from(t.epoch),
            at_unix_ms: crate::status::unix_ms(),
            previous_leader: t.previous_leader.clone(),
            leader_silent_ms: t.previous_renewal_age_ms,
            rebuild_ms,
        });
        i.stats.leader.store(true, Ordering::Relaxed);
        tracing::info!(
            center = %i.name,
            epoch = t.epoch,
            seq = t.last_seq + 1,
            "sequencer: LEADER at epoch {} from seq {} (inbound offset {}, {} batches republished, {:.0} ms)",
            t.epoch,
            t.last_seq + 1,
            t.inbound_offset,
            t.unpublished.len(),
            started.elapsed().as_secs_f64() * 1e3
        );
        Ok(Leader {
            sequencer,
            hash_key: random_key(),
            epoch: t.epoch,
            inbound_offset: t.inbound_offset,
            in_flight: VecDeque::new(),
            held: Vec::new(),
            held_since: None,
            delivered_seq_first: None,
            last_mark: Instant::now(),
            early: EarlyCopies::default(),
        })
    }

    fn send(&self, seq_first: Seq, frames: &Arc<Vec<u8>>) -> DeliveryFuture {
        let key = seq_first.to_be_bytes();
        loop {
            let record =
                FutureRecord::to(&self.i.broker.topics.journal).payload(frames.as_slice()).key(&key[..]);
            match self.producer.send_result(record) {
                Ok(delivery) => return delivery,
                // Queue full: the bound on the client queue is our back-pressure.
                Err((_, _)) => std::thread::sleep(PRODUCER_FULL_PAUSE),
            }
        }
    }

    /// Publishes and waits for the broker's confirmation, retrying until it comes.
    async fn publish_confirmed(&self, seq_first: Seq, frames: &Arc<Vec<u8>>) {
        loop {
            match self.send(seq_first, frames).await {
                Ok(Ok(_)) => return,
                Ok(Err((e, _))) => {
                    tracing::warn!(center = %self.i.name, "sequencer: publish of seq {seq_first}: {e}; again")
                }
                Err(_) => {
                    tracing::warn!(center = %self.i.name, "sequencer: publish of seq {seq_first} cancelled; again")
                }
            }
            tokio::time::sleep(PUBLISH_RETRY_PAUSE).await;
        }
    }

    /// One round as leader: sequence what the push path brought (`early`) and `batch` (and a
    /// Tick when one is due), record, publish.
    async fn lead(
        &self,
        l: &mut Leader,
        batch: &[(i64, Vec<u8>)],
        early: &[Vec<u8>],
    ) -> Result<(), LeadError> {
        let now = wall_us();
        let mut commands: Vec<Command> = Vec::new();
        // First what was pushed before the broker stored it (noted: the topic's copies of
        // those commands are dropped, in this round or a later one; if this round fails, this
        // instance steps down and forgets them).
        for body in early {
            let from = commands.len();
            if self.decode(body, &mut commands, "a pushed inbound message") {
                commands[from..].iter().for_each(|c| l.early.insert(c));
            }
        }
        let mut last_offset = l.inbound_offset;
        let mut seek_to = None;
        for (offset, payload) in batch {
            if *offset <= last_offset {
                continue; // sequenced by this or an earlier leader
            }
            if *offset > last_offset + 1 {
                // Inbound offsets are contiguous (no transactions, no compaction): a message was
                // not seen here (read before this instance led). Go back for it; never skip one.
                seek_to = Some(last_offset + 1);
                break;
            }
            last_offset = *offset;
            let from = commands.len();
            if self.decode(payload, &mut commands, &format!("inbound offset {offset}")) && !l.early.is_empty()
            {
                // Copies of commands taken from the push path: admitted already (their offset is
                // recorded with this round's last group, after the early commands).
                let mut kept = from;
                for k in from..commands.len() {
                    if l.early.remove(&commands[k]) {
                        self.i.stats.inbound_copies_skipped.fetch_add(1, Ordering::Relaxed);
                    } else {
                        commands.swap(kept, k);
                        kept += 1;
                    }
                }
                commands.truncate(kept);
            }
        }
        // One group of commands per outbox row; only the last group records the offset of the
        // messages read, so a crash between groups makes the next leader read those messages
        // again (what was recorded is then answered as a retry, never sequenced twice).
        let groups: Vec<&[Command]> = commands.chunks(SEQUENCER_BATCH_ENTRIES_MAX).collect();
        let mut recorded = false;
        for (k, group) in groups.iter().enumerate() {
            let offset = if k + 1 == groups.len() { last_offset } else { l.inbound_offset };
            recorded |= self.sequence_and_record(l, now, group, offset).await?;
        }
        // Time never stops: a Tick whenever one is due, with batches as when idle (mission.md
        // §3.4). Without idle ticks (drills) only rounds that recorded something carry one.
        if recorded || self.i.idle_tick {
            if let Some(tick) = l.sequencer.poll_tick(now) {
                let offset = l.inbound_offset.max(if recorded { last_offset } else { l.inbound_offset });
                self.record_and_publish(l, &[tick], offset).await?;
                recorded = true;
            }
        }
        if !recorded && last_offset > l.inbound_offset {
            // Only retries: nothing to record; re-reading them after a failover is harmless.
            l.inbound_offset = last_offset;
        }
        self.i.stats.inbound_pushed.fetch_add(early.len() as u64, Ordering::Relaxed);
        if let Some(offset) = seek_to {
            self.seek(offset);
        }
        self.settle_deliveries(l, false).await
    }

    /// Decodes one inbound message's commands onto `commands`; a message that does not decode is
    /// an input error: dropped whole, counted and reported (false).
    fn decode(&self, body: &[u8], commands: &mut Vec<Command>, what: &str) -> bool {
        if codec::decode_commands_frames(body, commands).is_ok() {
            return true;
        }
        self.i.stats.malformed_inbound.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(center = %self.i.name, "sequencer: {what} is not a commands frame; dropped");
        false
    }

    /// Sequences one group of commands and records it (cut into journal messages); whether
    /// anything was recorded.
    ///
    /// Optimistic: the group is sequenced as if every `bmi` were new — nearly all are — and the
    /// record's transaction inserts them into `sequenced_bmi` (one pass over the unique index).
    /// If one was sequenced before, nothing of the transaction stays: the group is sequenced
    /// again from the same seq with PostgreSQL's answers (the original seq, or a conflict). A
    /// group holding a retry therefore costs a second round; a look-up before every group would
    /// cost a second pass over the index for every `bmi` (it cut the throughput to a third).
    async fn sequence_and_record(
        &self,
        l: &mut Leader,
        now: u64,
        group: &[Command],
        inbound_offset: i64,
    ) -> Result<bool, LeadError> {
        let bmis: Vec<Bmi> = group.iter().map(|c| c.bmi).collect();
        let mut lookups: Vec<Lookup> =
            bmis.iter().map(|b| Lookup { key: siphash24(l.hash_key, b.as_bytes()), known: None }).collect();
        let seq_first = l.sequencer.seq_next();
        let (mut entries, mut admissions) =
            (Vec::with_capacity(group.len()), Vec::with_capacity(group.len()));
        for attempt in 0..2 {
            entries.clear();
            admissions.clear();
            l.sequencer.handle_commands(now, group.iter().cloned(), &lookups, &mut entries, &mut admissions);
            if entries.is_empty() || self.record_frames(l, &entries, inbound_offset).await? {
                break;
            }
            if attempt == 1 {
                return Err(EngineError::Invariant(Invariant(format!(
                    "seq {seq_first}: a bmi PostgreSQL did not know was sequenced already"
                )))
                .into());
            }
            // Nothing of it is durable or published: those seqs are stamped again.
            l.sequencer.rewind(seq_first);
            lookups = self.look_up(l.hash_key, &bmis).await?;
            self.i.stats.bmi_rounds.fetch_add(1, Ordering::Relaxed);
        }
        self.refuse(&admissions, &bmis);
        Ok(!entries.is_empty())
    }

    /// Records a group's entries cut into journal messages (the inbound offset with the last
    /// only); false if the first was refused because a `bmi` of it was sequenced before.
    async fn record_frames(
        &self,
        l: &mut Leader,
        entries: &[Entry],
        inbound_offset: i64,
    ) -> Result<bool, LeadError> {
        let ranges = frames::cut(entries, JOURNAL_MESSAGE_ENTRIES_MAX, frames::entry_bytes);
        let (count, recorded) = (ranges.len(), l.inbound_offset);
        for (k, range) in ranges.into_iter().enumerate() {
            // A leader that dies after recording the first messages of a group lets its
            // successor read those commands again (they then meet the index), never skip one.
            let offset = if k + 1 == count { inbound_offset } else { recorded };
            if !self.record_and_publish(l, &entries[range], offset).await? {
                if k > 0 {
                    return Err(EngineError::Invariant(Invariant(
                        "a bmi of a group's later message was sequenced before its first was recorded".into(),
                    ))
                    .into());
                }
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// What PostgreSQL knows of each of a group's `bmi`s (one query).
    async fn look_up(&self, hash_key: [u64; 2], bmis: &[Bmi]) -> Result<Vec<Lookup>, EngineError> {
        let mut distinct = bmis.to_vec();
        distinct.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
        distinct.dedup();
        let store = &self.i.store;
        let known = self.i.retry.get("bmi look-up", || store.known_bmis(&distinct)).await?;
        Ok(bmis
            .iter()
            .map(|b| Lookup { key: siphash24(hash_key, b.as_bytes()), known: known.get(b).copied() })
            .collect())
    }

    /// Commands not journaled are answered on the notify topic with the original's seq:
    /// conflicting `bmi`s refused (DUPL), retries (a `bmi` sequenced before with the same content,
    /// of any age) as duplicates — so the API that sent a retry answers it with its seq at once,
    /// and its outcome from the stored entry, instead of waiting for a final notice that went
    /// out long ago. Best effort: a lost answer is given again on the participant's next retry.
    fn refuse(&self, admissions: &[Admission], bmis: &[rtgs_core::entry::Bmi]) {
        let refusals: Vec<Notice> = admissions
            .iter()
            .zip(bmis)
            .filter_map(|(a, bmi)| match a {
                Admission::Conflict(seq) => {
                    Some(Notice { seq: *seq, status: NoticeStatus::Refused, bmi: *bmi })
                }
                Admission::Duplicate(seq) => {
                    Some(Notice { seq: *seq, status: NoticeStatus::Duplicate, bmi: *bmi })
                }
                Admission::Sequenced(_) => None,
            })
            .collect();
        if !refusals.is_empty() {
            self.i.stats.refusals.fetch_add(refusals.len() as u64, Ordering::Relaxed);
            let body = wire::encode_notices(&refusals);
            let _ = self
                .producer
                .send_result(FutureRecord::<(), _>::to(&self.i.broker.topics.notify).payload(&body));
        }
    }

    /// Reads the inbound partition from `offset` (the next message to sequence).
    fn assign(&self, offset: i64) -> Result<(), EngineError> {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&self.i.broker.topics.inbound, 0, Offset::Offset(offset))
            .and_then(|()| self.consumer.assign(&tpl))
            .map_err(|e| EngineError::kafka("assigning the inbound topic", e))?;
        tracing::info!(center = %self.i.name, "sequencer: inbound resumes at offset {offset}");
        Ok(())
    }

    /// Moves the inbound consumer to `offset` (the next message to sequence).
    fn seek(&self, offset: i64) {
        let topic = &self.i.broker.topics.inbound;
        let result = tokio::task::block_in_place(|| {
            self.consumer.seek(topic, 0, Offset::Offset(offset), Duration::from_secs(5))
        });
        match result {
            Ok(()) => tracing::info!(center = %self.i.name, "sequencer: inbound resumes at offset {offset}"),
            Err(e) => {
                tracing::warn!(center = %self.i.name, "sequencer: cannot seek the inbound topic to {offset}: {e}")
            }
        }
    }

    /// Records one journal message's entries (fenced) and publishes them; false, with nothing
    /// recorded, if a `bmi` of them was sequenced before.
    async fn record_and_publish(
        &self,
        l: &mut Leader,
        entries: &[Entry],
        inbound_offset: i64,
    ) -> Result<bool, LeadError> {
        let (Some(first), Some(last)) = (entries.first(), entries.last()) else { return Ok(true) };
        let mut frames = Vec::with_capacity(entries.len() * 72);
        codec::encode_frame(entries, &mut frames);
        let batch = OutboxBatch { seq_first: first.seq, seq_last: last.seq, epoch: l.epoch, frames };
        // Durable before publish. A lost connection leaves the commit's outcome unknown: look
        // before recording again (a second attempt after a commit would be fenced by itself).
        let store = &self.i.store;
        let started = Instant::now();
        let recorded = self
            .i
            .retry
            .write(
                "sequencer: recording a batch",
                || store.record_batch(&batch, inbound_offset),
                || store.is_recorded(batch.seq_first, batch.epoch),
            )
            .await;
        // Whether the push path announced it (unknown if settled by reading back: not paced).
        let announced = match recorded {
            Ok(announced) => announced.unwrap_or(false),
            Err(StoreError::Fenced { epoch, seq_first }) => {
                return Err(LeadError::Fenced { epoch, seq_first })
            }
            Err(StoreError::BmiSequenced { .. }) => return Ok(false),
            Err(e) => return Err(EngineError::store(format!("recording seq {}", batch.seq_first), e).into()),
        };
        self.lease.renewed();
        l.inbound_offset = l.inbound_offset.max(inbound_offset);
        self.i.stats.seq_sequenced.store(batch.seq_last, Ordering::Relaxed);
        self.i.metrics.sequenced(entries.len(), started.elapsed());
        self.publish_paced(l, batch.seq_first, Arc::new(batch.frames), announced);
        Ok(true)
    }

    /// Hands a recorded batch to the producer — or, if the push path announced it, holds it for
    /// up to [`BACKSTOP_PACE`] with the others so announced: the broker's copy is then the
    /// record and the backstop, and one produce request a pace costs the broker less CPU than
    /// one a round (bench/README.md "Fewer produce requests"). A batch that was not announced
    /// (too large to push) goes at once, after the held ones: the topic keeps seq order, and
    /// what reaches the centers by the broker alone never waits for the pace.
    fn publish_paced(&self, l: &mut Leader, seq_first: Seq, frames: Arc<Vec<u8>>, announced: bool) {
        if self.paced && announced && l.held.len() < IN_FLIGHT_MAX {
            l.held_since.get_or_insert_with(Instant::now);
            l.held.push((seq_first, frames));
            return;
        }
        self.release_held(l);
        let delivery = self.send(seq_first, &frames);
        l.in_flight.push_back(InFlight { seq_first, frames, delivery });
    }

    /// Hands every held batch to the producer, in order.
    fn release_held(&self, l: &mut Leader) {
        l.held_since = None;
        for (seq_first, frames) in std::mem::take(&mut l.held) {
            let delivery = self.send(seq_first, &frames);
            l.in_flight.push_back(InFlight { seq_first, frames, delivery });
        }
    }

    /// Collects the broker's confirmations in order (republishing a failed one), and every
    /// [`MARK_INTERVAL`] marks the confirmed batches published.
    async fn settle_deliveries(&self, l: &mut Leader, all: bool) -> Result<(), LeadError> {
        if all || l.held_since.is_some_and(|t| t.elapsed() >= BACKSTOP_PACE) {
            self.release_held(l);
        }
        loop {
            let must_wait = all || l.in_flight.len() > IN_FLIGHT_MAX;
            let Some(front) = l.in_flight.front_mut() else { break };
            let result = if must_wait {
                Some((&mut front.delivery).await)
            } else {
                (&mut front.delivery).now_or_never()
            };
            let Some(result) = result else { break };
            let Some(front) = l.in_flight.pop_front() else { break };
            if !matches!(result, Ok(Ok(_))) {
                // Not confirmed: publish again (centers reorder by seq and drop repeats).
                tracing::warn!(
                    center = %self.i.name,
                    "sequencer: journal publish of seq {} failed; again", front.seq_first
                );
                self.publish_confirmed(front.seq_first, &front.frames).await;
            }
            l.delivered_seq_first = Some(front.seq_first);
        }
        if l.last_mark.elapsed() >= MARK_INTERVAL {
            l.last_mark = Instant::now();
            if let Some(seq_first) = l.delivered_seq_first.take() {
                let store = &self.i.store;
                self.i.retry.get("mark published", || store.mark_published(seq_first)).await?;
            }
        }
        Ok(())
    }
}

/// Resumes the sequencer after the last recorded batch (read back from the outbox): seqs and
/// time go on from its last entry, which must be the sequencer row's `last_seq`.
fn resume(sequencer: &mut Sequencer, batches: &[OutboxBatch], last_seq: Seq) -> Result<(), Invariant> {
    let mut entries = Vec::new();
    for b in batches {
        codec::decode_frames(&b.frames, &mut entries)
            .map_err(|e| Invariant(format!("recorded batch {} does not decode: {e}", b.seq_first)))?;
    }
    let Some(last) = entries.last().filter(|e| e.seq == last_seq) else {
        return Err(Invariant(format!("the outbox holds no entry at recorded seq {last_seq}")));
    };
    sequencer.resume_at(last_seq + 1, 0, last.timestamp_us);
    Ok(())
}

/// A fresh random SipHash key, from the standard library's per-process random state.
fn random_key() -> [u64; 2] {
    use std::hash::{BuildHasher, Hasher};
    let state = std::collections::hash_map::RandomState::new();
    let half = |salt: u64| {
        let mut h = state.build_hasher();
        h.write_u64(salt);
        h.finish()
    };
    [half(1), half(2)]
}

#[cfg(test)]
mod pushed_tests {
    use super::*;
    use rtgs_core::entry::{AccountId, Currency, Payload, Transfer};

    fn command(bmi: &str, amount: u64) -> Command {
        Command {
            origin: CenterId(1),
            bmi: Bmi::new(bmi.as_bytes()).unwrap(),
            payload: Payload::Transfer(Transfer {
                debtor: AccountId(1),
                creditor: AccountId(2),
                amount_minor: amount,
                currency: Currency::new(b"KRW").unwrap(),
            }),
        }
    }

    #[test]
    fn topic_copies_of_pushed_commands_are_recognised_whole_and_with_multiplicity() {
        let mut early = EarlyCopies::default();
        let (a, b) = (command("a", 10), command("b", 10));
        early.insert(&a);
        early.insert(&a); // pushed twice (a participant's retry): two copies to drop
        early.insert(&b);
        early.insert(&command("b", 99)); // other content under b: not awaited
        assert!(!early.remove(&command("b", 99)), "a conflict's copy is admitted (answered) again");
        assert!(early.remove(&a) && early.remove(&b));
        assert!(!early.remove(&b), "one copy of b was awaited");
        assert!(early.remove(&a), "the second copy of a");
        assert!(!early.remove(&a) && early.is_empty());
        assert!(!early.remove(&command("never-pushed", 1)));
        let mut tick = command("x", 1);
        tick.bmi = Bmi::NONE;
        early.insert(&tick);
        assert!(early.is_empty(), "commands without a bmi are never matched");
    }

    #[test]
    fn awaited_copies_are_bounded_and_the_oldest_forgotten_first() {
        let mut early = EarlyCopies::default();
        for k in 0..EARLY_COPIES_MAX + 10 {
            early.insert(&command(&k.to_string(), 1));
        }
        assert_eq!(early.awaited.len(), EARLY_COPIES_MAX);
        assert!(!early.remove(&command("9", 1)), "forgotten: its copy is admitted as a retry");
        assert!(early.remove(&command("10", 1)));
        assert!(early.remove(&command(&(EARLY_COPIES_MAX + 9).to_string(), 1)));
    }

    #[test]
    fn pushed_messages_wait_for_the_next_round_within_their_bound() {
        let (tx, rx) = mpsc::channel(PUSH_INBOUND_HELD_MAX + 10);
        let mut p = PushedInbound { rx, early: Vec::new() };
        for k in 0..PUSH_INBOUND_HELD_MAX + 10 {
            tx.try_send(vec![k as u8]).unwrap();
        }
        p.take();
        assert_eq!(p.early.len(), PUSH_INBOUND_HELD_MAX, "beyond the bound the topic brings them");
        assert_eq!(p.early[0], vec![0u8]);
    }

    #[test]
    fn what_an_api_pushes_is_its_whole_round_in_notices_or_nothing() {
        use base64::Engine;
        let small: Vec<Command> = (0..20).map(|k| command(&format!("s{k}"), 5)).collect();
        let bodies = crate::broker::pushable_messages(&small).expect("small enough");
        assert_eq!(bodies.len(), 1, "a small round is one notice");
        let notice = crate::push::inbound_notice(&bodies[0]).expect("small enough");
        assert!(notice.len() < 8_000, "PostgreSQL refuses payloads of 8,000 bytes or more");
        let mut back = Vec::new();
        codec::decode_commands_frames(
            &base64::engine::general_purpose::STANDARD.decode(&notice).unwrap(),
            &mut back,
        )
        .unwrap();
        assert_eq!(back, small);
        let large: Vec<Command> = (0..2_000).map(|k| command(&format!("large-{k}"), 5)).collect();
        assert_eq!(
            crate::broker::pushable_messages(&large),
            None,
            "a full-load round goes by the broker alone"
        );
        let big = vec![0u8; crate::limits::PUSH_INBOUND_BYTES_MAX];
        assert!(crate::push::inbound_notice(&big).unwrap().len() < 8_000, "the largest pushed fits");
        assert_eq!(crate::push::inbound_notice(&vec![0u8; crate::limits::PUSH_INBOUND_BYTES_MAX + 1]), None);
    }
}
