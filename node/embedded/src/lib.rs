//! # rtgs-embedded: the embedded engine (the default)
//!
//! # Layout
//! One process runs the sequencer, three centers and their finalizers (and, optionally, the
//! centers' plugin hosts and the plugins' adapter thread); no services needed.
//!
//! * [`journal`] — segmented, append-only journal files of CRC-checked frames, optionally
//!   mirrored; fsync per group of batches, then a durable mark, before any center sees them; at
//!   open every frame is checked: a torn tail (past the durable end) is cut, corruption refuses
//!   to start, a mirror repairs one copy from the other; a read-only inspection; readers.
//! * [`bmi_index`] — every `bmi` ever sequenced: exact recent generations, Bloom filters, sorted
//!   runs on disk checked against the journal; the sequencer looks a batch up before stamping it.
//! * [`checkpoint`] — each center's durable state (ledger + watermark, finalizer tallies,
//!   retained acks, unannounced outcomes) in one atomically replaced file; the plugin host's
//!   state in its own file, written only when it changed.
//! * [`cluster`] — the threads and bounded queues around the core's state machines: submitters →
//!   sequencer → journal writer (fsync) → centers; the checkpointer; the plugins' adapter.
//! * [`center_thread`] — one center's thread: a thin driver of `rtgs_core::center::Center`
//!   (journal and ack batches in; acks, notices, pulls, effects and checkpoints out).
//! * [`client_link`] — the engine-neutral seam for clients (`rtgs_core::client`): submission,
//!   events, and a [`client_link::JournalFeed`] tailing the journal files for a read model.
//! * [`limits`] — queue capacities, segment size, checkpoint interval.

pub mod bmi_index;
pub mod center_thread;
pub mod checkpoint;
pub mod client_link;
pub mod cluster;
pub mod journal;
pub mod limits;
