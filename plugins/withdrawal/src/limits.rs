//! Every bound of the withdrawal plugin in one place (TigerBeetle's `constants.zig`), with
//! `const` assertions on how they relate.

use rtgs_core::limits::PLUGIN_BODY_BYTES_MAX;

/// Effects one entry may emit (the effect id keeps 16 bits for the index; a margin stays free).
pub const EFFECTS_PER_ENTRY_MAX: usize = 60_000;

/// SUBMITTED withdrawals taken in per `Tick` (authorization asked, or a cached signature used);
/// the rest wait for the next tick, oldest first.
pub const INTAKE_PER_TICK_MAX: usize = 8_192;

/// Due timers handled per `Tick` (timeouts, stale and validity checks, reorg checks).
pub const TIMERS_PER_TICK_MAX: usize = 8_192;

/// QUEUED withdrawals given a vault per `Tick` (besides the ones dispatched as slots free).
pub const DISPATCH_PER_TICK_MAX: usize = 8_192;

/// Effects one withdrawal's step may emit at most (an effect and an alert).
pub const EFFECTS_PER_WITHDRAWAL_STEP_MAX: usize = 2;

/// Signed transactions one round may have sent for its slot (the original and replacements).
pub const ATTEMPTS_PER_ROUND_MAX: usize = 8;

/// Rounds after the first (operator retries).
pub const RETRIES_MAX: u32 = 8;

/// Signed transactions over a withdrawal's whole life.
pub const ATTEMPTS_MAX: usize = ATTEMPTS_PER_ROUND_MAX * (RETRIES_MAX as usize + 1);

/// Operations recorded per withdrawal (applied or refused); beyond, operations on it are refused
/// and only counted.
pub const OPERATIONS_PER_WITHDRAWAL_MAX: usize = 64;

/// Confirmation rows per withdrawal (inclusions and threshold reports, reorgs included).
pub const CONFIRMATIONS_PER_WITHDRAWAL_MAX: usize = 64;

/// Attempt outcome records per withdrawal.
pub const OUTCOMES_PER_WITHDRAWAL_MAX: usize = 4 * ATTEMPTS_MAX;

/// Status transitions recorded per withdrawal. Every transition follows an operation, a round or
/// a chain event, each bounded above; reaching this is a bug (asserted).
pub const TRANSITIONS_PER_WITHDRAWAL_MAX: usize = 512;

/// A destination address (the seed's `VARCHAR(128)`).
pub const DESTINATION_BYTES_MAX: usize = 128;
/// A tag or memo (the seed's `VARCHAR(64)`).
pub const MEMO_BYTES_MAX: usize = 64;
/// Operator notes, and an operation's reason.
pub const NOTES_BYTES_MAX: usize = 512;
/// A signed payload or a raw signature.
pub const PAYLOAD_BYTES_MAX: usize = 2_048;
/// The name of the node a transaction is broadcast to.
pub const NODE_NAME_BYTES_MAX: usize = 64;

/// Refused requests remembered by request id (the participant's answer); older ones only in the
/// counters (and the journal).
pub const REFUSALS_KEPT_MAX: usize = 65_536;

/// Terminal withdrawals kept in state before the oldest are archived (to the journal, which
/// keeps everything: see the crate docs on retention).
pub const TERMINAL_KEPT_MAX: usize = 1_000_000;

/// A terminal withdrawal is archived no sooner than this after it ended (journal time): past
/// it, no reorg is expected to reach its transaction.
pub const ARCHIVE_AFTER_US: u64 = 7 * 24 * 3_600_000_000;

/// Terminal withdrawals archived per `Tick`.
pub const ARCHIVE_PER_TICK_MAX: usize = 1_024;

/// Raw signatures remembered by digest (the cached-signature path), oldest forgotten first.
pub const RAW_SIGNATURE_CACHE_MAX: usize = 4_096;

