//! [`CollectionPlugin`]: the `Plugin` implementation, command routing, the input commands
//! (deposits, settings, relayers, operator actions) and the audit queries.
//!
//! The rules themselves are split by topic: `schedule` (ticks: scheduled runs, stale monitor),
//! `sweep` (balance results, skip rules, batch lifecycle, race fix) and `nonce` (relayer nonces,
//! dispatch of waiting batches).

use std::collections::BTreeMap;

use rtgs_core::entry::{Entry, Payload, PluginKind, Seq};
use rtgs_core::plugin::{Effect, Plugin, PluginDecodeError, Step};

use crate::checkpoint::{self, Index};
use crate::command::*;
use crate::effect::{CollectionEffect, EffectSink, SweepTx};
use crate::limits::{
    BATCH_TX_HASHES_MAX, BUMP_GAS_PRICE_PERCENT_MIN, RECENT_REJECTIONS_MAX, SWEEP_GAS_LIMIT,
};
use crate::settings::{Effective, PartnerState, SettingKey, SettingScope, Settings};
use crate::state::*;
use crate::types::*;

/// The collection plugin: deterministic state over the journal (see the crate docs).
#[derive(Clone, Debug)]
pub struct CollectionPlugin {
    pub(crate) st: State,
    pub(crate) ix: Index,
    /// Per chain, a superset of the relayers available now: every relayer that may have become
    /// available (registered, lock released, pause lifted) is put in; dispatch scans it in id
    /// order and drops the ones it finds busy. It finds the same relayer a scan of all of them
    /// would (the lowest-numbered available one) without visiting every busy relayer for every
    /// entry. A cache, not state: rebuilt from all relayers on decode, never hashed or stored.
    pub(crate) maybe_free: BTreeMap<ChainId, std::collections::BTreeSet<RelayerId>>,
}

impl Default for CollectionPlugin {
    fn default() -> Self {
        Self::new()
    }
}

/// Where a deposit stands, end to end (deposit → queue row → batch → transaction hashes).
#[derive(Copy, Clone, Debug)]
pub struct DepositTrace<'a> {
    pub row: &'a QueueRow,
    /// The batch that collected it (none while QUEUED).
    pub batch: Option<&'a Batch>,
    /// The open batch of its group that may still collect it (while QUEUED).
    pub open_batch: Option<&'a Batch>,
    /// Why its group was last skipped, if it was.
    pub last_skip: Option<SkipRecord>,
}

impl<'a> DepositTrace<'a> {
    /// The hashes of the transaction that swept it.
    pub fn tx_hashes(&self) -> &'a [TxHash] {
        self.batch.map_or(&[], |b| b.tx_hashes.as_slice())
    }
}

impl CollectionPlugin {
    pub fn new() -> Self {
        Self::with_settings(Settings::default())
    }

    /// A plugin with other global settings (their ranges are the caller's to respect).
    pub fn with_settings(settings: Settings) -> Self {
        let st = State { settings, ..State::default() };
        CollectionPlugin { st, ix: Index::default(), maybe_free: BTreeMap::new() }
    }

    // ----- routing -----

    fn on_command(&mut self, seq: Seq, cmd: &CollectionCommand, out: &mut EffectSink<'_>) {
        use CollectionCommand as C;
        let result = match cmd {
            C::DepositConfirmed(c) => self.on_deposit(c),
            C::SetSetting(c) => self.on_set_setting(c),
            C::RegisterRelayer(c) => self.on_register_relayer(c),
            C::FailStale(c) => self.on_fail_stale(c, out),
            C::BumpGas(c) => self.on_bump_gas(c, out),
            C::ResetNonce(c) => self.on_reset_nonce(c),
            C::RunNow(c) => {
                self.run_now(c.partner, out);
                Ok(())
            }
            C::BalancesRead(c) => self.on_balances_read(c),
            C::BalancesReadFailed(c) => {
                self.on_balances_read_failed(c);
                Ok(())
            }
            C::BroadcastResult(c) => {
                self.on_broadcast_result(c, out);
                Ok(())
            }
            C::TxWebhook(c) => {
                self.on_webhook(c);
                Ok(())
            }
            C::ReceiptsLooked(c) => {
                self.on_receipts(c, out);
                Ok(())
            }
        };
        if let Err(kind) = result {
            self.reject(seq, kind);
        }
    }

