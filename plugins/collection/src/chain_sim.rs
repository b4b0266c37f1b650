//! The outside world of the collection plugin: the [`ChainAdapter`] trait a real chain client
//! implements, and [`ChainSim`], the shared EVM-like chain simulator (`rtgs_chain_sim::evm`)
//! behind it.
//!
//! The adapter is sans-IO too: [`ChainAdapter::execute`] hands it an effect; results come out of
//! [`ChainAdapter::poll`] (now or later), each a [`CollectionCommand`] for the journal. A real
//! client does the RPC calls in between; the simulator answers from its own ledger.
//!
//! What is the collection's own here: the sweep as a transaction (`executeTransfer(wallet,
//! token, amount, batch)` from the relayer: the collector moves the wallet's tokens to the
//! treasury under the wallet's allowance), balance reads at the safe height, receipt lookups,
//! deposits reported as `DepositConfirmed`, webhooks, and the RPC latency of every
//! answer. Mempool, nonces, blocks, reorgs and faults are the shared chain's
//! ([`EvmChain`], reached through `Deref`: `sim.faults`, `sim.stats`, `sim.tx(..)`, ...).

use std::collections::BTreeMap;
use std::ops::{Deref, DerefMut};

pub use rtgs_chain_sim::evm::{
    BroadcastFault, Faults, History, Ledger, SimStats, TxRecord, TxState, WebhookFault,
};
use rtgs_chain_sim::evm::{EvmChain, EvmConfig, EvmEvent, EvmTx};
pub use rtgs_chain_sim::Address;

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
        let evm = EvmConfig::default();
        ChainConfig {
            chain: evm.chain,
            treasury: 9_000_000_000,
            block_interval_us: evm.block_interval_us,
            confirmations: evm.confirmations,
            gas_price_wei: evm.gas_price_wei,
            native_price_usd_micros: evm.native_price_usd_micros,
            sweep_gas_used: evm.gas_used,
            rpc_latency_us: 200_000,
            webhook_latency_us: evm.webhook_latency_us,
            stuck_eviction_us: evm.stuck_eviction_us,
            tokens: vec![TokenConfig { token: TokenId(1), decimals: 6, price_usd_micros: 1_000_000 }],
        }
    }
}

impl ChainConfig {
    fn evm(&self) -> EvmConfig {
        EvmConfig {
            chain: self.chain,
            block_interval_us: self.block_interval_us,
            confirmations: self.confirmations,
            gas_price_wei: self.gas_price_wei,
            native_price_usd_micros: self.native_price_usd_micros,
            gas_used: self.sweep_gas_used,
            webhook_latency_us: self.webhook_latency_us,
            stuck_eviction_us: self.stuck_eviction_us,
            report_inclusion: false,
        }
    }
}

/// The collection's chain: the shared EVM chain plus the collection's reads, reports and latency.
pub struct ChainSim {
    pub cfg: ChainConfig,
    evm: EvmChain,
    /// The partner of each credit (deposit) the chain holds, by the credit's index.
    partners: Vec<PartnerId>,
    outbox: BTreeMap<(u64, u64), CollectionCommand>,
    outbox_seq: u64,
    forced_read_failures: u32,
    forced_read_lag: u64,
    events: Vec<EvmEvent>,
}

impl Deref for ChainSim {
    type Target = EvmChain;
    fn deref(&self) -> &EvmChain {
        &self.evm
    }
}

impl DerefMut for ChainSim {
    fn deref_mut(&mut self) -> &mut EvmChain {
        &mut self.evm
    }
}

