//! [`SeqChain`]: the non-EVM chains a withdrawal meets, one model with each family's rules.
//!
//! * **UTXO** (Bitcoin): a vault's transactions chain through their change, so they are mined
//!   in order (the slot is the position in the vault's chain); at most
//!   `sender_unconfirmed_max` (25 before Bitcoin Core 31) unconfirmed per vault, the next is
//!   refused (`MempoolLimit`); full RBF — a replacement for the same position must pay the old
//!   fee rate plus the incremental relay rate, else `ReplacementUnderpriced`.
//! * **Solana**: no order between a vault's transactions; a signature carries a recent
//!   blockhash: past it the node refuses it (`Expired`) and a pending one is dropped.
//! * **Algorand, Tezos, Polkadot**: validity windows like Solana's (rounds, branch, era); Tezos
//!   and Polkadot order a vault's operations (counter, nonce) and Tezos keeps one per account
//!   in the mempool (`MempoolLimit` beyond).
//!
//! Blocks every `block_interval_us`; the monitor reports each transaction when mined
//! (`Included`), at `confirmations` deep (`Confirmed`), and when a reorg takes it out
//! (`Reorged`). Faults per mille: dropped, stuck (never mined, expires or is evicted), RPC
//! timeouts before and after acceptance, certain refusals, missing webhooks, shallow reorgs and
//! deep ones (back in the next block, or replaced by a conflicting transaction for its slot).

use std::collections::{BTreeMap, BTreeSet};

use rtgs_chain_sim::answer::{AmbiguousCode, BroadcastOutcome, Receipt, ReceiptStatus, RejectCode};
use rtgs_core::prng::Prng;

use super::{ChainClient, LookupAnswer, SignedTx};
use crate::chain::ChainFamily;
use crate::command::{ChainEvent, ChainEventKind};
use crate::effect::RawTx;
use crate::limits::UTXO_INCREMENTAL_RELAY_SAT_PER_VB;
use crate::types::*;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeqConfig {
    pub chain: ChainId,
    pub family: ChainFamily,
    pub block_interval_us: u64,
    /// Depth of the `Confirmed` report (the plugin's threshold for this chain).
    pub confirmations: u32,
    /// Unconfirmed transactions one sender may have in the mempool (UTXO's chain limit,
    /// Tezos's one operation).
    pub sender_unconfirmed_max: u32,
    pub webhook_latency_us: u64,
    /// Stuck transactions leave the mempool after this long.
    pub stuck_eviction_us: u64,
}

impl SeqConfig {
    /// A chain of `family` with its usual block time and limits.
    pub fn of(chain: ChainId, family: ChainFamily, confirmations: u32) -> SeqConfig {
        let (block_interval_us, sender_unconfirmed_max) = match family {
            ChainFamily::Utxo => (600_000_000, crate::limits::UTXO_UNCONFIRMED_CHAIN_DEFAULT),
            ChainFamily::Solana => (400_000, u32::MAX),
            ChainFamily::Algorand => (3_300_000, u32::MAX),
            ChainFamily::Tezos => (8_000_000, 1),
            ChainFamily::Polkadot => (6_000_000, u32::MAX),
            ChainFamily::Evm => (12_000_000, u32::MAX),
        };
        SeqConfig {
            chain,
            family,
            block_interval_us,
            confirmations: confirmations.max(1),
            sender_unconfirmed_max,
            webhook_latency_us: 1_000_000,
            stuck_eviction_us: 24 * 3_600_000_000,
        }
    }
}

/// Faults per mille.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct SeqFaults {
    pub drop_tx: u32,
    pub stuck_tx: u32,
    pub timeout_before_accept: u32,
    pub timeout_after_accept: u32,
    pub reject_tx: u32,
    pub webhook_missing: u32,
    /// Per block: a reorg shallower than the confirmation depth.
    pub reorg: u32,
    /// Per block: a reorg past it.
    pub deep_reorg: u32,
    /// Of the deep ones, the share where conflicting transactions took the slots.
    pub deep_conflicting: u32,
}

