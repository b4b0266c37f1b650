//! Shared test fixtures: [`Fx`] drives the plugin directly with hand-made results (one rule at a
//! time); [`World`] runs it against the chain simulator through the journal driver.

#![allow(dead_code)]

use rtgs_collection::alert::AlertKind;
use rtgs_collection::chain_sim::{ChainConfig, ChainSim, Faults};
use rtgs_collection::command::*;
use rtgs_collection::driver::Driver;
use rtgs_collection::effect::*;
use rtgs_collection::settings::{SettingKey, SettingScope, HOUR_US, MINUTE_US};
use rtgs_collection::state::*;
use rtgs_collection::types::*;
use rtgs_collection::CollectionPlugin;
use rtgs_core::entry::{Bmi, CenterId, Entry, Payload};
use rtgs_core::plugin::Effect;

/// A multiple of 24 h, so every schedule interval's boundaries line up with it.
pub const START_US: u64 = 1_008 * HOUR_US;
pub const PARTNER: PartnerId = PartnerId(1);
pub const CHAIN: ChainId = ChainId(1);
pub const TOKEN: TokenId = TokenId(1);
pub const RELAYER: RelayerId = RelayerId(500);
pub const RELAYER_2: RelayerId = RelayerId(501);
/// 1.0 USDT (6 decimals).
pub const USDT: u128 = 1_000_000;
/// The simulator's default gas estimate: 50,000 gas × 1 gwei × 3,000 USD = 0.15 USD.
pub const GAS_USD_MICROS: u64 = 150_000;
pub const GAS_PRICE_WEI: u64 = 1_000_000_000;

pub fn wallet(n: u64) -> WalletId {
    WalletId(100 + n)
}

pub fn key(w: WalletId) -> GroupKey {
    GroupKey { wallet: w, chain: CHAIN, token: TOKEN }
}

/// An effect with its id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fx1 {
    pub id: u64,
    pub effect: CollectionEffect,
}

/// The plugin alone, fed entry by entry.
pub struct Fx {
    pub p: CollectionPlugin,
    pub seq: u64,
    pub now_us: u64,
    /// Check invariants after every entry (off for very large fixtures: it is O(state)).
    pub check: bool,
}

impl Fx {
    pub fn new() -> Self {
        Fx { p: CollectionPlugin::new(), seq: 0, now_us: START_US, check: true }
    }

    pub fn at(&mut self, t_us: u64) -> &mut Self {
        self.now_us = t_us;
        self
    }

    pub fn apply(&mut self, payload: Payload) -> Vec<Fx1> {
        self.seq += 1;
        let bmi = if payload == Payload::Tick {
            Bmi::NONE
        } else {
            Bmi::numbered("T", self.seq).unwrap_or(Bmi::NONE)
        };
        let entry =
            Entry { seq: self.seq, epoch: 1, timestamp_us: self.now_us, origin: CenterId(1), bmi, payload };
        let mut raw: Vec<Effect> = Vec::new();
        self.p.apply_entry(&entry, &mut raw);
        let decoded: Vec<Fx1> = raw
            .iter()
            .map(|e| Fx1 {
                id: e.effect_id,
                effect: CollectionEffect::from_effect(e).expect("own effects decode"),
            })
            .collect();
        if self.check {
            self.p.check_invariants().unwrap_or_else(|e| panic!("invariants after seq {}: {e}", self.seq));
        }
        decoded
    }

    pub fn cmd(&mut self, c: CollectionCommand) -> Vec<Fx1> {
        let pc = c.to_plugin_command().expect("command fits");
        self.apply(Payload::Plugin(pc))
    }

    pub fn tick(&mut self) -> Vec<Fx1> {
        self.apply(Payload::Tick)
    }

    /// Moves to `t_us` and ticks.
    pub fn tick_at(&mut self, t_us: u64) -> Vec<Fx1> {
        self.now_us = t_us;
        self.tick()
    }

    pub fn deposit(&mut self, id: u64, w: WalletId, amount: u128, height: u64) -> Vec<Fx1> {
        self.deposit_for(PARTNER, id, w, amount, height)
    }

    pub fn deposit_for(
        &mut self,
        partner: PartnerId,
        id: u64,
        w: WalletId,
        amount: u128,
        height: u64,
    ) -> Vec<Fx1> {
        self.cmd(CollectionCommand::DepositConfirmed(DepositConfirmed {
            deposit: DepositId(id),
            partner,
            wallet: w,
            chain: CHAIN,
            token: TOKEN,
            amount_minor: amount,
            block_height: height,
        }))
    }

