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

/// How a client (the HTTP API) hands commands to an engine: the seam both engines implement.
pub trait EngineSubmit: Send + Sync {
    /// Without blocking: `Err(Some(commands))` when the engine's queue is full (then
    /// [`EngineSubmit::submit`] off any async worker), `Err(None)` when it takes no more.
    fn try_submit(
        &self,
        commands: Vec<crate::entry::Command>,
    ) -> Result<(), Option<Vec<crate::entry::Command>>>;
    /// Blocks while the queue is full (back-pressure); false if the engine takes no more.
    fn submit(&self, commands: Vec<crate::entry::Command>) -> bool;
}

/// What an [`EntryFeed`] answered.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Fed {
    /// Entries were appended (in seq order, continuing the previous ones).
    Entries,
    /// Nothing new within the wait.
    Idle,
    /// The engine is gone: nothing more will come.
    Closed,
}

/// The journal's entries in seq order, as an engine delivers them to a read model (the API's
/// balances, statements and plugin replica): the embedded engine tails its journal files, the
/// production engine forwards what its center applied. Read on a thread of its own.
pub trait EntryFeed: Send {
    /// Appends the next entries to `out`, waiting at most `wait` for some.
    fn next_batch(
        &mut self,
        out: &mut Vec<crate::entry::Entry>,
        wait: std::time::Duration,
    ) -> Result<Fed, String>;
}
