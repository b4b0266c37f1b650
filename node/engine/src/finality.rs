//! The quorum finalizer of one center over the applied-acks topic, and the origin's notices.
//!
//! Every center counts every center's acks (its own included, read back from the topic like the
//! others). Finality is monotone in seq (each center acks in seq order, so the second ack of a
//! seq never comes before the second ack of an earlier one); a seq is final once it is below the
//! finalizer's `seq_unfinal_first`.
//!
//! Restart without losing an ack: no tallies are written; instead the committer persists, with
//! the finality ranges, the ack offset to resume from — the first ack message that still holds an
//! ack of a seq that is not final. Replaying from there rebuilds every pending tally exactly
//! (mission.md §2.5: "resume from a point no later than the first ack of the oldest unfinalized
//! seq"); a finalized seq is never declared again because the finalizer starts at the persisted
//! `seq_unfinal_first`.
//!
//! Notices: the origin center tells the participant once its own entry is final and committed
//! here. The committer persists `seq_notice_from` — the first own entry whose notice the broker
//! has not confirmed — so a restart re-sends (at-least-once), never loses, a notice, even for a
//! seq the other two centers finalized before this one applied it.

use super::center::NoticeItem;
use super::Node;
use anyhow::Context;
use rdkafka::producer::FutureRecord;
use rtgs_core::entry::{CenterId, Outcome, Seq};
use rtgs_core::finalizer::{AckResult, Finality, Finalizer};
use rtgs_core::ledger::Applied;
use rtgs_core::limits::FINALIZER_WINDOW_SEQS;
use rtgs_kafka::wire::{self, Notice, NoticeStatus};
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Notices per message: at most ~48 bytes each, so a message stays far below the 1 MB limit
/// even when a long halted range becomes final at once.
const NOTICES_PER_MESSAGE: usize = 8_192;

/// Where the finalizer resumes.
#[derive(Copy, Clone, Debug)]
pub struct Start {
    pub seq_unfinal_first: Seq,
    pub ack_offset: i64,
    /// The center's committed watermark at start.
    pub committed_through: Seq,
}

/// From the committer: every entry up to `committed_through` is committed; `owed` are this
/// center's own entries among them (in seq order) whose participants await a notice.
pub struct Handover {
    pub committed_through: Seq,
    pub owed: Vec<NoticeItem>,
}

/// Finality progress not yet committed.
#[derive(Clone, Debug, Default)]
pub struct Progress {
    pub ranges: Vec<(Seq, Seq)>,
    pub seq_unfinal_first: Seq,
    pub ack_offset: i64,
    /// Notices of own entries below this seq are confirmed by the broker.
    pub seq_notice_from: Seq,
}

/// Hand-over from the finality task to the committer.
#[derive(Default)]
pub struct Shared {
    inner: Mutex<(Progress, bool)>,
    /// Asked by the finality task when finality stalls: the committer publishes this center's
    /// acks from this seq again (0: nothing asked).
    reack_from: std::sync::atomic::AtomicU64,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, (Progress, bool)> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
    pub fn resume(&self, seq_unfinal_first: Seq, ack_offset: i64, seq_notice_from: Seq) {
        *self.lock() =
            (Progress { ranges: Vec::new(), seq_unfinal_first, ack_offset, seq_notice_from }, false);
    }
    /// The progress since the last take, if any.
    pub fn take(&self) -> Option<Progress> {
        let mut g = self.lock();
        if !g.1 {
            return None;
        }
        g.1 = false;
        let ranges = std::mem::take(&mut g.0.ranges);
        Some(Progress { ranges, ..g.0.clone() })
    }
    /// The seq to publish this center's acks again from, if the finality task asked.
    pub fn take_reack(&self) -> Option<Seq> {
        let from = self.reack_from.swap(0, Ordering::AcqRel);
        (from > 0).then_some(from)
    }

