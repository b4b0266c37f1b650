//! Commands: what enters the plugin through the journal, as
//! `Payload::Plugin(PluginCommand { plugin: Collection, op, body })`.
//!
//! Two kinds share one enum: inputs from the core system and operators (ops 1–15: a confirmed
//! deposit, settings, relayer registration, operator actions on stuck batches) and results of
//! effects, fed back by the adapter that executed them (ops 16–31, each naming the `effect_id`
//! it answers, except the chain's webhook, which names a transaction hash).

use rtgs_core::entry::{InputError, PluginCommand, PluginKind};

use crate::settings::{SettingKey, SettingScope};
use crate::types::*;
use crate::wire::{from_slice, to_vec, DecodeError};

wire_struct! {
    /// The deposit service confirmed an incoming transfer (seed 4-1): queue it for collection.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct DepositConfirmed {
        pub deposit: DepositId,
        pub partner: PartnerId,
        pub wallet: WalletId,
        pub chain: ChainId,
        pub token: TokenId,
        pub amount_minor: u128,
        /// The block that credited the funds to the wallet (its inclusion height).
        pub block_height: u64,
    }
}

wire_struct! {
    /// Changes a setting; `value: None` clears a partner override.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct SetSetting {
        pub scope: SettingScope,
        pub key: SettingKey,
        pub value: Option<u64>,
    }
}

wire_struct! {
    /// Adds a relayer account for a chain, with the nonce its next transaction must use.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct RegisterRelayer {
        pub chain: ChainId,
        pub relayer: RelayerId,
        pub next_nonce: u64,
    }
}

wire_struct! {
    /// Operator: a STALE batch is given up. STALE → FAILED; its deposits stay QUEUED; its nonce
    /// is cancelled, and its group and relayer wait until the chain shows the nonce used.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct FailStale {
        pub batch: BatchId,
    }
}

wire_struct! {
    /// Operator: re-send a BROADCASTING or STALE batch with the same nonce and a higher gas
    /// price (≥ +10 %); the new hash joins the batch's hashes.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct BumpGas {
        pub batch: BatchId,
        pub gas_price_wei: u64,
    }
}

wire_struct! {
    /// Operator: run the schedule now (for one partner, or for all), as if its interval had
    /// elapsed; its next run stays where it was. For drills, demos and catching up after an
    /// outage of the chain node.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct RunNow {
        pub partner: Option<PartnerId>,
    }
}

wire_struct! {
    /// Operator: move a relayer's next nonce forward to the chain's nonce (its mined transaction
    /// count, read from the chain by the operator). Only forward and only while the relayer is
    /// idle (nothing LOCKED, nothing STALE or given up): it can skip nonces, never reuse one
    /// (see `reset`).
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct ResetNonce {
        pub relayer: RelayerId,
        pub chain_nonce: u64,
    }
}

wire_struct! {
    /// One wallet's balance in a [`BalancesRead`].
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct BalanceRow {
        pub wallet: WalletId,
        pub token: TokenId,
        pub balance_minor: u128,
        /// What the collector contract may move (ERC-20 allowance): the approval check.
        pub allowance_minor: u128,
        /// USD price of one whole token, in micro-USD.
        pub price_usd_micros: u64,
        pub decimals: u8,
    }
}

wire_struct! {
    /// Result of `ReadBalances`: balances of one chain, all read at `block_height`.
    #[derive(Clone, PartialEq, Eq, Debug)]
    pub struct BalancesRead {
        pub effect_id: u64,
        pub chain: ChainId,
        pub block_height: u64,
        /// The gas price a sweep will pay (fixed in the signed transaction).
        pub gas_price_wei: u64,
        /// Estimated gas cost of one sweep, in micro-USD.
        pub gas_estimate_usd_micros: u64,
        pub rows: Vec<BalanceRow>,
    }
}

wire_struct! {
    /// Result of `ReadBalances` when the RPC failed: the groups are re-read next run.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct BalancesReadFailed {
        pub effect_id: u64,
    }
}

pub use rtgs_chain_sim::answer::{AmbiguousCode, BroadcastOutcome, Receipt, ReceiptStatus, RejectCode};

wire_struct! {
    /// Result of `Broadcast` or `Cancel`. The hash is known even when the send failed (it is
    /// the hash of the signed transaction).
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct BroadcastResult {
        pub effect_id: u64,
        pub batch: BatchId,
        pub tx_hash: TxHash,
        pub outcome: BroadcastOutcome,
    }
}

wire_struct! {
    /// The chain monitor's webhook (`COLLECTION_CONFIRM`): a transaction reached confirmation depth.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct TxWebhook {
        pub tx_hash: TxHash,
        pub receipt: Receipt,
    }
}

