//! [`EvmChain`]: a deterministic EVM-like chain, the outside world the collection and withdrawal
//! plugins are tested against (each wraps it in its own adapter, which turns its effects into
//! calls here and what happens here into its own result commands).
//!
//! The simulator models accounts with token and native balances, per-account nonces, a mempool
//! (same-nonce replacement at ≥ +10 % gas price, "already known" for the same signed transaction,
//! "nonce too low" for a used nonce), blocks every `block_interval_us`, receipts, and a chain
//! monitor that reports a transaction (and an incoming credit) once it is `confirmations` deep.
//! Balances can be read at any height, notably the *safe* one (the deepest block a reorg of at
//! most `confirmations - 1` blocks cannot undo).
//!
//! Cancellations (a zero-value self-transfer with a given-up nonce) are transactions like any
//! other: they replace, get stuck or dropped, and use the nonce when mined.
//!
//! Faults, each by probability (per mille, from a seeded PRNG) or forced for the next occurrence:
//! dropped tx, stuck tx, revert, RPC timeout before or after acceptance, certain rejection,
//! failed balance read (the caller rolls it), missing or delayed webhook, shallow reorgs. Deep
//! reorgs — past the confirmation depth, so that a transaction already reported leaves the chain
//! — are the caller's to ask for ([`EvmChain::reorg_deep`]): the reported transactions are
//! reported again as reorged, and either come back (mined again, reported again) or are
//! replaced by a conflicting transaction with the same nonce (they never come back).

mod ledger;

use std::collections::{BTreeMap, VecDeque};

use rtgs_core::prng::Prng;

pub use ledger::{Block, Credit, ExecParams, History, Ledger, TxRecord, TxState};

use crate::answer::{AmbiguousCode, BroadcastOutcome, RejectCode};
use crate::types::*;
use crate::wire::{Sink, Wire, Writer};

wire_struct! {
    /// One signed transaction: `sender` pays the gas and owns the nonce; `amount_minor` of
    /// `token` moves from `source` (the sender itself, or an account that allowed the sender,
    /// like a deposit wallet and the collector) to `to`. `tag` is call data that makes the
    /// transaction distinct (a batch id, a withdrawal attempt): two requests never sign the
    /// same transaction, and the chain itself names what it pays.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    pub struct EvmTx {
        pub chain: ChainId,
        pub sender: Address,
        pub nonce: u64,
        pub source: Address,
        pub to: Address,
        pub token: TokenId,
        pub amount_minor: u128,
        pub gas_price_wei: u64,
        pub gas_limit: u64,
        pub tag: u64,
    }
}

impl EvmTx {
    /// A cancellation: nothing from the sender to itself, only to use `nonce`.
    pub fn cancel(chain: ChainId, sender: Address, nonce: u64, gas_price_wei: u64, gas_limit: u64) -> EvmTx {
        EvmTx {
            chain,
            sender,
            nonce,
            source: sender,
            to: sender,
            token: TokenId(0),
            amount_minor: 0,
            gas_price_wei,
            gas_limit,
            tag: 0,
        }
    }
}

/// The simulated chain's parameters.
#[derive(Clone, Debug)]
pub struct EvmConfig {
    pub chain: ChainId,
    pub block_interval_us: u64,
    /// Depth at which credits and transactions are reported; shallow reorgs stay above it.
    pub confirmations: u64,
    /// The gas price the chain asks now (fee estimates).
    pub gas_price_wei: u64,
    /// USD price of one native coin (10^18 wei), in micro-USD.
    pub native_price_usd_micros: u64,
    /// Gas every transaction uses.
    pub gas_used: u64,
    /// Delay between confirmation depth and the monitor's report (webhook).
    pub webhook_latency_us: u64,
    /// Stuck transactions leave the mempool after this long.
    pub stuck_eviction_us: u64,
    /// The monitor also reports each transaction when it is mined (`Included`), and a shallow
    /// reorg that takes it out again (`Reorged`): a plugin that shows "chain entry" before the
    /// confirmation depth (withdrawals' CONFIRMING) wants them; collection does not.
    pub report_inclusion: bool,
}