    pub fn relayer(&mut self, r: RelayerId, next_nonce: u64) -> Vec<Fx1> {
        self.cmd(CollectionCommand::RegisterRelayer(RegisterRelayer { chain: CHAIN, relayer: r, next_nonce }))
    }

    pub fn setting(&mut self, scope: SettingScope, key: SettingKey, value: Option<u64>) -> Vec<Fx1> {
        self.cmd(CollectionCommand::SetSetting(SetSetting { scope, key, value }))
    }

    /// Ticks at the next hourly boundary (the default schedule): returns the reads.
    pub fn run_schedule(&mut self) -> Vec<Fx1> {
        let t = (self.now_us / HOUR_US + 1) * HOUR_US;
        self.tick_at(t)
    }

    pub fn read(&mut self, effect_id: u64, height: u64, rows: Vec<BalanceRow>) -> Vec<Fx1> {
        self.read_with_gas(effect_id, height, GAS_USD_MICROS, rows)
    }

    pub fn read_with_gas(
        &mut self,
        effect_id: u64,
        height: u64,
        gas: u64,
        rows: Vec<BalanceRow>,
    ) -> Vec<Fx1> {
        self.cmd(CollectionCommand::BalancesRead(BalancesRead {
            effect_id,
            chain: CHAIN,
            block_height: height,
            gas_price_wei: GAS_PRICE_WEI,
            gas_estimate_usd_micros: gas,
            rows,
        }))
    }

    pub fn broadcast_result(&mut self, b: &Fx1, outcome: BroadcastOutcome) -> Vec<Fx1> {
        let tx = sweep(b);
        self.cmd(CollectionCommand::BroadcastResult(BroadcastResult {
            effect_id: b.id,
            batch: tx.batch,
            tx_hash: hash_of(&tx),
            outcome,
        }))
    }

    pub fn webhook(&mut self, hash: TxHash, success: bool, height: u64) -> Vec<Fx1> {
        self.cmd(CollectionCommand::TxWebhook(TxWebhook { tx_hash: hash, receipt: receipt(success, height) }))
    }

    pub fn receipts(&mut self, l: &Fx1, nonce_mined: u64, statuses: &[ReceiptStatus]) -> Vec<Fx1> {
        let CollectionEffect::LookupReceipts(lr) = &l.effect else { panic!("not a lookup: {l:?}") };
        let receipts = lr.hashes.iter().copied().zip(statuses.iter().copied()).collect();
        self.cmd(CollectionCommand::ReceiptsLooked(ReceiptsLooked {
            effect_id: l.id,
            batch: lr.batch,
            nonce_mined,
            receipts,
        }))
    }

    pub fn batch(&self, id: u64) -> &Batch {
        self.p.batch(BatchId(id)).expect("batch exists")
    }

    pub fn row(&self, id: u64) -> &QueueRow {
        self.p.deposit(DepositId(id)).expect("row exists")
    }

    /// Deposits, a relayer, a scheduled run and a read: returns the first broadcast.
    pub fn up_to_broadcast(&mut self, deposits: &[(u64, u128, u64)], read_height: u64, balance: u128) -> Fx1 {
        for (id, amount, h) in deposits {
            self.deposit(*id, wallet(1), *amount, *h);
        }
        if self.p.relayer(RELAYER).is_none() {
            self.relayer(RELAYER, 0);
        }
        let reads = self.run_schedule();
        let read = only(&reads, is_read);
        let out = self.read(read.id, read_height, vec![bal(wallet(1), balance)]);
        only(&out, is_broadcast)
    }

    /// ... and accepted: the batch is BROADCASTING.
    pub fn up_to_broadcasting(
        &mut self,
        deposits: &[(u64, u128, u64)],
        read_height: u64,
        balance: u128,
    ) -> Fx1 {
        let b = self.up_to_broadcast(deposits, read_height, balance);
        self.broadcast_result(&b, BroadcastOutcome::Accepted);
        b
    }
}

pub fn bal(w: WalletId, balance: u128) -> BalanceRow {
    BalanceRow {
        wallet: w,
        token: TOKEN,
        balance_minor: balance,
        allowance_minor: u128::MAX,
        price_usd_micros: 1_000_000,
        decimals: 6,
    }
}

pub fn receipt(success: bool, height: u64) -> Receipt {
    Receipt { success, block_height: height, gas_used: 50_000, gas_cost_usd_micros: GAS_USD_MICROS }
}

pub fn sweep(e: &Fx1) -> SweepTx {
    match &e.effect {
        CollectionEffect::Broadcast(tx) => *tx,
        other => panic!("not a broadcast: {other:?}"),
    }
}

/// The simulator's hash of a broadcast (what a signer would produce).
pub fn hash_of(tx: &SweepTx) -> TxHash {
    ChainSim::tx_hash(tx)
}