wire_struct! {
    /// Result of `LookupReceipts`: every hash's state and the relayer's mined nonce count, read
    /// from one block (so "nonce used, none of ours mined" means another transaction used it).
    #[derive(Clone, PartialEq, Eq, Debug)]
    pub struct ReceiptsLooked {
        pub effect_id: u64,
        pub batch: BatchId,
        pub nonce_mined: u64,
        pub receipts: Vec<(TxHash, ReceiptStatus)>,
    }
}

/// Everything the plugin accepts.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum CollectionCommand {
    DepositConfirmed(DepositConfirmed),
    SetSetting(SetSetting),
    RegisterRelayer(RegisterRelayer),
    FailStale(FailStale),
    BumpGas(BumpGas),
    RunNow(RunNow),
    ResetNonce(ResetNonce),
    BalancesRead(BalancesRead),
    BalancesReadFailed(BalancesReadFailed),
    BroadcastResult(BroadcastResult),
    TxWebhook(TxWebhook),
    ReceiptsLooked(ReceiptsLooked),
}

/// Command op codes (the `PluginCommand::op`).
pub mod op {
    pub const DEPOSIT_CONFIRMED: u16 = 1;
    pub const SET_SETTING: u16 = 2;
    pub const REGISTER_RELAYER: u16 = 3;
    pub const FAIL_STALE: u16 = 4;
    pub const BUMP_GAS: u16 = 5;
    pub const RUN_NOW: u16 = 6;
    pub const RESET_NONCE: u16 = 7;
    pub const BALANCES_READ: u16 = 16;
    pub const BALANCES_READ_FAILED: u16 = 17;
    pub const BROADCAST_RESULT: u16 = 18;
    pub const TX_WEBHOOK: u16 = 19;
    pub const RECEIPTS_LOOKED: u16 = 20;
}

impl CollectionCommand {
    /// The op code and body.
    pub fn encode(&self) -> (u16, Vec<u8>) {
        use CollectionCommand as C;
        match self {
            C::DepositConfirmed(c) => (op::DEPOSIT_CONFIRMED, to_vec(c)),
            C::SetSetting(c) => (op::SET_SETTING, to_vec(c)),
            C::RegisterRelayer(c) => (op::REGISTER_RELAYER, to_vec(c)),
            C::FailStale(c) => (op::FAIL_STALE, to_vec(c)),
            C::BumpGas(c) => (op::BUMP_GAS, to_vec(c)),
            C::RunNow(c) => (op::RUN_NOW, to_vec(c)),
            C::ResetNonce(c) => (op::RESET_NONCE, to_vec(c)),
            C::BalancesRead(c) => (op::BALANCES_READ, to_vec(c)),
            C::BalancesReadFailed(c) => (op::BALANCES_READ_FAILED, to_vec(c)),
            C::BroadcastResult(c) => (op::BROADCAST_RESULT, to_vec(c)),
            C::TxWebhook(c) => (op::TX_WEBHOOK, to_vec(c)),
            C::ReceiptsLooked(c) => (op::RECEIPTS_LOOKED, to_vec(c)),
        }
    }

    pub fn decode(op: u16, body: &[u8]) -> Result<Self, DecodeError> {
        use CollectionCommand as C;
        Ok(match op {
            op::DEPOSIT_CONFIRMED => C::DepositConfirmed(from_slice(body)?),
            op::SET_SETTING => C::SetSetting(from_slice(body)?),
            op::REGISTER_RELAYER => C::RegisterRelayer(from_slice(body)?),
            op::FAIL_STALE => C::FailStale(from_slice(body)?),
            op::BUMP_GAS => C::BumpGas(from_slice(body)?),
            op::RUN_NOW => C::RunNow(from_slice(body)?),
            op::RESET_NONCE => C::ResetNonce(from_slice(body)?),
            op::BALANCES_READ => C::BalancesRead(from_slice(body)?),
            op::BALANCES_READ_FAILED => C::BalancesReadFailed(from_slice(body)?),
            op::BROADCAST_RESULT => C::BroadcastResult(from_slice(body)?),
            op::TX_WEBHOOK => C::TxWebhook(from_slice(body)?),
            op::RECEIPTS_LOOKED => C::ReceiptsLooked(from_slice(body)?),
            other => return Err(DecodeError::UnknownOp(other)),
        })
    }

    /// The journal envelope (fails only if the body exceeds the core's limit).
    pub fn to_plugin_command(&self) -> Result<PluginCommand, InputError> {
        let (op, body) = self.encode();
        PluginCommand::new(PluginKind::Collection, op, body)
    }

