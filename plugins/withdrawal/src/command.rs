//! Commands: what enters the plugin through the journal, as
//! `Payload::Plugin(PluginCommand { plugin: Withdrawal, op, body })`.
//!
//! Inputs (ops 1–15): a participant's request, operations, and the operators' registrations
//! and settings. Results of effects (ops 16–31), each naming the `effect_id` it answers and the
//! withdrawal: the screener's verdict, the policy engine's and approvers' decision, the custody
//! signer's signature, a node's answer to a broadcast, a receipt lookup. Webhooks (op 32): the
//! chain monitor's reports of a transaction (in a block, at a depth, reorged away), which name
//! a transaction hash. The screener's and signer's answers arrive as webhooks too (they are
//! asynchronous), carrying the effect id they answer.

use rtgs_core::entry::{InputError, PluginCommand, PluginKind};

use rtgs_chain_sim::answer::{BroadcastOutcome, ReceiptStatus};

use crate::chain::{AssetParams, ChainParams, VaultParams};
use crate::operation::{Actor, OpParams, OperationKind};
use crate::settings::SettingKey;
use crate::types::*;
use crate::wire::{from_slice, to_vec, DecodeError, Reader, Wire, Writer};

code_enum! {
    /// `withdrawals.destination_type`.
    pub enum DestinationType {
        Vault = 1,
        Exchange = 2,
        Whitelisted = 3,
        OneTime = 4,
        Network = 5,
    }
}

impl DestinationType {
    pub fn name(self) -> &'static str {
        match self {
            DestinationType::Vault => "vault",
            DestinationType::Exchange => "exchange",
            DestinationType::Whitelisted => "whitelisted",
            DestinationType::OneTime => "one-time",
            DestinationType::Network => "network",
        }
    }
    pub fn from_name(name: &str) -> Option<Self> {
        DestinationType::ALL.iter().copied().find(|d| d.name() == name)
    }
}

/// What is asked: a payment we sign and broadcast, a payment we only sign (the customer
/// broadcasts: SIGNED), or a signature over a digest (raw signing: no transaction, no money).
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum RequestKind {
    Standard,
    SignOnly,
    Raw(Digest),
}

impl RequestKind {
    pub fn name(&self) -> &'static str {
        match self {
            RequestKind::Standard => "standard",
            RequestKind::SignOnly => "sign_only",
            RequestKind::Raw(_) => "raw",
        }
    }
}

impl Wire for RequestKind {
    const BYTES_MIN: usize = 1;
    fn put(&self, w: &mut Writer<'_>) {
        match self {
            RequestKind::Standard => w.bytes(&[1]),
            RequestKind::SignOnly => w.bytes(&[2]),
            RequestKind::Raw(d) => {
                w.bytes(&[3]);
                d.put(w);
            }
        }
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        match r.array::<1>()?[0] {
            1 => Ok(RequestKind::Standard),
            2 => Ok(RequestKind::SignOnly),
            3 => Ok(RequestKind::Raw(Digest::get(r)?)),
            _ => Err(DecodeError::Invalid("request kind")),
        }
    }
}

wire_struct! {
    /// A participant asks for a withdrawal of `amount_minor` (ledger minor units of the asset's
    /// currency) from its ledger account `account`. Raw signing names the asset's chain only
    /// (its key), with no amount and no destination.
    #[derive(Clone, PartialEq, Eq, Debug)]
    pub struct CreateWithdrawal {
        pub account: LedgerAccount,
        pub asset: AssetId,
        pub amount_minor: u64,
        pub destination_type: DestinationType,
        pub destination: Option<Text>,
        pub memo: Option<Text>,
        pub kind: RequestKind,
        /// Screened by the AML screener first (PENDING_AML_SCREENING) or not (SUBMITTED).
        pub aml: bool,
        pub notes: Option<Text>,
        pub actor: Actor,
    }
}