impl ChainSim {
    pub fn new(cfg: ChainConfig, seed: u64, start_us: u64) -> Self {
        ChainSim {
            evm: EvmChain::new(cfg.evm(), seed, start_us),
            cfg,
            partners: Vec::new(),
            outbox: BTreeMap::new(),
            outbox_seq: 0,
            forced_read_failures: 0,
            forced_read_lag: 0,
            events: Vec::new(),
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
        self.evm.credit(deposit.0, wallet.0, token, amount_minor);
        self.partners.push(partner);
    }

    /// Sets the collector's allowance on a wallet's token (the approve transaction, done).
    pub fn approve(&mut self, wallet: WalletId, token: TokenId, amount_minor: u128) {
        self.evm.approve(wallet.0, token, amount_minor);
    }

    pub fn force_read_failure(&mut self) {
        self.forced_read_failures += 1;
    }
    /// The next balance read answers from `blocks` below the safe height (a lagging node).
    pub fn force_read_lag(&mut self, blocks: u64) {
        self.forced_read_lag = blocks;
    }

    // ----- observations -----

    pub fn treasury_balance(&self, token: TokenId) -> u128 {
        self.evm.token_balance(self.cfg.treasury, token)
    }
    /// Successful sweeps mined on the canonical chain, per batch: `(batch, hash, amount)`.
    pub fn mined_sweeps(&self) -> Vec<(BatchId, TxHash, u128)> {
        self.evm
            .ledger
            .txs
            .values()
            .filter(|t| !t.cancel && matches!(t.state, TxState::Mined { success: true, .. }))
            .map(|t| (BatchId(t.tx.tag), t.hash, t.tx.amount_minor))
            .collect()
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
        TxHash::of(0x7A5E_0000, &body)
    }

    /// A cancellation as the chain stores it: a transaction of nothing, from the relayer.
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

    /// A sweep as an EVM transaction: from the relayer, the wallet's tokens to the treasury.
    fn evm_tx(&self, tx: &SweepTx) -> EvmTx {
        EvmTx {
            chain: tx.chain,
            sender: tx.relayer.0,
            nonce: tx.nonce,
            source: tx.wallet.0,
            to: self.cfg.treasury,
            token: tx.token,
            amount_minor: tx.amount_minor,
            gas_price_wei: tx.gas_price_wei,
            gas_limit: tx.gas_limit,
            tag: tx.batch.0,
        }
    }

    fn send(&mut self, due_us: u64, cmd: CollectionCommand) {
        self.outbox_seq += 1;
        self.outbox.insert((due_us, self.outbox_seq), cmd);
    }

    // ----- effects -----

    fn read_balances(&mut self, effect_id: u64, e: &ReadBalances, now_us: u64) {
        let due = now_us + self.cfg.rpc_latency_us;
        let fail = self.forced_read_failures > 0 || self.evm.roll(self.evm.faults.read_failure);
        if fail || e.chain != self.cfg.chain {
            self.forced_read_failures = self.forced_read_failures.saturating_sub(1);
            self.send(due, CollectionCommand::BalancesReadFailed(BalancesReadFailed { effect_id }));
            return;
        }
        let height = self.evm.safe_height().saturating_sub(std::mem::take(&mut self.forced_read_lag));
        let rows = e.groups.iter().map(|(wallet, token)| self.balance_row(*wallet, *token, height)).collect();
        let read = BalancesRead {
            effect_id,
            chain: e.chain,
            block_height: height,
            gas_price_wei: self.cfg.gas_price_wei,
            gas_estimate_usd_micros: self
                .evm
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
            balance_minor: self.evm.ledger.tokens.at((wallet.0, token), height),
            allowance_minor: self.evm.ledger.allowances.get(&(wallet.0, token)).copied().unwrap_or(0),
            price_usd_micros: t.map_or(0, |t| t.price_usd_micros),
            decimals: t.map_or(0, |t| t.decimals),
        }
    }

    fn broadcast(&mut self, effect_id: u64, tx: &SweepTx, cancel: bool, now_us: u64) {
        let evm_tx = self.evm_tx(tx);
        let mut hash = Self::tx_hash(tx);
        if cancel {
            hash.0[0] ^= 0xCC;
        }
        let outcome = self.evm.broadcast(effect_id, &evm_tx, hash, cancel, now_us);
        let result = BroadcastResult { effect_id, batch: tx.batch, tx_hash: hash, outcome };
        self.send(now_us + self.cfg.rpc_latency_us, CollectionCommand::BroadcastResult(result));
    }

    fn lookup(&mut self, effect_id: u64, e: &LookupReceipts, now_us: u64) {
        let receipts = e.hashes.iter().map(|h| (*h, self.evm.receipt_status(h))).collect();
        let looked =
            ReceiptsLooked { effect_id, batch: e.batch, nonce_mined: self.evm.nonce(e.relayer.0), receipts };
        self.send(now_us + self.cfg.rpc_latency_us, CollectionCommand::ReceiptsLooked(looked));
    }

    // ----- time -----

    /// Mines due blocks and turns what the monitor reports into deposit confirmations and
    /// webhooks.
    fn advance(&mut self, now_us: u64) {
        let mut events = std::mem::take(&mut self.events);
        events.clear();
        self.evm.advance(now_us, &mut events);
        for e in &events {
            match *e {
                EvmEvent::Credited { index, due_us } => self.report_deposit(index, due_us),
                EvmEvent::Confirmed { hash, receipt, due_us } => {
                    self.send(due_us, CollectionCommand::TxWebhook(TxWebhook { tx_hash: hash, receipt }));
                }
                // Collection's chain never reorgs past the confirmation depth nor reports
                // inclusion.
                EvmEvent::Reorged { .. } | EvmEvent::Included { .. } => {}
            }
        }
        self.events = events;
    }

    fn report_deposit(&mut self, index: usize, due_us: u64) {
        let Some(d) = self.evm.ledger.credits.get(index) else { return };
        let c = DepositConfirmed {
            deposit: DepositId(d.tag),
            partner: self.partners.get(index).copied().unwrap_or_default(),
            wallet: WalletId(d.address),
            chain: self.cfg.chain,
            token: d.token,
            amount_minor: d.amount_minor,
            block_height: d.mined_height.unwrap_or(0),
        };
        self.send(due_us, CollectionCommand::DepositConfirmed(c));
    }
}

impl ChainAdapter for ChainSim {
    fn execute(&mut self, effect_id: u64, effect: &CollectionEffect, now_us: u64) {
        // The chain moves on before it answers: the effect sees the chain as of now.
        self.advance(now_us);
        match effect {
            CollectionEffect::ReadBalances(e) => self.read_balances(effect_id, e, now_us),
            CollectionEffect::Broadcast(tx) => self.broadcast(effect_id, tx, false, now_us),
            CollectionEffect::LookupReceipts(e) => self.lookup(effect_id, e, now_us),
            CollectionEffect::Cancel(c) => self.broadcast(effect_id, &Self::cancel_as_tx(c), true, now_us),
        }
    }

    fn figures(&self, out: &mut Vec<(&'static str, u64)>) {
        let s = &self.evm.stats;
        out.extend([
            ("chain_broadcasts", s.broadcasts),
            ("chain_already_known", s.already_known),
            ("chain_nonce_too_low", s.nonce_too_low),
            ("chain_webhooks_sent", s.webhooks_sent),
            ("chain_tip", self.evm.tip()),
        ]);
    }

    fn poll(&mut self, now_us: u64, results: &mut Vec<CollectionCommand>) {
        self.advance(now_us);
        while let Some(entry) = self.outbox.first_entry() {
            if entry.key().0 > now_us {
                break;
            }
            results.push(entry.remove());
        }
    }
}
