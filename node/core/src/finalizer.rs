//! The quorum finalizer (B2): counts applied-acks per seq and declares finality exactly once.
//!
//! Every center runs one over the acks of all centers. For each seq it keeps the set of distinct
//! centers that acked it and the `(outcome, state_hash)` they reported. At `floor(N/2) + 1`
//! agreeing centers the seq becomes final — `ACCC` for an accepted entry, `RJCT` with the reason
//! for a rejected one — and a [`Finality::Final`] is emitted once. Until then the status is ACSP.
//!
//! Two different `(outcome, state_hash)` reports for one seq are a divergence: the finalizer emits
//! [`Finality::Divergence`] and **halts**: it finalizes nothing more (no side is picked; an
//! operator must intervene). Acks for seqs more than [`FINALIZER_WINDOW_SEQS`] ahead of the oldest
//! unfinalized seq are refused as [`AckResult::Deferred`] (the driver holds them back: back-pressure);
//! late acks for already-final seqs are still compared while their slot is not reused.

use crate::entry::{CenterId, Outcome, Seq};
use crate::ledger::Applied;
use crate::limits::{CENTER_COUNT_MAX, FINALIZER_WINDOW_SEQS};

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Status {
    Free,
    Pending,
    Final,
    Diverged,
}

#[derive(Copy, Clone, Debug)]
struct Slot {
    seq: Seq,
    acked: u8,
    outcome: Outcome,
    state_hash: u64,
    status: Status,
}

const FREE: Slot = Slot { seq: 0, acked: 0, outcome: Outcome::Accepted, state_hash: 0, status: Status::Free };

/// What the finalizer tells its driver.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Finality {
    /// Final, exactly once per seq: ACCC if `outcome` is accepted, else RJCT with the reason.
    Final { seq: Seq, outcome: Outcome, state_hash: u64 },
    /// `center` reported something different from what was first reported for `seq`.
    Divergence { seq: Seq, center: CenterId, first: (Outcome, u64), reported: (Outcome, u64) },
}

/// What happened to one ack.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum AckResult {
    /// Counted towards the seq's quorum (or compared against its final result).
    Counted,
    /// This center already acked this seq.
    Duplicate,
    /// For a final seq whose slot was reused: nothing left to compare against.
    Late,
    /// Too far ahead of the oldest unfinalized seq: hold it and offer it again later.
    Deferred,
    /// Seq 0 or a center outside the cluster: ignored.
    Invalid,
}

/// What a seq looks like to this finalizer.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum SeqStatus {
    /// ACSP: accepted for settlement, waiting for a quorum; `acks` distinct centers so far.
    Pending {
        acks: u8,
    },
    Final(Outcome),
    Diverged,
    /// Final long ago (slot reused) or never seen.
    Unknown,
}

impl SeqStatus {
    /// The ISO 20022 `TxSts` a participant sees: ACSP while waiting for a quorum, then ACCC
    /// (settled) or RJCT (rejected, see the outcome's reason). `None` when it cannot be told.
    pub fn iso_status(self) -> Option<&'static str> {
        match self {
            SeqStatus::Pending { .. } | SeqStatus::Diverged => Some("ACSP"),
            SeqStatus::Final(outcome) => Some(iso_final_status(outcome)),
            SeqStatus::Unknown => None,
        }
    }
}

/// ACCC for an accepted entry, RJCT for a rejected one.
pub fn iso_final_status(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Accepted => "ACCC",
        Outcome::Rejected(_) => "RJCT",
    }
}

pub struct Finalizer {
    center_count: u8,
    quorum: u8,
    slots: Box<[Slot]>,
    mask: u64,
    /// The oldest seq that is not final yet.
    seq_unfinal_first: Seq,
    halted: bool,
    finalized_total: u64,
    divergences_total: u64,
    /// Highest seq any ack was counted for (bounds the live part of the ring).
    seq_acked_max: Seq,
}

impl Finalizer {
    pub fn new(center_count: usize) -> Self {
        Self::with_window(center_count, FINALIZER_WINDOW_SEQS, 1)
    }

    /// A finalizer for `center_count` centers whose seqs below `seq_unfinal_first` are final.
    pub fn with_window(center_count: usize, window_seqs: usize, seq_unfinal_first: Seq) -> Self {
        assert!((1..=CENTER_COUNT_MAX).contains(&center_count), "center count out of range");
        assert!(window_seqs.is_power_of_two(), "window must be a power of two");
        assert!(seq_unfinal_first >= 1);
        Finalizer {
            center_count: center_count as u8,
            quorum: (center_count / 2 + 1) as u8,
            slots: vec![FREE; window_seqs].into_boxed_slice(),
            mask: window_seqs as u64 - 1,
            seq_unfinal_first,
            halted: false,
            finalized_total: 0,
            divergences_total: 0,
            seq_acked_max: 0,
        }
    }