wire_struct! {
    /// An operation on a withdrawal (see `operation`).
    #[derive(Clone, PartialEq, Eq, Debug)]
    pub struct Operate {
        pub withdrawal: WithdrawalId,
        pub operation: OperationKind,
        pub actor: Actor,
        pub params: OpParams,
    }
}

wire_struct! {
    /// Takes a vault out of the rotation, or puts it back.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct SetVaultEnabled {
        pub vault: VaultId,
        pub enabled: bool,
    }
}

wire_struct! {
    /// Changes a timer setting (seconds).
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct SetSetting {
        pub key: SettingKey,
        pub value: u64,
    }
}

code_enum! {
    /// The AML screener's verdict.
    pub enum AmlVerdict {
        Accept = 1,
        /// Needs a human: it waits in PENDING_AML_SCREENING for rescreen-aml, bypass-aml or cancel.
        Alert = 2,
        Reject = 3,
        /// Rejected and the funds' source flagged: REJECTED, with an alert.
        Freeze = 4,
    }
}

wire_struct! {
    /// Result of `Screen`.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct Screened {
        pub effect_id: u64,
        pub withdrawal: WithdrawalId,
        pub verdict: AmlVerdict,
        /// The screener's case reference.
        pub case_ref: u64,
    }
}

wire_struct! {
    /// Result of `Authorize`: approved by the approvers, or blocked by a policy rule.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct Decided {
        pub effect_id: u64,
        pub withdrawal: WithdrawalId,
        /// `None`: approved; else the policy rule that blocked it.
        pub blocked_by_rule: Option<u32>,
    }
}

/// What the custody signer answered.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum SignOutcome {
    /// A signed transaction and its hash.
    Signed { signed_payload: Blob, tx_hash: TxHash },
    /// A signature over a raw digest.
    RawSigned { signature: Blob },
    /// The signer refused (a policy of its own, a key problem): its code.
    Refused { code: u16 },
}

impl Wire for SignOutcome {
    const BYTES_MIN: usize = 1;
    fn put(&self, w: &mut Writer<'_>) {
        match self {
            SignOutcome::Signed { signed_payload, tx_hash } => {
                w.bytes(&[1]);
                signed_payload.put(w);
                tx_hash.put(w);
            }
            SignOutcome::RawSigned { signature } => {
                w.bytes(&[2]);
                signature.put(w);
            }
            SignOutcome::Refused { code } => {
                w.bytes(&[3]);
                code.put(w);
            }
        }
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        match r.array::<1>()?[0] {
            1 => Ok(SignOutcome::Signed { signed_payload: Blob::get(r)?, tx_hash: TxHash::get(r)? }),
            2 => Ok(SignOutcome::RawSigned { signature: Blob::get(r)? }),
            3 => Ok(SignOutcome::Refused { code: u16::get(r)? }),
            _ => Err(DecodeError::Invalid("sign outcome")),
        }
    }
}

wire_struct! {
    /// Result of `Sign` or `SignRaw`.
    #[derive(Clone, PartialEq, Eq, Debug)]
    pub struct SignatureResult {
        pub effect_id: u64,
        pub withdrawal: WithdrawalId,
        pub outcome: SignOutcome,
    }
}

wire_struct! {
    /// Result of `Broadcast`: what the node said about the signed transaction `tx_hash`.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct BroadcastResult {
        pub effect_id: u64,
        pub withdrawal: WithdrawalId,
        pub tx_hash: TxHash,
        pub outcome: BroadcastOutcome,
    }
}

wire_struct! {
    /// Result of `Lookup`: each hash's state and, for ordered slots, how many of the vault's
    /// slots the chain has used — all read from one block, `tip_height` (so "slot used, none of
    /// ours mined" means another transaction used it).
    #[derive(Clone, PartialEq, Eq, Debug)]
    pub struct ReceiptsLooked {
        pub effect_id: u64,
        pub withdrawal: WithdrawalId,
        pub tip_height: u64,
        pub slots_used: Option<u64>,
        pub receipts: Vec<(TxHash, ReceiptStatus)>,
    }
}