    pub(crate) fn reject(&mut self, seq: Seq, kind: RejectKind) {
        *self.st.counters.rejected.entry(kind).or_default() += 1;
        if self.st.rejections_recent.len() >= RECENT_REJECTIONS_MAX {
            self.st.rejections_recent.remove(0);
        }
        self.st.rejections_recent.push(Rejection { seq, kind });
    }

    // ----- inputs -----

    /// A confirmed deposit becomes a QUEUED row (seed 4-1); nothing is sent now.
    fn on_deposit(&mut self, d: &DepositConfirmed) -> Result<(), RejectKind> {
        if d.amount_minor == 0 {
            return Err(RejectKind::ZeroAmount);
        }
        let key = GroupKey { wallet: d.wallet, chain: d.chain, token: d.token };
        if let Some(row) = self.st.deposits.get(&d.deposit) {
            let same = row.partner == d.partner
                && row.key == key
                && row.amount_minor == d.amount_minor
                && row.block_height == d.block_height;
            if !same {
                return Err(RejectKind::DepositConflict);
            }
            self.st.counters.deposits_duplicate += 1;
            return Ok(());
        }
        if self.ix.wallets.get(&d.wallet).is_some_and(|p| *p != d.partner) {
            return Err(RejectKind::WalletPartnerMismatch);
        }
        self.ensure_partner(d.partner);
        self.ix.wallets.insert(d.wallet, d.partner);
        self.st.groups.entry(key).or_insert(Group {
            partner: d.partner,
            read: None,
            last_sweep_height: 0,
            last_skip: None,
            skips_total: 0,
        });
        let row = QueueRow {
            deposit: d.deposit,
            partner: d.partner,
            key,
            amount_minor: d.amount_minor,
            block_height: d.block_height,
            queued_at_us: self.st.now_us,
            status: RowStatus::Queued,
            collected_at_us: None,
        };
        self.st.deposits.insert(d.deposit, row);
        match self.swept_by(key, d.block_height) {
            Some(batch) => self.credit_late(d.deposit, batch),
            None => {
                self.ix.queued.entry(key).or_default().insert((d.block_height, d.deposit));
            }
        }
        Ok(())
    }

    /// The CONFIRMED batch of the group whose swept balance holds a deposit included at
    /// `height`: the one read at the lowest height at or above it (those read below did not
    /// hold it; once it was swept, later reads do not hold it either).
    fn swept_by(&self, key: GroupKey, height: u64) -> Option<BatchId> {
        let swept = self.ix.swept.get(&key)?;
        swept.range((height, BatchId(0))..).next().map(|(_, b)| *b)
    }

    /// A deposit whose confirmation reached the journal after the batch that swept its funds was
    /// confirmed: COLLECTED by that batch now (not QUEUED forever, not credited to a later one).
    fn credit_late(&mut self, deposit: DepositId, batch: BatchId) {
        let now = self.st.now_us;
        if let Some(row) = self.st.deposits.get_mut(&deposit) {
            row.status = RowStatus::Collected(batch);
            row.collected_at_us = Some(now);
        }
        if let Some(b) = self.st.batches.get_mut(&batch) {
            b.deposits.push(deposit);
        }
    }

    /// A partner's first run is at the next boundary of its interval.
    fn ensure_partner(&mut self, partner: PartnerId) {
        let now = self.st.now_us;
        let global = self.st.settings;
        self.st.partners.entry(partner).or_insert_with(|| PartnerState {
            next_run_us: Effective::of(&global, None).next_boundary_us(now),
            ..PartnerState::default()
        });
    }

    fn on_set_setting(&mut self, s: &SetSetting) -> Result<(), RejectKind> {
        if let Some(v) = s.value {
            s.key.validate(v).map_err(|_| RejectKind::InvalidSetting)?;
        }
        match (s.scope, s.value) {
            (SettingScope::Global, None) => return Err(RejectKind::InvalidSetting),
            (SettingScope::Global, Some(v)) => self.st.settings.set(s.key, v),
            (SettingScope::Partner(p), value) => {
                if !s.key.per_partner() {
                    return Err(RejectKind::InvalidSetting);
                }
                self.ensure_partner(p);
                if let Some(ps) = self.st.partners.get_mut(&p) {
                    ps.set(s.key, value);
                }
            }
        }
        self.rearm_timers(s.key, s.scope);
        Ok(())
    }