pub fn is_read(e: &Fx1) -> bool {
    matches!(e.effect, CollectionEffect::ReadBalances(_))
}
pub fn is_broadcast(e: &Fx1) -> bool {
    matches!(e.effect, CollectionEffect::Broadcast(_))
}
pub fn is_lookup(e: &Fx1) -> bool {
    matches!(e.effect, CollectionEffect::LookupReceipts(_))
}
pub fn is_cancel(e: &Fx1) -> bool {
    matches!(e.effect, CollectionEffect::Cancel(_))
}
/// The kinds of the alerts open in the plugin's state, in the order they opened.
pub fn open_kinds(p: &CollectionPlugin) -> Vec<AlertKind> {
    let mut open: Vec<(u64, AlertKind)> = p.alerts_open().map(|a| (a.id, a.kind)).collect();
    open.sort_unstable();
    open.into_iter().map(|(_, k)| k).collect()
}

/// The one effect matching `pred` (and there must be exactly one).
pub fn only(effects: &[Fx1], pred: fn(&Fx1) -> bool) -> Fx1 {
    let m: Vec<&Fx1> = effects.iter().filter(|e| pred(e)).collect();
    assert_eq!(m.len(), 1, "expected exactly one matching effect in {effects:?}");
    m[0].clone()
}

pub fn count(effects: &[Fx1], pred: fn(&Fx1) -> bool) -> usize {
    effects.iter().filter(|e| pred(e)).count()
}

// ----- the plugin against the simulator -----

/// The plugin and the chain simulator, connected by the journal driver.
pub struct World {
    pub d: Driver<ChainSim>,
    /// Deposits injected into the chain: (id, wallet, amount).
    pub injected: Vec<(u64, WalletId, u128)>,
    /// When the operator last acted on each batch.
    pub operator_log: std::collections::BTreeMap<BatchId, u64>,
    /// Bump STALE batches (true) or give them up at once (false).
    pub operator_bumps: bool,
}

impl World {
    pub fn new(seed: u64) -> Self {
        Self::with(seed, ChainConfig::default(), &[RELAYER])
    }

    pub fn with(seed: u64, cfg: ChainConfig, relayers: &[RelayerId]) -> Self {
        let mut sim = ChainSim::new(cfg, seed, START_US);
        for r in relayers {
            sim.fund_native(r.0, 1_000_000_000_000_000_000_000);
        }
        let mut d = Driver::new(CollectionPlugin::new(), sim, START_US);
        for r in relayers {
            d.submit(&CollectionCommand::RegisterRelayer(RegisterRelayer {
                chain: CHAIN,
                relayer: *r,
                next_nonce: 0,
            }))
            .expect("fits");
        }
        World { d, injected: Vec::new(), operator_log: Default::default(), operator_bumps: true }
    }

    pub fn sim(&mut self) -> &mut ChainSim {
        &mut self.d.adapter
    }

    pub fn p(&self) -> &CollectionPlugin {
        &self.d.plugin
    }

    /// A user deposit into `w` (approved for the collector).
    pub fn deposit(&mut self, id: u64, w: WalletId, amount: u128) {
        self.d.adapter.deposit(DepositId(id), PARTNER, w, TOKEN, amount);
        self.d.adapter.approve(w, TOKEN, u128::MAX);
        self.injected.push((id, w, amount));
    }

    pub fn set(&mut self, key: SettingKey, value: u64) {
        let c = CollectionCommand::SetSetting(SetSetting {
            scope: SettingScope::Global,
            key,
            value: Some(value),
        });
        self.d.submit(&c).expect("fits");
    }

    pub fn run(&mut self, duration_us: u64) {
        self.d.run_for(duration_us, 10_000_000);
        self.p().check_invariants().unwrap_or_else(|e| panic!("{e}"));
    }

    pub fn run_minutes(&mut self, m: u64) {
        self.run(m * MINUTE_US);
    }

    /// Runs with an operator who, every 30 minutes at most per batch, bumps a STALE batch's
    /// gas by 20 % (or fails it once it has no hash slots left, or at once if `operator_bumps`
    /// is false), checking invariants every minute.
    pub fn run_with_operator(&mut self, duration_us: u64) {
        let World { d, operator_log, operator_bumps, .. } = self;
        let bumps = *operator_bumps;
        d.run_with(duration_us, 10_000_000, MINUTE_US, |d| {
            operator_step(d, operator_log, bumps);
            d.plugin.check_invariants().unwrap_or_else(|e| panic!("{e}"));
        });
    }

    pub fn batches_with(&self, status: BatchStatus) -> Vec<BatchId> {
        self.p().batches().filter(|b| b.status == status).map(|b| b.id).collect()
    }