impl Default for EvmConfig {
    fn default() -> Self {
        EvmConfig {
            chain: ChainId(1),
            block_interval_us: 12_000_000,
            confirmations: 3,
            gas_price_wei: 1_000_000_000,
            native_price_usd_micros: 3_000_000_000,
            gas_used: 50_000,
            webhook_latency_us: 1_000_000,
            stuck_eviction_us: 3 * 3_600_000_000,
            report_inclusion: false,
        }
    }
}

/// Fault probabilities, per mille.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    pub drop_tx: u32,
    pub stuck_tx: u32,
    pub revert_tx: u32,
    pub timeout_before_accept: u32,
    pub timeout_after_accept: u32,
    pub reject_tx: u32,
    /// Balance reads (rolled by the caller that reads balances).
    pub read_failure: u32,
    pub webhook_missing: u32,
    pub webhook_delay: u32,
    pub webhook_delay_us_max: u64,
    /// Per mined block: a shallow reorg.
    pub reorg: u32,
}

impl Faults {
    pub const NONE: Faults = Faults {
        drop_tx: 0,
        stuck_tx: 0,
        revert_tx: 0,
        timeout_before_accept: 0,
        timeout_after_accept: 0,
        reject_tx: 0,
        read_failure: 0,
        webhook_missing: 0,
        webhook_delay: 0,
        webhook_delay_us_max: 0,
        reorg: 0,
    };
}

/// A fault forced on the next broadcast.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum BroadcastFault {
    /// "Accepted", then gone from the mempool.
    Drop,
    /// Accepted, never mined until replaced or evicted.
    Stuck,
    /// Mined with status 0.
    Revert,
    /// The RPC times out; the transaction never reached the node.
    TimeoutBeforeAccept,
    /// The RPC times out after the node accepted it.
    TimeoutAfterAccept,
    /// Refused for certain (insufficient funds for gas).
    Reject,
}

/// A fault forced on the next confirmed transaction's webhook.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum WebhookFault {
    Missing,
    DelayUs(u64),
}

/// Counts for tests and reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SimStats {
    pub broadcasts: u64,
    pub already_known: u64,
    pub nonce_too_low: u64,
    pub replacements: u64,
    pub reorgs: u64,
    /// Reorgs past the confirmation depth.
    pub deep_reorgs: u64,
    pub webhooks_sent: u64,
    pub webhooks_missing: u64,
}

/// What the chain monitor reports, each due at `due_us` (the caller turns them into its own
/// result commands).
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum EvmEvent {
    /// Credit `index` (of [`Ledger::credits`]) reached confirmation depth.
    Credited { index: usize, due_us: u64 },
    /// A transaction was mined in block `block_height` (with `report_inclusion` only).
    Included { hash: TxHash, block_height: u64, block_hash: TxHash, due_us: u64 },
    /// A transaction reached confirmation depth (again, after a deep reorg brought it back).
    Confirmed { hash: TxHash, receipt: crate::answer::Receipt, due_us: u64 },
    /// A transaction already reported (as confirmed, or with `report_inclusion` as included)
    /// left the chain in a reorg.
    Reorged { hash: TxHash, block_height: u64, due_us: u64 },
}

impl EvmEvent {
    pub fn due_us(&self) -> u64 {
        match *self {
            EvmEvent::Credited { due_us, .. }
            | EvmEvent::Included { due_us, .. }
            | EvmEvent::Confirmed { due_us, .. }
            | EvmEvent::Reorged { due_us, .. } => due_us,
        }
    }
}

/// The deterministic EVM-like chain.
pub struct EvmChain {
    pub cfg: EvmConfig,
    pub faults: Faults,
    pub ledger: Ledger,
    pub stats: SimStats,
    prng: Prng,
    block_next_us: u64,
    /// Highest block whose credits and transactions have been reported as confirmed.
    confirmed_height: u64,
    forced_broadcast: VecDeque<BroadcastFault>,
    forced_webhook: VecDeque<WebhookFault>,
    /// Broadcasts refused for certain, by the caller's request id (its effect id).
    rejected_requests: BTreeMap<u64, RejectCode>,
}

impl EvmChain {
    pub fn new(cfg: EvmConfig, seed: u64, start_us: u64) -> Self {
        assert!(cfg.confirmations >= 1 && cfg.block_interval_us > 0, "invalid chain config");
        EvmChain {
            block_next_us: start_us + cfg.block_interval_us,
            cfg,
            faults: Faults::NONE,
            ledger: Ledger::default(),
            stats: SimStats::default(),
            prng: Prng::new(seed),
            confirmed_height: 0,
            forced_broadcast: VecDeque::new(),
            forced_webhook: VecDeque::new(),
            rejected_requests: BTreeMap::new(),
        }
    }

