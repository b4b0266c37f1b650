//! Effects: requests to the outside world, emitted as `rtgs_core::plugin::Effect { op, body }`
//! and executed by an adapter ([`crate::ChainAdapter`]) on the owning center only. Each result
//! re-enters the journal as a [`crate::CollectionCommand`] naming the effect id.
//!
//! Re-executing an effect must be harmless: `Broadcast` and `Cancel` carry everything of the
//! signed transaction (nonce, gas price, amount), so a second execution sends the *same*
//! transaction, which a node answers with "already known" (or "nonce too low" once it is
//! mined). An adapter answers a re-executed effect it refused for certain with the same refusal.

use rtgs_core::entry::{PluginKind, Seq};
use rtgs_core::plugin::Effect;

use crate::types::*;
use crate::wire::{from_slice, to_vec, DecodeError};

wire_struct! {
    /// Read the on-chain balance (and allowance, token price, gas price) of every listed wallet
    /// and token, all at one block, which must be one no reorg can undo (the depth at which
    /// deposits are confirmed).
    #[derive(Clone, PartialEq, Eq, Debug)]
    pub struct ReadBalances {
        pub chain: ChainId,
        pub groups: Vec<(WalletId, TokenId)>,
    }
}

wire_struct! {
    /// Sign and send one sweep: `executeTransfer(wallet, token, amount, batch)` from the relayer.
    /// The batch id in the call makes every batch's transaction distinct (and names the batch
    /// on chain).
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct SweepTx {
        pub batch: BatchId,
        pub chain: ChainId,
        pub relayer: RelayerId,
        pub nonce: u64,
        pub wallet: WalletId,
        pub token: TokenId,
        /// Exactly the balance read (the on-chain source of truth), not the sum of deposits.
        pub amount_minor: u128,
        pub gas_price_wei: u64,
        pub gas_limit: u64,
    }
}

wire_struct! {
    /// Look up the receipt of every hash sent for one nonce, and the relayer's mined nonce count.
    #[derive(Clone, PartialEq, Eq, Debug)]
    pub struct LookupReceipts {
        pub batch: BatchId,
        pub chain: ChainId,
        pub relayer: RelayerId,
        pub nonce: u64,
        pub hashes: Vec<TxHash>,
    }
}

wire_struct! {
    /// Kill a given-up nonce: a zero-value transfer from the relayer to itself with the same
    /// nonce and a higher gas price. Once the nonce is mined, a sweep sent with it either was
    /// the one mined (late success) or never will be.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct CancelTx {
        pub batch: BatchId,
        pub chain: ChainId,
        pub relayer: RelayerId,
        pub nonce: u64,
        pub gas_price_wei: u64,
        pub gas_limit: u64,
    }
}

/// Everything the plugin asks of the outside world.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum CollectionEffect {
    ReadBalances(ReadBalances),
    Broadcast(SweepTx),
    LookupReceipts(LookupReceipts),
    Cancel(CancelTx),
}

/// Effect op codes (the `Effect::op`).
pub mod op {
    pub const READ_BALANCES: u16 = 1;
    pub const BROADCAST: u16 = 2;
    pub const LOOKUP_RECEIPTS: u16 = 3;
    pub const CANCEL: u16 = 4;
    // 5 was ALERT: alerts are state now (`crate::alert`), not effects.
}

impl CollectionEffect {
    pub fn encode(&self) -> (u16, Vec<u8>) {
        use CollectionEffect as E;
        match self {
            E::ReadBalances(e) => (op::READ_BALANCES, to_vec(e)),
            E::Broadcast(e) => (op::BROADCAST, to_vec(e)),
            E::LookupReceipts(e) => (op::LOOKUP_RECEIPTS, to_vec(e)),
            E::Cancel(e) => (op::CANCEL, to_vec(e)),
        }
    }

