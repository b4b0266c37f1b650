//! What the API knows about the `bmi`s submitted through it: content, owner, seq, status.
//! Keyed by the `bmi` as journaled — a participant's scoped key ([`crate::scope`]), so one
//! participant's records are never another's.
//!
//! The embedded engine tells its client about an entry twice at most: a refusal (a retry or a
//! conflicting reuse of a `bmi`, with the original seq) or the final notice (seq and outcome) —
//! there is no "sequenced" event. The tracker therefore keeps, per `bmi`, the content and the
//! participant that submitted it (so a retry is recognised without submitting anything) and the
//! seq and outcome once they are announced, and wakes the requests waiting for them. Bounded
//! ([`TRACKED_TRANSFERS_MAX`]): the oldest records are forgotten first; a retry of a forgotten
//! one is submitted again and answered by the engine (`Duplicate`: the original seq; its
//! outcome is then the read model's, `server::with_outcome`).
//!
//! Records are keyed by the `bmi` itself under the standard library's randomly keyed SipHash:
//! participants choose `bmi`s, so a key they could compute (the unkeyed 128-bit fingerprint, a
//! mixer) would let one make its `bmi` collide with another's and have that one answered
//! `bmi_conflict`. ~20 ns a request.

use crate::limits::TRACKED_TRANSFERS_MAX;
use rtgs_core::client::{Notice, Refusal};
use rtgs_core::entry::{Bmi, Outcome, Payload, Seq};
use rtgs_core::sequencer::Admission;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// What a submission learns from the engine.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Journaled at this seq (newly, or earlier: a retry).
    Accepted(Seq),
    /// The `bmi` was journaled at this seq with different content: nothing journaled.
    Conflict(Seq),
    /// The engine did not take the submission (it is stopped): nothing journaled.
    Unavailable,
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
    pub owner: Arc<str>,
    pub seq: Option<Seq>,
    /// `None` until final (ACSP).
    pub outcome: Option<Outcome>,
}

struct Record {
    owner: Arc<str>,
    payload: Payload,
    seq: Option<Seq>,
    outcome: Option<Outcome>,
    /// The submitter's, then retries' (no allocation for the usual single waiter).
    waiter: Option<oneshot::Sender<Answer>>,
    more_waiters: Vec<oneshot::Sender<Answer>>,
}

impl Record {
    fn answer(&mut self, answer: Answer) {
        if let Some(w) = self.waiter.take() {
            let _ = w.send(answer);
        }
        for w in self.more_waiters.drain(..) {
            let _ = w.send(answer);
        }
    }
}

#[derive(Default)]
struct Inner {
    records: HashMap<Bmi, Record>,
    /// Insertion order, for eviction.
    order: VecDeque<Bmi>,
}

pub struct Tracker {
    inner: Mutex<Inner>,
    records_max: usize,
    /// Woken after every batch of notices or refusals (long-polls wait on it).
    changed: tokio::sync::Notify,
}

impl Default for Tracker {
    fn default() -> Self {
        Tracker::with_capacity(TRACKED_TRANSFERS_MAX)
    }
}

