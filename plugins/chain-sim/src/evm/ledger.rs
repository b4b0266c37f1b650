//! The simulated EVM chain's ledger: token and native balances with per-block history, account
//! nonces, a mempool, blocks, receipts and reorgs.
//!
//! Values keep their history by block height, so a balance can be read at an older block (the
//! "safe" height below any possible reorg) and a reorg simply cuts every history above the new
//! tip and puts the cut blocks' transactions back into the mempool.

use std::collections::{BTreeMap, BTreeSet};

use super::EvmTx;
use crate::answer::{Receipt, ReceiptStatus};
use crate::types::*;

/// A value per key with its history by block height.
#[derive(Clone, Debug)]
pub struct History<K: Ord> {
    map: BTreeMap<K, Vec<(u64, u128)>>,
}

impl<K: Ord + Copy> Default for History<K> {
    fn default() -> Self {
        History { map: BTreeMap::new() }
    }
}

impl<K: Ord + Copy> History<K> {
    /// The value at the end of block `height`.
    pub fn at(&self, key: K, height: u64) -> u128 {
        let Some(v) = self.map.get(&key) else { return 0 };
        let n = v.partition_point(|(h, _)| *h <= height);
        if n == 0 {
            0
        } else {
            v[n - 1].1
        }
    }

    pub fn latest(&self, key: K) -> u128 {
        self.map.get(&key).and_then(|v| v.last()).map_or(0, |(_, x)| *x)
    }

    pub fn set(&mut self, key: K, height: u64, value: u128) {
        let v = self.map.entry(key).or_default();
        match v.last_mut() {
            Some((h, x)) if *h == height => *x = value,
            _ => v.push((height, value)),
        }
    }

    /// Forgets every change made above `height` (a reorg).
    pub fn truncate_above(&mut self, height: u64) {
        for v in self.map.values_mut() {
            let keep = v.partition_point(|(h, _)| *h <= height);
            v.truncate(keep);
        }
    }
}

/// Where a transaction is.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum TxState {
    Pending,
    Mined {
        height: u64,
        success: bool,
        gas_used: u64,
    },
    /// Accepted, then lost from every mempool.
    Dropped,
    /// Replaced by another with the same nonce and a higher gas price.
    Replaced,
    /// Stuck too long: evicted from the mempool.
    Evicted,
}

/// One signed transaction the chain has seen.
#[derive(Clone, Debug)]
pub struct TxRecord {
    pub tx: EvmTx,
    pub hash: TxHash,
    pub state: TxState,
    /// Never mined (e.g. underpriced forever) until replaced or evicted.
    pub stuck: bool,
    /// Executes with status 0.
    pub revert: bool,
    /// A zero-value self-transfer that only uses the nonce.
    pub cancel: bool,
    /// Not sent by any plugin: the conflicting transaction a deep reorg's other branch held.
    pub foreign: bool,
    pub accepted_at_us: u64,
}

/// An incoming transfer from outside the simulated accounts (a user's deposit): it credits
/// `address` in the next block. `tag` is the caller's name for it (a deposit id).
#[derive(Clone, Debug)]
pub struct Credit {
    pub tag: u64,
    pub address: Address,
    pub token: TokenId,
    pub amount_minor: u128,
    pub mined_height: Option<u64>,
}

#[derive(Clone, Debug, Default)]
pub struct Block {
    pub height: u64,
    pub time_us: u64,
    pub txs: Vec<TxHash>,
    pub credits: Vec<usize>,
}

impl Block {
    /// The block's hash: its height and time (a block mined again after a reorg is another block).
    pub fn hash(&self) -> TxHash {
        let mut body = [0u8; 16];
        body[..8].copy_from_slice(&self.height.to_le_bytes());
        body[8..].copy_from_slice(&self.time_us.to_le_bytes());
        TxHash::of(0xB10C_0000, &body)
    }
}

/// Parameters the ledger needs to execute a block.
#[derive(Copy, Clone, Debug)]
pub struct ExecParams {
    /// Gas every transaction uses.
    pub gas_used: u64,
}

/// The chain's state.
#[derive(Clone, Debug)]
pub struct Ledger {
    pub tokens: History<(Address, TokenId)>,
    pub native: History<Address>,
    pub nonces: History<Address>,
    /// Allowances (`(owner, token)` → what a sender other than the owner may move, e.g. the
    /// collector contract); not consumed by transfers (collector approvals are unlimited in
    /// practice) and not part of reorgs.
    pub allowances: BTreeMap<(Address, TokenId), u128>,
    pub txs: BTreeMap<TxHash, TxRecord>,
    pub mempool: BTreeMap<(Address, u64), TxHash>,
    /// `blocks[h]` is block `h`; block 0 is genesis.
    pub blocks: Vec<Block>,
    pub credits: Vec<Credit>,
}

impl Default for Ledger {
    fn default() -> Self {
        Ledger {
            tokens: History::default(),
            native: History::default(),
            nonces: History::default(),
            allowances: BTreeMap::new(),
            txs: BTreeMap::new(),
            mempool: BTreeMap::new(),
            blocks: vec![Block::default()],
            credits: Vec::new(),
        }
    }
}

