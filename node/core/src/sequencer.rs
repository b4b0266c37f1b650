//! The sequencer (B1): turns submitted [`Command`]s into gap-free, stamped journal [`Entry`]s.
//!
//! Sans-IO: the driver hands in a batch of commands, what its `bmi` index knows about each of
//! them ([`Lookup`]) and the current time, and gets back the entries to make durable (one
//! frame, one fsync) and one [`Admission`] per command to answer the submitter with. Only after
//! the batch is durable may the driver publish it (durable before publish, mission.md §2.2). A
//! new leader first replays the durable journal through [`Sequencer::recover`] (or jumps with
//! [`Sequencer::resume_at`]) and then takes a higher epoch with [`Sequencer::begin_epoch`].
//!
//! **A `bmi` is sequenced at most once, ever.** The sequencer decides, the driver remembers:
//! every `bmi` ever sequenced is in the driver's index (the embedded engine's on-disk index
//! with in-memory filters, PostgreSQL's unique index, the simulator's map — all I/O), which
//! the driver looks up for a whole batch *before* calling [`Sequencer::handle_commands`] and
//! hands in as [`Lookup`]s. A known `bmi` with the same content is a retry (`Duplicate`, the
//! original seq); with other content it is refused (`Conflict`, DUPL). The comparison is on
//! the content itself (a transfer's fields) or on its SHA-256 ([`Content`]), never on a mixer
//! an attacker could invert. Repeats inside one batch are found here, by exact comparison.

use crate::entry::{Bmi, CenterId, Command, Entry, Payload, Seq, Transfer};
use crate::hash::Prehashed;
use crate::limits::TICK_INTERVAL_US;
use sha2::{Digest, Sha256};
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

/// What an entry asked for, in a form that tells a retry from a conflicting reuse of its `bmi`
/// and cannot be forged: a transfer itself (compared field by field), or the SHA-256 of any
/// other payload's encoding (account administration and plugin commands: rare, and a plugin
/// body can be 64 KiB).
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Content {
    Transfer(Transfer),
    Sha256([u8; 32]),
}

impl Content {
    pub fn of(payload: &Payload) -> Content {
        match payload {
            Payload::Transfer(t) => Content::Transfer(*t),
            other => Content::Sha256(sha256_of(other)),
        }
    }

    /// Whether `payload` is what this content describes.
    pub fn matches(&self, payload: &Payload) -> bool {
        match (self, payload) {
            (Content::Transfer(t), Payload::Transfer(u)) => t == u,
            (Content::Transfer(_), _) => false,
            (Content::Sha256(d), p) => *d == sha256_of(p),
        }
    }
}

/// SHA-256 of a payload's encoding (what the production engine stores per `bmi`).
pub fn sha256_of(payload: &Payload) -> [u8; 32] {
    let mut buf = Vec::with_capacity(64);
    crate::codec::encode_payload(payload, &mut buf);
    Sha256::digest(&buf).into()
}

/// A `bmi` the driver's index holds: its entry's seq and content.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct Known {
    pub seq: Seq,
    pub content: Content,
}

impl Known {
    pub fn of(entry: &Entry) -> Known {
        Known { seq: entry.seq, content: Content::of(&entry.payload) }
    }
}

/// The driver's answer for one command of a batch.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct Lookup {
    /// A 64-bit hash of the `bmi` (the driver's, keyed where outsiders choose `bmi`s), used only
    /// to find repeats within the batch quickly; equality is decided on the `bmi` itself.
    pub key: u64,
    /// The entry sequenced under this `bmi` before this batch, if any.
    pub known: Option<Known>,
}

pub struct Sequencer {
    /// The center hosting this sequencer (the origin of its `Tick`s).
    center: CenterId,
    epoch: u32,
    seq_next: Seq,
    timestamp_last_us: u64,
    /// Timestamp and seq of the last `Tick` stamped (or recovered), and the timestamp of the one
    /// before it (a rewind that takes the last back restores it): the next is due a tick
    /// interval after the last.
    tick_last: (u64, Seq),
    tick_before_us: u64,
    /// The current batch's sequenced entries by lookup key (index into the caller's `entries`);
    /// `batch_collided` holds those whose key an earlier, different `bmi` took.
    batch: HashMap<u64, usize, Prehashed>,
    batch_collided: Vec<usize>,
}