impl Tracker {
    pub fn with_capacity(records_max: usize) -> Self {
        Tracker { inner: Mutex::default(), records_max, changed: tokio::sync::Notify::new() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves consistent data (every update is one assignment).
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn admit(&self, bmi: Bmi, owner: &Arc<str>, payload: &Payload) -> Admit {
        let mut inner = self.lock();
        self.admit_locked(&mut inner, bmi, owner, payload)
    }

    /// [`Tracker::admit`] for many, under one lock (batches).
    pub fn admit_many<'a>(
        &self,
        owner: &Arc<str>,
        items: impl Iterator<Item = (Bmi, &'a Payload)>,
    ) -> Vec<Admit> {
        let mut inner = self.lock();
        items.map(|(bmi, payload)| self.admit_locked(&mut inner, bmi, owner, payload)).collect()
    }

    fn admit_locked(&self, inner: &mut Inner, bmi: Bmi, owner: &Arc<str>, payload: &Payload) -> Admit {
        let key = bmi;
        if let Some(r) = inner.records.get_mut(&key) {
            if r.owner != *owner || r.payload != *payload {
                return Admit::Conflict(r.seq);
            }
            if let Some(seq) = r.seq {
                return Admit::Known(seq);
            }
            let (tx, rx) = oneshot::channel();
            r.more_waiters.push(tx);
            return Admit::Wait(rx);
        }
        let (tx, rx) = oneshot::channel();
        let record = Record {
            owner: Arc::clone(owner),
            payload: payload.clone(),
            seq: None,
            outcome: None,
            waiter: Some(tx),
            more_waiters: Vec::new(),
        };
        inner.records.insert(key, record);
        inner.order.push_back(key);
        while inner.order.len() > self.records_max {
            if let Some(old) = inner.order.pop_front() {
                inner.records.remove(&old);
            }
        }
        Admit::Submit(rx)
    }

    /// Forgets a submission the engine never received (it was closed); retries waiting for it
    /// are told so.
    pub fn forget(&self, bmi: Bmi) {
        let key = bmi;
        let mut inner = self.lock();
        if inner.records.get(&key).is_some_and(|r| r.seq.is_none()) {
            if let Some(mut r) = inner.records.remove(&key) {
                r.answer(Answer::Unavailable);
            }
            inner.order.retain(|b| *b != key);
        }
    }

    pub fn len(&self) -> usize {
        self.lock().records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// For each `bmi`, under one lock: whether the tracker holds it.
    pub fn known(&self, bmis: impl Iterator<Item = Bmi>) -> Vec<bool> {
        let inner = self.lock();
        bmis.map(|b| inner.records.contains_key(&b)).collect()
    }

    pub fn status(&self, bmi: Bmi) -> Option<Status> {
        let inner = self.lock();
        inner.records.get(&bmi).map(|r| Status {
            owner: Arc::clone(&r.owner),
            seq: r.seq,
            outcome: r.outcome,
        })
    }

    /// Resolves after the next batch of notices or refusals; create it *before* checking the
    /// status, so that a notice in between is not missed.
    pub fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }

    /// Final notices from the engine.
    pub fn on_final(&self, notices: &[Notice]) {
        self.record_final(notices);
        self.changed.notify_waiters();
    }

    fn record_final(&self, notices: &[Notice]) {
        let mut inner = self.lock();
        for n in notices {
            if n.bmi.is_none() {
                continue;
            }
            if let Some(r) = inner.records.get_mut(&n.bmi) {
                r.seq = Some(n.seq);
                r.outcome = Some(n.outcome);
                r.answer(Answer::Accepted(n.seq));
            }
        }
    }

    /// Refusals from the engine: a retry the tracker had forgotten, or a `bmi` already journaled
    /// with other content (before this process started, or forgotten).
    pub fn on_refused(&self, refusals: &[Refusal]) {
        self.record_refused(refusals);
        self.changed.notify_waiters();
    }

    fn record_refused(&self, refusals: &[Refusal]) {
        let mut inner = self.lock();
        for f in refusals {
            let key = f.bmi;
            let Some(r) = inner.records.get_mut(&key) else { continue };
            match f.admission {
                Admission::Duplicate(seq) => {
                    r.seq = Some(seq);
                    r.answer(Answer::Accepted(seq));
                }
                Admission::Conflict(seq) => {
                    // Our record holds content that was never journaled: drop it.
                    r.answer(Answer::Conflict(seq));
                    if r.seq.is_none() {
                        inner.records.remove(&key);
                        inner.order.retain(|b| *b != key);
                    }
                }
                Admission::Sequenced(_) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtgs_core::entry::{AccountId, CenterId, Currency, RejectReason, Transfer};

    fn bmi(text: &str) -> Bmi {
        Bmi::new(text.as_bytes()).unwrap_or(Bmi::NONE)
    }

    fn payment(amount_minor: u64) -> Payload {
        let currency = Currency::new(b"EUR").unwrap_or_else(|_| unreachable!());
        Payload::Transfer(Transfer { debtor: AccountId(1), creditor: AccountId(2), amount_minor, currency })
    }

    fn notice(b: &str, seq: Seq, outcome: Outcome) -> Notice {
        Notice { center: CenterId(1), seq, bmi: bmi(b), outcome, submitted_at_us: 0 }
    }

    fn refusal(b: &str, admission: Admission) -> Refusal {
        Refusal { bmi: bmi(b), admission, submitted_at_us: 0 }
    }

    #[test]
    fn a_retry_waits_for_then_gets_the_original_seq_and_other_content_conflicts() {
        let t = Tracker::default();
        let (a, b): (Arc<str>, Arc<str>) = (Arc::from("bank-a"), Arc::from("bank-b"));
        let Admit::Submit(mut first) = t.admit(bmi("T1"), &a, &payment(100)) else { panic!("new bmi") };
        let Admit::Wait(mut retry) = t.admit(bmi("T1"), &a, &payment(100)) else { panic!("retry waits") };
        assert!(matches!(t.admit(bmi("T1"), &a, &payment(101)), Admit::Conflict(None)));
        assert!(matches!(t.admit(bmi("T1"), &b, &payment(100)), Admit::Conflict(None)));
        t.on_final(&[notice("T1", 7, Outcome::Rejected(RejectReason::InsufficientFunds))]);
        assert_eq!(first.try_recv(), Ok(Answer::Accepted(7)));
        assert_eq!(retry.try_recv(), Ok(Answer::Accepted(7)));
        assert!(matches!(t.admit(bmi("T1"), &a, &payment(100)), Admit::Known(7)));
        assert!(matches!(t.admit(bmi("T1"), &a, &payment(1)), Admit::Conflict(Some(7))));
        let status = t.status(bmi("T1"));
        assert_eq!(status.map(|s| s.outcome), Some(Some(Outcome::Rejected(RejectReason::InsufficientFunds))));
    }

    #[test]
    fn engine_refusals_answer_waiters() {
        let t = Tracker::default();
        let a: Arc<str> = Arc::from("bank-a");
        let Admit::Submit(mut dup) = t.admit(bmi("D"), &a, &payment(1)) else { panic!("new") };
        let Admit::Submit(mut conflict) = t.admit(bmi("C"), &a, &payment(1)) else { panic!("new") };
        t.on_refused(&[refusal("D", Admission::Duplicate(3)), refusal("C", Admission::Conflict(4))]);
        assert_eq!(dup.try_recv(), Ok(Answer::Accepted(3)));
        assert_eq!(conflict.try_recv(), Ok(Answer::Conflict(4)));
        // A retry of "D" is answered from memory; "C"'s content was never journaled: forgotten.
        assert!(matches!(t.admit(bmi("D"), &a, &payment(1)), Admit::Known(3)));
        assert_eq!(t.status(bmi("C")), None);
        assert_eq!(t.status(bmi("D")).map(|s| (s.seq, s.outcome)), Some((Some(3), None)));
    }

    #[test]
    fn the_oldest_records_are_forgotten_beyond_capacity() {
        let t = Tracker::with_capacity(2);
        let a: Arc<str> = Arc::from("bank-a");
        for name in ["E1", "E2", "E3"] {
            assert!(matches!(t.admit(bmi(name), &a, &payment(1)), Admit::Submit(_)));
        }
        assert_eq!(t.status(bmi("E1")), None);
        assert!(t.status(bmi("E2")).is_some() && t.status(bmi("E3")).is_some());
        let Admit::Wait(mut retry) = t.admit(bmi("E3"), &a, &payment(1)) else { panic!("retry waits") };
        t.forget(bmi("E3"));
        assert_eq!(t.status(bmi("E3")), None);
        assert_eq!(retry.try_recv(), Ok(Answer::Unavailable));
    }
}
