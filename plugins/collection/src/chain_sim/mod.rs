//! The outside world of the collection plugin: the [`ChainAdapter`] trait a real chain client
//! implements, and [`ChainSim`], a deterministic EVM-like chain behind it.
//!
//! The adapter is sans-IO too: [`ChainAdapter::execute`] hands it an effect; results come out of
//! [`ChainAdapter::poll`] (now or later), each a [`CollectionCommand`] for the journal. A real
//! client does the RPC calls in between; the simulator answers from its own ledger.
//!
//! The simulator models accounts with token and native balances, per-account nonces, a mempool
//! (same-nonce replacement at ≥ +10 % gas price, "already known" for the same signed transaction,
//! "nonce too low" for a used nonce), blocks every `block_interval_us`, receipts, a chain
//! monitor that sends a webhook once a transaction is `confirmations` deep, and a deposit monitor
//! that confirms deposits at the same depth. Balances are read at the *safe* height (the
//! deepest block a reorg of at most `confirmations - 1` blocks cannot undo).
//!
//! Cancellations (a zero-value self-transfer with a given-up nonce) are transactions like
//! sweeps: they replace, get stuck or dropped, and use the nonce when mined.
//!
//! Faults, each by probability (per mille, from a seeded PRNG) or forced for the next occurrence:
//! dropped tx, stuck tx, revert, RPC timeout before or after acceptance, certain rejection,
//! failed balance read, missing or delayed webhook, reorgs.

mod chain;

use std::collections::{BTreeMap, VecDeque};

use rtgs_core::prng::Prng;

pub use chain::{Address, DepositTx, History, Ledger, TxRecord, TxState};

use crate::command::*;
use crate::effect::*;
use crate::types::*;