impl Sequencer {
    /// A sequencer over an empty journal.
    pub fn new(center: CenterId, epoch: u32) -> Self {
        Sequencer {
            center,
            epoch,
            seq_next: 1,
            timestamp_last_us: 0,
            tick_last: (0, 0),
            tick_before_us: 0,
            batch: HashMap::with_hasher(Prehashed::default()),
            batch_collided: Vec::new(),
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
    /// (The driver's `bmi` index is the driver's to rebuild.)
    pub fn recover(&mut self, entry: &Entry) {
        assert_eq!(entry.seq, self.seq_next, "journal is not gap-free at seq {}", entry.seq);
        self.seq_next = entry.seq + 1;
        self.epoch = self.epoch.max(entry.epoch);
        self.timestamp_last_us = self.timestamp_last_us.max(entry.timestamp_us);
        if entry.payload == crate::entry::Payload::Tick {
            self.tick_before_us = self.tick_last.0;
            self.tick_last = (self.tick_last.0.max(entry.timestamp_us), entry.seq);
        }
    }

    /// Skips ahead to `seq_next` without replaying (the durable journal ends at `seq_next - 1`
    /// with that epoch and timestamp).
    pub fn resume_at(&mut self, seq_next: Seq, epoch: u32, timestamp_last_us: u64) {
        assert!(seq_next >= self.seq_next, "the sequencer never goes back");
        self.seq_next = seq_next;
        self.epoch = self.epoch.max(epoch);
        self.timestamp_last_us = self.timestamp_last_us.max(timestamp_last_us);
    }

    /// Takes back the stamps from `seq_next` on: the driver could not record that batch (nothing
    /// of it is durable or published), and sequences its commands again. Never below what is
    /// durable: the driver's promise.
    pub fn rewind(&mut self, seq_next: Seq) {
        assert!(seq_next <= self.seq_next, "rewind cannot go forward: {seq_next} > {}", self.seq_next);
        self.seq_next = seq_next;
        if self.tick_last.1 >= seq_next {
            // The tick taken back is due again.
            self.tick_last = (self.tick_before_us, 0);
        }
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

    /// Sequences a batch. `lookups[i]` is the driver's index answer for the i-th command (one
    /// per command: anything else is a driver bug and stops the node). Appends the new entries
    /// to `entries` and one admission per command to `admissions`, in command order; the driver
    /// then adds the newly sequenced entries to its index.
    pub fn handle_commands(
        &mut self,
        now_us: u64,
        commands: impl IntoIterator<Item = Command>,
        lookups: &[Lookup],
        entries: &mut Vec<Entry>,
        admissions: &mut Vec<Admission>,
    ) {
        // Time is recorded only if an entry is stamped with it: a batch of retries (or an empty
        // poll) must not count as activity, or it would hold back the idle `Tick`.
        let timestamp_us = self.timestamp_last_us.max(now_us);
        let before = entries.len();
        self.batch.clear();
        self.batch_collided.clear();
        let mut n = 0usize;
        for command in commands {
            let lookup = lookups.get(n).unwrap_or_else(|| panic!("no bmi lookup for command {n}"));
            admissions.push(self.admit(timestamp_us, command, lookup, entries));
            n += 1;
        }
        assert_eq!(n, lookups.len(), "{} bmi lookups for {n} commands", lookups.len());
        if entries.len() > before {
            self.timestamp_last_us = timestamp_us;
        }
    }

    fn admit(
        &mut self,
        timestamp_us: u64,
        command: Command,
        lookup: &Lookup,
        entries: &mut Vec<Entry>,
    ) -> Admission {
        if let Some(known) = lookup.known {
            return if known.content.matches(&command.payload) {
                Admission::Duplicate(known.seq)
            } else {
                Admission::Conflict(known.seq)
            };
        }
        if !command.bmi.is_none() {
            if let Some(earlier) = self.earlier_in_batch(lookup.key, &command.bmi, entries) {
                let e = &entries[earlier];
                return if e.payload == command.payload {
                    Admission::Duplicate(e.seq)
                } else {
                    Admission::Conflict(e.seq)
                };
            }
            match self.batch.entry(lookup.key) {
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(entries.len());
                }
                std::collections::hash_map::Entry::Occupied(_) => self.batch_collided.push(entries.len()),
            }
        }
        let seq = self.seq_next;
        self.seq_next += 1;
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

    /// The index in `entries` of this batch's entry with this `bmi`, if any.
    fn earlier_in_batch(&self, key: u64, bmi: &Bmi, entries: &[Entry]) -> Option<usize> {
        let first = *self.batch.get(&key)?;
        if entries[first].bmi == *bmi {
            return Some(first);
        }
        // Two bmis of this batch share a key (rare): look through those that collided.
        self.batch_collided.iter().copied().find(|&i| entries[i].bmi == *bmi)
    }

    /// A `Tick` if none has been stamped for `TICK_INTERVAL_US`, whatever else was: plugin timers
    /// fire under continuous traffic as they do when idle (mission.md §3.4, "time never
    /// stops"). The driver calls this with every batch it sequences and when idle.
    pub fn poll_tick(&mut self, now_us: u64) -> Option<Entry> {
        if now_us < self.tick_last.0.saturating_add(TICK_INTERVAL_US) {
            return None;
        }
        let timestamp_us = self.stamp(now_us);
        let seq = self.seq_next;
        self.seq_next += 1;
        self.tick_before_us = self.tick_last.0;
        self.tick_last = (timestamp_us, seq);
        Some(Entry::tick(seq, self.epoch, timestamp_us, self.center))
    }
}

/// An exact, unbounded index of every `bmi` sequenced: the simulator's and the tests' driver
/// side (the engines keep theirs on disk or in PostgreSQL). Keys are an unkeyed hash: fine for
/// inputs the test itself chooses.
#[derive(Default)]
pub struct MemoryIndex {
    known: HashMap<Bmi, Known>,
}

impl MemoryIndex {
    /// One lookup per command, for [`Sequencer::handle_commands`].
    pub fn lookup<'a>(&self, commands: impl IntoIterator<Item = &'a Command>, out: &mut Vec<Lookup>) {
        out.extend(commands.into_iter().map(|c| Lookup {
            key: crate::hash::bytes64(0, c.bmi.as_bytes()),
            known: if c.bmi.is_none() { None } else { self.known.get(&c.bmi).copied() },
        }));
    }

    /// Remembers sequenced entries (a batch's new entries, or the journal on a restart).
    pub fn record<'a>(&mut self, entries: impl IntoIterator<Item = &'a Entry>) {
        for e in entries {
            if !e.bmi.is_none() {
                // The first entry of a bmi is the one retries are answered with.
                self.known.entry(e.bmi).or_insert_with(|| Known::of(e));
            }
        }
    }

    pub fn len(&self) -> usize {
        self.known.len()
    }
    pub fn is_empty(&self) -> bool {
        self.known.is_empty()
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

    /// A sequencer at `center`/`epoch` over an empty journal, its index, entry and answer lists.
    fn fresh(center: u8, epoch: u32) -> (Sequencer, MemoryIndex, Vec<Entry>, Vec<Admission>) {
        (Sequencer::new(CenterId(center), epoch), MemoryIndex::default(), Vec::new(), Vec::new())
    }

    /// The driver's part, as the simulator does it: look the batch up, sequence, remember.
    fn step(
        s: &mut Sequencer,
        index: &mut MemoryIndex,
        now: u64,
        commands: Vec<Command>,
        e: &mut Vec<Entry>,
        a: &mut Vec<Admission>,
    ) {
        let mut lookups = Vec::new();
        index.lookup(&commands, &mut lookups);
        let before = e.len();
        s.handle_commands(now, commands, &lookups, e, a);
        index.record(&e[before..]);
    }

    #[test]
    fn stamps_gap_free_seqs_epoch_and_time() {
        let (mut s, mut index, mut e, mut a) = fresh(1, 3);
        step(&mut s, &mut index, 100, vec![transfer("A", 1), transfer("B", 1)], &mut e, &mut a);
        step(&mut s, &mut index, 50, vec![transfer("C", 1)], &mut e, &mut a);
        let seqs: Vec<_> = e.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, vec![1, 2, 3]);
        assert!(e.iter().all(|e| e.epoch == 3));
        // The clock went backwards; the journal's time did not.
        assert_eq!(e[2].timestamp_us, 100);
        assert_eq!(a, vec![Admission::Sequenced(1), Admission::Sequenced(2), Admission::Sequenced(3)]);
    }

    #[test]
    fn duplicate_bmi_same_content_gets_original_seq_different_content_conflicts() {
        let (mut s, mut index, mut e, mut a) = fresh(1, 1);
        // Within one batch (found by the sequencer itself) ...
        step(
            &mut s,
            &mut index,
            1,
            vec![transfer("A", 5), transfer("A", 5), transfer("A", 6)],
            &mut e,
            &mut a,
        );
        assert_eq!(e.len(), 1);
        assert_eq!(a, vec![Admission::Sequenced(1), Admission::Duplicate(1), Admission::Conflict(1)]);
        assert_eq!(a[2].reject_reason().map(|r| r.iso_code()), Some("DUPL"));
        assert_eq!(a[1].reject_reason(), None);
        // ... and in a later batch (found by the driver's index).
        a.clear();
        step(&mut s, &mut index, 2, vec![transfer("A", 6), transfer("A", 5)], &mut e, &mut a);
        assert_eq!(a, vec![Admission::Conflict(1), Admission::Duplicate(1)]);
        assert_eq!(e.len(), 1, "nothing new journaled");
    }

    /// However old the first entry, a retry is answered with its seq: the sequencer keeps no
    /// window of its own, the index answers for every age.
    #[test]
    fn a_retry_of_any_age_gets_the_original_seq() {
        let (mut s, mut index, mut e, mut a) = fresh(1, 1);
        step(&mut s, &mut index, 1, vec![transfer("FIRST", 7)], &mut e, &mut a);
        for chunk in 0..200u64 {
            let batch = (0..1_000).map(|i| transfer(&format!("N{chunk}-{i}"), 1)).collect();
            step(&mut s, &mut index, 2, batch, &mut e, &mut a);
            e.clear();
        }
        a.clear();
        step(&mut s, &mut index, 3, vec![transfer("FIRST", 7), transfer("FIRST", 8)], &mut e, &mut a);
        assert_eq!(a, vec![Admission::Duplicate(1), Admission::Conflict(1)]);
        assert_eq!(index.len(), 200_001);
    }

    /// The content comparison is exact (a transfer's fields) or SHA-256 (what PostgreSQL stores):
    /// a different amount, account or currency is a conflict, whatever a 64-bit mix says.
    #[test]
    fn content_is_compared_exactly_or_by_sha256() {
        let t = transfer("A", 5).payload;
        let stored = Content::Sha256(sha256_of(&t));
        assert!(stored.matches(&t));
        assert!(Content::of(&t).matches(&t));
        for other in [transfer("A", 6).payload, Payload::AccountClose { account: AccountId(1) }] {
            assert!(!stored.matches(&other));
            assert!(!Content::of(&t).matches(&other));
        }
        let close = Payload::AccountClose { account: AccountId(1) };
        assert_eq!(Content::of(&close), Content::Sha256(sha256_of(&close)));
        assert!(!Content::of(&close).matches(&Payload::AccountClose { account: AccountId(2) }));
        // An index that stores digests (PostgreSQL) answers like one that stores content.
        let mut s = Sequencer::new(CenterId(1), 1);
        let (mut e, mut a) = (Vec::new(), Vec::new());
        let known = Some(Known { seq: 9, content: stored });
        let lookups = [Lookup { key: 1, known }, Lookup { key: 1, known }];
        s.handle_commands(1, vec![transfer("A", 5), transfer("A", 6)], &lookups, &mut e, &mut a);
        assert_eq!(a, vec![Admission::Duplicate(9), Admission::Conflict(9)]);
        assert!(e.is_empty());
    }

    /// Two different bmis of one batch with the same lookup key (a driver's hash collision) are
    /// both sequenced, and a repeat of either is still recognised.
    #[test]
    fn lookup_key_collisions_within_a_batch_are_told_apart_by_the_bmi() {
        let mut s = Sequencer::new(CenterId(1), 1);
        let (mut e, mut a) = (Vec::new(), Vec::new());
        let commands = vec![transfer("X", 1), transfer("Y", 2), transfer("Y", 2), transfer("X", 3)];
        let lookups = [Lookup { key: 42, known: None }; 4];
        s.handle_commands(1, commands, &lookups, &mut e, &mut a);
        assert_eq!(
            a,
            vec![
                Admission::Sequenced(1),
                Admission::Sequenced(2),
                Admission::Duplicate(2),
                Admission::Conflict(1)
            ]
        );
    }

    #[test]
    fn a_missing_lookup_is_a_driver_bug_and_stops() {
        let r = std::panic::catch_unwind(|| {
            let mut s = Sequencer::new(CenterId(1), 1);
            let (mut e, mut a) = (Vec::new(), Vec::new());
            s.handle_commands(
                1,
                vec![transfer("A", 1), transfer("B", 1)],
                &[Lookup { key: 0, known: None }],
                &mut e,
                &mut a,
            );
        });
        assert!(r.is_err());
    }

    /// A batch the driver could not record is stamped again from the same seq, with new answers.
    #[test]
    fn a_batch_not_recorded_is_sequenced_again_from_the_same_seq() {
        let (mut s, mut index, mut e, mut a) = fresh(1, 1);
        step(&mut s, &mut index, 1, vec![transfer("A", 5)], &mut e, &mut a);
        let first = s.seq_next();
        let (mut e2, mut a2) = (Vec::new(), Vec::new());
        let none = [Lookup { key: 1, known: None }, Lookup { key: 2, known: None }];
        s.handle_commands(2, vec![transfer("B", 1), transfer("OLD", 1)], &none, &mut e2, &mut a2);
        assert_eq!(a2, vec![Admission::Sequenced(2), Admission::Sequenced(3)]);
        // The store refused it (OLD was sequenced long ago, at seq 1 of another content).
        s.rewind(first);
        let known = Some(Known { seq: 1, content: Content::Sha256([7; 32]) });
        let answers = [Lookup { key: 1, known: None }, Lookup { key: 2, known }];
        let (mut e3, mut a3) = (Vec::new(), Vec::new());
        s.handle_commands(2, vec![transfer("B", 1), transfer("OLD", 1)], &answers, &mut e3, &mut a3);
        assert_eq!(a3, vec![Admission::Sequenced(2), Admission::Conflict(1)]);
        assert_eq!(s.seq_next(), 3);
        assert!(std::panic::catch_unwind(move || s.rewind(9)).is_err(), "never forward");
    }

    #[test]
    fn a_tick_every_interval_idle_or_loaded() {
        let (mut s, mut index, mut e, mut a) = fresh(3, 1);
        let t0 = TICK_INTERVAL_US + 10;
        let first = s.poll_tick(t0);
        assert!(matches!(first, Some(Entry { seq: 1, payload: Payload::Tick, origin: CenterId(3), .. })));
        // Continuous traffic: a transfer every millisecond for three intervals.
        let mut ticks = Vec::new();
        for ms in 1..=3_000u64 {
            let now = t0 + ms * 1_000;
            step(&mut s, &mut index, now, vec![transfer(&format!("T{ms}"), 5)], &mut e, &mut a);
            ticks.extend(s.poll_tick(now).map(|t| t.timestamp_us));
        }
        assert_eq!(ticks, vec![t0 + TICK_INTERVAL_US, t0 + 2 * TICK_INTERVAL_US, t0 + 3 * TICK_INTERVAL_US]);
        assert_eq!(s.poll_tick(t0 + 1 + 3 * TICK_INTERVAL_US), None);
    }

    #[test]
    fn recovery_and_rewind_keep_the_tick_schedule() {
        let mut s = Sequencer::new(CenterId(1), 1);
        let t0 = TICK_INTERVAL_US + 500;
        let tick = s.poll_tick(t0).unwrap_or_else(|| unreachable!("the first poll ticks"));
        let mut t = Sequencer::new(CenterId(2), 0);
        t.recover(&tick);
        assert_eq!(t.poll_tick(t0 + TICK_INTERVAL_US - 1), None, "the recovered tick counts");
        let again = t.poll_tick(t0 + TICK_INTERVAL_US).unwrap_or_else(|| unreachable!("due"));
        // That tick's batch could not be recorded: taken back, it is due again at once.
        t.rewind(again.seq);
        assert!(t.poll_tick(t0 + TICK_INTERVAL_US).is_some());
    }

    #[test]
    fn recovery_restores_seq_and_the_index_the_answers_and_epoch_must_rise() {
        let (mut s, mut index, mut e, mut a) = fresh(1, 1);
        step(&mut s, &mut index, 1, vec![transfer("A", 5), transfer("B", 5)], &mut e, &mut a);
        let (mut t, mut rebuilt) = (Sequencer::new(CenterId(2), 0), MemoryIndex::default());
        for entry in &e {
            t.recover(entry);
        }
        rebuilt.record(&e);
        t.begin_epoch(2);
        let (mut e2, mut a2) = (Vec::new(), Vec::new());
        step(&mut t, &mut rebuilt, 2, vec![transfer("B", 5), transfer("C", 5)], &mut e2, &mut a2);
        assert_eq!(a2, vec![Admission::Duplicate(2), Admission::Sequenced(3)]);
        assert_eq!(e2[0].epoch, 2);
        assert!(std::panic::catch_unwind(move || t.begin_epoch(2)).is_err());
    }

    proptest! {
        /// Whatever the stream of bmis and however it is cut into batches, seqs are gap-free,
        /// no bmi is ever sequenced twice, and every repeat gets the first seq (or a conflict
        /// when its amount differs).
        #[test]
        fn every_bmi_is_sequenced_at_most_once(
            ids in proptest::collection::vec((0u64..60, 1u64..3), 1..400),
            cuts in proptest::collection::vec(1usize..9, 1..80),
        ) {
            let (mut s, mut index) = (Sequencer::new(CenterId(1), 1), MemoryIndex::default());
            let (mut e, mut a) = (Vec::new(), Vec::new());
            let mut first: std::collections::HashMap<u64, (Seq, u64)> = std::collections::HashMap::new();
            let mut rest = &ids[..];
            let mut cut = cuts.iter().cycle();
            while !rest.is_empty() {
                let n = (*cut.next().unwrap_or(&1)).min(rest.len());
                let (batch, tail) = rest.split_at(n);
                rest = tail;
                a.clear();
                let commands = batch.iter().map(|(id, amount)| transfer(&format!("B{id}"), *amount)).collect();
                step(&mut s, &mut index, 0, commands, &mut e, &mut a);
                for ((id, amount), admission) in batch.iter().zip(&a) {
                    match (*admission, first.get(id)) {
                        (Admission::Sequenced(seq), None) => { first.insert(*id, (seq, *amount)); }
                        (Admission::Duplicate(seq), Some(&(s0, a0))) => prop_assert!(seq == s0 && a0 == *amount),
                        (Admission::Conflict(seq), Some(&(s0, a0))) => prop_assert!(seq == s0 && a0 != *amount),
                        (other, known) => prop_assert!(false, "{other:?} for {id} known as {known:?}"),
                    }
                }
            }
            for (i, entry) in e.iter().enumerate() {
                prop_assert_eq!(entry.seq, i as u64 + 1);
            }
            prop_assert_eq!(e.len(), first.len());
        }
    }
}
