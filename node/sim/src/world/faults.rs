//! The faults: how often each kind hits per fault level, the per-step injection, and the plan of
//! the two orchestrated ones.
//!
//! * **A center lost for the run**: early in the fault phase one center (with plugins, the
//!   owner half of the time) goes down until the others have converged at the end. The owner's
//!   work must move by the centers' own failure detector, and finality runs on a quorum of the
//!   rest — so every ack of theirs is needed: a lost ack message must be asked for again.
//! * **A center far behind**: a center stays down until the journal has grown by several tally
//!   windows, then restarts more than a window behind the others: the acks it reads of the
//!   centers ahead are beyond its window, dropped, and must be read again. If a center is lost
//!   at the time, this is the case that deadlocked production finality (one center down,
//!   another restarted more than a window behind the third); if not, the two others finalize
//!   without it and will never publish their acks again on their own. Until it has finalized
//!   what was journaled when it restarted, no other fault is injected: a restart reads the ack
//!   stream again too, and a lost ack or a slow read makes another center's finality stand
//!   still and publish its acks again — either would hide a missing rewind.

use super::{Check, World, DELAY_US};
use crate::center::Wake;
use crate::storage::flip_bit;
use crate::Faults;
use rtgs_core::prng::Prng;

/// Probabilities per 10,000, indexed by fault level.
pub const DUPLICATE: [u64; 4] = [0, 200, 500, 1_000];
pub const DELAY: [u64; 4] = [0, 200, 500, 1_000];
/// Journal deliveries.
pub const DROP: [u64; 4] = [0, 100, 300, 600];
/// Per ack message published: it never reaches the stream.
pub const ACK_LOSS: [u64; 4] = [0, 100, 300, 600];
/// Per step and center: its ack reader stalls for a delay.
pub const ACK_READ_DELAY: [u64; 4] = [0, 2, 5, 10];
/// Per step.
const CENTER_CRASH: [u64; 4] = [0, 5, 15, 30];
/// Per step.
const SEQUENCER_CRASH: [u64; 4] = [0, 5, 10, 20];
/// At each point where a crash splits a durable write from what follows it.
pub const CRASH_POINT: [u64; 4] = [0, 5, 15, 30];
/// Per step: a bit flips in a durable journal frame (one copy) or in a stored checkpoint.
const JOURNAL_FLIP_AT_REST: [u64; 4] = [0, 2, 5, 10];
const CHECKPOINT_FLIP: [u64; 4] = [0, 2, 5, 10];
/// Per journal message delivered: a bit flips in flight.
pub const JOURNAL_FLIP_IN_FLIGHT: [u64; 4] = [0, 20, 50, 100];
/// Per journal append: the sequencer crashes in the middle of it.
pub const JOURNAL_TORN: [u64; 4] = [0, 20, 50, 100];
/// Per checkpoint write: the center crashes in the middle of it.
pub const CHECKPOINT_TORN: [u64; 4] = [0, 100, 300, 600];
/// Per run, in percent (clusters of 3 or more): a center is lost for the run; a center is left
/// far behind (always when one is lost).
const CENTER_LOST_PERCENT: [u64; 4] = [0, 0, 33, 50];
const FAR_BEHIND_PERCENT: [u64; 4] = [0, 0, 50, 75];

/// How long a crashed process stays down.
pub const CENTER_DOWN_US: (u64, u64) = (2_000, 50_000);
pub const SEQUENCER_DOWN_US: (u64, u64) = (1_000, 30_000);
/// How far (in seqs) the journal grows past a center left far behind before it restarts: two
/// tally windows.
const FAR_BEHIND_SEQS: u64 = 2 * super::centers::FINALIZER_WINDOW_SEQS as u64;

pub struct FaultSwitch {
    pub enabled: bool,
    /// While a center far behind catches up (see the module docs).
    pub paused: bool,
    pub level: usize,
    pub counts: Faults,
}

impl FaultSwitch {
    pub fn hit(&self, prng: &mut Prng, per_10k: &[u64; 4]) -> bool {
        let p = if self.enabled && !self.paused { per_10k[self.level] } else { 0 };
        p > 0 && prng.chance(p, 10_000)
    }
}

/// The run's shape, drawn at the start.
pub struct Plan {
    pub fault_steps: u64,
    /// The step at which a center is lost for the run.
    lost_at_step: Option<u64>,
    /// The step at which another center is left far behind.
    far_behind_at_step: Option<u64>,
    /// A center restarted far behind, and the journal's length then: no other fault until it
    /// has finalized that far.
    pub catching_up: Option<(usize, u64)>,
}

impl Plan {
    pub fn new(prng: &mut Prng, level: usize, centers: usize, fault_steps: u64) -> Self {
        // Early, while the workload still flows (the clients have sent it all about a third of
        // the way through the fault phase): the journal must grow past the center behind.
        let early = |prng: &mut Prng| prng.range(fault_steps / 20, fault_steps / 8);
        let lost = centers >= 3 && prng.chance(CENTER_LOST_PERCENT[level], 100);
        let lost_at_step = lost.then(|| early(prng));
        let far_behind_at_step = match lost_at_step {
            Some(at) => Some(at + prng.range(fault_steps / 80, fault_steps / 16)),
            None => (centers >= 3 && prng.chance(FAR_BEHIND_PERCENT[level], 100)).then(|| early(prng)),
        };
        Plan { fault_steps, lost_at_step, far_behind_at_step, catching_up: None }
    }
}

