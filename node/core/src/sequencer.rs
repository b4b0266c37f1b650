//! The sequencer (B1): turns submitted [`Command`]s into gap-free, stamped journal [`Entry`]s.
//!
//! Sans-IO: the driver hands in a batch of commands and the current time, gets back the entries
//! to make durable (one frame, one fsync) and one [`Admission`] per command to answer the
//! submitter with. Only after the batch is durable may the driver publish it (durable before
//! publish, mission.md §2.2). A new leader first replays the durable journal through
//! [`Sequencer::recover`] (which rebuilds `seq_next` and the dedupe window) and then takes a
//! higher epoch with [`Sequencer::begin_epoch`].

use crate::entry::{CenterId, Command, Entry, Seq};
use crate::hash::Prehashed;
use crate::limits::{DEDUPE_WINDOW_ENTRIES, TICK_INTERVAL_US};
use std::collections::HashMap;

/// The sequencer's answer to one submitted command.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Admission {
    /// Newly sequenced at this seq.
    Sequenced(Seq),
    /// A retry: same `bmi`, same content as the entry at this seq. Nothing new is journaled.
    Duplicate(Seq),
    /// Same `bmi` as the entry at this seq but different content: rejected (DUPL), not journaled.
    Conflict(Seq),
}

impl Admission {
    /// The ISO 20022 reason a participant is told when nothing new was journaled: a conflicting
    /// reuse of a `bmi` is rejected as DUPL; a retry is not rejected (it gets the original's
    /// status), and neither is a newly sequenced command.
    pub fn reject_reason(self) -> Option<crate::entry::RejectReason> {
        match self {
            Admission::Conflict(_) => Some(crate::entry::RejectReason::Duplicate),
            Admission::Sequenced(_) | Admission::Duplicate(_) => None,
        }
    }
}

/// Remembers recent `bmi`s: two generations, each holding up to half the window; when the current
/// one fills, the older one is dropped whole (no per-entry eviction on the hot path).
struct Dedupe {
    current: HashMap<u128, (Seq, u64), Prehashed>,
    previous: HashMap<u128, (Seq, u64), Prehashed>,
    generation_entries_max: usize,
}

impl Dedupe {
    fn new(window_entries: usize) -> Self {
        let half = (window_entries / 2).max(1);
        Dedupe {
            current: HashMap::with_capacity_and_hasher(half, Prehashed::default()),
            previous: HashMap::with_capacity_and_hasher(half, Prehashed::default()),
            generation_entries_max: half,
        }
    }

    fn get(&self, key: u128) -> Option<(Seq, u64)> {
        self.current.get(&key).or_else(|| self.previous.get(&key)).copied()
    }

    fn insert(&mut self, key: u128, seq: Seq, digest: u64) {
        if self.current.len() >= self.generation_entries_max {
            std::mem::swap(&mut self.current, &mut self.previous);
            self.current.clear();
        }
        self.current.insert(key, (seq, digest));
    }
}

pub struct Sequencer {
    /// The center hosting this sequencer (the origin of its `Tick`s).
    center: CenterId,
    epoch: u32,
    seq_next: Seq,
    timestamp_last_us: u64,
    /// Timestamp of the last `Tick` stamped (or recovered): the next is due a tick interval on.
    tick_last_us: u64,
    dedupe: Dedupe,
}

impl Sequencer {
    /// A sequencer over an empty journal, with the default dedupe window.
    pub fn new(center: CenterId, epoch: u32) -> Self {
        Self::with_window(center, epoch, DEDUPE_WINDOW_ENTRIES)
    }

    pub fn with_window(center: CenterId, epoch: u32, window_entries: usize) -> Self {
        Sequencer {
            center,
            epoch,
            seq_next: 1,
            timestamp_last_us: 0,
            tick_last_us: 0,
            dedupe: Dedupe::new(window_entries),
        }
    }

    pub fn seq_next(&self) -> Seq {
        self.seq_next
    }
    pub fn epoch(&self) -> u32 {
        self.epoch
    }
    pub fn timestamp_last_us(&self) -> u64 {
        self.timestamp_last_us
    }

    /// Feeds one durable journal entry, in seq order, while taking over. Panics on a gap: the
    /// durable journal is gap-free by construction, so a hole means corruption (stop the node).
    pub fn recover(&mut self, entry: &Entry) {
        assert_eq!(entry.seq, self.seq_next, "journal is not gap-free at seq {}", entry.seq);
        self.seq_next = entry.seq + 1;
        self.epoch = self.epoch.max(entry.epoch);
        self.timestamp_last_us = self.timestamp_last_us.max(entry.timestamp_us);
        if entry.payload == crate::entry::Payload::Tick {
            self.tick_last_us = self.tick_last_us.max(entry.timestamp_us);
        }
        if !entry.bmi.is_none() {
            self.dedupe.insert(entry.bmi.fingerprint(), entry.seq, entry.payload.digest());
        }
    }

