//! Bounds of the embedded engine, beside the core's (`rtgs_core::limits`).

use rtgs_core::limits::{FINALIZER_WINDOW_SEQS, GAP_BUFFER_SLOTS, SEQUENCER_BATCH_ENTRIES_MAX};

/// Largest number of commands in one submission (one message on the submit queue).
pub const SUBMISSION_COMMANDS_MAX: usize = 1_024;
/// Submissions waiting for the sequencer.
pub const SUBMIT_QUEUE_SUBMISSIONS: usize = 32;
/// Sequenced batches waiting for the journal writer.
pub const WRITE_QUEUE_BATCHES: usize = 8;
/// Durable batches waiting for one center to apply them.
pub const JOURNAL_QUEUE_BATCHES: usize = 4;
/// Ack batches waiting for one center's finalizer.
pub const ACK_QUEUE_BATCHES: usize = 8;
/// Notice batches waiting for the client (the demo's reporter).
pub const EVENT_QUEUE_BATCHES: usize = 1_024;
/// Effect batches waiting for the plugins' adapter (the owner keeps the rest in its outbox).
pub const EFFECT_QUEUE_BATCHES: usize = 64;
/// How long the adapter waits for effects before it polls its outside world again.
pub const ADAPTER_POLL_INTERVAL: std::time::Duration = std::time::Duration::from_millis(1);
/// A journal segment file is closed and a new one started past this size.
pub const SEGMENT_BYTES_MAX: u64 = 256 << 20;
/// Body bytes of one journal frame (a sequencer batch is split into frames at this size).
pub const FRAME_BODY_BYTES_TARGET: usize = 4 << 20;
/// A center writes a checkpoint after applying this many entries since the last one.
pub const CHECKPOINT_INTERVAL_ENTRIES: u64 = 1 << 19;

/// A sequencer batch may hold one more submission than the batch limit before it is cut.
pub const BATCH_ENTRIES_MAX: usize = SEQUENCER_BATCH_ENTRIES_MAX + SUBMISSION_COMMANDS_MAX;

// The channels bound how far one center can run ahead of another; that lead must fit the
// finalizer's window so that acks are never deferred in the embedded engine, and one batch must
// fit the gap buffer.
const _: () = assert!(
    (JOURNAL_QUEUE_BATCHES + WRITE_QUEUE_BATCHES + ACK_QUEUE_BATCHES + 2) * BATCH_ENTRIES_MAX
        < FINALIZER_WINDOW_SEQS
);
const _: () = assert!(BATCH_ENTRIES_MAX <= GAP_BUFFER_SLOTS);
const _: () = assert!(FRAME_BODY_BYTES_TARGET * 2 < rtgs_core::limits::FRAME_BYTES_MAX);