impl World {
    pub(super) fn crash_point(&mut self) -> bool {
        self.faults.hit(&mut self.prng, &CRASH_POINT)
    }

    pub(super) fn inject_faults(&mut self) -> Check {
        if let Some((i, len)) = self.plan.catching_up {
            if self.centers[i].center().is_none_or(|c| c.seq_unfinal_first() > len) {
                self.plan.catching_up = None;
                self.faults.paused = false;
            }
        }
        if self.faults.hit(&mut self.prng, &CENTER_CRASH) {
            let i = self.prng.below(self.centers.len() as u64) as usize;
            let wake = self.wake_after(CENTER_DOWN_US);
            self.try_crash_center(i, wake);
        }
        if self.faults.hit(&mut self.prng, &SEQUENCER_CRASH) && self.sequencer.leader.is_some() {
            self.crash_sequencer();
        }
        if self.faults.hit(&mut self.prng, &JOURNAL_FLIP_AT_REST)
            && self.sequencer.store.flip_at_rest(&mut self.prng)
        {
            self.faults.counts.journal_bit_flips += 1;
        }
        if self.faults.hit(&mut self.prng, &CHECKPOINT_FLIP) {
            self.flip_a_checkpoint();
        }
        if self.faults.enabled && Some(self.step) == self.plan.lost_at_step {
            self.lose_a_center();
        }
        if self.faults.enabled && Some(self.step) == self.plan.far_behind_at_step {
            self.leave_a_center_behind();
        }
        Ok(())
    }

    pub(super) fn wake_after(&mut self, (lo, hi): (u64, u64)) -> Wake {
        Wake::At(self.now_us + self.prng.range(lo, hi))
    }

    /// A delay fault's due time.
    pub(super) fn delayed(&mut self) -> u64 {
        self.now_us + self.prng.range(DELAY_US.0, DELAY_US.1)
    }

    fn flip_a_checkpoint(&mut self) {
        let i = self.prng.below(self.centers.len() as u64) as usize;
        let cps = &mut self.centers[i].store.checkpoints;
        if cps.is_empty() {
            return;
        }
        let k = self.prng.below(cps.len() as u64) as usize;
        flip_bit(&mut cps[k], &mut self.prng);
        self.faults.counts.checkpoint_bit_flips += 1;
    }

    /// With plugins, the owner half of the time (its work must move); otherwise any center up.
    fn lose_a_center(&mut self) {
        let owner = self.first_host().and_then(|h| h.kinds().next().and_then(|k| h.owner(k)));
        let n = self.centers.len() as u64;
        let i = match owner {
            Some((owner, _)) if self.prng.chance(1, 2) => owner.index(),
            _ => self.prng.below(n) as usize,
        };
        if self.try_crash_center(i, Wake::Lost) {
            self.faults.counts.centers_lost += 1;
        }
    }

    /// A center stays down until the journal has grown well past it (its restart counts as far
    /// behind if it is then more than a window behind).
    fn leave_a_center_behind(&mut self) {
        let candidates: Vec<usize> = (0..self.centers.len()).filter(|&i| self.centers[i].is_up()).collect();
        if candidates.len() < 2 {
            return;
        }
        let i = candidates[self.prng.below(candidates.len() as u64) as usize];
        let until = self.sequencer.truth.len() as u64 + FAR_BEHIND_SEQS;
        self.try_crash_center(i, Wake::JournalLen(until));
    }

    /// Restarts what is due; a center left far behind counts as such when it restarts.
    pub(super) fn restart_due(&mut self) -> Check {
        let len = self.sequencer.truth.len() as u64;
        for i in 0..self.centers.len() {
            let c = &self.centers[i];
            if c.is_up() {
                continue;
            }
            let due = match c.wake {
                Wake::At(t) => t <= self.now_us,
                Wake::JournalLen(l) => l <= len,
                Wake::Lost => false,
            };
            if !due {
                continue;
            }
            self.start_after_down(i)?;
        }
        if self.sequencer.leader.is_none() && self.sequencer.down_until_us <= self.now_us {
            self.restart_sequencer()?;
        }
        Ok(())
    }

    /// Restarts center `i`; one left far behind starts its catch-up episode.
    pub(super) fn start_after_down(&mut self, i: usize) -> Check {
        let len = self.sequencer.truth.len() as u64;
        let c = &self.centers[i];
        let behind = len.saturating_sub(c.store.committed_through());
        if matches!(c.wake, Wake::JournalLen(_)) && behind > super::centers::FINALIZER_WINDOW_SEQS as u64 {
            self.faults.counts.far_behind += 1;
            self.plan.catching_up = Some((i, len));
            self.faults.paused = true;
        }
        self.start_center(i)
    }
}