impl SeqFaults {
    pub const NONE: SeqFaults = SeqFaults {
        drop_tx: 0,
        stuck_tx: 0,
        timeout_before_accept: 0,
        timeout_after_accept: 0,
        reject_tx: 0,
        webhook_missing: 0,
        reorg: 0,
        deep_reorg: 0,
        deep_conflicting: 0,
    };
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum TxState {
    Pending,
    Mined { height: u64 },
    Dropped,
    Replaced,
    Expired,
}

#[derive(Clone, Debug)]
struct SeqTx {
    raw: Option<RawTx>,
    sender: u64,
    slot: u64,
    fee: u64,
    valid_until_us: Option<u64>,
    state: TxState,
    stuck: bool,
    accepted_at_us: u64,
}

#[derive(Clone, Debug)]
struct Block {
    hash: TxHash,
    txs: Vec<TxHash>,
}

/// Counts for reports and tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SeqStats {
    pub broadcasts: u64,
    pub already_known: u64,
    pub replacements: u64,
    pub expired: u64,
    pub mempool_limit: u64,
    pub reorgs: u64,
    pub deep_reorgs: u64,
    pub webhooks_missing: u64,
}

pub struct SeqChain {
    pub cfg: SeqConfig,
    pub faults: SeqFaults,
    pub stats: SeqStats,
    prng: Prng,
    txs: BTreeMap<TxHash, SeqTx>,
    /// Pending transactions by (sender, slot) — for unordered chains the slot is a per-hash key.
    mempool: BTreeMap<(u64, u64), TxHash>,
    /// `blocks[h]` is block `h`; block 0 is genesis.
    blocks: Vec<Block>,
    block_next_us: u64,
    /// Highest block whose transactions were reported at the confirmation depth.
    confirmed_height: u64,
    rejected: BTreeMap<u64, RejectCode>,
    conflicts: u64,
    /// Per sender, one past its highest mined slot (ordered chains).
    used: BTreeMap<u64, u64>,
    /// Webhooks produced while answering a call, handed out by the next `advance`.
    pending_events: Vec<(u64, ChainEvent)>,
}

impl SeqChain {
    pub fn new(cfg: SeqConfig, faults: SeqFaults, seed: u64, start_us: u64) -> Self {
        assert!(cfg.block_interval_us > 0, "invalid chain config");
        SeqChain {
            block_next_us: start_us + cfg.block_interval_us,
            cfg,
            faults,
            stats: SeqStats::default(),
            prng: Prng::new(seed),
            txs: BTreeMap::new(),
            mempool: BTreeMap::new(),
            blocks: vec![Block { hash: TxHash::default(), txs: Vec::new() }],
            confirmed_height: 0,
            rejected: BTreeMap::new(),
            conflicts: 0,
            used: BTreeMap::new(),
            pending_events: Vec::new(),
        }
    }

    pub fn tip(&self) -> u64 {
        self.blocks.len() as u64 - 1
    }

    fn ordered(&self) -> bool {
        self.cfg.family.ordered_slots()
    }

    fn roll(&mut self, permille: u32) -> bool {
        permille > 0 && self.prng.chance(u64::from(permille), 1000)
    }

    /// Slots of `sender` the chain has used (ordered chains): one past the highest mined.
    pub fn slots_used(&self, sender: u64) -> u64 {
        self.used.get(&sender).copied().unwrap_or(0)
    }

    /// Recounts a sender's used slots from its mined transactions (after a reorg).
    fn recount(&mut self, sender: u64) {
        let used = self
            .txs
            .values()
            .filter(|t| t.sender == sender && matches!(t.state, TxState::Mined { .. }))
            .map(|t| t.slot + 1)
            .max()
            .unwrap_or(0);
        self.used.insert(sender, used);
    }

    fn key(&self, sender: u64, slot: u64, hash: &TxHash) -> (u64, u64) {
        if self.ordered() {
            (sender, slot)
        } else {
            (sender, u64::from_le_bytes(hash.0[..8].try_into().unwrap_or([0; 8])))
        }
    }

    fn pending_of(&self, sender: u64) -> usize {
        self.mempool.range((sender, 0)..=(sender, u64::MAX)).count()
    }