    pub fn quorum(&self) -> u8 {
        self.quorum
    }
    /// Every seq below this is final.
    pub fn seq_unfinal_first(&self) -> Seq {
        self.seq_unfinal_first
    }
    pub fn is_halted(&self) -> bool {
        self.halted
    }
    pub fn finalized_total(&self) -> u64 {
        self.finalized_total
    }
    pub fn divergences_total(&self) -> u64 {
        self.divergences_total
    }
    /// Acks for seqs at or above this are deferred.
    pub fn seq_window_end(&self) -> Seq {
        self.seq_unfinal_first + self.slots.len() as u64
    }

    pub fn status(&self, seq: Seq) -> SeqStatus {
        let slot = &self.slots[(seq & self.mask) as usize];
        if slot.seq != seq {
            return SeqStatus::Unknown;
        }
        match slot.status {
            Status::Free => SeqStatus::Unknown,
            Status::Pending => SeqStatus::Pending { acks: slot.acked.count_ones() as u8 },
            Status::Final => SeqStatus::Final(slot.outcome),
            Status::Diverged => SeqStatus::Diverged,
        }
    }

    /// Counts one center's ack; finality and divergence events go to `out`.
    /// A hint, nothing else: an ack of `seq` will come soon (its tally slot is fetched into the
    /// cache while the acks before it are counted).
    #[inline]
    pub fn prefetch(&self, seq: Seq) {
        crate::hint::prefetch(&self.slots[(seq & self.mask) as usize]);
    }

    pub fn handle_ack(&mut self, center: CenterId, ack: Applied, out: &mut Vec<Finality>) -> AckResult {
        let seq = ack.seq;
        if seq == 0 || center.0 == 0 || center.0 > self.center_count {
            return AckResult::Invalid;
        }
        if seq >= self.seq_window_end() {
            return AckResult::Deferred;
        }
        let index = (seq & self.mask) as usize;
        if self.slots[index].seq != seq {
            if seq < self.seq_unfinal_first {
                return AckResult::Late;
            }
            // The slot holds a final seq one or more windows back, or nothing: take it over.
            assert!(
                matches!(self.slots[index].status, Status::Free | Status::Final),
                "reusing a live tally slot"
            );
            self.slots[index] = Slot { seq, ..FREE };
            self.slots[index].status = Status::Pending;
        }
        self.seq_acked_max = self.seq_acked_max.max(seq);
        let bit = 1u8 << center.index();
        let slot = self.slots[index];
        let first = (slot.outcome, slot.state_hash);
        let reported = (ack.outcome, ack.state_hash);
        if slot.acked != 0 && first != reported {
            self.diverge(index, seq, center, first, reported, out);
        }
        if slot.acked & bit != 0 {
            return AckResult::Duplicate;
        }
        let slot = &mut self.slots[index];
        if slot.acked == 0 {
            slot.outcome = ack.outcome;
            slot.state_hash = ack.state_hash;
        }
        slot.acked |= bit;
        if slot.status == Status::Pending && !self.halted && slot.acked.count_ones() as u8 >= self.quorum {
            slot.status = Status::Final;
            self.finalized_total += 1;
            out.push(Finality::Final { seq, outcome: slot.outcome, state_hash: slot.state_hash });
            self.advance();
        }
        AckResult::Counted
    }

    fn diverge(
        &mut self,
        index: usize,
        seq: Seq,
        center: CenterId,
        first: (Outcome, u64),
        reported: (Outcome, u64),
        out: &mut Vec<Finality>,
    ) {
        if self.slots[index].status == Status::Pending {
            self.slots[index].status = Status::Diverged;
        }
        self.halted = true;
        self.divergences_total += 1;
        out.push(Finality::Divergence { seq, center, first, reported });
    }

    fn advance(&mut self) {
        loop {
            let slot = &self.slots[(self.seq_unfinal_first & self.mask) as usize];
            if slot.seq != self.seq_unfinal_first || slot.status != Status::Final {
                break;
            }
            self.seq_unfinal_first += 1;
        }
    }

