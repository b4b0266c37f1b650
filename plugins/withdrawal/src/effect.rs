//! Effects: requests to the outside world, emitted as `rtgs_core::plugin::Effect { op, body }`
//! and executed on the owner center only, by the adapter of the service they name (`world`):
//! the AML screener, the policy engine and approvers, the custody signer, a chain's node.
//! Each result re-enters the journal as a [`crate::WithdrawalCommand`] naming the effect id.
//!
//! Re-executing an effect must be harmless: `Sign` carries the whole raw transaction (vault,
//! slot, fee, validity), so a second signature of it is the same signed payload; `Broadcast`
//! carries that signed payload, so a second execution sends the *same* transaction ("already
//! known", or "nonce too low" once mined). A node that refused a transaction for certain
//! answers the same effect again with the same refusal.

use rtgs_core::entry::{PluginKind, Seq};
use rtgs_core::plugin::Effect;

use crate::chain::ChainFamily;
use crate::command::{DestinationType, RequestKind};
use crate::records::Purpose;
use crate::types::*;
use crate::wire::{from_slice, to_vec, DecodeError};

wire_struct! {
    /// Screen a withdrawal (Chainalysis / Elliptic style): destination and amount.
    #[derive(Clone, PartialEq, Eq, Debug)]
    pub struct Screen {
        pub withdrawal: WithdrawalId,
        pub account: LedgerAccount,
        pub asset: AssetId,
        pub chain: ChainId,
        pub amount_chain: u128,
        pub destination_type: DestinationType,
        pub destination: Text,
    }
}

wire_struct! {
    /// Ask for authorization: the policy engine decides (block, or on to the approvers) and
    /// the approvers approve (or never answer: the plugin's 2 h timer).
    #[derive(Clone, PartialEq, Eq, Debug)]
    pub struct Authorize {
        pub withdrawal: WithdrawalId,
        pub account: LedgerAccount,
        pub asset: AssetId,
        pub chain: ChainId,
        pub amount_chain: u128,
        pub destination: Option<Text>,
        pub kind: RequestKind,
    }
}

wire_struct! {
    /// A transaction as the plugin builds it, before signing (`raw_payload_cbor`). Everything a
    /// node needs is in it, so the signature over it is the transaction.
    #[derive(Clone, PartialEq, Eq, Debug)]
    pub struct RawTx {
        pub withdrawal: WithdrawalId,
        pub round: u32,
        /// The attempt number it will have.
        pub attempt: u32,
        pub purpose: Purpose,
        pub chain: ChainId,
        pub family: ChainFamily,
        pub vault: VaultId,
        pub vault_address: u64,
        /// Nonce, counter or change position (0 where slots are not ordered).
        pub slot: u64,
        /// `None` for a drop: to the vault itself.
        pub destination: Option<Text>,
        pub memo: Option<Text>,
        pub token: TokenId,
        /// Token units (0 for a drop).
        pub amount_chain: u128,
        pub fee: u64,
        /// Journal time after which the signature is invalid (blockhash, rounds, era, branch).
        pub valid_until_us: Option<u64>,
    }
}

wire_struct! {
    /// Sign a transaction; `sign_only`: the signed payload goes back to the customer, who
    /// broadcasts it (SIGNED).
    #[derive(Clone, PartialEq, Eq, Debug)]
    pub struct Sign {
        pub raw: RawTx,
        pub sign_only: bool,
    }
}

wire_struct! {
    /// Sign a raw digest with the key of `chain`'s vaults (raw signing: no transaction).
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct SignRaw {
        pub withdrawal: WithdrawalId,
        pub chain: ChainId,
        pub digest: Digest,
    }
}

wire_struct! {
    /// Send a signed transaction to a node of its chain.
    #[derive(Clone, PartialEq, Eq, Debug)]
    pub struct Broadcast {
        pub withdrawal: WithdrawalId,
        pub attempt: u32,
        pub chain: ChainId,
        pub node: Text,
        pub tx_hash: TxHash,
        pub signed_payload: Blob,
    }
}

wire_struct! {
    /// Ask the chain about every hash of a slot (the stale monitor, a validity or reorg check,
    /// an ambiguous broadcast), and how many of the vault's slots it has used.
    #[derive(Clone, PartialEq, Eq, Debug)]
    pub struct Lookup {
        pub withdrawal: WithdrawalId,
        pub chain: ChainId,
        pub vault_address: u64,
        pub slot: Option<u64>,
        pub hashes: Vec<TxHash>,
    }
}

/// Everything the plugin asks of the outside world.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum WithdrawalEffect {
    Screen(Screen),
    Authorize(Authorize),
    Sign(Sign),
    SignRaw(SignRaw),
    Broadcast(Broadcast),
    Lookup(Lookup),
}

/// Effect op codes (the `Effect::op`).
pub mod op {
    pub const SCREEN: u16 = 1;
    pub const AUTHORIZE: u16 = 2;
    pub const SIGN: u16 = 3;
    pub const SIGN_RAW: u16 = 4;
    pub const BROADCAST: u16 = 5;
    pub const LOOKUP: u16 = 6;
    // 7 was ALERT: alerts are state now (`crate::alert`), not effects.
}

impl WithdrawalEffect {
    pub fn encode(&self) -> (u16, Vec<u8>) {
        use WithdrawalEffect as E;
        match self {
            E::Screen(e) => (op::SCREEN, to_vec(e)),
            E::Authorize(e) => (op::AUTHORIZE, to_vec(e)),
            E::Sign(e) => (op::SIGN, to_vec(e)),
            E::SignRaw(e) => (op::SIGN_RAW, to_vec(e)),
            E::Broadcast(e) => (op::BROADCAST, to_vec(e)),
            E::Lookup(e) => (op::LOOKUP, to_vec(e)),
        }
    }