    /// A new interval takes effect from now: the next run is the new interval's next boundary.
    fn rearm_timers(&mut self, key: SettingKey, scope: SettingScope) {
        let now = self.st.now_us;
        let global = self.st.settings;
        match key {
            SettingKey::ScheduleIntervalHours => {
                for (id, p) in self.st.partners.iter_mut() {
                    let applies = match scope {
                        SettingScope::Global => p.schedule_interval_hours.is_none(),
                        SettingScope::Partner(target) => *id == target,
                    };
                    if applies {
                        p.next_run_us = Effective::of(&global, Some(p)).next_boundary_us(now);
                    }
                }
            }
            SettingKey::StaleCheckIntervalMinutes => {
                self.st.stale_check_next_us = now.saturating_add(global.stale_check_interval_us());
                self.st.stale_cursor = None;
            }
            _ => {}
        }
    }

    fn on_register_relayer(&mut self, c: &RegisterRelayer) -> Result<(), RejectKind> {
        if self.st.relayers.contains_key(&c.relayer) {
            return Err(RejectKind::RelayerExists);
        }
        let relayer = Relayer { id: c.relayer, chain: c.chain, next_nonce: c.next_nonce, lock: None };
        self.mark_maybe_free(c.chain, c.relayer);
        self.close(crate::alert::AlertKind::NoRelayer, crate::alert::AlertSubject::Chain(c.chain));
        self.st.relayers.insert(c.relayer, relayer);
        self.ix.chain_relayers.entry(c.chain).or_default().insert(c.relayer);
        Ok(())
    }

    /// STALE → FAILED by an operator (seed 10-3); its rows stay QUEUED. The operator says the
    /// transaction is dead, but the chain decides: the plugin cancels the nonce and keeps the
    /// group fenced and the relayer paused until the nonce is used (see `sweep::settle_given_up`).
    fn on_fail_stale(&mut self, c: &FailStale, out: &mut EffectSink<'_>) -> Result<(), RejectKind> {
        let b = self.st.batches.get(&c.batch).ok_or(RejectKind::UnknownBatch)?;
        if b.status != BatchStatus::Stale {
            return Err(RejectKind::BatchNotStale);
        }
        self.fail_batch(c.batch, FailReason::Operator, crate::nonce::NonceFate::Used);
        self.hold_nonce(c.batch);
        self.emit_cancel(c.batch, out);
        Ok(())
    }

    /// A replacement with the same nonce and a higher gas price (seed 10-2: "gas price 올려서
    /// replace TX"). Every hash sent for the nonce is kept: any of them may be the one mined.
    fn on_bump_gas(&mut self, c: &BumpGas, out: &mut EffectSink<'_>) -> Result<(), RejectKind> {
        let b = self.st.batches.get(&c.batch).ok_or(RejectKind::UnknownBatch)?;
        if !matches!(b.status, BatchStatus::Broadcasting | BatchStatus::Stale) {
            return Err(RejectKind::BatchNotInFlight);
        }
        // One question at a time: a bump would make the lookup's answer stale (unless that
        // answer is overdue, in which case it is as good as lost).
        let threshold_us = self.st.settings.stale_threshold_us();
        if b.awaiting.is_some_and(|a| self.st.now_us.saturating_sub(a.since_us) < threshold_us) {
            return Err(RejectKind::AnswerAwaited);
        }
        let floor = u128::from(b.gas_price_wei) * u128::from(BUMP_GAS_PRICE_PERCENT_MIN);
        if u128::from(c.gas_price_wei) * 100 < floor {
            return Err(RejectKind::BumpTooSmall);
        }
        if b.tx_hashes.len() >= BATCH_TX_HASHES_MAX {
            return Err(RejectKind::TooManyHashes);
        }
        // A command entry emits a handful of effects: the budget cannot run out here.
        self.emit_broadcast(c.batch, AwaitKind::Bump, c.gas_price_wei, out);
        Ok(())
    }