    // ----- the test's hands on the world -----

    /// Someone outside sends `amount` of `token` to `address`: mined in the next block,
    /// reported once `confirmations` deep.
    pub fn credit(&mut self, tag: u64, address: Address, token: TokenId, amount_minor: u128) {
        self.ledger.credits.push(Credit { tag, address, token, amount_minor, mined_height: None });
    }

    /// Gives `address` tokens from genesis (a vault's float).
    pub fn fund_token(&mut self, address: Address, token: TokenId, amount_minor: u128) {
        let tip = self.ledger.tip();
        let v = self.ledger.tokens.latest((address, token)).saturating_add(amount_minor);
        self.ledger.tokens.set((address, token), tip, v);
    }

    /// Sets what other senders may move of `owner`'s token (the approve transaction, done).
    pub fn approve(&mut self, owner: Address, token: TokenId, amount_minor: u128) {
        self.ledger.allowances.insert((owner, token), amount_minor);
    }

    /// Gives an account native coin for gas (from genesis).
    pub fn fund_native(&mut self, address: Address, wei: u128) {
        let tip = self.ledger.tip();
        let v = self.ledger.native.latest(address).saturating_add(wei);
        self.ledger.native.set(address, tip, v);
    }

    pub fn force_broadcast_fault(&mut self, f: BroadcastFault) {
        self.forced_broadcast.push_back(f);
    }
    pub fn force_webhook_fault(&mut self, f: WebhookFault) {
        self.forced_webhook.push_back(f);
    }

    /// Drops the last `depth` blocks now, shallower than the confirmation depth (nothing
    /// reported as confirmed is undone).
    pub fn reorg(&mut self, depth: u64) {
        let mut events = Vec::new();
        self.reorg_shallow(depth, 0, &mut events);
    }

    /// [`EvmChain::reorg`], reporting the included transactions it takes out (with
    /// `report_inclusion`).
    fn reorg_shallow(&mut self, depth: u64, now_us: u64, events: &mut Vec<EvmEvent>) {
        let depth = depth.min(self.cfg.confirmations - 1).min(self.ledger.tip() - self.confirmed_height);
        if depth == 0 {
            return;
        }
        let new_tip = self.ledger.tip() - depth;
        if self.cfg.report_inclusion {
            self.report_reorged(new_tip + 1, self.ledger.tip(), now_us, events);
        }
        self.ledger.reorg(depth);
        self.stats.reorgs += 1;
    }

    /// `Reorged` events for every transaction of blocks `from..=to`.
    fn report_reorged(&self, from: u64, to: u64, now_us: u64, events: &mut Vec<EvmEvent>) {
        for h in from..=to {
            let Some(block) = self.ledger.blocks.get(h as usize) else { continue };
            for hash in &block.txs {
                let due_us = now_us + self.cfg.webhook_latency_us;
                events.push(EvmEvent::Reorged { hash: *hash, block_height: h, due_us });
            }
        }
    }

    /// Drops the last `depth` blocks now, however deep (never genesis): every transaction they
    /// held that was reported confirmed is reported again as reorged (`Reorged` events, due
    /// after the webhook latency). Their transactions go back to the mempool and are mined again
    /// in the next blocks — or, with `conflicting`, the other branch held a conflicting
    /// transaction with the same nonce for each of them (a zero-value self-transfer no plugin
    /// sent), which is mined instead: they never come back.
    pub fn reorg_deep(&mut self, depth: u64, conflicting: bool, now_us: u64, events: &mut Vec<EvmEvent>) {
        let depth = depth.min(self.ledger.tip());
        if depth == 0 {
            return;
        }
        let new_tip = self.ledger.tip() - depth;
        // Everything reported goes: confirmed blocks, and included ones when those are reported.
        let reported_to = if self.cfg.report_inclusion { self.ledger.tip() } else { self.confirmed_height };
        self.report_reorged(new_tip + 1, reported_to.min(self.ledger.tip()), now_us, events);
        let unmined = self.ledger.reorg(depth);
        self.confirmed_height = self.confirmed_height.min(new_tip);
        self.stats.reorgs += 1;
        self.stats.deep_reorgs += 1;
        if conflicting {
            for hash in unmined {
                self.replace_by_conflict(hash, now_us);
            }
        }
    }

