//! What the API knows about the `bmi`s submitted through it: content, owner, seq, status.
//!
//! The embedded engine tells its client about an entry twice at most: a refusal (a retry or a
//! conflicting reuse of a `bmi`, with the original seq) or the final notice (seq and outcome) —
//! there is no "sequenced" event. The tracker therefore keeps, per `bmi`, the content and the
//! participant that submitted it (so a retry is recognised without submitting anything) and the
//! seq and outcome once they are announced, and wakes the requests waiting for them. Bounded
//! ([`TRACKED_TRANSFERS_MAX`]): the oldest records are forgotten first.

use crate::limits::TRACKED_TRANSFERS_MAX;
use rtgs_core::entry::{Bmi, Outcome, Payload, Seq};
use rtgs_core::sequencer::Admission;
use rtgs_embedded::cluster::{Notice, Refusal};
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use tokio::sync::oneshot;

/// What a submission learns from the engine.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Journaled at this seq (newly, or earlier: a retry).
    Accepted(Seq),
    /// The `bmi` was journaled at this seq with different content: nothing journaled.
    Conflict(Seq),
}

/// The tracker's verdict on a submission, before anything is sent to the engine.
pub enum Admit {
    /// First time: submit it; the answer arrives on the receiver.
    Submit(oneshot::Receiver<Answer>),
    /// A retry whose seq is known.
    Known(Seq),
    /// A retry of a submission still waiting for its seq.
    Wait(oneshot::Receiver<Answer>),
    /// Same `bmi`, different content or participant (the original's seq, if known).
    Conflict(Option<Seq>),
}

/// A tracked `bmi`'s status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    pub owner: String,
    pub seq: Option<Seq>,
    /// `None` until final (ACSP).
    pub outcome: Option<Outcome>,
}

struct Record {
    owner: String,
    payload: Payload,
    seq: Option<Seq>,
    outcome: Option<Outcome>,
    waiters: Vec<oneshot::Sender<Answer>>,
}

#[derive(Default)]
struct Inner {
    records: HashMap<Bmi, Record>,
    /// Insertion order, for eviction.
    order: VecDeque<Bmi>,
}

#[derive(Default)]
pub struct Tracker {
    inner: Mutex<Inner>,
}

impl Tracker {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves consistent data (every update is one assignment).
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn admit(&self, bmi: Bmi, owner: &str, payload: &Payload) -> Admit {
        let mut inner = self.lock();
        if let Some(r) = inner.records.get_mut(&bmi) {
            if r.owner != owner || r.payload != *payload {
                return Admit::Conflict(r.seq);
            }
            if let Some(seq) = r.seq {
                return Admit::Known(seq);
            }
            let (tx, rx) = oneshot::channel();
            r.waiters.push(tx);
            return Admit::Wait(rx);
        }
        let (tx, rx) = oneshot::channel();
        let record = Record {
            owner: owner.to_string(),
            payload: payload.clone(),
            seq: None,
            outcome: None,
            waiters: vec![tx],
        };
        inner.records.insert(bmi, record);
        inner.order.push_back(bmi);
        while inner.order.len() > TRACKED_TRANSFERS_MAX {
            if let Some(old) = inner.order.pop_front() {
                inner.records.remove(&old);
            }
        }
        Admit::Submit(rx)
    }

    /// Forgets a submission the engine never received (it was closed).
    pub fn forget(&self, bmi: Bmi) {
        let mut inner = self.lock();
        if inner.records.get(&bmi).is_some_and(|r| r.seq.is_none()) {
            inner.records.remove(&bmi);
            inner.order.retain(|b| *b != bmi);
        }
    }

    pub fn status(&self, bmi: Bmi) -> Option<Status> {
        let inner = self.lock();
        inner.records.get(&bmi).map(|r| Status { owner: r.owner.clone(), seq: r.seq, outcome: r.outcome })
    }

    /// Final notices from the engine. Returns the highest seq among them.
    pub fn on_final(&self, notices: &[Notice]) -> Seq {
        let mut inner = self.lock();
        let mut seq_max = 0;
        for n in notices {
            seq_max = seq_max.max(n.seq);
            if let Some(r) = inner.records.get_mut(&n.bmi) {
                r.seq = Some(n.seq);
                r.outcome = Some(n.outcome);
                for w in r.waiters.drain(..) {
                    let _ = w.send(Answer::Accepted(n.seq));
                }
            }
        }
        seq_max
    }

    /// Refusals from the engine: a retry the tracker had forgotten, or a `bmi` already journaled
    /// with other content (before this process started, or forgotten).
    pub fn on_refused(&self, refusals: &[Refusal]) {
        let mut inner = self.lock();
        for f in refusals {
            let Some(r) = inner.records.get_mut(&f.bmi) else { continue };
            match f.admission {
                Admission::Duplicate(seq) => {
                    r.seq = Some(seq);
                    for w in r.waiters.drain(..) {
                        let _ = w.send(Answer::Accepted(seq));
                    }
                }
                Admission::Conflict(seq) => {
                    // Our record holds content that was never journaled: drop it.
                    for w in r.waiters.drain(..) {
                        let _ = w.send(Answer::Conflict(seq));
                    }
                    if r.seq.is_none() {
                        inner.records.remove(&f.bmi);
                        inner.order.retain(|b| *b != f.bmi);
                    }
                }
                Admission::Sequenced(_) => {}
            }
        }
    }
}
