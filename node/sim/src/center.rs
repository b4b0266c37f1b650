//! One simulated data center: the core's [`Center`] while it is up, and the durable [`Store`]
//! its driver writes, which survives a crash.
//!
//! The store is what a center's storage holds in the engines: checkpoints of the ledger and the
//! plugin host (written when the center says one is due, as checksummed bytes, the last
//! [`CHECKPOINTS_KEPT`] of them), and from every [`Commit`] the center's own acks (so that it can
//! publish them again when it asks to) and its finality progress (`seq_unfinal_first`, where to
//! read the ack stream again from, which notices are owed). A restart rebuilds a `Center` from
//! it: the newest checkpoint that reads back, the journal replayed from there.

use rtgs_core::center::{Center, Commit, Progress};
use rtgs_core::entry::{CenterId, Seq};
use rtgs_core::ledger::Applied;
use std::collections::VecDeque;

/// Checkpoints a store keeps: a torn write of the next one leaves the previous one whole.
pub const CHECKPOINTS_KEPT: usize = 2;

/// When a crashed center comes back.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Wake {
    At(u64),
    /// Once the journal holds this many entries (a center left far behind).
    JournalLen(u64),
    /// Only after the other centers converged at the end (a center lost for the run).
    Lost,
}

#[derive(Default)]
pub struct Store {
    /// Encoded checkpoints, oldest first.
    pub checkpoints: VecDeque<Vec<u8>>,
    /// This center's committed acks, by seq from 1 (what it publishes again when asked).
    pub acks: Vec<Applied>,
    /// The finality progress of the last commit written (its ranges are in `finals`).
    pub progress: Progress,
    /// Per seq (index `seq - 1`): committed as final here.
    pub finals: Vec<bool>,
}

impl Store {
    fn new() -> Self {
        Store {
            progress: Progress { seq_unfinal_first: 1, seq_notice_from: 1, ..Progress::default() },
            ..Store::default()
        }
    }

    /// Every seq up to here is committed (durably applied, or replayable from the journal).
    pub fn committed_through(&self) -> Seq {
        self.acks.len() as Seq
    }

    /// Writes a commit: its acks (a seq committed again after a restart must ack as before), its
    /// final seqs and its progress, as one durable step.
    pub fn write(&mut self, id: CenterId, commit: &Commit) -> Result<(), String> {
        for a in &commit.applied {
            let i = (a.seq - 1) as usize;
            match self.acks.get(i) {
                Some(before) if before != a => {
                    return Err(format!("{id} committed seq {} as {a:?}, before as {before:?}", a.seq))
                }
                Some(_) => {}
                None if i == self.acks.len() => self.acks.push(*a),
                None => return Err(format!("{id} committed seq {} after seq {}", a.seq, self.acks.len())),
            }
        }
        for &(lo, hi) in &commit.progress.final_ranges {
            if self.finals.len() < hi as usize {
                self.finals.resize(hi as usize, false);
            }
            self.finals[(lo - 1) as usize..hi as usize].fill(true);
        }
        self.progress = Progress { final_ranges: Vec::new(), ..commit.progress.clone() };
        Ok(())
    }

    pub fn push_checkpoint(&mut self, bytes: Vec<u8>) {
        self.checkpoints.push_back(bytes);
        while self.checkpoints.len() > CHECKPOINTS_KEPT {
            self.checkpoints.pop_front();
        }
    }
}

/// A center that is up: the state machine and what its driver keeps beside it (volatile).
pub struct Live {
    pub center: Center,
    /// The next position of the ack stream its reader hands in.
    pub ack_next: u64,
    /// Its ack reader stalls until then (a delay fault).
    pub ack_paused_until_us: u64,
    /// Commits polled and not yet written (the committer is behind; merged when written).
    pub commits: Vec<Commit>,
    /// After a restart: the journal frames its catch-up reader still reads, `next..end`.
    pub catch_up: Option<(usize, usize)>,
    /// The highest journal frame delivered to it (to count reorderings).
    pub frame_max: Option<usize>,
}

pub struct SimCenter {
    pub id: CenterId,
    pub store: Store,
    /// `None` while down.
    pub live: Option<Live>,
    /// When it comes back, while down.
    pub wake: Wake,
}

impl SimCenter {
    pub fn new(id: CenterId) -> Self {
        SimCenter { id, store: Store::new(), live: None, wake: Wake::At(0) }
    }

    pub fn is_up(&self) -> bool {
        self.live.is_some()
    }

    pub fn center(&self) -> Option<&Center> {
        self.live.as_ref().map(|l| &l.center)
    }
}