    pub fn decode(op: u16, body: &[u8]) -> Result<Self, DecodeError> {
        use WithdrawalEffect as E;
        Ok(match op {
            op::SCREEN => E::Screen(from_slice(body)?),
            op::AUTHORIZE => E::Authorize(from_slice(body)?),
            op::SIGN => E::Sign(from_slice(body)?),
            op::SIGN_RAW => E::SignRaw(from_slice(body)?),
            op::BROADCAST => E::Broadcast(from_slice(body)?),
            op::LOOKUP => E::Lookup(from_slice(body)?),
            other => return Err(DecodeError::UnknownOp(other)),
        })
    }

    /// Decodes a core effect; it must be the withdrawal plugin's.
    pub fn from_effect(e: &Effect) -> Result<Self, DecodeError> {
        if e.plugin != PluginKind::Withdrawal {
            return Err(DecodeError::Invalid("effect of another plugin"));
        }
        Self::decode(e.op, &e.body)
    }

    /// As a core effect with id `effect_id`.
    pub fn to_effect(&self, effect_id: u64) -> Effect {
        let (op, body) = self.encode();
        Effect { plugin: PluginKind::Withdrawal, effect_id, op, body }
    }

    /// The withdrawal it concerns.
    pub fn withdrawal(&self) -> WithdrawalId {
        use WithdrawalEffect as E;
        match self {
            E::Screen(e) => e.withdrawal,
            E::Authorize(e) => e.withdrawal,
            E::Sign(e) => e.raw.withdrawal,
            E::SignRaw(e) => e.withdrawal,
            E::Broadcast(e) => e.withdrawal,
            E::Lookup(e) => e.withdrawal,
        }
    }
}

/// Hands out the effect ids of one entry: `Effect::id_for(seq, 0), (seq, 1), ...`.
pub(crate) struct EffectIds {
    seq: Seq,
    next_index: usize,
}

impl EffectIds {
    pub(crate) fn new(seq: Seq) -> Self {
        EffectIds { seq, next_index: 0 }
    }

    /// Whether `n` more effects fit this entry's id space.
    pub(crate) fn has_room(&self, n: usize) -> bool {
        self.next_index + n <= crate::limits::EFFECTS_PER_ENTRY_MAX
    }

    /// The next id. Callers check `has_room` where the count depends on input; running out here
    /// is a bug.
    pub(crate) fn next(&mut self) -> u64 {
        assert!(self.has_room(1), "effect budget of one entry exceeded");
        let id = Effect::id_for(self.seq, self.next_index as u16);
        self.next_index += 1;
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn samples() -> Vec<WithdrawalEffect> {
        use WithdrawalEffect as E;
        let text = |s: &str| Text::new(s, 64).expect("valid");
        let raw = RawTx {
            withdrawal: WithdrawalId(4),
            round: 1,
            attempt: 2,
            purpose: Purpose::Boost,
            chain: ChainId(1),
            family: ChainFamily::Evm,
            vault: VaultId(3),
            vault_address: 300,
            slot: 7,
            destination: Some(text("0xdead")),
            memo: None,
            token: TokenId(1),
            amount_chain: 10_000,
            fee: 110,
            valid_until_us: None,
        };
        vec![
            E::Screen(Screen {
                withdrawal: WithdrawalId(4),
                account: LedgerAccount(1),
                asset: AssetId(1),
                chain: ChainId(1),
                amount_chain: 5,
                destination_type: DestinationType::OneTime,
                destination: text("bc1q"),
            }),
            E::Authorize(Authorize {
                withdrawal: WithdrawalId(4),
                account: LedgerAccount(1),
                asset: AssetId(1),
                chain: ChainId(1),
                amount_chain: 5,
                destination: None,
                kind: RequestKind::Raw(Digest([1; 32])),
            }),
            E::Sign(Sign { raw, sign_only: true }),
            E::SignRaw(SignRaw { withdrawal: WithdrawalId(4), chain: ChainId(2), digest: Digest([2; 32]) }),
            E::Broadcast(Broadcast {
                withdrawal: WithdrawalId(4),
                attempt: 1,
                chain: ChainId(1),
                node: text("rpc"),
                tx_hash: TxHash([5; 32]),
                signed_payload: Blob(vec![9; 40]),
            }),
            E::Lookup(Lookup {
                withdrawal: WithdrawalId(4),
                chain: ChainId(1),
                vault_address: 300,
                slot: Some(7),
                hashes: vec![TxHash([5; 32]), TxHash([6; 32])],
            }),
        ]
    }

    #[test]
    fn every_effect_round_trips_and_ids_are_deterministic() {
        let mut ids = EffectIds::new(9);
        for (i, e) in samples().into_iter().enumerate() {
            let id = ids.next();
            assert_eq!(id, Effect::id_for(9, i as u16));
            let raw = e.to_effect(id);
            assert_eq!(WithdrawalEffect::from_effect(&raw), Ok(e.clone()));
            for n in 0..raw.body.len() {
                assert!(WithdrawalEffect::decode(raw.op, &raw.body[..n]).is_err());
            }
        }
        assert_eq!(WithdrawalEffect::decode(77, &[]), Err(DecodeError::UnknownOp(77)));
        let foreign = Effect { plugin: PluginKind::Collection, effect_id: 1, op: 1, body: vec![] };
        assert!(WithdrawalEffect::from_effect(&foreign).is_err());
    }
}