    /// Skips ahead to `seq_next` without replaying (only for a journal whose older entries are
    /// gone; the dedupe window then starts empty).
    pub fn resume_at(&mut self, seq_next: Seq, epoch: u32, timestamp_last_us: u64) {
        assert!(seq_next >= self.seq_next, "the sequencer never goes back");
        self.seq_next = seq_next;
        self.epoch = self.epoch.max(epoch);
        self.timestamp_last_us = self.timestamp_last_us.max(timestamp_last_us);
    }

    /// Takes leadership with a strictly higher epoch (fences the previous leader).
    pub fn begin_epoch(&mut self, epoch: u32) {
        assert!(epoch > self.epoch, "epoch must rise: {} -> {}", self.epoch, epoch);
        self.epoch = epoch;
    }

    fn stamp(&mut self, now_us: u64) -> u64 {
        // Time never runs backwards in the journal, whatever the host clock does.
        self.timestamp_last_us = self.timestamp_last_us.max(now_us);
        self.timestamp_last_us
    }

    /// Sequences a batch. Appends the new entries to `entries` and one admission per command to
    /// `admissions`, in command order.
    pub fn handle_commands(
        &mut self,
        now_us: u64,
        commands: impl IntoIterator<Item = Command>,
        entries: &mut Vec<Entry>,
        admissions: &mut Vec<Admission>,
    ) {
        // Time is recorded only if an entry is stamped with it: a batch of retries (or an empty
        // poll) must not count as activity, or it would hold back the idle `Tick`.
        let timestamp_us = self.timestamp_last_us.max(now_us);
        let before = entries.len();
        for command in commands {
            admissions.push(self.admit(timestamp_us, command, entries));
        }
        if entries.len() > before {
            self.timestamp_last_us = timestamp_us;
        }
    }

    fn admit(&mut self, timestamp_us: u64, command: Command, entries: &mut Vec<Entry>) -> Admission {
        let digest = command.payload.digest();
        let key = if command.bmi.is_none() { None } else { Some(command.bmi.fingerprint()) };
        if let Some(key) = key {
            if let Some((seq, known)) = self.dedupe.get(key) {
                return if known == digest { Admission::Duplicate(seq) } else { Admission::Conflict(seq) };
            }
        }
        let seq = self.seq_next;
        self.seq_next += 1;
        if let Some(key) = key {
            self.dedupe.insert(key, seq, digest);
        }
        entries.push(Entry {
            seq,
            epoch: self.epoch,
            timestamp_us,
            origin: command.origin,
            bmi: command.bmi,
            payload: command.payload,
        });
        Admission::Sequenced(seq)
    }

    /// A `Tick` if none has been stamped for `TICK_INTERVAL_US`, whatever else was: plugin timers
    /// fire under continuous traffic as they do when idle (mission.md §3.4, "time never
    /// stops"). The driver calls this with every batch it sequences and when idle.
    pub fn poll_tick(&mut self, now_us: u64) -> Option<Entry> {
        if now_us < self.tick_last_us.saturating_add(TICK_INTERVAL_US) {
            return None;
        }
        let timestamp_us = self.stamp(now_us);
        self.tick_last_us = timestamp_us;
        let seq = self.seq_next;
        self.seq_next += 1;
        Some(Entry::tick(seq, self.epoch, timestamp_us, self.center))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::{AccountId, Bmi, Currency, Payload, Transfer};
    use proptest::prelude::*;

    fn transfer(bmi: &str, amount: u64) -> Command {
        Command {
            origin: CenterId(2),
            bmi: Bmi::new(bmi.as_bytes()).unwrap_or_else(|_| unreachable!()),
            payload: Payload::Transfer(Transfer {
                debtor: AccountId(1),
                creditor: AccountId(2),
                amount_minor: amount,
                currency: Currency::new(b"EUR").unwrap_or_else(|_| unreachable!()),
            }),
        }
    }

    #[test]
    fn stamps_gap_free_seqs_epoch_and_time() {
        let mut s = Sequencer::with_window(CenterId(1), 3, 64);
        let (mut e, mut a) = (Vec::new(), Vec::new());
        s.handle_commands(100, vec![transfer("A", 1), transfer("B", 1)], &mut e, &mut a);
        s.handle_commands(50, vec![transfer("C", 1)], &mut e, &mut a);
        let seqs: Vec<_> = e.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, vec![1, 2, 3]);
        assert!(e.iter().all(|e| e.epoch == 3));
        // The clock went backwards; the journal's time did not.
        assert_eq!(e[2].timestamp_us, 100);
        assert_eq!(a, vec![Admission::Sequenced(1), Admission::Sequenced(2), Admission::Sequenced(3)]);
    }