    fn outcome(&mut self, tx: &SignedTx, now_us: u64) -> BroadcastOutcome {
        let raw = &tx.raw;
        if raw.chain != self.cfg.chain || raw.family != self.cfg.family {
            return BroadcastOutcome::Rejected(RejectCode::Invalid);
        }
        match self.txs.get(&tx.hash).map(|t| t.state) {
            Some(TxState::Pending) => {
                self.stats.already_known += 1;
                return BroadcastOutcome::Accepted;
            }
            Some(TxState::Mined { .. }) if self.ordered() => {
                return BroadcastOutcome::Ambiguous(AmbiguousCode::NonceTooLow);
            }
            Some(TxState::Mined { .. }) => return BroadcastOutcome::Accepted,
            _ => {}
        }
        if self.roll(self.faults.timeout_before_accept) {
            return BroadcastOutcome::Ambiguous(AmbiguousCode::Timeout);
        }
        if tx.valid_until_us.is_some_and(|v| v <= now_us) {
            self.stats.expired += 1;
            return BroadcastOutcome::Rejected(RejectCode::Expired);
        }
        let sender = raw.vault_address;
        if self.ordered() && raw.slot < self.slots_used(sender) {
            return BroadcastOutcome::Ambiguous(AmbiguousCode::NonceTooLow);
        }
        let key = self.key(sender, raw.slot, &tx.hash);
        if let Err(code) = self.make_room(key, raw.fee, sender) {
            return BroadcastOutcome::Rejected(code);
        }
        if self.roll(self.faults.reject_tx) {
            return BroadcastOutcome::Rejected(RejectCode::InsufficientFunds);
        }
        let dropped = self.roll(self.faults.drop_tx);
        let stuck = !dropped && self.roll(self.faults.stuck_tx);
        self.txs.insert(
            tx.hash,
            SeqTx {
                raw: Some(raw.clone()),
                sender,
                slot: raw.slot,
                fee: raw.fee,
                valid_until_us: tx.valid_until_us,
                state: if dropped { TxState::Dropped } else { TxState::Pending },
                stuck,
                accepted_at_us: now_us,
            },
        );
        if !dropped {
            self.mempool.insert(key, tx.hash);
        }
        if self.roll(self.faults.timeout_after_accept) {
            return BroadcastOutcome::Ambiguous(AmbiguousCode::Timeout);
        }
        BroadcastOutcome::Accepted
    }

    /// Room for a transaction at `key`: a pending one there is replaced only by UTXO's RBF
    /// rule; a sender at its unconfirmed limit gets nothing more.
    fn make_room(&mut self, key: (u64, u64), fee: u64, sender: u64) -> Result<(), RejectCode> {
        if let Some(old) = self.mempool.get(&key).copied() {
            if self.cfg.family != ChainFamily::Utxo {
                self.stats.mempool_limit += 1;
                return Err(RejectCode::MempoolLimit);
            }
            let old_fee = self.txs.get(&old).map_or(0, |t| t.fee);
            if fee < old_fee.saturating_add(UTXO_INCREMENTAL_RELAY_SAT_PER_VB) {
                return Err(RejectCode::ReplacementUnderpriced);
            }
            self.mempool.remove(&key);
            if let Some(t) = self.txs.get_mut(&old) {
                t.state = TxState::Replaced;
            }
            self.stats.replacements += 1;
            return Ok(());
        }
        if self.pending_of(sender) >= self.cfg.sender_unconfirmed_max as usize {
            self.stats.mempool_limit += 1;
            return Err(RejectCode::MempoolLimit);
        }
        Ok(())
    }

    // ----- blocks -----

