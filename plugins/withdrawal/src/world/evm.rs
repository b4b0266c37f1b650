//! An EVM chain for withdrawals: the shared [`EvmChain`] (moved from the collection plugin to
//! `rtgs-chain-sim`) behind [`ChainClient`]. A withdrawal is a transfer of the vault's tokens
//! from the vault (sender and source) to the destination's address, with the slot as nonce and
//! the fee as gas price; a drop is a cancellation (nothing to the vault itself, same nonce).
//!
//! Besides the shared chain's own faults (dropped, stuck, reverted, RPC timeouts before and
//! after acceptance, certain refusals, missing and delayed webhooks, shallow reorgs), deep
//! reorgs past the confirmation depth happen here by probability per block: the reorged
//! transactions come back, or — `deep_conflicting` — a conflicting transaction took their
//! nonce in the other branch, and they never do.

use rtgs_chain_sim::answer::BroadcastOutcome;
use rtgs_chain_sim::evm::{EvmChain, EvmConfig, EvmEvent, EvmTx, Faults, TxState};
use rtgs_core::prng::Prng;

use super::{address_of, ChainClient, LookupAnswer, SignedTx};
use crate::command::{ChainEvent, ChainEventKind};
use crate::effect::RawTx;
use crate::records::Purpose;
use crate::types::*;

/// Gas limit of a withdrawal transfer.
pub const TRANSFER_GAS_LIMIT: u64 = 65_000;

/// Deep reorg faults, per mille.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct DeepReorgs {
    /// Per mined block.
    pub per_block: u32,
    /// Of those, the share where a conflicting transaction took the nonce.
    pub conflicting: u32,
}

pub struct EvmClient {
    pub chain: EvmChain,
    pub deep: DeepReorgs,
    prng: Prng,
    tip_seen: u64,
    events: Vec<EvmEvent>,
    /// Raw transactions by hash (what the chain saw, for the end checks).
    raws: std::collections::BTreeMap<TxHash, RawTx>,
}

impl EvmClient {
    pub fn new(mut cfg: EvmConfig, faults: Faults, deep: DeepReorgs, seed: u64, start_us: u64) -> Self {
        cfg.report_inclusion = true;
        let mut chain = EvmChain::new(cfg, seed, start_us);
        chain.faults = faults;
        EvmClient {
            chain,
            deep,
            prng: Prng::new(seed ^ 0xDEE9),
            tip_seen: 0,
            events: Vec::new(),
            raws: Default::default(),
        }
    }

    /// Gas and tokens for a vault.
    pub fn fund_vault(&mut self, address: u64, token: TokenId) {
        self.chain.fund_native(address, u128::MAX / 4);
        self.chain.fund_token(address, token, u128::MAX / 4);
    }

    fn evm_tx(raw: &RawTx) -> EvmTx {
        let drop = raw.purpose == Purpose::Drop;
        let to = match (&raw.destination, drop) {
            (Some(d), false) => address_of(d),
            _ => raw.vault_address,
        };
        EvmTx {
            chain: raw.chain,
            sender: raw.vault_address,
            nonce: raw.slot,
            source: raw.vault_address,
            to,
            token: raw.token,
            amount_minor: if drop { 0 } else { raw.amount_chain },
            gas_price_wei: raw.fee,
            gas_limit: TRANSFER_GAS_LIMIT,
            tag: (raw.withdrawal.0 << 8) | u64::from(raw.attempt & 0xFF),
        }
    }

    /// A reorg past the confirmation depth now (its reports go out with the next events).
    pub fn reorg_deep(&mut self, depth: u64, conflicting: bool, now_us: u64) {
        self.chain.reorg_deep(depth, conflicting, now_us, &mut self.events);
        self.tip_seen = self.chain.tip();
    }

    fn block_hash(&self, height: u64) -> TxHash {
        self.chain.ledger.blocks.get(height as usize).map(|b| b.hash()).unwrap_or_default()
    }

    fn deep_reorgs(&mut self, now_us: u64) {
        while self.tip_seen < self.chain.tip() {
            self.tip_seen += 1;
            if self.deep.per_block > 0 && self.prng.chance(u64::from(self.deep.per_block), 1000) {
                let c = self.chain.cfg.confirmations;
                let depth = self.prng.range(c, 2 * c);
                let conflicting =
                    self.deep.conflicting > 0 && self.prng.chance(u64::from(self.deep.conflicting), 1000);
                self.chain.reorg_deep(depth, conflicting, now_us, &mut self.events);
                self.tip_seen = self.chain.tip();
                break;
            }
        }
    }
}

impl ChainClient for EvmClient {
    fn broadcast(&mut self, request_id: u64, tx: &SignedTx, now_us: u64) -> BroadcastOutcome {
        self.chain.advance(now_us, &mut self.events);
        self.raws.insert(tx.hash, tx.raw.clone());
        let evm = Self::evm_tx(&tx.raw);
        self.chain.broadcast(request_id, &evm, tx.hash, tx.raw.purpose == Purpose::Drop, now_us)
    }

    fn lookup(&mut self, hashes: &[TxHash], sender: u64, now_us: u64) -> LookupAnswer {
        self.chain.advance(now_us, &mut self.events);
        LookupAnswer {
            tip_height: self.chain.tip(),
            slots_used: Some(self.chain.nonce(sender)),
            receipts: hashes.iter().map(|h| (*h, self.chain.receipt_status(h))).collect(),
        }
    }

    fn advance(&mut self, now_us: u64, out: &mut Vec<(u64, ChainEvent)>) {
        self.chain.advance(now_us, &mut self.events);
        self.deep_reorgs(now_us);
        let chain = self.chain.cfg.chain;
        let depth = u32::try_from(self.chain.cfg.confirmations).unwrap_or(u32::MAX);
        for e in std::mem::take(&mut self.events) {
            let (due, tx_hash, event) = match e {
                EvmEvent::Included { hash, block_height, block_hash, due_us } => {
                    (due_us, hash, ChainEventKind::Included { block_hash, height: block_height })
                }
                EvmEvent::Confirmed { hash, receipt, due_us } => {
                    let block_hash = self.block_hash(receipt.block_height);
                    let height = receipt.block_height;
                    (
                        due_us,
                        hash,
                        ChainEventKind::Confirmed { block_hash, height, depth, success: receipt.success },
                    )
                }
                EvmEvent::Reorged { hash, block_height, due_us } => {
                    (due_us, hash, ChainEventKind::Reorged { height: block_height })
                }
                EvmEvent::Credited { .. } => continue,
            };
            out.push((due, ChainEvent { chain, tx_hash, event }));
        }
    }

    fn seen(&self) -> Vec<(TxHash, Option<RawTx>, bool)> {
        self.chain
            .ledger
            .txs
            .values()
            .filter(|t| !t.foreign)
            .map(|t| {
                let raw = self.raws.get(&t.hash).cloned();
                (t.hash, raw, matches!(t.state, TxState::Mined { success: true, .. }))
            })
            .collect()
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }

    fn figures(&self, out: &mut Vec<(&'static str, u64)>) {
        let s = &self.chain.stats;
        out.extend([
            ("chain_already_known", s.already_known),
            ("chain_nonce_too_low", s.nonce_too_low),
            ("chain_replacements", s.replacements),
            ("chain_reorgs", s.reorgs),
            ("chain_deep_reorgs", s.deep_reorgs),
            ("chain_webhooks_missing", s.webhooks_missing),
        ]);
    }
}