    /// The position without new ranges (for a commit of entries only).
    pub fn current(&self) -> Progress {
        let g = self.lock();
        Progress { ranges: Vec::new(), ..g.0.clone() }
    }
    fn publish(
        &self,
        ranges: &mut Vec<(Seq, Seq)>,
        seq_unfinal_first: Seq,
        ack_offset: i64,
        seq_notice_from: Seq,
    ) {
        let mut g = self.lock();
        let p = &mut g.0;
        for (lo, hi) in ranges.drain(..) {
            push_range(&mut p.ranges, lo, hi);
        }
        let position = (seq_unfinal_first, ack_offset, seq_notice_from);
        if (p.seq_unfinal_first, p.ack_offset, p.seq_notice_from) != position || !p.ranges.is_empty() {
            (p.seq_unfinal_first, p.ack_offset, p.seq_notice_from) = position;
            g.1 = true;
        }
    }
}

/// Appends `lo..=hi`, extending the last range when it continues it (finality rows are ranges).
fn push_range(ranges: &mut Vec<(Seq, Seq)>, lo: Seq, hi: Seq) {
    match ranges.last_mut() {
        Some(last) if last.1 + 1 == lo => last.1 = hi,
        _ => ranges.push((lo, hi)),
    }
}

struct State {
    finalizer: Finalizer,
    /// (offset, highest seq) of consumed ack messages that may still hold a pending seq's ack.
    offsets: VecDeque<(i64, Seq)>,
    last_offset: i64,
    /// Acks were refused as too far ahead (beyond the finalizer's window): the offset of the
    /// first message that held one, and the lowest such seq. They are dropped, not held, and
    /// the topic is read again from that offset once finality has come within half a window
    /// of them ([`State::rewind_due`]). Holding them instead stopped the reading, and with one
    /// center down and another more than a window behind the third, the acks finality waited
    /// for sat behind the held one: finality stood for good (seen in `bench/cluster.sh`).
    dropped: Option<(i64, Seq)>,
    events: Vec<Finality>,
    ranges: Vec<(Seq, Seq)>,
    pending: VecDeque<NoticeItem>,
    /// Every entry up to here is committed and its owed notice (if any) handed over.
    committed_through: Seq,
}

impl State {
    /// Counts the acks of one message (at `offset`, from `center`). A center acks in seq order,
    /// so after its first ack that is too far ahead the rest of the message is too.
    fn feed(&mut self, node: &Node, offset: i64, center: CenterId, acks: impl Iterator<Item = Applied>) {
        for ack in acks {
            if self.finalizer.handle_ack(center, ack, &mut self.events) == AckResult::Deferred {
                let (first_offset, first_seq) = self.dropped.unwrap_or((offset, ack.seq));
                self.dropped = Some((first_offset.min(offset), first_seq.min(ack.seq)));
                break;
            }
        }
        self.settle(node);
    }

    /// Whether to read the topic again from the first message with dropped acks: once finality
    /// is within half a window of the lowest of them, so that every rewind admits at least half
    /// a window of seqs. Finality never waits on a dropped ack before that: those are all at
    /// least a window beyond where finality stood when they were dropped.
    fn rewind_due(&self) -> Option<i64> {
        let (offset, seq) = self.dropped?;
        let half = (FINALIZER_WINDOW_SEQS / 2) as u64;
        (self.finalizer.seq_unfinal_first() + half > seq).then_some(offset)
    }

    /// Forgets what was read from `offset` on, before the topic is read again from there (acks
    /// read twice count once: the finalizer answers `Duplicate`).
    fn rewind(&mut self, offset: i64) {
        while self.offsets.back().is_some_and(|&(o, _)| o >= offset) {
            self.offsets.pop_back();
        }
        self.last_offset = self.last_offset.min(offset - 1);
        self.dropped = None;
    }