    pub fn decode(op: u16, body: &[u8]) -> Result<Self, DecodeError> {
        use CollectionEffect as E;
        Ok(match op {
            op::READ_BALANCES => E::ReadBalances(from_slice(body)?),
            op::BROADCAST => E::Broadcast(from_slice(body)?),
            op::LOOKUP_RECEIPTS => E::LookupReceipts(from_slice(body)?),
            op::CANCEL => E::Cancel(from_slice(body)?),
            other => return Err(DecodeError::UnknownOp(other)),
        })
    }

    /// Decodes a core effect; it must be the collection plugin's.
    pub fn from_effect(e: &Effect) -> Result<Self, DecodeError> {
        if e.plugin != PluginKind::Collection {
            return Err(DecodeError::Invalid("effect of another plugin"));
        }
        Self::decode(e.op, &e.body)
    }
}

/// Hands out the effect ids of one entry: `Effect::id_for(seq, 0), (seq, 1), ...`.
pub(crate) struct EffectSink<'a> {
    seq: Seq,
    next_index: usize,
    effects: &'a mut Vec<Effect>,
}

impl<'a> EffectSink<'a> {
    pub(crate) fn new(seq: Seq, effects: &'a mut Vec<Effect>) -> Self {
        EffectSink { seq, next_index: 0, effects }
    }

    /// Whether `n` more effects fit this entry's id space.
    pub(crate) fn has_room(&self, n: usize) -> bool {
        self.next_index + n <= crate::limits::EFFECTS_PER_ENTRY_MAX
    }

    /// Emits one effect and returns its id. Callers check `has_room` where the count depends
    /// on input; running out here is a bug.
    pub(crate) fn emit(&mut self, effect: &CollectionEffect) -> u64 {
        assert!(self.has_room(1), "effect budget of one entry exceeded");
        let id = Effect::id_for(self.seq, self.next_index as u16);
        self.next_index += 1;
        let (op, body) = effect.encode();
        self.effects.push(Effect { plugin: PluginKind::Collection, effect_id: id, op, body });
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples() -> Vec<CollectionEffect> {
        use CollectionEffect as E;
        vec![
            E::ReadBalances(ReadBalances {
                chain: ChainId(1),
                groups: vec![(WalletId(1), TokenId(2)), (WalletId(3), TokenId(2))],
            }),
            E::Broadcast(SweepTx {
                batch: BatchId(1),
                chain: ChainId(1),
                relayer: RelayerId(50),
                nonce: 7,
                wallet: WalletId(1),
                token: TokenId(2),
                amount_minor: 1_800_000,
                gas_price_wei: 20_000_000_000,
                gas_limit: 100_000,
            }),
            E::LookupReceipts(LookupReceipts {
                batch: BatchId(1),
                chain: ChainId(1),
                relayer: RelayerId(50),
                nonce: 7,
                hashes: vec![TxHash([1; 32]), TxHash([2; 32])],
            }),
            E::Cancel(CancelTx {
                batch: BatchId(1),
                chain: ChainId(1),
                relayer: RelayerId(50),
                nonce: 7,
                gas_price_wei: 30_000_000_000,
                gas_limit: 21_000,
            }),
        ]
    }

    #[test]
    fn every_effect_round_trips_and_ids_are_deterministic() {
        let mut out = Vec::new();
        let mut sink = EffectSink::new(9, &mut out);
        for e in samples() {
            sink.emit(&e);
        }
        for (i, (raw, e)) in out.iter().zip(samples()).enumerate() {
            assert_eq!(raw.effect_id, Effect::id_for(9, i as u16));
            assert_eq!(CollectionEffect::from_effect(raw), Ok(e));
        }
        assert_eq!(CollectionEffect::decode(77, &[]), Err(DecodeError::UnknownOp(77)));
        let foreign = Effect { plugin: PluginKind::Matching, effect_id: 1, op: 1, body: vec![] };
        assert!(CollectionEffect::from_effect(&foreign).is_err());
    }

    #[test]
    fn truncated_effects_are_errors() {
        for e in samples() {
            let (op, body) = e.encode();
            for n in 0..body.len() {
                assert!(CollectionEffect::decode(op, &body[..n]).is_err());
            }
        }
    }
}