/// What the chain monitor says about a transaction.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum ChainEventKind {
    /// In block `height` (one confirmation).
    Included { block_hash: TxHash, height: u64 },
    /// `depth` blocks deep; `success` false is a revert.
    Confirmed { block_hash: TxHash, height: u64, depth: u32, success: bool },
    /// The blocks from `height` up left the chain (a reorg).
    Reorged { height: u64 },
}

impl Wire for ChainEventKind {
    const BYTES_MIN: usize = 1;
    fn put(&self, w: &mut Writer<'_>) {
        match *self {
            ChainEventKind::Included { block_hash, height } => {
                w.bytes(&[1]);
                block_hash.put(w);
                height.put(w);
            }
            ChainEventKind::Confirmed { block_hash, height, depth, success } => {
                w.bytes(&[2]);
                block_hash.put(w);
                height.put(w);
                depth.put(w);
                success.put(w);
            }
            ChainEventKind::Reorged { height } => {
                w.bytes(&[3]);
                height.put(w);
            }
        }
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        match r.array::<1>()?[0] {
            1 => Ok(ChainEventKind::Included { block_hash: TxHash::get(r)?, height: u64::get(r)? }),
            2 => Ok(ChainEventKind::Confirmed {
                block_hash: TxHash::get(r)?,
                height: u64::get(r)?,
                depth: u32::get(r)?,
                success: bool::get(r)?,
            }),
            3 => Ok(ChainEventKind::Reorged { height: u64::get(r)? }),
            _ => Err(DecodeError::Invalid("chain event")),
        }
    }
}

wire_struct! {
    /// The chain monitor's webhook about one transaction.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct ChainEvent {
        pub chain: ChainId,
        pub tx_hash: TxHash,
        pub event: ChainEventKind,
    }
}

/// Everything the plugin accepts.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum WithdrawalCommand {
    Create(CreateWithdrawal),
    Operate(Operate),
    RegisterChain(ChainParams),
    RegisterAsset(AssetParams),
    RegisterVault(VaultParams),
    SetVaultEnabled(SetVaultEnabled),
    SetSetting(SetSetting),
    Screened(Screened),
    Decided(Decided),
    SignatureResult(SignatureResult),
    BroadcastResult(BroadcastResult),
    ReceiptsLooked(ReceiptsLooked),
    ChainEvent(ChainEvent),
}

/// Command op codes (the `PluginCommand::op`).
pub mod op {
    pub const CREATE: u16 = 1;
    pub const OPERATE: u16 = 2;
    pub const REGISTER_CHAIN: u16 = 3;
    pub const REGISTER_ASSET: u16 = 4;
    pub const REGISTER_VAULT: u16 = 5;
    pub const SET_VAULT_ENABLED: u16 = 6;
    pub const SET_SETTING: u16 = 7;
    pub const SCREENED: u16 = 16;
    pub const DECIDED: u16 = 17;
    pub const SIGNATURE_RESULT: u16 = 18;
    pub const BROADCAST_RESULT: u16 = 19;
    pub const RECEIPTS_LOOKED: u16 = 20;
    pub const CHAIN_EVENT: u16 = 32;
}

impl WithdrawalCommand {
    /// The op code and body.
    pub fn encode(&self) -> (u16, Vec<u8>) {
        use WithdrawalCommand as C;
        match self {
            C::Create(c) => (op::CREATE, to_vec(c)),
            C::Operate(c) => (op::OPERATE, to_vec(c)),
            C::RegisterChain(c) => (op::REGISTER_CHAIN, to_vec(c)),
            C::RegisterAsset(c) => (op::REGISTER_ASSET, to_vec(c)),
            C::RegisterVault(c) => (op::REGISTER_VAULT, to_vec(c)),
            C::SetVaultEnabled(c) => (op::SET_VAULT_ENABLED, to_vec(c)),
            C::SetSetting(c) => (op::SET_SETTING, to_vec(c)),
            C::Screened(c) => (op::SCREENED, to_vec(c)),
            C::Decided(c) => (op::DECIDED, to_vec(c)),
            C::SignatureResult(c) => (op::SIGNATURE_RESULT, to_vec(c)),
            C::BroadcastResult(c) => (op::BROADCAST_RESULT, to_vec(c)),
            C::ReceiptsLooked(c) => (op::RECEIPTS_LOOKED, to_vec(c)),
            C::ChainEvent(c) => (op::CHAIN_EVENT, to_vec(c)),
        }
    }