    fn settle(&mut self, node: &Node) {
        let (mut settled, mut rejected) = (0, 0);
        for event in self.events.drain(..) {
            match event {
                Finality::Final { seq, outcome, .. } => {
                    push_range(&mut self.ranges, seq, seq);
                    match outcome {
                        Outcome::Accepted => settled += 1,
                        Outcome::Rejected(_) => rejected += 1,
                    }
                }
                Finality::Divergence { seq, center, first, reported } => {
                    node.stats.divergences.fetch_add(1, Ordering::Relaxed);
                    node.stats.halted.store(true, Ordering::Relaxed);
                    eprintln!(
                        "{}: ALARM: DIVERGENCE at seq {seq}: DC{} reported {reported:?}, first report was \
                         {first:?}. Finality is halted; nothing more is finalized until an operator \
                         intervenes.",
                        node.name, center.0
                    );
                }
            }
        }
        let unfinal = self.finalizer.seq_unfinal_first();
        while self.offsets.front().is_some_and(|&(_, max)| max < unfinal) {
            self.offsets.pop_front();
        }
        node.stats.seq_unfinal_first.store(unfinal, Ordering::Relaxed);
        node.stats.finalized.store(self.finalizer.finalized_total(), Ordering::Relaxed);
        // Once per ack message (a batch), whatever it finalized.
        node.metrics.finalized(settled, rejected, unfinal, super::now_us());
    }

    /// The ack offset a restart resumes after.
    fn ack_offset(&self) -> i64 {
        self.offsets.front().map_or(self.last_offset, |&(offset, _)| offset - 1)
    }

    /// Own entries below this seq have their notices confirmed.
    fn seq_notice_from(&self) -> Seq {
        self.pending.front().map_or(self.committed_through + 1, |(a, _)| a.seq)
    }

    /// Notices owed for seqs that are final now (none while finality is halted).
    fn due_notices(&mut self) -> Vec<Notice> {
        let mut out = Vec::new();
        if self.finalizer.is_halted() {
            return out;
        }
        let unfinal = self.finalizer.seq_unfinal_first();
        while self.pending.front().is_some_and(|(a, _)| a.seq < unfinal) {
            let Some((a, bmi)) = self.pending.pop_front() else { break };
            let status = match a.outcome {
                Outcome::Accepted => NoticeStatus::Settled,
                o @ Outcome::Rejected(_) => NoticeStatus::Rejected(o),
            };
            out.push(Notice { seq: a.seq, status, bmi });
        }
        out
    }
}