    /// Sends the batch's transaction (its nonce already acquired) and waits for the answer.
    pub(crate) fn emit_broadcast(
        &mut self,
        id: BatchId,
        kind: AwaitKind,
        gas_price_wei: u64,
        out: &mut EffectSink<'_>,
    ) {
        let now = self.st.now_us;
        let Some(b) = self.st.batches.get_mut(&id) else { return };
        let (Some(relayer), Some(nonce)) = (b.relayer, b.nonce) else { return };
        let tx = SweepTx {
            batch: id,
            chain: b.key.chain,
            relayer,
            nonce,
            wallet: b.key.wallet,
            token: b.key.token,
            amount_minor: b.amount_minor,
            gas_price_wei,
            gas_limit: SWEEP_GAS_LIMIT,
        };
        let effect_id = out.emit(&CollectionEffect::Broadcast(tx));
        b.awaiting = Some(Awaiting { kind, effect_id, since_us: now, gas_price_wei });
    }

    // ----- queries -----

    pub fn settings(&self) -> &Settings {
        &self.st.settings
    }

    /// The settings in force for a partner (its overrides over the global values).
    pub fn effective_settings(&self, partner: PartnerId) -> Effective {
        Effective::of(&self.st.settings, self.st.partners.get(&partner))
    }

    pub fn partner(&self, id: PartnerId) -> Option<&PartnerState> {
        self.st.partners.get(&id)
    }

    pub fn deposit(&self, id: DepositId) -> Option<&QueueRow> {
        self.st.deposits.get(&id)
    }

    pub fn deposits(&self) -> impl Iterator<Item = &QueueRow> {
        self.st.deposits.values()
    }

    pub fn batch(&self, id: BatchId) -> Option<&Batch> {
        self.st.batches.get(&id)
    }

    pub fn batches(&self) -> impl Iterator<Item = &Batch> {
        self.st.batches.values()
    }

    pub fn group(&self, key: &GroupKey) -> Option<&Group> {
        self.st.groups.get(key)
    }

    pub fn relayer(&self, id: RelayerId) -> Option<&Relayer> {
        self.st.relayers.get(&id)
    }

    /// Whether the relayer may get a new transaction now (not LOCKED, not paused by a STALE
    /// batch or a given-up nonce still unused).
    pub fn relayer_available(&self, id: RelayerId) -> bool {
        self.st
            .relayers
            .get(&id)
            .is_some_and(|r| r.lock.is_none() && self.ix.relayer_paused.get(&id).is_none_or(|s| s.is_empty()))
    }

    pub fn counters(&self) -> &Counters {
        &self.st.counters
    }

    pub fn rejections_recent(&self) -> &[Rejection] {
        &self.st.rejections_recent
    }

    pub fn seq_applied(&self) -> Seq {
        self.st.seq_applied
    }

    pub fn now_us(&self) -> u64 {
        self.st.now_us
    }

    pub fn queued_count(&self) -> usize {
        self.ix.queued.values().map(|s| s.len()).sum()
    }

    /// The batch that sent a hash.
    pub fn batch_of_tx(&self, hash: &TxHash) -> Option<BatchId> {
        self.ix.tx_index.get(hash).copied()
    }

