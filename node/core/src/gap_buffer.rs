//! The gap buffer (B3): a bounded, lock-free reorder window keyed by `seq`.
//!
//! Journal readers (any number, [`GapProducer`] is `Clone + Sync`) insert entries as they arrive,
//! in any order, duplicated or late; the one applier ([`GapConsumer`], not `Clone`) drains the
//! contiguous run that starts at its watermark. No mutex anywhere: each slot carries an atomic
//! stamp `seq << 2 | state`, as crossbeam's `ArrayQueue` does with laps:
//!
//! * `EMPTY` with seq `s`: the slot awaits exactly `s` (slot `s % slots`);
//! * `WRITING` with seq `s`: a producer owns the slot and is writing `s`;
//! * `FULL` with seq `s`: `s` is ready for the consumer.
//!
//! A producer claims a slot with one compare-exchange `EMPTY(s) → WRITING(s)`; failure tells it
//! why: the stamp's seq is higher (that seq was already applied: drop), equal (a duplicate in
//! flight or waiting: drop) or lower (the window is full: hand the entry back, back-pressure).
//! The consumer takes `FULL(next)`, then re-arms the slot as `EMPTY(next + slots)`.
//!
//! **Architecture Invariant:** a hole is never skipped. When the run stops at a missing seq while
//! later ones are present for longer than the timeout, [`GapConsumer::poll_gap`] reports it so
//! the driver can pull the missing entries from the durable source. Time is an argument.

use crate::limits::GAP_TIMEOUT_US;
use std::mem::MaybeUninit;
use std::sync::Arc;
use sync::{AtomicU64, Ordering, UnsafeCell};

#[cfg(loom)]
mod sync {
    pub(crate) use loom::cell::UnsafeCell;
    pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};
}

#[cfg(not(loom))]
mod sync {
    pub(crate) use std::sync::atomic::{AtomicU64, Ordering};

    /// `std`'s `UnsafeCell` with loom's closure API, so one body of code serves both.
    #[derive(Debug)]
    pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        pub(crate) fn new(v: T) -> Self {
            UnsafeCell(std::cell::UnsafeCell::new(v))
        }
        pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }
}

const EMPTY: u64 = 0;
const WRITING: u64 = 1;
const FULL: u64 = 2;
/// Seqs must fit in the stamp beside the two state bits.
pub const SEQ_MAX: u64 = (1 << 62) - 1;

struct Slot<T> {
    stamp: AtomicU64,
    value: UnsafeCell<MaybeUninit<T>>,
}

struct Shared<T> {
    slots: Box<[Slot<T>]>,
    mask: u64,
    /// Highest seq ever inserted (for gap detection only).
    seq_seen_max: AtomicU64,
}

// SAFETY: a slot's value is written only by the producer that won the EMPTY→WRITING exchange and
// read only by the consumer after it observed FULL (Release/Acquire), so access is exclusive.
unsafe impl<T: Send> Sync for Shared<T> {}
unsafe impl<T: Send> Send for Shared<T> {}

impl<T> Drop for Shared<T> {
    fn drop(&mut self) {
        for slot in self.slots.iter() {
            if slot.stamp.load(Ordering::Acquire) & 3 == FULL {
                // SAFETY: FULL means initialised and not yet taken; we have `&mut self`.
                slot.value.with_mut(|p| unsafe { (*p).assume_init_drop() });
            }
        }
    }
}

/// What happened to an inserted entry.
#[derive(Debug, PartialEq, Eq)]
pub enum Insert<T> {
    /// Stored; the consumer will drain it in order.
    Stored,
    /// This seq is already waiting or being written: dropped.
    Duplicate,
    /// This seq was already applied: dropped.
    Applied,
    /// Too far ahead of the applied watermark: not stored, handed back (retry later).
    Full(T),
    /// Seq 0 or above [`SEQ_MAX`]: dropped.
    OutOfRange,
}

/// A hole that has waited longer than the timeout.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Gap {
    /// First missing seq (the consumer's next).
    pub seq_missing_first: u64,
    /// Highest seq present beyond the hole.
    pub seq_seen_max: u64,
    pub waited_us: u64,
}

/// The inserting side. Cheap to clone; usable from many threads at once.
pub struct GapProducer<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Clone for GapProducer<T> {
    fn clone(&self) -> Self {
        GapProducer { shared: Arc::clone(&self.shared) }
    }
}

/// The draining side: exactly one.
pub struct GapConsumer<T> {
    shared: Arc<Shared<T>>,
    seq_next: u64,
    gap_since_us: Option<u64>,
    timeout_us: u64,
}