    /// Appends the tallies that are not final yet (a checkpoint); read back by [`Finalizer::decode`].
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(self.center_count);
        out.extend_from_slice(&(self.slots.len() as u64).to_le_bytes());
        out.extend_from_slice(&self.seq_unfinal_first.to_le_bytes());
        out.push(u8::from(self.halted));
        out.extend_from_slice(&self.finalized_total.to_le_bytes());
        out.extend_from_slice(&self.divergences_total.to_le_bytes());
        // Only the live part of the ring: from the oldest unfinal seq to the highest acked one.
        let live: Vec<&Slot> = (self.seq_unfinal_first..=self.seq_acked_max)
            .map(|seq| &self.slots[(seq & self.mask) as usize])
            .filter(|s| s.seq >= self.seq_unfinal_first && s.status != Status::Free)
            .collect();
        out.extend_from_slice(&(live.len() as u64).to_le_bytes());
        for s in live {
            out.extend_from_slice(&s.seq.to_le_bytes());
            out.push(s.acked);
            out.extend_from_slice(&s.outcome.code().to_le_bytes());
            out.extend_from_slice(&s.state_hash.to_le_bytes());
            out.push(s.status as u8);
        }
    }

    pub fn decode(buf: &[u8]) -> Option<(Finalizer, usize)> {
        let mut at = 0usize;
        let mut take = |n: usize| -> Option<&[u8]> {
            let s = buf.get(at..at + n)?;
            at += n;
            Some(s)
        };
        let u64_of = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or([0; 8]));
        let center_count = usize::from(take(1)?[0]);
        let window = usize::try_from(u64_of(take(8)?)).ok()?;
        if !window.is_power_of_two() || !(1..=CENTER_COUNT_MAX).contains(&center_count) || window > 1 << 26 {
            return None;
        }
        let first = u64_of(take(8)?);
        if first == 0 {
            return None;
        }
        let mut f = Finalizer::with_window(center_count, window, first);
        f.halted = take(1)?[0] != 0;
        f.finalized_total = u64_of(take(8)?);
        f.divergences_total = u64_of(take(8)?);
        let n = u64_of(take(8)?);
        for _ in 0..n {
            let seq = u64_of(take(8)?);
            let acked = take(1)?[0];
            let outcome = Outcome::from_code(u16::from_le_bytes(take(2)?.try_into().ok()?))?;
            let state_hash = u64_of(take(8)?);
            let status = match take(1)?[0] {
                1 => Status::Pending,
                2 => Status::Final,
                3 => Status::Diverged,
                _ => return None,
            };
            let centers_mask = ((1u16 << center_count) - 1) as u8;
            if seq < first || seq >= f.seq_window_end() || acked & !centers_mask != 0 {
                return None;
            }
            f.slots[(seq & f.mask) as usize] = Slot { seq, acked, outcome, state_hash, status };
            f.seq_acked_max = f.seq_acked_max.max(seq);
        }
        Some((f, at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::RejectReason;
    use proptest::prelude::*;

    fn ack(seq: Seq, outcome: Outcome, h: u64) -> Applied {
        Applied { seq, outcome, state_hash: h }
    }

    #[test]
    fn final_at_quorum_exactly_once() {
        let mut f = Finalizer::with_window(3, 8, 1);
        let mut out = Vec::new();
        let rj = Outcome::Rejected(RejectReason::InsufficientFunds);
        assert_eq!(f.handle_ack(CenterId(1), ack(1, rj, 7), &mut out), AckResult::Counted);
        assert_eq!(f.status(1), SeqStatus::Pending { acks: 1 });
        assert_eq!(f.status(1).iso_status(), Some("ACSP"));
        assert_eq!(f.handle_ack(CenterId(1), ack(1, rj, 7), &mut out), AckResult::Duplicate);
        assert!(out.is_empty(), "one center is not a quorum, however often it acks");
        f.handle_ack(CenterId(3), ack(1, rj, 7), &mut out);
        assert_eq!(out, vec![Finality::Final { seq: 1, outcome: rj, state_hash: 7 }]);
        f.handle_ack(CenterId(2), ack(1, rj, 7), &mut out);
        assert_eq!(out.len(), 1, "third ack does not finalize again");
        assert_eq!(f.status(1), SeqStatus::Final(rj));
        assert_eq!(f.status(1).iso_status(), Some("RJCT"));
        assert_eq!(iso_final_status(Outcome::Accepted), "ACCC");
        assert_eq!(f.seq_unfinal_first(), 2);
    }

    #[test]
    fn divergence_halts_and_picks_no_side() {
        let mut f = Finalizer::with_window(3, 8, 1);
        let mut out = Vec::new();
        f.handle_ack(CenterId(1), ack(1, Outcome::Accepted, 1), &mut out);
        f.handle_ack(CenterId(2), ack(1, Outcome::Accepted, 2), &mut out);
        assert!(matches!(out[..], [Finality::Divergence { seq: 1, center: CenterId(2), .. }]));
        f.handle_ack(CenterId(3), ack(1, Outcome::Accepted, 1), &mut out);
        assert_eq!(f.status(1), SeqStatus::Diverged);
        f.handle_ack(CenterId(1), ack(2, Outcome::Accepted, 5), &mut out);
        f.handle_ack(CenterId(3), ack(2, Outcome::Accepted, 5), &mut out);
        assert!(!out.iter().any(|x| matches!(x, Finality::Final { .. })), "halted: nothing final");
        assert!(f.is_halted());
    }

    #[test]
    fn late_mismatch_after_final_is_reported() {
        let mut f = Finalizer::with_window(3, 8, 1);
        let mut out = Vec::new();
        f.handle_ack(CenterId(1), ack(1, Outcome::Accepted, 1), &mut out);
        f.handle_ack(CenterId(2), ack(1, Outcome::Accepted, 1), &mut out);
        f.handle_ack(CenterId(3), ack(1, Outcome::Accepted, 9), &mut out);
        assert!(matches!(out[1], Finality::Divergence { center: CenterId(3), .. }));
        assert_eq!(f.divergences_total(), 1);
    }

    #[test]
    fn window_defers_far_acks_and_out_of_range_is_invalid() {
        let mut f = Finalizer::with_window(3, 4, 1);
        let mut out = Vec::new();
        assert_eq!(f.handle_ack(CenterId(1), ack(5, Outcome::Accepted, 1), &mut out), AckResult::Deferred);
        assert_eq!(f.handle_ack(CenterId(4), ack(1, Outcome::Accepted, 1), &mut out), AckResult::Invalid);
        assert_eq!(f.handle_ack(CenterId(1), ack(0, Outcome::Accepted, 1), &mut out), AckResult::Invalid);
        for c in 1..=2 {
            f.handle_ack(CenterId(c), ack(1, Outcome::Accepted, 1), &mut out);
        }
        assert_eq!(f.handle_ack(CenterId(1), ack(5, Outcome::Accepted, 1), &mut out), AckResult::Counted);
        assert_eq!(f.handle_ack(CenterId(3), ack(1, Outcome::Accepted, 1), &mut out), AckResult::Late);
    }

    #[test]
    fn checkpoint_round_trip_keeps_pending_tallies() {
        let mut f = Finalizer::with_window(3, 8, 1);
        let mut out = Vec::new();
        f.handle_ack(CenterId(1), ack(1, Outcome::Accepted, 1), &mut out);
        f.handle_ack(CenterId(2), ack(1, Outcome::Accepted, 1), &mut out);
        f.handle_ack(CenterId(2), ack(2, Outcome::Accepted, 2), &mut out);
        let mut buf = Vec::new();
        f.encode(&mut buf);
        let (mut g, used) = Finalizer::decode(&buf).unwrap_or_else(|| panic!("decode"));
        assert_eq!(used, buf.len());
        assert_eq!(g.seq_unfinal_first(), 2);
        assert_eq!(g.status(2), SeqStatus::Pending { acks: 1 });
        out.clear();
        g.handle_ack(CenterId(3), ack(2, Outcome::Accepted, 2), &mut out);
        assert_eq!(out, vec![Finality::Final { seq: 2, outcome: Outcome::Accepted, state_hash: 2 }]);
        assert!(Finalizer::decode(&buf[..buf.len() - 1]).is_none());
    }

    proptest! {
        /// Random delivery of acks (with duplicates) from `n` honest centers: every seq becomes
        /// final exactly once, only after a quorum of distinct centers acked it.
        #[test]
        fn exactly_once_with_quorum(n in 1usize..=5, seqs in 1u64..40, order in proptest::collection::vec(any::<u64>(), 0..400)) {
            let mut f = Finalizer::with_window(n, 64, 1);
            let mut acks: Vec<(u8, u64)> = (1..=seqs).flat_map(|s| (1..=n as u8).map(move |c| (c, s))).collect();
            acks.extend(order.iter().map(|x| ((x % n as u64) as u8 + 1, 1 + (x >> 8) % seqs)));
            for i in (1..acks.len()).rev() {
                let j = (order.get(i).copied().unwrap_or(7 * i as u64) % (i as u64 + 1)) as usize;
                acks.swap(i, j);
            }
            let mut seen: std::collections::HashMap<u64, std::collections::HashSet<u8>> = Default::default();
            let mut finals = std::collections::HashSet::new();
            let mut out = Vec::new();
            for (c, s) in acks {
                seen.entry(s).or_default().insert(c);
                out.clear();
                f.handle_ack(CenterId(c), ack(s, Outcome::Accepted, s * 3), &mut out);
                for e in &out {
                    match e {
                        Finality::Final { seq, .. } => {
                            prop_assert!(finals.insert(*seq), "finalized twice");
                            prop_assert!(seen[seq].len() > n / 2, "final without quorum");
                        }
                        Finality::Divergence { .. } => prop_assert!(false, "honest centers diverged"),
                    }
                }
            }
            prop_assert_eq!(finals.len() as u64, seqs);
            prop_assert_eq!(f.seq_unfinal_first(), seqs + 1);
        }
    }
}