impl Ledger {
    pub fn tip(&self) -> u64 {
        self.blocks.len() as u64 - 1
    }

    pub fn nonce(&self, a: Address) -> u64 {
        u64::try_from(self.nonces.latest(a)).unwrap_or(u64::MAX)
    }

    /// Mines one block: pending credits, then each sender's transactions in nonce order (a
    /// missing or stuck nonce blocks every later one of that sender).
    pub fn mine(&mut self, time_us: u64, p: ExecParams) {
        let height = self.tip() + 1;
        let mut block = Block { height, time_us, ..Block::default() };
        for (i, d) in self.credits.iter_mut().enumerate() {
            if d.mined_height.is_none() {
                let key = (d.address, d.token);
                self.tokens.set(key, height, self.tokens.latest(key).saturating_add(d.amount_minor));
                d.mined_height = Some(height);
                block.credits.push(i);
            }
        }
        let senders: BTreeSet<Address> = self.mempool.keys().map(|(s, _)| *s).collect();
        for sender in senders {
            while let Some(&hash) = self.mempool.get(&(sender, self.nonce(sender))) {
                if self.txs.get(&hash).is_none_or(|t| t.stuck) {
                    break;
                }
                self.execute(hash, height, p);
                block.txs.push(hash);
            }
        }
        self.blocks.push(block);
    }

    fn execute(&mut self, hash: TxHash, height: u64, p: ExecParams) {
        let Some(rec) = self.txs.get(&hash) else { return };
        let (tx, revert, cancel) = (rec.tx, rec.revert, rec.cancel);
        let from = tx.sender;
        self.mempool.remove(&(from, tx.nonce));
        let fee = u128::from(p.gas_used) * u128::from(tx.gas_price_wei);
        self.native.set(from, height, self.native.latest(from).saturating_sub(fee));
        self.nonces.set(from, height, u128::from(tx.nonce) + 1);
        let source_key = (tx.source, tx.token);
        let balance = self.tokens.latest(source_key);
        // The sender moves its own tokens freely, anyone else's up to the owner's allowance.
        let allowed = tx.source == tx.sender
            || self.allowances.get(&source_key).copied().unwrap_or(0) >= tx.amount_minor;
        let success = cancel || (!revert && allowed && balance >= tx.amount_minor);
        if success && !cancel {
            self.tokens.set(source_key, height, balance - tx.amount_minor);
            let t = (tx.to, tx.token);
            self.tokens.set(t, height, self.tokens.latest(t).saturating_add(tx.amount_minor));
        }
        if let Some(rec) = self.txs.get_mut(&hash) {
            rec.state = TxState::Mined { height, success, gas_used: p.gas_used };
        }
    }

    /// Drops the last `depth` blocks: their transactions and credits become pending again.
    /// Returns the transactions taken out of blocks (they are back in the mempool).
    pub fn reorg(&mut self, depth: u64) -> Vec<TxHash> {
        let new_tip = self.tip().saturating_sub(depth);
        let mut unmined = Vec::new();
        while self.tip() > new_tip {
            let Some(block) = self.blocks.pop() else { break };
            for hash in block.txs.iter().rev() {
                if let Some(rec) = self.txs.get_mut(hash) {
                    rec.state = TxState::Pending;
                    self.mempool.insert((rec.tx.sender, rec.tx.nonce), *hash);
                    unmined.push(*hash);
                }
            }
            for i in block.credits {
                if let Some(d) = self.credits.get_mut(i) {
                    d.mined_height = None;
                }
            }
        }
        self.tokens.truncate_above(new_tip);
        self.native.truncate_above(new_tip);
        self.nonces.truncate_above(new_tip);
        unmined
    }

    /// Stuck transactions older than `age_us` leave the mempool (geth's lifetime eviction).
    pub fn evict_stuck(&mut self, now_us: u64, age_us: u64) {
        let old: Vec<((Address, u64), TxHash)> = self
            .mempool
            .iter()
            .filter(|(_, h)| {
                self.txs.get(*h).is_some_and(|t| t.stuck && now_us.saturating_sub(t.accepted_at_us) >= age_us)
            })
            .map(|(k, h)| (*k, *h))
            .collect();
        for (slot, hash) in old {
            self.mempool.remove(&slot);
            if let Some(t) = self.txs.get_mut(&hash) {
                t.state = TxState::Evicted;
            }
        }
    }

    pub fn receipt_status(&self, hash: &TxHash, gas_cost: impl Fn(u64, u64) -> u64) -> ReceiptStatus {
        match self.txs.get(hash).map(|t| (t.state, t.tx.gas_price_wei)) {
            Some((TxState::Pending, _)) => ReceiptStatus::Pending,
            Some((TxState::Mined { height, success, gas_used }, price)) => ReceiptStatus::Mined(Receipt {
                success,
                block_height: height,
                gas_used,
                gas_cost_usd_micros: gas_cost(gas_used, price),
            }),
            _ => ReceiptStatus::Unknown,
        }
    }
}