    /// Puts a foreign same-nonce transaction in place of `hash` (see [`EvmChain::reorg_deep`]).
    fn replace_by_conflict(&mut self, hash: TxHash, now_us: u64) {
        let Some(rec) = self.ledger.txs.get_mut(&hash) else { return };
        if rec.cancel || rec.foreign {
            return;
        }
        rec.state = TxState::Replaced;
        let tx = rec.tx;
        let mut conflict = EvmTx::cancel(tx.chain, tx.sender, tx.nonce, tx.gas_price_wei, tx.gas_limit);
        conflict.tag = u64::MAX;
        let conflict_hash = Self::tx_hash(&conflict);
        self.ledger.txs.insert(
            conflict_hash,
            TxRecord {
                tx: conflict,
                hash: conflict_hash,
                state: TxState::Pending,
                stuck: false,
                revert: false,
                cancel: true,
                foreign: true,
                accepted_at_us: now_us,
            },
        );
        self.ledger.mempool.insert((tx.sender, tx.nonce), conflict_hash);
    }

    // ----- observations -----

    pub fn tip(&self) -> u64 {
        self.ledger.tip()
    }
    /// The deepest block no shallow reorg can undo.
    pub fn safe_height(&self) -> u64 {
        self.ledger.tip().saturating_sub(self.cfg.confirmations - 1)
    }
    pub fn token_balance(&self, address: Address, token: TokenId) -> u128 {
        self.ledger.tokens.latest((address, token))
    }
    pub fn tx(&self, hash: &TxHash) -> Option<&TxRecord> {
        self.ledger.txs.get(hash)
    }
    pub fn mempool_len(&self) -> usize {
        self.ledger.mempool.len()
    }
    /// How many transactions of `sender` the chain has mined (its next nonce).
    pub fn nonce(&self, sender: Address) -> u64 {
        self.ledger.nonce(sender)
    }
    pub fn receipt_status(&self, hash: &TxHash) -> crate::answer::ReceiptStatus {
        self.ledger.receipt_status(hash, |g, p| self.gas_cost_usd_micros(g, p))
    }

    /// The hash of a signed transaction: a function of its content only, so that the same
    /// effect executed twice produces the same transaction.
    pub fn tx_hash(tx: &EvmTx) -> TxHash {
        let mut body: Vec<u8> = Vec::with_capacity(96);
        tx.put(&mut Writer::new(&mut body as &mut dyn Sink));
        TxHash::of(0x7A5E_0000, &body)
    }

    /// The hash of a signed cancellation (distinct from a transfer of nothing with the same
    /// fields).
    pub fn cancel_hash(tx: &EvmTx) -> TxHash {
        let mut h = Self::tx_hash(tx);
        h.0[0] ^= 0xCC;
        h
    }

    pub fn gas_cost_usd_micros(&self, gas_used: u64, gas_price_wei: u64) -> u64 {
        let wei = u128::from(gas_used) * u128::from(gas_price_wei);
        let usd =
            wei.saturating_mul(u128::from(self.cfg.native_price_usd_micros)) / 1_000_000_000_000_000_000;
        u64::try_from(usd).unwrap_or(u64::MAX)
    }

    /// A fault roll (per mille) from the chain's own seeded stream.
    pub fn roll(&mut self, permille: u32) -> bool {
        permille > 0 && self.prng.chance(u64::from(permille), 1000)
    }

    // ----- broadcasts -----

    fn next_broadcast_fault(&mut self) -> Option<BroadcastFault> {
        if let Some(f) = self.forced_broadcast.pop_front() {
            return Some(f);
        }
        let f = self.faults;
        let table = [
            (f.timeout_before_accept, BroadcastFault::TimeoutBeforeAccept),
            (f.reject_tx, BroadcastFault::Reject),
            (f.drop_tx, BroadcastFault::Drop),
            (f.stuck_tx, BroadcastFault::Stuck),
            (f.revert_tx, BroadcastFault::Revert),
            (f.timeout_after_accept, BroadcastFault::TimeoutAfterAccept),
        ];
        table.into_iter().find(|(p, _)| self.roll(*p)).map(|(_, fault)| fault)
    }

