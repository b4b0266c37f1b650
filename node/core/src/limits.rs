//! Every bound of the core in one place (TigerBeetle's `constants.zig`).
//!
//! Sizes are chosen for the embedded demo on a small host (10 M transfers in ≤ 512 MiB RSS) and
//! for a 40-core host alike; the `const` assertions at the bottom keep their relations honest.

/// Largest number of entries the sequencer stamps in one batch (one journal frame, one fsync).
pub const SEQUENCER_BATCH_ENTRIES_MAX: usize = 8_192;

/// Slots of a center's gap buffer: how far ahead of the applied watermark deliveries may land.
pub const GAP_BUFFER_SLOTS: usize = 1 << 16;

/// How long a hole in the delivered sequence may wait before it is reported (never skipped).
pub const GAP_TIMEOUT_US: u64 = 200_000;

/// The sequencer stamps a `Tick` at least this often, idle or loaded (plugin timers run on it).
pub const TICK_INTERVAL_US: u64 = 1_000_000;

/// Finality standing still this long while the center has committed the oldest unfinal seq
/// makes it publish its acks from there again and read the ack stream again (center docs).
pub const REACK_AFTER_US: u64 = 5_000_000;

/// An expired timer whose rule is not met yet (a silent owner this center may not replace yet,
/// a quiet journal with nothing missing) is looked at again after this: the center asks to be
/// woken no sooner, so a driver sleeping until `poll_timeout` never spins.
pub const TIMER_RESOLUTION_US: u64 = 10_000;

/// A plugin owner whose acks stand still this long while others advance is suspected, and the
/// lowest-numbered center whose acks advance proposes itself (center docs).
pub const OWNER_SILENCE_US: u64 = 5_000_000;

/// Largest encoded journal frame (header + body).
pub const FRAME_BYTES_MAX: usize = 16 << 20;

/// Largest `bmi` text a participant or an operator writes (ISO 20022 `BizMsgIdr` is
/// `Max35Text`).
pub const BMI_TEXT_BYTES_MAX: usize = 35;

/// Bytes of the participant scope the API puts before a participant's `bmi` text (`~` and a
/// 7-character tag of the participant): the engine's `bmi` of a participant's entry is
/// scope + text, so two participants' equal texts are two `bmi`s (see `rtgs_api::scope`).
pub const BMI_SCOPE_BYTES: usize = 8;

/// Largest `bmi` the engines journal: a text with its participant scope.
pub const BMI_BYTES_MAX: usize = BMI_TEXT_BYTES_MAX + BMI_SCOPE_BYTES;

/// Largest plugin command body.
pub const PLUGIN_BODY_BYTES_MAX: usize = 64 << 10;

/// Slots of the quorum finalizer's tally ring: acks further ahead than this of the oldest
/// unfinalized seq are deferred (back-pressure), late acks within it are still checked.
pub const FINALIZER_WINDOW_SEQS: usize = 1 << 18;

/// Most centers a cluster may have (the tally keeps one bit per center).
pub const CENTER_COUNT_MAX: usize = 8;

/// Largest amount or balance in minor units: every sum of balances fits an `i64`.
pub const AMOUNT_MINOR_MAX: u64 = i64::MAX as u64;

/// Account ids below this are found by the ledger in a plain array (4 bytes per id up to the
/// largest such id opened: at most 4 MiB), the rest in a hash map: the usual small, dense ids
/// then cost one load instead of a hash probe (a cache miss per lookup at 10,000 accounts).
pub const LEDGER_DENSE_IDS: u64 = 1 << 20;

const _: () = assert!(GAP_BUFFER_SLOTS.is_power_of_two());
const _: () = assert!(FINALIZER_WINDOW_SEQS.is_power_of_two());
const _: () = assert!(SEQUENCER_BATCH_ENTRIES_MAX <= GAP_BUFFER_SLOTS);
const _: () = assert!(GAP_BUFFER_SLOTS <= FINALIZER_WINDOW_SEQS);
const _: () = assert!(CENTER_COUNT_MAX <= 8);
const _: () = assert!(BMI_BYTES_MAX < 256);
const _: () = assert!(BMI_BYTES_MAX == 43, "InputError::BmiLength names it");
// A stall is only declared after several tick intervals: an idle cluster's finality moves
// with every tick, and so do the owner's acks.
const _: () = assert!(REACK_AFTER_US >= 2 * TICK_INTERVAL_US);
const _: () = assert!(OWNER_SILENCE_US >= 2 * TICK_INTERVAL_US);
const _: () = assert!(GAP_TIMEOUT_US < TICK_INTERVAL_US);
// Timers armed anew are never pushed back by the resolution.
const _: () = assert!(TIMER_RESOLUTION_US < GAP_TIMEOUT_US);