pub async fn run(
    node: Arc<Node>,
    start: Start,
    shared: Arc<Shared>,
    mut notice_rx: mpsc::Receiver<Handover>,
) -> anyhow::Result<()> {
    let consumer = node.assigned_consumer("finalizer", &node.topics.applied, start.ack_offset + 1)?;
    let producer = rtgs_kafka::clients::producer(&node.bootstrap, &format!("{}-notify", node.name))?;
    let mut s = State {
        finalizer: Finalizer::with_window(node.center_count, FINALIZER_WINDOW_SEQS, start.seq_unfinal_first),
        offsets: VecDeque::new(),
        last_offset: start.ack_offset,
        dropped: None,
        events: Vec::new(),
        ranges: Vec::new(),
        pending: VecDeque::new(),
        committed_through: start.committed_through,
    };
    let mut acks = Vec::new();
    // (oldest unfinal seq, since when): finality that does not move while this center has
    // committed past it asks for this center's acks again (see [`REACK_AFTER`]).
    let mut stall = (s.finalizer.seq_unfinal_first(), Instant::now());
    loop {
        tokio::select! {
            biased;
            handover = notice_rx.recv() => match handover {
                Some(h) => {
                    s.pending.extend(h.owed);
                    s.committed_through = s.committed_through.max(h.committed_through);
                }
                None => anyhow::bail!("the committer stopped"),
            },
            messages = super::recv_batch(&node, "applied-acks", &consumer, Duration::from_millis(20), 1 << 20) => {
                for (offset, payload) in messages {
                    acks.clear();
                    s.last_offset = offset;
                    let Some(center) = wire::decode_acks(&payload, &mut acks) else {
                        // Acks are written only by centers: damage is an invariant violation.
                        anyhow::bail!("applied-acks message at offset {offset} does not decode");
                    };
                    let max = acks.last().map_or(0, |a| a.seq);
                    s.offsets.push_back((offset, max));
                    // Who still acks (the plugins' owner failure detector).
                    if let Some(acked) = node.stats.plugins.acked_seq_max.get(center.index()) {
                        acked.fetch_max(max, Ordering::Relaxed);
                    }
                    if center != node.center {
                        // How far the journal goes, as far as the others know (lost-tail check).
                        node.stats.seq_acked_elsewhere.fetch_max(max, Ordering::Relaxed);
                    }
                    s.feed(&node, offset, center, acks.drain(..));
                }
            },
        }
        let mut rewind_to = s.rewind_due();
        let notices = s.due_notices();
        for chunk in notices.chunks(NOTICES_PER_MESSAGE) {
            let body = wire::encode_notices(chunk);
            loop {
                let record = FutureRecord::<(), _>::to(&node.topics.notify).payload(&body);
                match producer.send(record, Duration::from_secs(5)).await {
                    Ok(_) => break,
                    Err((e, _)) => {
                        eprintln!("{}: publishing notices: {e}; again", node.name);
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
            node.stats.notices.fetch_add(chunk.len() as u64, Ordering::Relaxed);
        }
        let unfinal = s.finalizer.seq_unfinal_first();
        if unfinal != stall.0 {
            stall = (unfinal, Instant::now());
        } else if stall.1.elapsed() >= REACK_AFTER
            && !s.finalizer.is_halted()
            && node.stats.seq_committed.load(Ordering::Relaxed) >= unfinal
        {
            shared.reack_from.store(unfinal, Ordering::Release);
            node.stats.reacks.fetch_add(1, Ordering::Relaxed);
            eprintln!(
                "{}: finality has stood at seq {unfinal} for {} s with it committed here: publishing \
                 this center's acks from there again",
                node.name,
                REACK_AFTER.as_secs()
            );
            stall.1 = Instant::now();
            // And read the acks again from where a restart would (the first message that still
            // holds an ack of an unfinal seq): whatever this finalizer missed, it gets again. No
            // later than any dropped ack: a message holding one holds an unfinal seq's ack.
            rewind_to = Some(s.ack_offset() + 1);
        }
        if let Some(offset) = rewind_to {
            s.rewind(offset);
            // A seek discards what was fetched beyond it (librdkafka versions the fetch queue).
            let topic = node.topics.applied.clone();
            tokio::task::block_in_place(|| {
                rdkafka::consumer::Consumer::seek(
                    &consumer,
                    &topic,
                    0,
                    rdkafka::Offset::Offset(offset),
                    Duration::from_secs(10),
                )
            })
            .with_context(|| format!("read {topic} again from offset {offset}"))?;
            node.stats.ack_rewinds.fetch_add(1, Ordering::Relaxed);
        }
        let ack_offset = s.ack_offset();
        let notice_from = s.seq_notice_from();
        shared.publish(&mut s.ranges, unfinal, ack_offset, notice_from);
    }
}

/// Finality standing still this long while this center has committed the oldest unfinal seq
/// makes it publish its acks from there again. An ack message that never reached the other
/// centers (a broker or client that lost it) would otherwise stall finality for good whenever
/// that ack is needed for the quorum — with one center down, every ack of the two others is.
/// Acks are idempotent (a center's second ack of a seq is counted once), so the cost of a false
/// alarm — two centers down, say — is one read of the unfinal entries and their acks again. The
/// finality task also reads the acks topic again from its resume point then: an ack this center
/// dropped or missed (another center's, which no re-ack of its own replaces) comes back too.
pub const REACK_AFTER: Duration = Duration::from_secs(5);

/// At most this many acks are published again per stall (the oldest first): enough to unblock
/// finality; a later stall asks again.
pub const REACK_ENTRIES_MAX: usize = 1 << 16;