    /// Sends a signed transaction with its hash (`cancel`: a cancellation) for request
    /// `request_id` (the caller's effect id): what the node answered. Signing — the hash — is
    /// the caller's ([`EvmChain::tx_hash`] is one way). The same request again gets the same
    /// certain refusal: a caller must not turn a certain failure (on which it released the
    /// nonce) into a late success.
    pub fn broadcast(
        &mut self,
        request_id: u64,
        tx: &EvmTx,
        hash: TxHash,
        cancel: bool,
        now_us: u64,
    ) -> BroadcastOutcome {
        self.stats.broadcasts += 1;
        let outcome = match self.rejected_requests.get(&request_id) {
            Some(code) => BroadcastOutcome::Rejected(*code),
            None => self.broadcast_outcome(tx, hash, cancel, now_us),
        };
        if let BroadcastOutcome::Rejected(code) = outcome {
            self.rejected_requests.insert(request_id, code);
        }
        outcome
    }

    /// What a node answers, and what it does to its mempool.
    fn broadcast_outcome(&mut self, tx: &EvmTx, hash: TxHash, cancel: bool, now_us: u64) -> BroadcastOutcome {
        if tx.chain != self.cfg.chain {
            return BroadcastOutcome::Rejected(RejectCode::Invalid);
        }
        match self.ledger.txs.get(&hash).map(|t| t.state) {
            Some(TxState::Pending) => {
                self.stats.already_known += 1;
                return BroadcastOutcome::Accepted;
            }
            Some(TxState::Mined { .. }) => {
                self.stats.nonce_too_low += 1;
                return BroadcastOutcome::Ambiguous(AmbiguousCode::NonceTooLow);
            }
            _ => {}
        }
        let fault = self.next_broadcast_fault();
        if fault == Some(BroadcastFault::TimeoutBeforeAccept) {
            return BroadcastOutcome::Ambiguous(AmbiguousCode::Timeout);
        }
        if tx.nonce < self.ledger.nonce(tx.sender) {
            self.stats.nonce_too_low += 1;
            return BroadcastOutcome::Ambiguous(AmbiguousCode::NonceTooLow);
        }
        let fee = u128::from(tx.gas_limit) * u128::from(tx.gas_price_wei);
        if fault == Some(BroadcastFault::Reject) || self.ledger.native.latest(tx.sender) < fee {
            return BroadcastOutcome::Rejected(RejectCode::InsufficientFunds);
        }
        if let Err(code) = self.replace_slot(tx) {
            return BroadcastOutcome::Rejected(code);
        }
        self.admit(tx, hash, fault, cancel, now_us);
        match fault {
            Some(BroadcastFault::TimeoutAfterAccept) => BroadcastOutcome::Ambiguous(AmbiguousCode::Timeout),
            _ => BroadcastOutcome::Accepted,
        }
    }

    /// Makes room for `tx` at its nonce: a pending transaction there is replaced only by a
    /// ≥ +10 % gas price.
    fn replace_slot(&mut self, tx: &EvmTx) -> Result<(), RejectCode> {
        let slot = (tx.sender, tx.nonce);
        let Some(old_hash) = self.ledger.mempool.get(&slot).copied() else { return Ok(()) };
        let old_price = self.ledger.txs.get(&old_hash).map_or(0, |t| t.tx.gas_price_wei);
        if u128::from(tx.gas_price_wei) * 100 < u128::from(old_price) * 110 {
            return Err(RejectCode::ReplacementUnderpriced);
        }
        self.ledger.mempool.remove(&slot);
        if let Some(t) = self.ledger.txs.get_mut(&old_hash) {
            t.state = TxState::Replaced;
        }
        self.stats.replacements += 1;
        Ok(())
    }

    fn admit(&mut self, tx: &EvmTx, hash: TxHash, fault: Option<BroadcastFault>, cancel: bool, now_us: u64) {
        let dropped = fault == Some(BroadcastFault::Drop);
        let rec = TxRecord {
            tx: *tx,
            hash,
            state: if dropped { TxState::Dropped } else { TxState::Pending },
            stuck: fault == Some(BroadcastFault::Stuck),
            revert: fault == Some(BroadcastFault::Revert) && !cancel,
            cancel,
            foreign: false,
            accepted_at_us: now_us,
        };
        self.ledger.txs.insert(hash, rec);
        if !dropped {
            self.ledger.mempool.insert((tx.sender, tx.nonce), hash);
        }
    }

