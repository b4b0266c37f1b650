//! The plugin's rows (seed 000 §3): `collection_queue` ([`QueueRow`]), `collection_batches`
//! ([`Batch`]), plus what the seed kept elsewhere — wallet groups (the last skip and why), relayers
//! and their nonce locks, partners' schedules, counters.
//!
//! Everything here is primary data: it is what the checkpoint stores and the state hash covers.
//! Lookup indexes are derived from it (`checkpoint::Index`).

use std::collections::BTreeMap;

use crate::alert::{AlertKey, AlertKind, OpenAlert};
use crate::command::{Receipt, RejectCode, TxWebhook};
use crate::settings::{PartnerState, Settings};
use crate::types::*;
use crate::wire::{DecodeError, Reader, Wire, Writer};

/// A `collection_queue` row's status. Skips are not a status (seed 4-4): a skipped row stays
/// QUEUED and is re-evaluated next run.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum RowStatus {
    Queued,
    Collected(BatchId),
}

impl Wire for RowStatus {
    const BYTES_MIN: usize = 1;
    fn put(&self, w: &mut Writer<'_>) {
        match self {
            RowStatus::Queued => w.bytes(&[0]),
            RowStatus::Collected(b) => {
                w.bytes(&[1]);
                b.put(w);
            }
        }
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        match r.array::<1>()?[0] {
            0 => Ok(RowStatus::Queued),
            1 => Ok(RowStatus::Collected(BatchId::get(r)?)),
            _ => Err(DecodeError::Invalid("row status")),
        }
    }
}

wire_struct! {
    /// One confirmed deposit awaiting (or done with) collection: the logical layer.
    #[derive(Clone, PartialEq, Eq, Debug)]
    pub struct QueueRow {
        pub deposit: DepositId,
        pub partner: PartnerId,
        pub key: GroupKey,
        /// What this deposit brought (for tracing; the sweep moves the on-chain balance).
        pub amount_minor: u128,
        /// Inclusion height of the deposit: a sweep whose balance was read at or above it
        /// contains these funds.
        pub block_height: u64,
        pub queued_at_us: u64,
        pub status: RowStatus,
        pub collected_at_us: Option<u64>,
    }
}

code_enum! {
    /// Why a scheduled run did not sweep a group (its rows stay QUEUED).
    pub enum SkipReason {
        /// Nothing on chain yet (seed: "아직 미도착").
        ZeroBalance = 1,
        /// Balance worth less than `collection.min_amount_usd`.
        BelowMinimum = 2,
        /// Estimated gas / balance above `collection.gas_threshold_ratio`.
        GasTooHigh = 3,
        /// The collector's allowance does not cover the balance (approve not done).
        ApprovalNotReady = 4,
        /// The balance was read below the block of this group's last sweep, so it may still
        /// count swept funds.
        ReadBelowLastSweep = 5,
        /// The balance read failed (RPC error).
        ReadFailed = 6,
    }
}

wire_struct! {
    /// The last skip decision of a group, with what it was based on.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct SkipRecord {
        pub at_us: u64,
        pub reason: SkipReason,
        pub balance_minor: u128,
        pub balance_usd_micros: u128,
        pub gas_estimate_usd_micros: u64,
        pub block_height: u64,
    }
}

wire_struct! {
    /// A balance read in flight.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct PendingRead {
        pub effect_id: u64,
        pub since_us: u64,
    }
}

wire_struct! {
    /// Per wallet+token state kept across runs.
    #[derive(Clone, PartialEq, Eq, Debug)]
    pub struct Group {
        pub partner: PartnerId,
        pub read: Option<PendingRead>,
        /// Highest block at which one of this group's sweeps was mined: a balance read below it
        /// may still contain funds already swept.
        pub last_sweep_height: u64,
        pub last_skip: Option<SkipRecord>,
        pub skips_total: u64,
    }
}

code_enum! {
    /// `collection_batches.status`.
    pub enum BatchStatus {
        /// Created; waiting for a relayer, or for the broadcast's (or the chain check's) answer.
        Pending = 1,
        /// The node accepted the transaction; confirmation comes later (webhook).
        Broadcasting = 2,
        Confirmed = 3,
        Failed = 4,
        /// No receipt long after broadcast: its relayer gets no new transactions.
        Stale = 5,
    }
}