    /// The effect this command answers, if it is an effect's result.
    pub fn effect_id(&self) -> Option<u64> {
        use CollectionCommand as C;
        match self {
            C::BalancesRead(c) => Some(c.effect_id),
            C::BalancesReadFailed(c) => Some(c.effect_id),
            C::BroadcastResult(c) => Some(c.effect_id),
            C::ReceiptsLooked(c) => Some(c.effect_id),
            _ => None,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hash(b: u8) -> TxHash {
        TxHash([b; 32])
    }

    pub(crate) fn samples() -> Vec<CollectionCommand> {
        use CollectionCommand as C;
        let receipt =
            Receipt { success: true, block_height: 9, gas_used: 50_000, gas_cost_usd_micros: 2_000 };
        vec![
            C::DepositConfirmed(DepositConfirmed {
                deposit: DepositId(7),
                partner: PartnerId(1),
                wallet: WalletId(100),
                chain: ChainId(1),
                token: TokenId(2),
                amount_minor: 300_000,
                block_height: 42,
            }),
            C::SetSetting(SetSetting {
                scope: SettingScope::Partner(PartnerId(3)),
                key: SettingKey::ScheduleIntervalHours,
                value: Some(6),
            }),
            C::SetSetting(SetSetting {
                scope: SettingScope::Global,
                key: SettingKey::MinAmountUsdMicros,
                value: None,
            }),
            C::RegisterRelayer(RegisterRelayer { chain: ChainId(1), relayer: RelayerId(9), next_nonce: 4 }),
            C::FailStale(FailStale { batch: BatchId(5) }),
            C::BumpGas(BumpGas { batch: BatchId(5), gas_price_wei: 30_000_000_000 }),
            C::ResetNonce(ResetNonce { relayer: RelayerId(9), chain_nonce: 12 }),
            C::BalancesRead(BalancesRead {
                effect_id: 1 << 16,
                chain: ChainId(1),
                block_height: 40,
                gas_price_wei: 20,
                gas_estimate_usd_micros: 2_000,
                rows: vec![BalanceRow {
                    wallet: WalletId(100),
                    token: TokenId(2),
                    balance_minor: u128::MAX,
                    allowance_minor: 0,
                    price_usd_micros: 1_000_000,
                    decimals: 6,
                }],
            }),
            C::BalancesReadFailed(BalancesReadFailed { effect_id: 3 }),
            C::BroadcastResult(BroadcastResult {
                effect_id: 4,
                batch: BatchId(1),
                tx_hash: hash(1),
                outcome: BroadcastOutcome::Ambiguous(AmbiguousCode::Timeout),
            }),
            C::BroadcastResult(BroadcastResult {
                effect_id: 4,
                batch: BatchId(1),
                tx_hash: hash(1),
                outcome: BroadcastOutcome::Rejected(RejectCode::InsufficientFunds),
            }),
            C::TxWebhook(TxWebhook { tx_hash: hash(2), receipt }),
            C::ReceiptsLooked(ReceiptsLooked {
                effect_id: 5,
                batch: BatchId(1),
                nonce_mined: 3,
                receipts: vec![
                    (hash(1), ReceiptStatus::Unknown),
                    (hash(2), ReceiptStatus::Pending),
                    (hash(3), ReceiptStatus::Mined(receipt)),
                ],
            }),
        ]
    }

    #[test]
    fn every_command_round_trips() {
        for c in samples() {
            let (op, body) = c.encode();
            assert_eq!(CollectionCommand::decode(op, &body), Ok(c.clone()), "{c:?}");
            let env = c.to_plugin_command().map_err(|e| e.to_string());
            assert_eq!(env.map(|p| (p.plugin, p.op)), Ok((PluginKind::Collection, op)));
        }
    }

    #[test]
    fn malformed_commands_are_errors() {
        assert_eq!(CollectionCommand::decode(999, &[]), Err(DecodeError::UnknownOp(999)));
        for c in samples() {
            let (op, body) = c.encode();
            // Every strict prefix is truncated; one more byte is trailing.
            for n in 0..body.len() {
                assert!(CollectionCommand::decode(op, &body[..n]).is_err(), "{c:?} prefix {n}");
            }
            let mut longer = body.clone();
            longer.push(0);
            assert_eq!(CollectionCommand::decode(op, &longer), Err(DecodeError::Trailing(1)));
        }
    }

    proptest! {
        #[test]
        fn decode_never_panics(op in 0u16..40, body in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = CollectionCommand::decode(op, &body);
        }

        #[test]
        fn deposit_round_trips(d in any::<u64>(), a in any::<u128>(), h in any::<u64>(), w in any::<u64>()) {
            let c = CollectionCommand::DepositConfirmed(DepositConfirmed {
                deposit: DepositId(d), partner: PartnerId(d ^ 1), wallet: WalletId(w), chain: ChainId(1),
                token: TokenId(2), amount_minor: a, block_height: h,
            });
            let (op, body) = c.encode();
            prop_assert_eq!(CollectionCommand::decode(op, &body), Ok(c));
        }
    }
}