    pub fn row_status(&self, id: u64) -> Option<RowStatus> {
        self.p().deposit(DepositId(id)).map(|r| r.status)
    }

    /// Money check: what the chain swept equals what the plugin marked COLLECTED, batch by batch,
    /// and no batch was swept twice.
    pub fn check_money(&self) {
        let sim = &self.d.adapter;
        let sweeps = sim.mined_sweeps();
        let mut per_batch = std::collections::BTreeMap::<BatchId, u32>::new();
        for (b, _, _) in &sweeps {
            *per_batch.entry(*b).or_default() += 1;
        }
        assert!(per_batch.values().all(|n| *n == 1), "a batch was swept twice: {per_batch:?}");
        let swept: u128 = sweeps.iter().map(|(_, _, a)| a).sum();
        let collected: u128 = self
            .p()
            .deposits()
            .filter(|r| matches!(r.status, RowStatus::Collected(_)))
            .map(|r| r.amount_minor)
            .sum();
        assert_eq!(swept, collected, "swept on chain vs COLLECTED rows");
        assert_eq!(sim.treasury_balance(TOKEN), swept);
        for (b, _, amount) in &sweeps {
            let batch = self.p().batch(*b).expect("swept batch known");
            assert_eq!(batch.amount_minor, *amount);
            let rows: u128 =
                self.p().batch_deposits(*b).unwrap_or_default().iter().map(|r| r.amount_minor).sum();
            assert_eq!(rows, *amount, "batch {b:?}: rows vs swept amount");
        }
    }

    /// What holds at any moment: no batch swept twice; a CONFIRMED batch's transaction is on
    /// chain (mined, or pending again after a reorg shallower than the confirmation depth) and
    /// its rows add up to exactly what it swept.
    pub fn check_money_so_far(&self) {
        let sim = &self.d.adapter;
        let mut per_batch = std::collections::BTreeMap::<BatchId, u32>::new();
        for (b, _, _) in sim.mined_sweeps() {
            *per_batch.entry(b).or_default() += 1;
        }
        assert!(per_batch.values().all(|n| *n == 1), "a batch was swept twice: {per_batch:?}");
        for b in self.p().batches().filter(|b| b.status == BatchStatus::Confirmed) {
            let on_chain = b.tx_hashes.iter().any(|h| {
                matches!(
                    sim.tx(h).map(|t| t.state),
                    Some(rtgs_collection::chain_sim::TxState::Mined { success: true, .. })
                        | Some(rtgs_collection::chain_sim::TxState::Pending)
                )
            });
            assert!(on_chain, "confirmed batch {:?} is not on chain", b.id);
            let rows: u128 =
                self.p().batch_deposits(b.id).unwrap_or_default().iter().map(|r| r.amount_minor).sum();
            assert_eq!(rows, b.amount_minor, "batch {:?}: rows vs swept amount", b.id);
        }
    }

    /// Every injected deposit is COLLECTED and the wallets are empty.
    pub fn check_all_collected(&self) {
        for (id, w, _) in &self.injected {
            assert!(
                matches!(self.row_status(*id), Some(RowStatus::Collected(_))),
                "deposit {id} not collected: {:?}",
                self.p().trace_deposit(DepositId(*id)).map(|t| (
                    t.row.clone(),
                    t.open_batch.cloned(),
                    t.last_skip
                ))
            );
            assert_eq!(self.d.adapter.token_balance(w.0, TOKEN), 0, "wallet {w:?} not empty");
        }
    }
}

/// The operator: bump STALE batches, fail those that ran out of replacement slots.
pub fn operator_step(
    d: &mut Driver<ChainSim>,
    log: &mut std::collections::BTreeMap<BatchId, u64>,
    bumps: bool,
) {
    let now = d.now_us();
    let stale: Vec<(BatchId, u64, usize)> = d
        .plugin
        .batches()
        .filter(|b| b.status == BatchStatus::Stale && b.awaiting.is_none())
        .filter(|b| log.get(&b.id).is_none_or(|t| now.saturating_sub(*t) >= 30 * MINUTE_US))
        .map(|b| (b.id, b.gas_price_wei, b.tx_hashes.len()))
        .collect();
    for (id, gas, hashes) in stale {
        log.insert(id, now);
        let cmd = if bumps && hashes < rtgs_collection::limits::BATCH_TX_HASHES_MAX {
            CollectionCommand::BumpGas(BumpGas { batch: id, gas_price_wei: gas / 5 * 6 + 1 })
        } else {
            CollectionCommand::FailStale(FailStale { batch: id })
        };
        d.submit(&cmd).expect("fits");
    }
}

pub fn no_faults() -> Faults {
    Faults::NONE
}
