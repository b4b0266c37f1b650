//! Bounds of the embedded engine, beside the core's (`rtgs_core::limits`).

use rtgs_core::limits::{FINALIZER_WINDOW_SEQS, GAP_BUFFER_SLOTS, SEQUENCER_BATCH_ENTRIES_MAX};

/// Largest number of commands in one submission (one message on the submit queue).
pub const SUBMISSION_COMMANDS_MAX: usize = 1_024;
/// Submissions waiting for the sequencer.
pub const SUBMIT_QUEUE_SUBMISSIONS: usize = 32;
/// Status questions by `bmi` waiting for the sequencer thread (`BmiQueries`); a full queue is
/// "try again" to the asker. At most this many are answered between two batches.
pub const BMI_QUERY_QUEUE: usize = 64;
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
/// Zeros the journal writer keeps written past its frames in the current segment, so that its
/// `fdatasync`s flush data only (see `journal.rs`, "Zeros ahead"); topped up a step with each write.
pub const JOURNAL_ZERO_AHEAD_BYTES: u64 = 4 << 20;
/// Body bytes of one journal frame (a sequencer batch is split into frames at this size).
pub const FRAME_BODY_BYTES_TARGET: usize = 4 << 20;
/// A center writes a checkpoint after applying this many entries since the last one.
pub const CHECKPOINT_INTERVAL_ENTRIES: u64 = 1 << 19;

/// `bmi`s per recent generation of the `bmi` index (two are held exactly in memory, ≈ 25 MiB
/// each): retries within ≈ 200,000–400,000 entries are answered without I/O.
pub const BMI_RECENT_ENTRIES: usize = 196_608;
/// `bmi`s the first filter generation of the `bmi` index holds (32 MiB at 16 bits each); each later
/// generation holds twice as many as the one before, at fewer bits each (100 M `bmi`s: three
/// generations, 152 MiB).
pub const BMI_FILTER_KEYS_FIRST: usize = 1 << 24;
/// Bits per `bmi` of the first filter generation: ≈ 10⁻³ false positives, each a look-up in
/// the recent generations and the runs (the hot path of a young ledger).
pub const BMI_FILTER_BITS_FIRST: usize = 16;
/// Bits per `bmi` of later generations: ≈ 10⁻² false positives, each a look-up in the runs of
/// that generation's seqs only (one or two block reads); 6 bits less per `bmi` is 72 MiB less at
/// 100 M `bmi`s.
pub const BMI_FILTER_BITS_LATER: usize = 10;
/// Runs of one tier merged into one run of the next tier.
pub const BMI_MERGE_FANOUT: usize = 8;
/// Records per block of a run file (16 bytes each: a 4 KiB block, one read per look-up).
pub const BMI_RUN_BLOCK_RECORDS: usize = 256;
/// Generations waiting for the `bmi` index's writer thread before the sequencer waits.
pub const BMI_FROZEN_QUEUE: usize = 4;

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
// A recent generation leaves memory only once its entries are in the journal files (where a
// run's candidate is read back). It is older than what the sequencer can have stamped but the
// writer not yet appended (the write queue, the group in the writer's hands, the batch being
// sent), so in practice the sequencer never waits for that.
const _: () = assert!(BMI_RECENT_ENTRIES > (2 * WRITE_QUEUE_BATCHES + 1) * BATCH_ENTRIES_MAX);
// Whole 512-bit blocks of 16 bits per key.
const _: () = assert!((BMI_FILTER_KEYS_FIRST * BMI_FILTER_BITS_FIRST).is_multiple_of(512));
const _: () = assert!(BMI_FILTER_BITS_LATER >= 8 && BMI_FILTER_BITS_LATER <= BMI_FILTER_BITS_FIRST);
const _: () = assert!(BMI_MERGE_FANOUT >= 2);
const _: () = assert!(FRAME_BODY_BYTES_TARGET * 2 < rtgs_core::limits::FRAME_BYTES_MAX);