    fn mine(&mut self, t: u64, out: &mut Vec<(u64, ChainEvent)>) {
        // Expired and long-stuck transactions leave the mempool first.
        let gone: Vec<((u64, u64), TxHash)> = self
            .mempool
            .iter()
            .filter(|(_, h)| {
                self.txs.get(*h).is_some_and(|tx| {
                    tx.valid_until_us.is_some_and(|v| v <= t)
                        || (tx.stuck && t.saturating_sub(tx.accepted_at_us) >= self.cfg.stuck_eviction_us)
                })
            })
            .map(|(k, h)| (*k, *h))
            .collect();
        for (k, h) in gone {
            self.mempool.remove(&k);
            if let Some(tx) = self.txs.get_mut(&h) {
                tx.state = if tx.valid_until_us.is_some_and(|v| v <= t) {
                    TxState::Expired
                } else {
                    TxState::Dropped
                };
            }
        }
        let height = self.tip() + 1;
        let mut mined = Vec::new();
        if self.ordered() {
            let senders: BTreeSet<u64> = self.mempool.keys().map(|(s, _)| *s).collect();
            for s in senders {
                let mut next = self.slots_used(s);
                while let Some(&h) = self.mempool.get(&(s, next)) {
                    if self.txs.get(&h).is_none_or(|t| t.stuck) {
                        break;
                    }
                    self.mempool.remove(&(s, next));
                    mined.push(h);
                    next += 1;
                }
            }
        } else {
            let ready: Vec<((u64, u64), TxHash)> = self
                .mempool
                .iter()
                .filter(|(_, h)| self.txs.get(*h).is_some_and(|t| !t.stuck))
                .map(|(k, h)| (*k, *h))
                .collect();
            for (k, h) in ready {
                self.mempool.remove(&k);
                mined.push(h);
            }
        }
        for h in &mined {
            if let Some(tx) = self.txs.get_mut(h) {
                tx.state = TxState::Mined { height };
                let used = self.used.entry(tx.sender).or_default();
                *used = (*used).max(tx.slot + 1);
            }
        }
        let mut body = height.to_le_bytes().to_vec();
        body.extend_from_slice(&t.to_le_bytes());
        let hash = TxHash::of(0x0B10_C5E9, &body);
        for h in &mined {
            self.report(t, *h, ChainEventKind::Included { block_hash: hash, height }, out);
        }
        self.blocks.push(Block { hash, txs: mined });
        self.report_confirmed(t, out);
    }

    fn report(&mut self, t: u64, tx_hash: TxHash, event: ChainEventKind, out: &mut Vec<(u64, ChainEvent)>) {
        if self.roll(self.faults.webhook_missing) {
            self.stats.webhooks_missing += 1;
            return;
        }
        let foreign = self.txs.get(&tx_hash).is_none_or(|t| t.raw.is_none());
        if !foreign {
            out.push((t + self.cfg.webhook_latency_us, ChainEvent { chain: self.cfg.chain, tx_hash, event }));
        }
    }

    fn report_confirmed(&mut self, t: u64, out: &mut Vec<(u64, ChainEvent)>) {
        let depth = u64::from(self.cfg.confirmations);
        let safe = (self.tip() + 1).saturating_sub(depth);
        while self.confirmed_height < safe {
            self.confirmed_height += 1;
            let h = self.confirmed_height;
            let Some(block) = self.blocks.get(h as usize).cloned() else { break };
            for tx in block.txs {
                let event = ChainEventKind::Confirmed {
                    block_hash: block.hash,
                    height: h,
                    depth: self.cfg.confirmations,
                    success: true,
                };
                self.report(t, tx, event, out);
            }
        }
    }

    /// Drops the last `depth` blocks: their transactions go back to the mempool, or (with
    /// `conflicting`) are replaced by a transaction for the same slot that is not ours.
    pub fn reorg(&mut self, depth: u64, conflicting: bool, t: u64, out: &mut Vec<(u64, ChainEvent)>) {
        let depth = depth.min(self.tip());
        if depth == 0 {
            return;
        }
        self.stats.reorgs += 1;
        if depth >= u64::from(self.cfg.confirmations) {
            self.stats.deep_reorgs += 1;
        }
        let new_tip = self.tip() - depth;
        let mut senders = BTreeSet::new();
        while self.tip() > new_tip {
            let Some(block) = self.blocks.pop() else { break };
            let height = self.tip() + 1;
            for h in block.txs.iter().rev() {
                self.report(t, *h, ChainEventKind::Reorged { height }, out);
                if let Some(s) = self.unmine(*h, conflicting, t) {
                    senders.insert(s);
                }
            }
        }
        for s in senders {
            self.recount(s);
        }
        self.confirmed_height = self.confirmed_height.min(new_tip);
    }

