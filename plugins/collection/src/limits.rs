//! Every bound of the collection plugin in one place (TigerBeetle's `constants.zig`).

use rtgs_core::limits::PLUGIN_BODY_BYTES_MAX;

/// Wallet groups read in one `ReadBalances` effect (one multicall at one block height).
///
/// One effect per group would not fit: effect ids keep only 16 bits for the index within an
/// entry, and a scheduled run over 100,000 wallets happens in one `Tick`.
pub const READ_GROUPS_PER_EFFECT_MAX: usize = 256;

/// Effects one entry may emit (the effect id keeps 16 bits for the index; a margin stays free).
pub const EFFECTS_PER_ENTRY_MAX: usize = 60_000;

/// Transaction hashes one batch may have sent for its nonce (the original and its replacements).
pub const BATCH_TX_HASHES_MAX: usize = 8;

/// Webhooks of unknown hashes kept until their broadcast's answer records the hash.
pub const EARLY_WEBHOOKS_MAX: usize = 1_024;

/// Rejected commands remembered by seq (the counters keep the totals).
pub const RECENT_REJECTIONS_MAX: usize = 64;

/// Gas limit of one sweep (`executeTransfer` → ERC-20 `transferFrom`), with headroom.
pub const SWEEP_GAS_LIMIT: u64 = 100_000;

/// Gas limit of a cancellation (a plain zero-value transfer).
pub const CANCEL_GAS_LIMIT: u64 = 21_000;

/// A replacement must pay at least this percentage of the replaced gas price (EVM mempools).
pub const BUMP_GAS_PRICE_PERCENT_MIN: u64 = 110;

/// Batches the stale monitor looks at per `Tick`; the rest wait for the next tick.
pub const STALE_LOOKUPS_PER_TICK_MAX: usize = 4_096;

/// Largest token `decimals` a balance row may carry (`10^38` is the largest power of ten in u128).
pub const TOKEN_DECIMALS_MAX: u8 = 38;

/// Encoded size of one balance row (wallet 8, token 4, balance 16, allowance 16, price 8, decimals 1).
pub const BALANCE_ROW_BYTES: usize = 53;

const _: () = assert!(EFFECTS_PER_ENTRY_MAX <= u16::MAX as usize);
const _: () = assert!(READ_GROUPS_PER_EFFECT_MAX * BALANCE_ROW_BYTES + 64 <= PLUGIN_BODY_BYTES_MAX);
const _: () = assert!(STALE_LOOKUPS_PER_TICK_MAX * 2 <= EFFECTS_PER_ENTRY_MAX);
const _: () = assert!(BATCH_TX_HASHES_MAX * 40 + 64 <= PLUGIN_BODY_BYTES_MAX);
const _: () = assert!(BUMP_GAS_PRICE_PERCENT_MIN > 100);