    // ----- time -----

    /// Mines every block due by `now_us` (with shallow reorgs by probability) and appends what
    /// the monitor reports about blocks that reached confirmation depth.
    pub fn advance(&mut self, now_us: u64, events: &mut Vec<EvmEvent>) {
        while self.block_next_us <= now_us {
            let t = self.block_next_us;
            self.block_next_us += self.cfg.block_interval_us;
            if self.cfg.confirmations > 1 && self.roll(self.faults.reorg) {
                let depth = self.prng.range(1, self.cfg.confirmations - 1);
                self.reorg_shallow(depth, t, events);
            }
            self.ledger.evict_stuck(t, self.cfg.stuck_eviction_us);
            self.ledger.mine(t, ExecParams { gas_used: self.cfg.gas_used });
            if self.cfg.report_inclusion {
                self.report_included(t, events);
            }
            self.report_confirmed(t, events);
        }
    }

    /// The block just mined: each of its transactions' inclusion.
    fn report_included(&self, t: u64, events: &mut Vec<EvmEvent>) {
        let tip = self.ledger.tip();
        let Some(block) = self.ledger.blocks.get(tip as usize) else { return };
        let block_hash = block.hash();
        for hash in &block.txs {
            let due_us = t + self.cfg.webhook_latency_us;
            events.push(EvmEvent::Included { hash: *hash, block_height: tip, block_hash, due_us });
        }
    }

    /// Blocks that reached confirmation depth: credits and transaction webhooks.
    fn report_confirmed(&mut self, t: u64, events: &mut Vec<EvmEvent>) {
        let safe = self.safe_height();
        while self.confirmed_height < safe {
            self.confirmed_height += 1;
            let h = self.confirmed_height as usize;
            let (credits, txs) = match self.ledger.blocks.get(h) {
                Some(b) => (b.credits.clone(), b.txs.clone()),
                None => break,
            };
            for index in credits {
                events.push(EvmEvent::Credited { index, due_us: t + self.cfg.webhook_latency_us });
            }
            for hash in txs {
                self.report_tx(hash, t, events);
            }
        }
    }

