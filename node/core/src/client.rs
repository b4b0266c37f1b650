//! What an engine tells its clients (the API, the demo's reporter): final statuses of the
//! entries submitted through a center, and the sequencer's refusals. Engine-neutral: both
//! engines produce these, and the API consumes them without knowing which engine runs.

use crate::entry::{Bmi, CenterId, Outcome, Seq};
use crate::sequencer::Admission;

/// Final status of an own-origin entry, announced by its origin center (at least once).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    pub center: CenterId,
    pub seq: Seq,
    pub bmi: Bmi,
    pub outcome: Outcome,
    /// When it was submitted (µs on the engine's clock); 0 when unknown (e.g. after a restart).
    pub submitted_at_us: u64,
}

/// A command the sequencer did not journal (a retry or a conflicting reuse of a `bmi`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub bmi: Bmi,
    pub admission: Admission,
    pub submitted_at_us: u64,
}

/// What an engine tells its client.
#[derive(Clone, Debug)]
pub enum ClientEvent {
    Final(Vec<Notice>),
    Refused(Vec<Refusal>),
    /// Two centers disagree: finality has halted. Never expected; the node must be inspected.
    Divergence(String),
}