/// A gap buffer of `slots` (a power of two) whose first expected seq is `seq_next`.
pub fn gap_buffer<T: Send>(slots: usize, seq_next: u64) -> (GapProducer<T>, GapConsumer<T>) {
    gap_buffer_with_timeout(slots, seq_next, GAP_TIMEOUT_US)
}

pub fn gap_buffer_with_timeout<T: Send>(
    slots: usize,
    seq_next: u64,
    timeout_us: u64,
) -> (GapProducer<T>, GapConsumer<T>) {
    assert!(slots.is_power_of_two() && slots >= 2, "slots must be a power of two");
    assert!((1..=SEQ_MAX).contains(&seq_next), "seq_next out of range");
    let mask = slots as u64 - 1;
    let slots: Box<[Slot<T>]> = (0..slots as u64)
        .map(|i| {
            // The smallest seq >= seq_next that maps to slot i.
            let offset = (i.wrapping_sub(seq_next)) & mask;
            Slot {
                stamp: AtomicU64::new((seq_next + offset) << 2 | EMPTY),
                value: UnsafeCell::new(MaybeUninit::uninit()),
            }
        })
        .collect();
    let shared = Arc::new(Shared { slots, mask, seq_seen_max: AtomicU64::new(seq_next - 1) });
    (
        GapProducer { shared: Arc::clone(&shared) },
        GapConsumer { shared, seq_next, gap_since_us: None, timeout_us },
    )
}

impl<T: Send> GapProducer<T> {
    pub fn insert(&self, seq: u64, value: T) -> Insert<T> {
        if seq == 0 || seq > SEQ_MAX {
            return Insert::OutOfRange;
        }
        let shared = &*self.shared;
        let slot = &shared.slots[(seq & shared.mask) as usize];
        match slot.stamp.compare_exchange(
            seq << 2 | EMPTY,
            seq << 2 | WRITING,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => {
                // SAFETY: winning the exchange gives this producer the slot until it stores FULL.
                slot.value.with_mut(|p| unsafe { (*p).write(value) });
                slot.stamp.store(seq << 2 | FULL, Ordering::Release);
                shared.seq_seen_max.fetch_max(seq, Ordering::AcqRel);
                Insert::Stored
            }
            Err(current) => {
                let awaited = current >> 2;
                if awaited > seq {
                    Insert::Applied
                } else if awaited == seq {
                    Insert::Duplicate
                } else {
                    Insert::Full(value)
                }
            }
        }
    }
}

impl<T: Send> GapConsumer<T> {
    /// The next seq to apply (everything below it has been drained).
    pub fn seq_next(&self) -> u64 {
        self.seq_next
    }

    /// A hint, nothing else: the slot of `seq` will be touched soon (an applier passing
    /// entries in hand touches one slot per seq, each on its own cache line).
    #[inline]
    pub fn prefetch(&self, seq: u64) {
        crate::hint::prefetch(&self.shared.slots[(seq & self.shared.mask) as usize]);
    }

    /// Hands at most `max` entries of the contiguous run to `apply`, in seq order; returns how
    /// many. `now_us` only feeds gap timing.
    pub fn drain(&mut self, max: usize, now_us: u64, mut apply: impl FnMut(u64, T)) -> usize {
        let shared = &*self.shared;
        let slots = shared.slots.len() as u64;
        let mut drained = 0;
        while drained < max {
            let seq = self.seq_next;
            let slot = &shared.slots[(seq & shared.mask) as usize];
            if slot.stamp.load(Ordering::Acquire) != seq << 2 | FULL {
                break;
            }
            // SAFETY: FULL(seq) was published with Release by the only writer of this lap.
            let value = slot.value.with_mut(|p| unsafe { (*p).assume_init_read() });
            slot.stamp.store((seq + slots) << 2 | EMPTY, Ordering::Release);
            self.seq_next = seq + 1;
            drained += 1;
            apply(seq, value);
        }
        if drained > 0 {
            self.gap_since_us = None;
        }
        let _ = now_us;
        drained
    }