    fn report_tx(&mut self, hash: TxHash, t: u64, events: &mut Vec<EvmEvent>) {
        let crate::answer::ReceiptStatus::Mined(receipt) = self.receipt_status(&hash) else {
            return;
        };
        let fault = match self.forced_webhook.pop_front() {
            Some(f) => Some(f),
            None if self.roll(self.faults.webhook_missing) => Some(WebhookFault::Missing),
            None if self.roll(self.faults.webhook_delay) => {
                Some(WebhookFault::DelayUs(self.prng.range(0, self.faults.webhook_delay_us_max)))
            }
            None => None,
        };
        let delay = match fault {
            Some(WebhookFault::Missing) => {
                self.stats.webhooks_missing += 1;
                return;
            }
            Some(WebhookFault::DelayUs(d)) => d,
            None => 0,
        };
        self.stats.webhooks_sent += 1;
        events.push(EvmEvent::Confirmed { hash, receipt, due_us: t + self.cfg.webhook_latency_us + delay });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::answer::ReceiptStatus;

    const VAULT: Address = 7;
    const DEST: Address = 8;
    const TOKEN: TokenId = TokenId(1);

    fn chain() -> EvmChain {
        let mut c = EvmChain::new(EvmConfig::default(), 1, 0);
        c.fund_native(VAULT, 1_000_000_000_000_000_000);
        c.fund_token(VAULT, TOKEN, 1_000);
        c
    }

    fn tx(nonce: u64, amount: u128, gas: u64) -> EvmTx {
        EvmTx {
            chain: ChainId(1),
            sender: VAULT,
            nonce,
            source: VAULT,
            to: DEST,
            token: TOKEN,
            amount_minor: amount,
            gas_price_wei: gas,
            gas_limit: 21_000,
            tag: nonce + 100,
        }
    }

    fn send(c: &mut EvmChain, id: u64, t: &EvmTx, now_us: u64) -> (TxHash, BroadcastOutcome) {
        let hash = EvmChain::tx_hash(t);
        (hash, c.broadcast(id, t, hash, false, now_us))
    }

    fn run(c: &mut EvmChain, until_us: u64) -> Vec<EvmEvent> {
        let mut ev = Vec::new();
        c.advance(until_us, &mut ev);
        ev
    }

    #[test]
    fn nonces_mine_in_order_and_a_stuck_one_blocks_the_later_ones() {
        let mut c = chain();
        c.force_broadcast_fault(BroadcastFault::Stuck);
        assert_eq!(send(&mut c, 1, &tx(0, 10, 100), 0).1, BroadcastOutcome::Accepted);
        assert_eq!(send(&mut c, 2, &tx(1, 10, 100), 0).1, BroadcastOutcome::Accepted);
        run(&mut c, 60_000_000);
        assert_eq!(c.nonce(VAULT), 0, "nonce 1 waits behind the stuck nonce 0");
        // A replacement of nonce 0 at +10 % unblocks both.
        let (_, o) = send(&mut c, 3, &tx(0, 10, 110), 60_000_000);
        assert_eq!(o, BroadcastOutcome::Accepted);
        run(&mut c, 80_000_000);
        assert_eq!(c.nonce(VAULT), 2);
        assert_eq!(c.token_balance(DEST, TOKEN), 20);
    }

    #[test]
    fn a_replacement_below_ten_percent_is_refused_for_certain() {
        let mut c = chain();
        c.force_broadcast_fault(BroadcastFault::Stuck);
        send(&mut c, 1, &tx(0, 10, 100), 0);
        let (_, o) = send(&mut c, 2, &tx(0, 10, 109), 0);
        assert_eq!(o, BroadcastOutcome::Rejected(RejectCode::ReplacementUnderpriced));
        // The same request again: the same refusal, whatever the chain is like now.
        assert_eq!(send(&mut c, 2, &tx(0, 10, 200), 0).1, o);
    }

    #[test]
    fn deep_reorgs_report_reorged_then_confirm_again_or_never() {
        for conflicting in [false, true] {
            let mut c = chain();
            let (hash, _) = send(&mut c, 1, &tx(0, 10, 100), 0);
            let ev = run(&mut c, 60_000_000);
            assert!(ev.iter().any(|e| matches!(e, EvmEvent::Confirmed { hash: h, .. } if *h == hash)));
            let mut ev = Vec::new();
            c.reorg_deep(c.tip(), conflicting, 60_000_000, &mut ev);
            assert!(ev.iter().any(|e| matches!(e, EvmEvent::Reorged { hash: h, .. } if *h == hash)));
            assert_eq!(c.token_balance(DEST, TOKEN), 0, "the transfer left the chain");
            let ev = run(&mut c, 120_000_000);
            let again = ev.iter().any(|e| matches!(e, EvmEvent::Confirmed { hash: h, .. } if *h == hash));
            assert_eq!(again, !conflicting);
            assert_eq!(c.nonce(VAULT), 1, "the nonce is used either way");
            let status = c.receipt_status(&hash);
            assert_eq!(matches!(status, ReceiptStatus::Mined(_)), !conflicting, "{status:?}");
            assert_eq!(c.token_balance(DEST, TOKEN), if conflicting { 0 } else { 10 });
        }
    }

    #[test]
    fn credits_confirm_at_depth_and_allowances_gate_other_senders() {
        let mut c = chain();
        c.credit(5, 70, TOKEN, 40);
        let ev = run(&mut c, 40_000_000);
        assert!(ev.iter().any(|e| matches!(e, EvmEvent::Credited { index: 0, .. })));
        let mut t = tx(0, 40, 100);
        t.source = 70;
        let (hash, _) = send(&mut c, 1, &t, 40_000_000);
        run(&mut c, 60_000_000);
        assert!(matches!(c.receipt_status(&hash), ReceiptStatus::Mined(r) if !r.success), "no allowance");
        c.approve(70, TOKEN, u128::MAX);
        let (hash, _) = send(&mut c, 2, &tx(1, 40, 100).with_source(70), 60_000_000);
        run(&mut c, 80_000_000);
        assert!(matches!(c.receipt_status(&hash), ReceiptStatus::Mined(r) if r.success));
        assert_eq!(c.token_balance(DEST, TOKEN), 40);
    }

    impl EvmTx {
        fn with_source(mut self, s: Address) -> Self {
            self.source = s;
            self
        }
    }
}