/// Vaults a dispatch records as skipped (with why) per choice; the rest are only counted.
pub const VAULT_SKIPS_RECORDED_MAX: usize = 8;

/// Rejected commands remembered by seq (the counters keep the totals).
pub const RECENT_REJECTIONS_MAX: usize = 64;

/// Chains, assets and vaults a workspace may register.
pub const CHAINS_MAX: usize = 64;
pub const ASSETS_MAX: usize = 1_024;
pub const VAULTS_MAX: usize = 65_536;

/// AML screenings sent for one withdrawal without an answer before an operator is alerted
/// (the screener keeps being asked).
pub const AML_ATTEMPTS_BEFORE_ALERT: u32 = 3;

/// Per-vault in-flight limits: Solana's and Tezos's are the chains' (5 per vault, one operation
/// per account in the mempool); Bitcoin's unconfirmed chain is 25 on nodes before Bitcoin Core
/// 31 (cluster limits since), configurable up to the cluster limit.
pub const SOLANA_VAULT_IN_FLIGHT_MAX: u32 = 5;
pub const SOLANA_WORKSPACE_IN_FLIGHT_MAX: u32 = 600;
pub const TEZOS_VAULT_IN_FLIGHT_MAX: u32 = 1;
pub const UTXO_UNCONFIRMED_CHAIN_DEFAULT: u32 = 25;
pub const UTXO_UNCONFIRMED_CHAIN_MAX: u32 = 64;
pub const VAULT_IN_FLIGHT_MAX: u32 = 1_024;

/// A replacement must pay at least this percentage of the replaced fee (EVM mempools).
pub const EVM_REPLACEMENT_FEE_PERCENT_MIN: u64 = 110;
/// Bitcoin's incremental relay fee rate (sat/vB): a full-RBF replacement pays the replaced fee
/// rate plus this (BIP 125 rules 3 and 4 at a fixed size).
pub const UTXO_INCREMENTAL_RELAY_SAT_PER_VB: u64 = 1;

// The encodings that must fit a plugin command body.
const LOOKUP_RESULT_BYTES_MAX: usize = 64 + ATTEMPTS_PER_ROUND_MAX * (32 + 1 + 33);
const SIGNATURE_RESULT_BYTES_MAX: usize = 64 + PAYLOAD_BYTES_MAX + 32;
const CREATE_BYTES_MAX: usize = 96 + DESTINATION_BYTES_MAX + MEMO_BYTES_MAX + NOTES_BYTES_MAX;

const _: () = assert!(EFFECTS_PER_ENTRY_MAX <= u16::MAX as usize);
const _: () = assert!(
    (INTAKE_PER_TICK_MAX + TIMERS_PER_TICK_MAX + DISPATCH_PER_TICK_MAX) * EFFECTS_PER_WITHDRAWAL_STEP_MAX
        <= EFFECTS_PER_ENTRY_MAX
);
const _: () = assert!(LOOKUP_RESULT_BYTES_MAX <= PLUGIN_BODY_BYTES_MAX);
const _: () = assert!(SIGNATURE_RESULT_BYTES_MAX <= PLUGIN_BODY_BYTES_MAX);
const _: () = assert!(CREATE_BYTES_MAX <= PLUGIN_BODY_BYTES_MAX);
const _: () = assert!(ATTEMPTS_PER_ROUND_MAX >= 3, "an original, a boost and a drop");
const _: () = assert!(EVM_REPLACEMENT_FEE_PERCENT_MIN > 100);
const _: () = assert!(UTXO_UNCONFIRMED_CHAIN_DEFAULT <= UTXO_UNCONFIRMED_CHAIN_MAX);
const _: () = assert!(SOLANA_VAULT_IN_FLIGHT_MAX <= VAULT_IN_FLIGHT_MAX);
const _: () = assert!(TRANSITIONS_PER_WITHDRAWAL_MAX >= 4 * OPERATIONS_PER_WITHDRAWAL_MAX);