    /// Audit, forward: deposit → queue row → batch → transaction hash(es).
    pub fn trace_deposit(&self, id: DepositId) -> Option<DepositTrace<'_>> {
        let row = self.st.deposits.get(&id)?;
        let batch = match row.status {
            RowStatus::Collected(b) => self.st.batches.get(&b),
            RowStatus::Queued => None,
        };
        let open_batch = match row.status {
            RowStatus::Queued => self.ix.open_batch.get(&row.key).and_then(|b| self.st.batches.get(b)),
            RowStatus::Collected(_) => None,
        };
        let last_skip = self.st.groups.get(&row.key).and_then(|g| g.last_skip);
        Some(DepositTrace { row, batch, open_batch, last_skip })
    }

    /// Audit, backward: batch → the deposits it collected (empty until CONFIRMED).
    pub fn batch_deposits(&self, id: BatchId) -> Option<Vec<&QueueRow>> {
        let b = self.st.batches.get(&id)?;
        Some(b.deposits.iter().filter_map(|d| self.st.deposits.get(d)).collect())
    }

    /// Applies one journal entry, appending its effects (the plugin step without a ledger: what
    /// [`Plugin::apply`] does, and what the plugin's own tests and drivers call).
    pub fn apply_entry(&mut self, entry: &Entry, effects: &mut Vec<Effect>) {
        // Idempotent by seq: a republished entry changes nothing.
        if entry.seq <= self.st.seq_applied {
            return;
        }
        self.st.seq_applied = entry.seq;
        self.st.now_us = self.st.now_us.max(entry.timestamp_us);
        let mut out = EffectSink::new(entry.seq, effects);
        match &entry.payload {
            Payload::Tick => self.on_tick(&mut out),
            Payload::Plugin(c) if c.plugin == PluginKind::Collection => {
                match CollectionCommand::decode(c.op, &c.body) {
                    Ok(cmd) => self.on_command(entry.seq, &cmd, &mut out),
                    Err(_) => {
                        self.reject(entry.seq, RejectKind::Malformed);
                        return;
                    }
                }
            }
            _ => return,
        }
        // A hash recorded now may have had its webhook journaled first.
        self.apply_early_webhooks();
        // Whatever freed a relayer or created a batch: hand out nonces now.
        self.dispatch_waiting(&mut out);
    }

    /// Rebuilds the indexes from primary data and compares them with the live ones.
    pub fn check_invariants(&self) -> Result<(), String> {
        for r in self.st.relayers.values() {
            let cached = self.maybe_free.get(&r.chain).is_some_and(|s| s.contains(&r.id));
            if self.relayer_available(r.id) && !cached {
                return Err(format!("relayer {:?} is available but not in the dispatch cache", r.id));
            }
        }
        let rebuilt = Index::build(&self.st).map_err(str::to_string)?;
        if rebuilt != self.ix {
            return Err(format!(
                "indexes drifted from the state:\n live {:?}\n rebuilt {:?}",
                self.ix, rebuilt
            ));
        }
        Ok(())
    }
}

impl Plugin for CollectionPlugin {
    const KIND: PluginKind = PluginKind::Collection;

    fn apply(&mut self, entry: &Entry, step: &mut Step<'_>) {
        // Collection moves no ledger money (it sweeps on-chain balances): effects only.
        self.apply_entry(entry, step.effects());
    }

    const ALERT_KINDS: &'static [&'static str] = &crate::alert::AlertKind::NAMES;

    fn state_hash(&self) -> u64 {
        checkpoint::hash_state(&self.st)
    }

    fn alerts_open(&self, out: &mut Vec<rtgs_core::plugin::PluginAlert>) {
        out.extend(self.st.alerts.values().map(|a| rtgs_core::plugin::PluginAlert {
            plugin: PluginKind::Collection,
            id: a.id,
            kind: a.kind.name(),
            subject: a.subject.to_string(),
            since_us: a.since_us,
        }));
    }

    fn digest(&self) -> u64 {
        use rtgs_core::hash::{fold, mix64};
        let st = &self.st;
        let c = &st.counters;
        [
            st.now_us,
            st.deposits.len() as u64,
            st.groups.len() as u64,
            st.batches.len() as u64,
            st.relayers.len() as u64,
            st.partners.len() as u64,
            st.batch_id_last,
            st.stale_check_next_us,
            st.rejections_recent.len() as u64,
            st.webhooks_early.len() as u64,
            c.results_ignored,
            c.deposits_duplicate,
            c.webhooks_foreign,
            c.reads_deferred,
            st.alerts.len() as u64,
            st.alert_id_last,
            self.ix.queued.len() as u64,
            self.ix.waiting.len() as u64,
            self.ix.open_batch.len() as u64,
        ]
        .into_iter()
        .fold(mix64(st.seq_applied), fold)
    }

    fn pending_effects(&self, out: &mut Vec<Effect>) {
        crate::pending::pending_effects(self, out)
    }

    fn figures(&self, out: &mut Vec<(&'static str, u64)>) {
        crate::pending::figures(self, out)
    }

    fn encode(&self, out: &mut Vec<u8>) {
        checkpoint::write_state(&self.st, out);
    }

    fn decode(buf: &[u8]) -> Result<Self, PluginDecodeError> {
        let (st, ix) = checkpoint::read_state(buf).map_err(|_| PluginDecodeError)?;
        let mut p = CollectionPlugin { st, ix, maybe_free: BTreeMap::new() };
        let all: Vec<(ChainId, RelayerId)> = p.st.relayers.values().map(|r| (r.chain, r.id)).collect();
        for (chain, id) in all {
            p.mark_maybe_free(chain, id);
        }
        Ok(p)
    }
}