/// What a real chain client implements for the plugin's effects.
pub trait ChainAdapter {
    /// Starts executing one effect; its result names `effect_id`.
    fn execute(&mut self, effect_id: u64, effect: &CollectionEffect, now_us: u64);
    /// Moves the outside world to `now_us`; appends results (and webhooks, deposit
    /// confirmations) that are due, in the order they happened.
    fn poll(&mut self, now_us: u64, results: &mut Vec<CollectionCommand>);
    /// Named figures for reports.
    fn figures(&self, out: &mut Vec<(&'static str, u64)>) {
        let _ = out;
    }
}

/// A token the chain knows.
#[derive(Copy, Clone, Debug)]
pub struct TokenConfig {
    pub token: TokenId,
    pub decimals: u8,
    pub price_usd_micros: u64,
}

/// The simulated chain's parameters.
#[derive(Clone, Debug)]
pub struct ChainConfig {
    pub chain: ChainId,
    /// Where sweeps send funds (the collector contract's fixed destination).
    pub treasury: Address,
    pub block_interval_us: u64,
    /// Depth at which deposits and sweeps are confirmed (webhook); reorgs are shallower.
    pub confirmations: u64,
    pub gas_price_wei: u64,
    /// USD price of one native coin (10^18 wei), in micro-USD.
    pub native_price_usd_micros: u64,
    pub sweep_gas_used: u64,
    /// Delay of RPC answers.
    pub rpc_latency_us: u64,
    /// Delay between confirmation depth and the webhook.
    pub webhook_latency_us: u64,
    /// Stuck transactions leave the mempool after this long.
    pub stuck_eviction_us: u64,
    pub tokens: Vec<TokenConfig>,
}

impl Default for ChainConfig {
    fn default() -> Self {
        ChainConfig {
            chain: ChainId(1),
            treasury: 9_000_000_000,
            block_interval_us: 12_000_000,
            confirmations: 3,
            gas_price_wei: 1_000_000_000,
            native_price_usd_micros: 3_000_000_000,
            sweep_gas_used: 50_000,
            rpc_latency_us: 200_000,
            webhook_latency_us: 1_000_000,
            stuck_eviction_us: 3 * 3_600_000_000,
            tokens: vec![TokenConfig { token: TokenId(1), decimals: 6, price_usd_micros: 1_000_000 }],
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
    pub read_failure: u32,
    pub webhook_missing: u32,
    pub webhook_delay: u32,
    pub webhook_delay_us_max: u64,
    /// Per mined block.
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

/// A fault forced on the next confirmed sweep's webhook.
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
    pub webhooks_sent: u64,
    pub webhooks_missing: u64,
}

/// The deterministic chain simulator.
pub struct ChainSim {
    pub cfg: ChainConfig,
    pub faults: Faults,
    pub ledger: Ledger,
    pub stats: SimStats,
    prng: Prng,
    block_next_us: u64,
    /// Highest block whose deposits and transactions have been reported as confirmed.
    confirmed_height: u64,
    outbox: BTreeMap<(u64, u64), CollectionCommand>,
    outbox_seq: u64,
    forced_broadcast: VecDeque<BroadcastFault>,
    forced_webhook: VecDeque<WebhookFault>,
    forced_read_failures: u32,
    forced_read_lag: u64,
    alerts: Vec<(u64, Alert)>,
    /// Broadcast effects refused for certain, by effect id.
    rejected_effects: BTreeMap<u64, RejectCode>,
}

impl ChainSim {
    pub fn new(cfg: ChainConfig, seed: u64, start_us: u64) -> Self {
        assert!(cfg.confirmations >= 1 && cfg.block_interval_us > 0, "invalid chain config");
        ChainSim {
            block_next_us: start_us + cfg.block_interval_us,
            cfg,
            faults: Faults::NONE,
            ledger: Ledger::default(),
            stats: SimStats::default(),
            prng: Prng::new(seed),
            confirmed_height: 0,
            outbox: BTreeMap::new(),
            outbox_seq: 0,
            forced_broadcast: VecDeque::new(),
            forced_webhook: VecDeque::new(),
            forced_read_failures: 0,
            forced_read_lag: 0,
            alerts: Vec::new(),
            rejected_effects: BTreeMap::new(),
        }
    }

    // ----- the test's hands on the world -----

    /// A user sends `amount` to a deposit wallet: mined in the next block, reported as
    /// `DepositConfirmed` once `confirmations` deep.
    pub fn deposit(
        &mut self,
        deposit: DepositId,
        partner: PartnerId,
        wallet: WalletId,
        token: TokenId,
        amount_minor: u128,
    ) {
        self.ledger.deposits.push(DepositTx {
            deposit,
            partner,
            wallet,
            token,
            amount_minor,
            mined_height: None,
        });
    }

    /// Sets the collector's allowance on a wallet's token (the approve transaction, done).
    pub fn approve(&mut self, wallet: WalletId, token: TokenId, amount_minor: u128) {
        self.ledger.allowances.insert((wallet.0, token), amount_minor);
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
    pub fn force_read_failure(&mut self) {
        self.forced_read_failures += 1;
    }
    /// The next balance read answers from `blocks` below the safe height (a lagging node).
    pub fn force_read_lag(&mut self, blocks: u64) {
        self.forced_read_lag = blocks;
    }

    /// Drops the last `depth` blocks now (must be shallower than the confirmation depth).
    pub fn reorg(&mut self, depth: u64) {
        let depth = depth.min(self.cfg.confirmations - 1).min(self.ledger.tip() - self.confirmed_height);
        if depth > 0 {
            self.ledger.reorg(depth);
            self.stats.reorgs += 1;
        }
    }

    // ----- observations -----

    pub fn tip(&self) -> u64 {
        self.ledger.tip()
    }
    /// The deepest block no reorg can undo.
    pub fn safe_height(&self) -> u64 {
        self.ledger.tip().saturating_sub(self.cfg.confirmations - 1)
    }
    pub fn token_balance(&self, address: Address, token: TokenId) -> u128 {
        self.ledger.tokens.latest((address, token))
    }
    pub fn treasury_balance(&self, token: TokenId) -> u128 {
        self.token_balance(self.cfg.treasury, token)
    }
    pub fn alerts(&self) -> &[(u64, Alert)] {
        &self.alerts
    }
    /// Successful sweeps mined on the canonical chain, per batch: `(batch, hash, amount)`.
    pub fn mined_sweeps(&self) -> Vec<(BatchId, TxHash, u128)> {
        self.ledger
            .txs
            .values()
            .filter(|t| !t.cancel && matches!(t.state, TxState::Mined { success: true, .. }))
            .map(|t| (t.tx.batch, t.hash, t.tx.amount_minor))
            .collect()
    }
    pub fn tx(&self, hash: &TxHash) -> Option<&TxRecord> {
        self.ledger.txs.get(hash)
    }
    pub fn mempool_len(&self) -> usize {
        self.ledger.mempool.len()
    }

    /// The hash of a signed sweep: a function of the transaction's content only, so that the
    /// same effect executed twice produces the same transaction. The batch id is part of the
    /// call (`executeTransfer(wallet, token, amount, batchId)`), so two batches never sign the
    /// same transaction, and the chain itself names the batch.
    pub fn tx_hash(tx: &SweepTx) -> TxHash {
        let mut body = Vec::with_capacity(72);
        for v in
            [u64::from(tx.chain.0), tx.relayer.0, tx.nonce, tx.wallet.0, u64::from(tx.token.0), tx.batch.0]
        {
            body.extend_from_slice(&v.to_le_bytes());
        }
        body.extend_from_slice(&tx.amount_minor.to_le_bytes());
        body.extend_from_slice(&tx.gas_price_wei.to_le_bytes());
        body.extend_from_slice(&tx.gas_limit.to_le_bytes());
        let mut h = [0u8; 32];
        for (i, chunk) in h.chunks_mut(8).enumerate() {
            chunk.copy_from_slice(&rtgs_core::hash::bytes64(0x7A5E_0000 + i as u64, &body).to_le_bytes());
        }
        TxHash(h)
    }

    fn gas_cost_usd_micros(&self, gas_used: u64, gas_price_wei: u64) -> u64 {
        let wei = u128::from(gas_used) * u128::from(gas_price_wei);
        let usd =
            wei.saturating_mul(u128::from(self.cfg.native_price_usd_micros)) / 1_000_000_000_000_000_000;
        u64::try_from(usd).unwrap_or(u64::MAX)
    }

    fn send(&mut self, due_us: u64, cmd: CollectionCommand) {
        self.outbox_seq += 1;
        self.outbox.insert((due_us, self.outbox_seq), cmd);
    }

    fn roll(&mut self, permille: u32) -> bool {
        permille > 0 && self.prng.chance(u64::from(permille), 1000)
    }

    // ----- effects -----

    fn read_balances(&mut self, effect_id: u64, e: &ReadBalances, now_us: u64) {
        let due = now_us + self.cfg.rpc_latency_us;
        let fail = self.forced_read_failures > 0 || self.roll(self.faults.read_failure);
        if fail || e.chain != self.cfg.chain {
            self.forced_read_failures = self.forced_read_failures.saturating_sub(1);
            self.send(due, CollectionCommand::BalancesReadFailed(BalancesReadFailed { effect_id }));
            return;
        }
        let height = self.safe_height().saturating_sub(std::mem::take(&mut self.forced_read_lag));
        let rows = e.groups.iter().map(|(wallet, token)| self.balance_row(*wallet, *token, height)).collect();
        let read = BalancesRead {
            effect_id,
            chain: e.chain,
            block_height: height,
            gas_price_wei: self.cfg.gas_price_wei,
            gas_estimate_usd_micros: self
                .gas_cost_usd_micros(self.cfg.sweep_gas_used, self.cfg.gas_price_wei),
            rows,
        };
        self.send(due, CollectionCommand::BalancesRead(read));
    }

    fn balance_row(&self, wallet: WalletId, token: TokenId, height: u64) -> BalanceRow {
        let t = self.cfg.tokens.iter().find(|t| t.token == token);
        BalanceRow {
            wallet,
            token,
            balance_minor: self.ledger.tokens.at((wallet.0, token), height),
            allowance_minor: self.ledger.allowances.get(&(wallet.0, token)).copied().unwrap_or(0),
            price_usd_micros: t.map_or(0, |t| t.price_usd_micros),
            decimals: t.map_or(0, |t| t.decimals),
        }
    }

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

    /// A cancellation as the ledger stores it: a transaction of nothing, from the relayer.
    fn cancel_as_tx(c: &CancelTx) -> SweepTx {
        SweepTx {
            batch: c.batch,
            chain: c.chain,
            relayer: c.relayer,
            nonce: c.nonce,
            wallet: WalletId(c.relayer.0),
            token: TokenId(0),
            amount_minor: 0,
            gas_price_wei: c.gas_price_wei,
            gas_limit: c.gas_limit,
        }
    }

    /// The hash of a signed cancellation.
    pub fn cancel_hash(c: &CancelTx) -> TxHash {
        let mut h = Self::tx_hash(&Self::cancel_as_tx(c));
        h.0[0] ^= 0xCC;
        h
    }

    fn broadcast(&mut self, effect_id: u64, tx: &SweepTx, cancel: bool, now_us: u64) {
        self.stats.broadcasts += 1;
        let mut hash = Self::tx_hash(tx);
        if cancel {
            hash.0[0] ^= 0xCC;
        }
        // The same effect executed again gets the same refusal: an adapter must not turn a
        // certain failure (on which the nonce was released) into a late success.
        let outcome = match self.rejected_effects.get(&effect_id) {
            Some(code) => BroadcastOutcome::Rejected(*code),
            None => self.broadcast_outcome(tx, hash, cancel, now_us),
        };
        if let BroadcastOutcome::Rejected(code) = outcome {
            self.rejected_effects.insert(effect_id, code);
        }
        let result = BroadcastResult { effect_id, batch: tx.batch, tx_hash: hash, outcome };
        self.send(now_us + self.cfg.rpc_latency_us, CollectionCommand::BroadcastResult(result));
    }

    /// What a node answers, and what it does to its mempool.
    fn broadcast_outcome(
        &mut self,
        tx: &SweepTx,
        hash: TxHash,
        cancel: bool,
        now_us: u64,
    ) -> BroadcastOutcome {
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
        if tx.nonce < self.ledger.nonce(tx.relayer.0) {
            self.stats.nonce_too_low += 1;
            return BroadcastOutcome::Ambiguous(AmbiguousCode::NonceTooLow);
        }
        let fee = u128::from(tx.gas_limit) * u128::from(tx.gas_price_wei);
        if fault == Some(BroadcastFault::Reject) || self.ledger.native.latest(tx.relayer.0) < fee {
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
    fn replace_slot(&mut self, tx: &SweepTx) -> Result<(), RejectCode> {
        let slot = (tx.relayer.0, tx.nonce);
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

    fn admit(
        &mut self,
        tx: &SweepTx,
        hash: TxHash,
        fault: Option<BroadcastFault>,
        cancel: bool,
        now_us: u64,
    ) {
        let dropped = fault == Some(BroadcastFault::Drop);
        let rec = TxRecord {
            tx: *tx,
            hash,
            state: if dropped { TxState::Dropped } else { TxState::Pending },
            stuck: fault == Some(BroadcastFault::Stuck),
            revert: fault == Some(BroadcastFault::Revert) && !cancel,
            cancel,
            accepted_at_us: now_us,
        };
        self.ledger.txs.insert(hash, rec);
        if !dropped {
            self.ledger.mempool.insert((tx.relayer.0, tx.nonce), hash);
        }
    }

    fn lookup(&mut self, effect_id: u64, e: &LookupReceipts, now_us: u64) {
        let receipts = e
            .hashes
            .iter()
            .map(|h| (*h, self.ledger.receipt_status(h, |g, p| self.gas_cost_usd_micros(g, p))))
            .collect();
        let looked = ReceiptsLooked {
            effect_id,
            batch: e.batch,
            nonce_mined: self.ledger.nonce(e.relayer.0),
            receipts,
        };
        self.send(now_us + self.cfg.rpc_latency_us, CollectionCommand::ReceiptsLooked(looked));
    }

    // ----- time -----

    fn mine_due_blocks(&mut self, now_us: u64) {
        while self.block_next_us <= now_us {
            let t = self.block_next_us;
            self.block_next_us += self.cfg.block_interval_us;
            if self.cfg.confirmations > 1 && self.roll(self.faults.reorg) {
                let depth = self.prng.range(1, self.cfg.confirmations - 1);
                self.reorg(depth);
            }
            self.ledger.evict_stuck(t, self.cfg.stuck_eviction_us);
            self.ledger.mine(
                t,
                chain::ExecParams { treasury: self.cfg.treasury, sweep_gas_used: self.cfg.sweep_gas_used },
            );
            self.report_confirmed(t);
        }
    }

    /// Blocks that reached confirmation depth: deposit confirmations and sweep webhooks.
    fn report_confirmed(&mut self, t: u64) {
        let safe = self.safe_height();
        while self.confirmed_height < safe {
            self.confirmed_height += 1;
            let h = self.confirmed_height as usize;
            let (deposits, txs) = match self.ledger.blocks.get(h) {
                Some(b) => (b.deposits.clone(), b.txs.clone()),
                None => break,
            };
            for i in deposits {
                self.report_deposit(i, t);
            }
            for hash in txs {
                self.report_tx(hash, t);
            }
        }
    }

    fn report_deposit(&mut self, i: usize, t: u64) {
        let Some(d) = self.ledger.deposits.get(i) else { return };
        let c = DepositConfirmed {
            deposit: d.deposit,
            partner: d.partner,
            wallet: d.wallet,
            chain: self.cfg.chain,
            token: d.token,
            amount_minor: d.amount_minor,
            block_height: d.mined_height.unwrap_or(0),
        };
        self.send(t + self.cfg.webhook_latency_us, CollectionCommand::DepositConfirmed(c));
    }

    fn report_tx(&mut self, hash: TxHash, t: u64) {
        let ReceiptStatus::Mined(receipt) =
            self.ledger.receipt_status(&hash, |g, p| self.gas_cost_usd_micros(g, p))
        else {
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
        self.send(
            t + self.cfg.webhook_latency_us + delay,
            CollectionCommand::TxWebhook(TxWebhook { tx_hash: hash, receipt }),
        );
    }
}

impl ChainAdapter for ChainSim {
    fn execute(&mut self, effect_id: u64, effect: &CollectionEffect, now_us: u64) {
        // The chain moves on before it answers: the effect sees the chain as of now.
        self.mine_due_blocks(now_us);
        match effect {
            CollectionEffect::ReadBalances(e) => self.read_balances(effect_id, e, now_us),
            CollectionEffect::Broadcast(tx) => self.broadcast(effect_id, tx, false, now_us),
            CollectionEffect::LookupReceipts(e) => self.lookup(effect_id, e, now_us),
            CollectionEffect::Cancel(c) => self.broadcast(effect_id, &Self::cancel_as_tx(c), true, now_us),
            CollectionEffect::Alert(a) => self.alerts.push((now_us, *a)),
        }
    }

    fn figures(&self, out: &mut Vec<(&'static str, u64)>) {
        let s = &self.stats;
        out.extend([
            ("chain_broadcasts", s.broadcasts),
            ("chain_already_known", s.already_known),
            ("chain_nonce_too_low", s.nonce_too_low),
            ("chain_webhooks_sent", s.webhooks_sent),
            ("chain_tip", self.ledger.tip()),
        ]);
    }

    fn poll(&mut self, now_us: u64, results: &mut Vec<CollectionCommand>) {
        self.mine_due_blocks(now_us);
        while let Some(entry) = self.outbox.first_entry() {
            if entry.key().0 > now_us {
                break;
            }
            results.push(entry.remove());
        }
    }
}