    #[test]
    fn duplicate_bmi_same_content_gets_original_seq_different_content_conflicts() {
        let mut s = Sequencer::with_window(CenterId(1), 1, 64);
        let (mut e, mut a) = (Vec::new(), Vec::new());
        s.handle_commands(1, vec![transfer("A", 5), transfer("A", 5), transfer("A", 6)], &mut e, &mut a);
        assert_eq!(e.len(), 1);
        assert_eq!(a, vec![Admission::Sequenced(1), Admission::Duplicate(1), Admission::Conflict(1)]);
        assert_eq!(a[2].reject_reason().map(|r| r.iso_code()), Some("DUPL"));
        assert_eq!(a[1].reject_reason(), None);
    }

    #[test]
    fn a_tick_every_interval_idle_or_loaded() {
        let mut s = Sequencer::with_window(CenterId(3), 1, 1 << 12);
        let (mut e, mut a) = (Vec::new(), Vec::new());
        let t0 = TICK_INTERVAL_US + 10;
        let first = s.poll_tick(t0);
        assert!(matches!(first, Some(Entry { seq: 1, payload: Payload::Tick, origin: CenterId(3), .. })));
        // Continuous traffic: a transfer every millisecond for three intervals.
        let mut ticks = Vec::new();
        for ms in 1..=3_000u64 {
            let now = t0 + ms * 1_000;
            s.handle_commands(now, vec![transfer(&format!("T{ms}"), 5)], &mut e, &mut a);
            ticks.extend(s.poll_tick(now).map(|t| t.timestamp_us));
        }
        assert_eq!(ticks, vec![t0 + TICK_INTERVAL_US, t0 + 2 * TICK_INTERVAL_US, t0 + 3 * TICK_INTERVAL_US]);
        assert_eq!(s.poll_tick(t0 + 1 + 3 * TICK_INTERVAL_US), None);
    }

    #[test]
    fn recovery_restores_the_tick_schedule() {
        let mut s = Sequencer::with_window(CenterId(1), 1, 64);
        let t0 = TICK_INTERVAL_US + 500;
        let tick = s.poll_tick(t0).unwrap_or_else(|| unreachable!("the first poll ticks"));
        let mut t = Sequencer::with_window(CenterId(2), 0, 64);
        t.recover(&tick);
        assert_eq!(t.poll_tick(t0 + TICK_INTERVAL_US - 1), None, "the recovered tick counts");
        assert!(t.poll_tick(t0 + TICK_INTERVAL_US).is_some());
    }

    #[test]
    fn recovery_restores_seq_and_dedupe_and_epoch_must_rise() {
        let mut s = Sequencer::with_window(CenterId(1), 1, 64);
        let (mut e, mut a) = (Vec::new(), Vec::new());
        s.handle_commands(1, vec![transfer("A", 5), transfer("B", 5)], &mut e, &mut a);
        let mut t = Sequencer::with_window(CenterId(2), 0, 64);
        for entry in &e {
            t.recover(entry);
        }
        t.begin_epoch(2);
        let (mut e2, mut a2) = (Vec::new(), Vec::new());
        t.handle_commands(2, vec![transfer("B", 5), transfer("C", 5)], &mut e2, &mut a2);
        assert_eq!(a2, vec![Admission::Duplicate(2), Admission::Sequenced(3)]);
        assert_eq!(e2[0].epoch, 2);
        assert!(std::panic::catch_unwind(move || t.begin_epoch(2)).is_err());
    }

    proptest! {
        /// Whatever the stream of bmis, seqs are gap-free, every sequenced bmi is new within the
        /// window, and a bmi seen within the last window/2 entries is never sequenced again.
        #[test]
        fn dedupe_window_holds(ids in proptest::collection::vec(0u64..50, 1..400), window in 4usize..64) {
            let mut s = Sequencer::with_window(CenterId(1), 1, window);
            let (mut e, mut a) = (Vec::new(), Vec::new());
            let mut last_seq_of = std::collections::HashMap::new();
            for id in ids {
                let before = s.seq_next();
                a.clear();
                s.handle_commands(0, vec![transfer(&format!("B{id}"), 1)], &mut e, &mut a);
                match a[0] {
                    Admission::Sequenced(seq) => {
                        prop_assert_eq!(seq, before);
                        if let Some(prev) = last_seq_of.insert(id, seq) {
                            prop_assert!(seq - prev > (window / 2) as u64, "re-sequenced inside window");
                        }
                    }
                    Admission::Duplicate(seq) => prop_assert_eq!(Some(&seq), last_seq_of.get(&id)),
                    Admission::Conflict(_) => prop_assert!(false, "same content cannot conflict"),
                }
            }
            for (i, entry) in e.iter().enumerate() {
                prop_assert_eq!(entry.seq, i as u64 + 1);
            }
        }
    }
}
