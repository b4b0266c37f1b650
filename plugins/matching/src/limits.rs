//! Every bound of the matching plugin in one place (TigerBeetle's `constants.zig`), with `const`
//! assertions on how they relate.

use rtgs_core::limits::PLUGIN_BODY_BYTES_MAX;

/// Legs of one bundle: the LP leg and two P2P legs (seed §1, `max-transfer-legs: 3`).
pub const BUNDLE_LEGS_MAX: usize = 3;
/// P2P legs of one bundle (P2P#1, P2P#2).
pub const P2P_LEGS_MAX: usize = 2;

/// Effects one entry may emit (the effect id keeps 16 bits for the index; a margin stays free).
pub const EFFECTS_PER_ENTRY_MAX: usize = 60_000;
/// Effects one session's step may emit at the most (an LP call, a stray release, a hand-off, an
/// alert, with room to spare): a `Tick` stops taking sessions when less than this is left, and
/// the rest wait for the next `Tick`.
pub const EFFECTS_PER_SESSION_STEP_MAX: usize = 6;

/// Orders the intake binds to new sessions per `Tick` (the rest wait for the next one).
pub const INTAKE_PER_TICK_MAX: usize = 8_192;
/// Session timers (routing passes, lease renewals, LP retries) served per `Tick`.
pub const WAKES_PER_TICK_MAX: usize = 8_192;
/// Overdue sessions (window close, grace expiry) swept per `Tick`.
pub const SWEEPS_PER_TICK_MAX: usize = 8_192;
/// Orders whose own deadline passed, handled per `Tick`.
pub const DEADLINES_PER_TICK_MAX: usize = 8_192;

/// Live orders (not COMPLETED, CANCELLED or EXPIRED) at once; a new order beyond is refused.
pub const ORDERS_LIVE_MAX: usize = 1 << 20;
/// Registered sellers.
pub const SELLERS_MAX: usize = 1 << 16;
/// Partners with their own settings.
pub const PARTNERS_MAX: usize = 1 << 14;

/// LP trade-completion webhooks for escrows not recorded yet, kept until the confirm answer
/// records them (after a failover the webhook can be journaled first).
pub const EARLY_WEBHOOKS_MAX: usize = 1_024;
/// Error records and rejections remembered (the counters keep the totals).
pub const ERRORS_RECENT_MAX: usize = 256;
pub const REJECTIONS_RECENT_MAX: usize = 64;

/// Largest amount of one order, in minor units (the ledger's own bound).
pub const ORDER_AMOUNT_MINOR_MAX: u64 = rtgs_core::limits::AMOUNT_MINOR_MAX;

/// Bounds of the per-partner settings, in seconds.
pub const PHASE_S_MAX: u32 = 3_600;
pub const GRACE_S_MAX: u32 = 3_600;

/// Largest encoded command (a hand-off lists at most the bundle's legs; every command is a few
/// dozen bytes).
pub const COMMAND_BYTES_MAX: usize = 512;

const _: () = assert!(EFFECTS_PER_ENTRY_MAX <= u16::MAX as usize);
const _: () = assert!(P2P_LEGS_MAX + 1 == BUNDLE_LEGS_MAX);
const _: () = assert!(EFFECTS_PER_SESSION_STEP_MAX * 16 < EFFECTS_PER_ENTRY_MAX);
const _: () = assert!(COMMAND_BYTES_MAX <= PLUGIN_BODY_BYTES_MAX);
const _: () = assert!(INTAKE_PER_TICK_MAX <= ORDERS_LIVE_MAX);