    pub fn decode(op: u16, body: &[u8]) -> Result<Self, DecodeError> {
        use WithdrawalCommand as C;
        Ok(match op {
            op::CREATE => C::Create(from_slice(body)?),
            op::OPERATE => C::Operate(from_slice(body)?),
            op::REGISTER_CHAIN => C::RegisterChain(from_slice(body)?),
            op::REGISTER_ASSET => C::RegisterAsset(from_slice(body)?),
            op::REGISTER_VAULT => C::RegisterVault(from_slice(body)?),
            op::SET_VAULT_ENABLED => C::SetVaultEnabled(from_slice(body)?),
            op::SET_SETTING => C::SetSetting(from_slice(body)?),
            op::SCREENED => C::Screened(from_slice(body)?),
            op::DECIDED => C::Decided(from_slice(body)?),
            op::SIGNATURE_RESULT => C::SignatureResult(from_slice(body)?),
            op::BROADCAST_RESULT => C::BroadcastResult(from_slice(body)?),
            op::RECEIPTS_LOOKED => C::ReceiptsLooked(from_slice(body)?),
            op::CHAIN_EVENT => C::ChainEvent(from_slice(body)?),
            other => return Err(DecodeError::UnknownOp(other)),
        })
    }

    /// The journal envelope (fails only if the body exceeds the core's limit).
    pub fn to_plugin_command(&self) -> Result<PluginCommand, InputError> {
        let (op, body) = self.encode();
        PluginCommand::new(PluginKind::Withdrawal, op, body)
    }