impl BatchStatus {
    pub fn is_open(self) -> bool {
        matches!(self, BatchStatus::Pending | BatchStatus::Broadcasting | BatchStatus::Stale)
    }
}

/// Why a batch FAILED.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum FailReason {
    /// The node refused the transaction for certain; the nonce was released.
    BroadcastRejected(RejectCode),
    /// Mined with status 0; the nonce is consumed.
    Reverted,
    /// The nonce was used by another transaction; none of ours can be mined.
    NonceConsumedElsewhere,
    /// An operator failed a STALE batch.
    Operator,
    /// No relayer is registered for the chain.
    NoRelayer,
}

impl Wire for FailReason {
    const BYTES_MIN: usize = 1;
    fn put(&self, w: &mut Writer<'_>) {
        match self {
            FailReason::BroadcastRejected(c) => w.bytes(&[1, c.code()]),
            FailReason::Reverted => w.bytes(&[2]),
            FailReason::NonceConsumedElsewhere => w.bytes(&[3]),
            FailReason::Operator => w.bytes(&[4]),
            FailReason::NoRelayer => w.bytes(&[5]),
        }
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        match r.array::<1>()?[0] {
            1 => Ok(FailReason::BroadcastRejected(RejectCode::get(r)?)),
            2 => Ok(FailReason::Reverted),
            3 => Ok(FailReason::NonceConsumedElsewhere),
            4 => Ok(FailReason::Operator),
            5 => Ok(FailReason::NoRelayer),
            _ => Err(DecodeError::Invalid("fail reason")),
        }
    }
}

code_enum! {
    /// Which answer a batch waits for.
    pub enum AwaitKind {
        /// The broadcast of its first transaction (nonce LOCKED).
        Broadcast = 1,
        /// The chain check after an ambiguous broadcast (nonce still LOCKED).
        Check = 2,
        /// The stale monitor's receipt lookup.
        Lookup = 3,
        /// An operator's gas bump (a replacement with the same nonce).
        Bump = 4,
        /// A cancellation of a given-up nonce.
        Cancel = 5,
    }
}

wire_struct! {
    /// The one effect a batch waits on; results naming another effect id are stale duplicates.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct Awaiting {
        pub kind: AwaitKind,
        pub effect_id: u64,
        pub since_us: u64,
        /// The gas price of the transaction sent (bumps raise it).
        pub gas_price_wei: u64,
    }
}

wire_struct! {
    /// One physical sweep of one wallet and token.
    #[derive(Clone, PartialEq, Eq, Debug)]
    pub struct Batch {
        pub id: BatchId,
        pub key: GroupKey,
        pub partner: PartnerId,
        /// Block at which the swept balance was read: exactly the deposits included at or below
        /// it are collected by this batch (the race fix).
        pub read_height: u64,
        /// On-chain balance read = the amount swept (`onchain_balance` = `collected_amount`).
        pub amount_minor: u128,
        pub balance_usd_micros: u128,
        pub estimated_gas_usd_micros: u64,
        /// The highest gas price sent for the nonce (a replacement must beat it by 10 %).
        pub gas_price_wei: u64,
        pub status: BatchStatus,
        pub relayer: Option<RelayerId>,
        pub nonce: Option<u64>,
        /// Every hash sent for the nonce (the original, then replacements).
        pub tx_hashes: Vec<TxHash>,
        pub awaiting: Option<Awaiting>,
        pub created_at_us: u64,
        pub broadcast_at_us: Option<u64>,
        /// When the node last accepted one of its transactions (the first broadcast or a gas
        /// bump): the stale age counts from here.
        pub sent_last_at_us: Option<u64>,
        pub finished_at_us: Option<u64>,
        /// The mined receipt (gas cost) once CONFIRMED or reverted.
        pub receipt: Option<Receipt>,
        pub fail_reason: Option<FailReason>,
        /// The deposits this batch collected (set when CONFIRMED).
        pub deposits: Vec<DepositId>,
        /// FAILED by an operator while one of its hashes may still be mined: a cancellation
        /// holds its nonce, its group is fenced and its relayer paused until the chain shows
        /// the nonce used — by the cancellation (dead) or by one of its hashes (late success).
        pub nonce_unsettled: bool,
    }
}