    /// Lets `seq` — the next seq, held by the caller and not inserted — pass without going
    /// through a slot (an applier that has the entry in hand when it is next in order saves two
    /// moves of it). False, and nothing changes, if `seq` is not the next or its slot is taken
    /// (being written or waiting: then drain it as usual).
    pub fn pass(&mut self, seq: u64) -> bool {
        if seq != self.seq_next {
            return false;
        }
        let shared = &*self.shared;
        let slots = shared.slots.len() as u64;
        let slot = &shared.slots[(seq & shared.mask) as usize];
        let armed = slot.stamp.compare_exchange(
            seq << 2 | EMPTY,
            (seq + slots) << 2 | EMPTY,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
        if armed.is_err() {
            return false;
        }
        self.seq_next = seq + 1;
        self.gap_since_us = None;
        true
    }

    /// Reports a hole at `seq_next` that has waited at least the timeout while later seqs are
    /// present; reports again after each further timeout. Never skips it.
    pub fn poll_gap(&mut self, now_us: u64) -> Option<Gap> {
        let seen = self.shared.seq_seen_max.load(Ordering::Acquire);
        let slot = &self.shared.slots[(self.seq_next & self.shared.mask) as usize];
        let ready = slot.stamp.load(Ordering::Acquire) == self.seq_next << 2 | FULL;
        if seen < self.seq_next || ready {
            self.gap_since_us = None;
            return None;
        }
        let since = *self.gap_since_us.get_or_insert(now_us);
        let waited_us = now_us.saturating_sub(since);
        if waited_us < self.timeout_us {
            return None;
        }
        self.gap_since_us = Some(now_us);
        Some(Gap { seq_missing_first: self.seq_next, seq_seen_max: seen, waited_us })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn drain_all(c: &mut GapConsumer<u64>) -> Vec<u64> {
        let mut got = Vec::new();
        c.drain(usize::MAX, 0, |seq, v| {
            assert_eq!(seq, v);
            got.push(seq)
        });
        got
    }

    #[test]
    fn an_entry_in_hand_passes_only_when_next_and_not_inserted() {
        let (p, mut c) = gap_buffer::<u64>(4, 1);
        assert!(!c.pass(2), "not the next");
        assert!(c.pass(1));
        assert_eq!(c.seq_next(), 2);
        assert_eq!(p.insert(1, 1), Insert::Applied, "a passed seq counts as applied");
        assert_eq!(p.insert(2, 2), Insert::Stored);
        assert!(!c.pass(2), "inserted: drain it");
        assert_eq!(drain_all(&mut c), vec![2]);
        // The passed slot was re-armed for the next lap.
        assert_eq!(p.insert(5, 5), Insert::Stored);
        assert!(c.pass(3) && c.pass(4));
        assert_eq!(drain_all(&mut c), vec![5]);
    }

    #[test]
    fn reorders_drops_duplicates_and_applied() {
        let (p, mut c) = gap_buffer::<u64>(8, 1);
        assert_eq!(p.insert(2, 2), Insert::Stored);
        assert_eq!(p.insert(2, 2), Insert::Duplicate);
        assert!(drain_all(&mut c).is_empty());
        assert_eq!(p.insert(1, 1), Insert::Stored);
        assert_eq!(drain_all(&mut c), vec![1, 2]);
        assert_eq!(p.insert(1, 1), Insert::Applied);
        assert_eq!(p.insert(0, 0), Insert::OutOfRange);
        assert_eq!(p.insert(3 + 8, 11), Insert::Full(11));
        assert_eq!(p.insert(3 + 7, 10), Insert::Stored);
    }

    #[test]
    fn starts_mid_journal() {
        let (p, mut c) = gap_buffer::<u64>(4, 1_000_001);
        assert_eq!(p.insert(1_000_000, 0), Insert::Applied);
        assert_eq!(p.insert(1_000_002, 1_000_002), Insert::Stored);
        assert_eq!(p.insert(1_000_001, 1_000_001), Insert::Stored);
        assert_eq!(drain_all(&mut c), vec![1_000_001, 1_000_002]);
    }

    #[test]
    fn gap_reported_after_timeout_and_never_skipped() {
        let (p, mut c) = gap_buffer_with_timeout::<u64>(8, 1, 100);
        assert_eq!(c.poll_gap(0), None, "nothing beyond: no gap");
        assert_eq!(p.insert(3, 3), Insert::Stored);
        assert_eq!(c.poll_gap(1_000), None, "gap starts being timed");
        assert_eq!(c.poll_gap(1_099), None);
        assert_eq!(c.poll_gap(1_100), Some(Gap { seq_missing_first: 1, seq_seen_max: 3, waited_us: 100 }));
        assert_eq!(c.poll_gap(1_150), None, "re-reported only after another timeout");
        assert!(drain_all(&mut c).is_empty(), "hole is not skipped");
        p.insert(1, 1);
        p.insert(2, 2);
        assert_eq!(drain_all(&mut c), vec![1, 2, 3]);
        assert_eq!(c.poll_gap(10_000), None);
    }

    #[test]
    fn drops_undrained_values() {
        let (p, c) = gap_buffer::<Arc<()>>(4, 1);
        let v = Arc::new(());
        p.insert(2, Arc::clone(&v));
        drop((p, c));
        assert_eq!(Arc::strong_count(&v), 1);
    }

    #[test]
    fn concurrent_producers_deliver_every_seq_once_in_order() {
        let (p, mut c) = gap_buffer::<u64>(64, 1);
        let n = 20_000u64;
        let handles: Vec<_> = (0..3)
            .map(|t| {
                let p = p.clone();
                std::thread::spawn(move || {
                    // Every producer offers every seq (duplicates), in its own order.
                    let mut pending: Vec<u64> = (1..=n).collect();
                    if t == 1 {
                        pending.reverse();
                    }
                    while !pending.is_empty() {
                        pending.retain(|&s| matches!(p.insert(s, s), Insert::Full(_)));
                        std::thread::yield_now();
                    }
                })
            })
            .collect();
        let mut got = Vec::new();
        while got.len() < n as usize {
            c.drain(usize::MAX, 0, |seq, v| {
                assert_eq!(seq, v);
                got.push(seq)
            });
        }
        for h in handles {
            h.join().unwrap_or_else(|_| panic!("producer panicked"));
        }
        assert_eq!(got, (1..=n).collect::<Vec<_>>());
    }

    proptest! {
        /// Any arrival order, with duplicates and stale re-deliveries: the drained run is exactly
        /// 1..=n in order, and nothing is ever drained twice.
        #[test]
        fn any_order_drains_exactly_once_in_order(
            n in 1u64..200,
            shuffle in proptest::collection::vec(any::<u64>(), 0..600),
            slots_log2 in 1u32..6,
        ) {
            let (p, mut c) = gap_buffer::<u64>(1 << slots_log2, 1);
            let mut arrivals: Vec<u64> = (1..=n).collect();
            arrivals.extend(shuffle.iter().map(|x| 1 + x % n));
            // Deterministic shuffle from the proptest input.
            for i in (1..arrivals.len()).rev() {
                let j = (shuffle.get(i).copied().unwrap_or(i as u64) % (i as u64 + 1)) as usize;
                arrivals.swap(i, j);
            }
            let mut got = Vec::new();
            let mut pending = std::collections::VecDeque::from(arrivals);
            let mut stuck = 0;
            while let Some(s) = pending.pop_front() {
                match p.insert(s, s) {
                    Insert::Full(v) => { pending.push_back(v); stuck += 1; }
                    Insert::OutOfRange => prop_assert!(false),
                    _ => stuck = 0,
                }
                got.extend(drain_all(&mut c));
                prop_assert!(stuck <= pending.len() + 1, "no progress");
            }
            got.extend(drain_all(&mut c));
            prop_assert_eq!(got, (1..=n).collect::<Vec<_>>());
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;

    /// Two producers race on the same seqs while the consumer drains: every seq is applied once,
    /// in order, and values are never torn or lost.
    #[test]
    fn racing_producers_and_consumer() {
        loom::model(|| {
            let (p, mut c) = gap_buffer_with_timeout::<u64>(2, 1, 0);
            let p2 = p.clone();
            let t1 = loom::thread::spawn(move || {
                for s in [2u64, 1] {
                    let _ = p.insert(s, s * 10);
                }
            });
            let t2 = loom::thread::spawn(move || {
                for s in [1u64, 2] {
                    let _ = p2.insert(s, s * 10);
                }
            });
            let mut got = Vec::new();
            c.drain(usize::MAX, 0, |s, v| got.push((s, v)));
            t1.join().unwrap();
            t2.join().unwrap();
            c.drain(usize::MAX, 0, |s, v| got.push((s, v)));
            assert_eq!(got, vec![(1, 10), (2, 20)]);
        });
    }

    /// A producer laps the window while the consumer re-arms slots: an insert for the next lap
    /// either lands or is handed back, never overwrites an undrained value.
    #[test]
    fn lapping_producer() {
        loom::model(|| {
            let (p, mut c) = gap_buffer_with_timeout::<u64>(2, 1, 0);
            p.insert(1, 1);
            p.insert(2, 2);
            let t = loom::thread::spawn(move || {
                let r = p.insert(3, 3);
                matches!(r, Insert::Stored)
            });
            let mut got = Vec::new();
            c.drain(usize::MAX, 0, |s, v| got.push((s, v)));
            let stored = t.join().unwrap();
            c.drain(usize::MAX, 0, |s, v| got.push((s, v)));
            let mut want = vec![(1, 1), (2, 2)];
            if stored {
                want.push((3, 3));
            }
            assert_eq!(got, want);
        });
    }
}