    /// Takes a transaction out of its block; the sender whose slots changed.
    fn unmine(&mut self, h: TxHash, conflicting: bool, t: u64) -> Option<u64> {
        let tx = self.txs.get_mut(&h)?;
        let (sender, slot) = (tx.sender, tx.slot);
        if !conflicting || tx.raw.is_none() {
            tx.state = TxState::Pending;
            let key = self.key(sender, slot, &h);
            self.mempool.insert(key, h);
            return Some(sender);
        }
        tx.state = TxState::Replaced;
        if self.ordered() {
            self.conflicts += 1;
            let c = TxHash::of(0xC0F1, &self.conflicts.to_le_bytes());
            let foreign = SeqTx {
                raw: None,
                sender,
                slot,
                fee: 0,
                valid_until_us: None,
                state: TxState::Pending,
                stuck: false,
                accepted_at_us: t,
            };
            self.txs.insert(c, foreign);
            self.mempool.insert((sender, slot), c);
        }
        Some(sender)
    }
}

impl ChainClient for SeqChain {
    fn broadcast(&mut self, request_id: u64, tx: &SignedTx, now_us: u64) -> BroadcastOutcome {
        let mut sink = Vec::new();
        self.advance(now_us, &mut sink);
        self.pending_events.extend(sink);
        self.stats.broadcasts += 1;
        if let Some(code) = self.rejected.get(&request_id) {
            return BroadcastOutcome::Rejected(*code);
        }
        let outcome = self.outcome(tx, now_us);
        if let BroadcastOutcome::Rejected(code) = outcome {
            self.rejected.insert(request_id, code);
        }
        outcome
    }

    fn lookup(&mut self, hashes: &[TxHash], sender: u64, now_us: u64) -> LookupAnswer {
        let mut sink = Vec::new();
        self.advance(now_us, &mut sink);
        self.pending_events.extend(sink);
        let receipts = hashes
            .iter()
            .map(|h| {
                let status = match self.txs.get(h).map(|t| t.state) {
                    Some(TxState::Pending) => ReceiptStatus::Pending,
                    Some(TxState::Mined { height }) => ReceiptStatus::Mined(Receipt {
                        success: true,
                        block_height: height,
                        gas_used: 0,
                        gas_cost_usd_micros: 0,
                    }),
                    _ => ReceiptStatus::Unknown,
                };
                (*h, status)
            })
            .collect();
        let slots_used = self.ordered().then(|| self.slots_used(sender));
        LookupAnswer { tip_height: self.tip(), slots_used, receipts }
    }

    fn advance(&mut self, now_us: u64, out: &mut Vec<(u64, ChainEvent)>) {
        out.append(&mut self.pending_events);
        while self.block_next_us <= now_us {
            let t = self.block_next_us;
            self.block_next_us += self.cfg.block_interval_us;
            let c = u64::from(self.cfg.confirmations);
            if c > 1 && self.roll(self.faults.reorg) {
                let depth = self.prng.range(1, c - 1);
                let depth = depth.min(self.tip().saturating_sub(self.confirmed_height));
                self.reorg(depth, false, t, out);
            } else if self.roll(self.faults.deep_reorg) {
                let depth = self.prng.range(c, 2 * c);
                let conflicting = self.roll(self.faults.deep_conflicting);
                self.reorg(depth, conflicting, t, out);
            }
            self.mine(t, out);
        }
    }

    fn seen(&self) -> Vec<(TxHash, Option<RawTx>, bool)> {
        self.txs
            .iter()
            .filter(|(_, t)| t.raw.is_some())
            .map(|(h, t)| (*h, t.raw.clone(), matches!(t.state, TxState::Mined { .. })))
            .collect()
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }

    fn figures(&self, out: &mut Vec<(&'static str, u64)>) {
        let s = &self.stats;
        out.extend([
            ("chain_already_known", s.already_known),
            ("chain_replacements", s.replacements),
            ("chain_reorgs", s.reorgs),
            ("chain_deep_reorgs", s.deep_reorgs),
            ("chain_expired", s.expired),
            ("chain_mempool_limit", s.mempool_limit),
            ("chain_webhooks_missing", s.webhooks_missing),
        ]);
    }
}