wire_struct! {
    /// A nonce acquired for a batch and not yet confirmed or released (LOCKED).
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct NonceLock {
        pub nonce: u64,
        pub batch: BatchId,
    }
}

wire_struct! {
    /// A relayer account and its nonce manager.
    ///
    /// One nonce is LOCKED at a time: `release` can then simply keep `next_nonce`, which is
    /// what makes releasing safe (seed 9-1: "next_nonce 원복").
    #[derive(Clone, PartialEq, Eq, Debug)]
    pub struct Relayer {
        pub id: RelayerId,
        pub chain: ChainId,
        pub next_nonce: u64,
        pub lock: Option<NonceLock>,
    }
}

code_enum! {
    /// Why a command was rejected (recorded, never a panic).
    pub enum RejectKind {
        Malformed = 1,
        ZeroAmount = 2,
        /// The deposit id is known with different content.
        DepositConflict = 3,
        /// The wallet belongs to another partner.
        WalletPartnerMismatch = 4,
        InvalidSetting = 5,
        RelayerExists = 6,
        UnknownBatch = 7,
        BatchNotStale = 8,
        /// Bumps apply to BROADCASTING or STALE batches only.
        BatchNotInFlight = 9,
        /// Below +10 % of the current gas price.
        BumpTooSmall = 10,
        TooManyHashes = 11,
        /// A result with a value out of range (e.g. token decimals above 38).
        InvalidResult = 12,
        /// The batch waits for an answer (a lookup or another bump): try again later.
        AnswerAwaited = 13,
        UnknownRelayer = 14,
        /// A nonce reset while the relayer has a nonce LOCKED, STALE or given up.
        RelayerBusy = 15,
        /// A nonce reset below the relayer's next nonce (it could reuse a nonce).
        NonceBehind = 16,
    }
}

wire_struct! {
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct Rejection {
        pub seq: u64,
        pub kind: RejectKind,
    }
}

wire_struct! {
    /// Totals for metrics and audits.
    #[derive(Clone, PartialEq, Eq, Debug, Default)]
    pub struct Counters {
        pub rejected: BTreeMap<RejectKind, u64>,
        pub skipped: BTreeMap<SkipReason, u64>,
        /// Results of effects no longer awaited (duplicates after a failover, late answers).
        pub results_ignored: u64,
        /// The same deposit confirmed again with the same content.
        pub deposits_duplicate: u64,
        /// Webhooks for hashes that are not ours.
        pub webhooks_foreign: u64,
        /// Groups a scheduled run could not read because the entry's effect budget ran out.
        pub reads_deferred: u64,
        /// Alerts opened, by kind (the open ones are `State::alerts`).
        pub alerts_raised: BTreeMap<AlertKind, u64>,
    }
}

wire_struct! {
    /// The whole primary state.
    #[derive(Clone, PartialEq, Eq, Debug, Default)]
    pub struct State {
        /// Highest seq applied: entries at or below it are ignored (idempotent by seq).
        pub seq_applied: u64,
        pub now_us: u64,
        pub settings: Settings,
        pub partners: BTreeMap<PartnerId, PartnerState>,
        pub deposits: BTreeMap<DepositId, QueueRow>,
        pub groups: BTreeMap<GroupKey, Group>,
        pub batches: BTreeMap<BatchId, Batch>,
        pub relayers: BTreeMap<RelayerId, Relayer>,
        pub batch_id_last: u64,
        /// 0 until the first `Tick` arms the stale monitor.
        pub stale_check_next_us: u64,
        /// Where an interrupted stale check resumes (it looks at a bounded number per tick).
        pub stale_cursor: Option<BatchId>,
        pub counters: Counters,
        pub rejections_recent: Vec<Rejection>,
        /// Webhooks for hashes not (yet) known, oldest first: after a failover the answer to a
        /// broadcast (lost with the old owner, re-executed by the new one) can reach the journal
        /// after the transaction's webhook; the webhook is applied once the hash is recorded.
        pub webhooks_early: Vec<TxWebhook>,
        /// The open alerts (see `alert`): derived from state, replicated with it.
        pub alerts: BTreeMap<AlertKey, OpenAlert>,
        pub alert_id_last: u64,
    }
}