    /// The effect this command answers, if it is an effect's result.
    pub fn effect_id(&self) -> Option<u64> {
        use WithdrawalCommand as C;
        match self {
            C::Screened(c) => Some(c.effect_id),
            C::Decided(c) => Some(c.effect_id),
            C::SignatureResult(c) => Some(c.effect_id),
            C::BroadcastResult(c) => Some(c.effect_id),
            C::ReceiptsLooked(c) => Some(c.effect_id),
            _ => None,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::chain::ChainFamily;
    use crate::operation::{ActorKind, RefuseCode};
    use proptest::prelude::*;
    use rtgs_chain_sim::answer::{AmbiguousCode, Receipt, RejectCode};

    fn text(s: &str) -> Text {
        Text::new(s, 256).expect("valid")
    }

    pub(crate) fn samples() -> Vec<WithdrawalCommand> {
        use WithdrawalCommand as C;
        let actor = Actor { kind: ActorKind::Participant, id: ActorId(7) };
        let h = TxHash([3; 32]);
        vec![
            C::Create(CreateWithdrawal {
                account: LedgerAccount(1),
                asset: AssetId(2),
                amount_minor: 1_000,
                destination_type: DestinationType::Whitelisted,
                destination: Some(text("0xabc")),
                memo: None,
                kind: RequestKind::Standard,
                aml: true,
                notes: Some(text("n")),
                actor,
            }),
            C::Create(CreateWithdrawal {
                account: LedgerAccount(1),
                asset: AssetId(2),
                amount_minor: 0,
                destination_type: DestinationType::Network,
                destination: None,
                memo: Some(text("m")),
                kind: RequestKind::Raw(Digest([9; 32])),
                aml: false,
                notes: None,
                actor,
            }),
            C::Operate(Operate {
                withdrawal: WithdrawalId(5),
                operation: OperationKind::Boost,
                actor: Actor { kind: ActorKind::Operator, id: ActorId(1) },
                params: OpParams { fee: Some(30), reason: Some(text("slow")), notes: None },
            }),
            C::RegisterChain(ChainParams::defaults(ChainId(1), ChainFamily::Solana, 5_000, text("rpc-1"))),
            C::RegisterAsset(crate::chain::AssetParams {
                asset: AssetId(1),
                chain: ChainId(1),
                token: TokenId(1),
                currency: CurrencyCode(*b"USD"),
                scale_exp: 4,
                settlement_account: LedgerAccount(99),
            }),
            C::RegisterVault(VaultParams { vault: VaultId(1), chain: ChainId(1), address: 77, next_slot: 3 }),
            C::SetVaultEnabled(SetVaultEnabled { vault: VaultId(1), enabled: false }),
            C::SetSetting(SetSetting { key: SettingKey::StaleThreshold, value: 60 }),
            C::Screened(Screened {
                effect_id: 1 << 16,
                withdrawal: WithdrawalId(5),
                verdict: AmlVerdict::Freeze,
                case_ref: 4,
            }),
            C::Decided(Decided { effect_id: 2, withdrawal: WithdrawalId(5), blocked_by_rule: Some(12) }),
            C::SignatureResult(SignatureResult {
                effect_id: 3,
                withdrawal: WithdrawalId(5),
                outcome: SignOutcome::Signed { signed_payload: Blob(vec![1, 2, 3]), tx_hash: h },
            }),
            C::SignatureResult(SignatureResult {
                effect_id: 3,
                withdrawal: WithdrawalId(5),
                outcome: SignOutcome::Refused { code: RefuseCode::Malformed as u16 },
            }),
            C::BroadcastResult(BroadcastResult {
                effect_id: 4,
                withdrawal: WithdrawalId(5),
                tx_hash: h,
                outcome: BroadcastOutcome::Ambiguous(AmbiguousCode::Timeout),
            }),
            C::BroadcastResult(BroadcastResult {
                effect_id: 4,
                withdrawal: WithdrawalId(5),
                tx_hash: h,
                outcome: BroadcastOutcome::Rejected(RejectCode::Expired),
            }),
            C::ReceiptsLooked(ReceiptsLooked {
                effect_id: 5,
                withdrawal: WithdrawalId(5),
                tip_height: 40,
                slots_used: Some(3),
                receipts: vec![
                    (h, ReceiptStatus::Pending),
                    (
                        TxHash([4; 32]),
                        ReceiptStatus::Mined(Receipt {
                            success: true,
                            block_height: 39,
                            gas_used: 1,
                            gas_cost_usd_micros: 2,
                        }),
                    ),
                ],
            }),
            C::ChainEvent(ChainEvent {
                chain: ChainId(1),
                tx_hash: h,
                event: ChainEventKind::Confirmed { block_hash: h, height: 9, depth: 12, success: true },
            }),
            C::ChainEvent(ChainEvent {
                chain: ChainId(1),
                tx_hash: h,
                event: ChainEventKind::Reorged { height: 9 },
            }),
        ]
    }

    #[test]
    fn every_command_round_trips() {
        for c in samples() {
            let (op, body) = c.encode();
            assert_eq!(WithdrawalCommand::decode(op, &body), Ok(c.clone()), "{c:?}");
            let env = c.to_plugin_command().map_err(|e| e.to_string());
            assert_eq!(env.map(|p| (p.plugin, p.op)), Ok((PluginKind::Withdrawal, op)));
        }
    }

    #[test]
    fn malformed_commands_are_errors() {
        assert_eq!(WithdrawalCommand::decode(999, &[]), Err(DecodeError::UnknownOp(999)));
        for c in samples() {
            let (op, body) = c.encode();
            for n in 0..body.len() {
                assert!(WithdrawalCommand::decode(op, &body[..n]).is_err(), "{c:?} prefix {n}");
            }
            let mut longer = body.clone();
            longer.push(0);
            assert_eq!(WithdrawalCommand::decode(op, &longer), Err(DecodeError::Trailing(1)));
        }
    }

    proptest! {
        #[test]
        fn decode_never_panics(op in 0u16..40, body in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = WithdrawalCommand::decode(op, &body);
        }
    }
}
