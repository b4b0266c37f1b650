//! [`WithdrawalPlugin`]: the `Plugin` implementation, command routing, registrations and
//! settings, and the queries the API and the audits use.
//!
//! The rules are split by topic: `intake` (requests, the hold, taking SUBMITTED ones in),
//! `lifecycle` (status changes and money, the answers of the screener, the approvers and the
//! signer, broadcasts), `chainwatch` (webhooks, lookups, reorgs), `dispatch` (vault
//! round-robin and slots), `monitor` (ticks: timers, archiving) and `ops` (operations).
//!
//! **One withdrawal at a time.** A handler takes the withdrawal out of the map (and its
//! contributions out of every index: [`WithdrawalPlugin::take`]), changes it with the whole
//! plugin at hand, and puts it back ([`WithdrawalPlugin::put`]: its timer re-armed, its index
//! entries added again). The indexes are therefore a function of the rows, which is what
//! `check_invariants` verifies by rebuilding them.

use rtgs_core::entry::{Entry, Payload, PluginKind, Seq};
use rtgs_core::ledger::{IntentRejected, LedgerIntent};
use rtgs_core::plugin::{Effect, Plugin, PluginDecodeError, Step};

use crate::chain::{AssetParams, ChainParams, VaultParams};
use crate::checkpoint::{self, Index};
use crate::command::*;
use crate::effect::{EffectIds, WithdrawalEffect};
use crate::limits::*;
use crate::operation::{Refusal, RefuseCode};
use crate::settings::SettingKey;
use crate::state::*;
use crate::status::Status;
use crate::types::*;

/// The withdrawal plugin: deterministic state over the journal (see the crate docs).
#[derive(Clone, Debug, Default)]
pub struct WithdrawalPlugin {
    pub(crate) st: State,
    pub(crate) ix: Index,
    /// Per chain, a superset of the vaults free now: every vault whose withdrawals changed
    /// (or that was registered or enabled) since it was last found busy. Dispatch asks these
    /// first and scans the whole round only when one of them is free, so that a chain whose
    /// vaults are all busy costs no scan per entry. A cache, not state: it decides nothing
    /// (the scan that chooses is the whole round from the cursor), is never hashed or stored,
    /// and starts as every vault on decode.
    pub(crate) maybe_free: std::collections::BTreeMap<ChainId, std::collections::BTreeSet<VaultId>>,
}

/// One entry's step: its seq and time, the effect ids it hands out, and the core's `Step`
/// (effects out, ledger intents in).
pub(crate) struct Ctx<'s, 'l> {
    pub seq: Seq,
    pub now: u64,
    ids: EffectIds,
    step: &'s mut Step<'l>,
}

impl<'s, 'l> Ctx<'s, 'l> {
    pub(crate) fn new(seq: Seq, now: u64, step: &'s mut Step<'l>) -> Self {
        Ctx { seq, now, ids: EffectIds::new(seq), step }
    }

    /// Emits an effect and returns its id (callers check `has_room` where counts depend on input).
    pub fn emit(&mut self, e: &WithdrawalEffect) -> u64 {
        let id = self.ids.next();
        self.step.effects().push(e.to_effect(id));
        id
    }

    pub fn has_room(&self, n: usize) -> bool {
        self.ids.has_room(n)
    }

    /// Applies a group of ledger intents, all or none.
    pub fn intents(&mut self, intents: &[LedgerIntent]) -> Result<(), IntentRejected> {
        self.step.apply_intents(intents)
    }
}

impl WithdrawalPlugin {
    pub fn new() -> Self {
        WithdrawalPlugin::default()
    }

    // ----- one withdrawal at a time -----

    /// Takes a withdrawal out of the state and its entries out of the indexes.
    pub(crate) fn take(&mut self, id: WithdrawalId) -> Option<Box<Withdrawal>> {
        let w = self.st.withdrawals.remove(&id)?;
        self.ix.remove(&w, &self.st);
        if let Some(v) = w.vault {
            self.maybe_free.entry(w.chain).or_default().insert(v);
        }
        Some(w)
    }

    /// Puts a withdrawal back: its timer re-armed for its status, its index entries added.
    pub(crate) fn put(&mut self, mut w: Box<Withdrawal>) {
        w.timer_us = crate::monitor::timer_for(&w, &self.st);
        self.close_ended(&w);
        self.ix.add(&w, &self.st);
        self.st.withdrawals.insert(w.id, w);
    }

    pub(crate) fn chain_of(&self, w: &Withdrawal) -> Option<&ChainParams> {
        self.st.chains.get(&w.chain)
    }

    pub(crate) fn asset_of(&self, w: &Withdrawal) -> Option<&AssetParams> {
        self.st.assets.get(&w.asset)
    }

    // ----- routing -----

    /// Applies one journal entry through a core step (ledger intents and effects).
    pub(crate) fn apply_entry(&mut self, entry: &Entry, step: &mut Step<'_>) {
        if entry.seq <= self.st.seq_applied {
            return;
        }
        self.st.seq_applied = entry.seq;
        self.st.now_us = self.st.now_us.max(entry.timestamp_us);
        let mut cx = Ctx::new(entry.seq, self.st.now_us, step);
        match &entry.payload {
            Payload::Tick => self.on_tick(&mut cx),
            Payload::Plugin(pc) if pc.plugin == PluginKind::Withdrawal => {
                match WithdrawalCommand::decode(pc.op, &pc.body) {
                    Ok(cmd) => self.on_command(&mut cx, &cmd),
                    Err(_) => self.reject(entry.seq, RefuseCode::Malformed.into()),
                }
            }
            _ => {}
        }
    }

    fn on_command(&mut self, cx: &mut Ctx<'_, '_>, cmd: &WithdrawalCommand) {
        use WithdrawalCommand as C;
        let result = match cmd {
            C::Create(c) => {
                self.on_create(cx, c);
                Ok(())
            }
            C::Operate(c) => self.on_operate(cx, c),
            C::RegisterChain(c) => self.on_register_chain(c),
            C::RegisterAsset(c) => self.on_register_asset(c),
            C::RegisterVault(c) => self.on_register_vault(cx, c),
            C::SetVaultEnabled(c) => self.on_set_vault_enabled(cx, c),
            C::SetSetting(c) => self.on_set_setting(c),
            C::Screened(c) => self.on_screened(cx, c),
            C::Decided(c) => self.on_decided(cx, c),
            C::SignatureResult(c) => self.on_signature(cx, c),
            C::BroadcastResult(c) => self.on_broadcast_result(cx, c),
            C::ReceiptsLooked(c) => self.on_receipts(cx, c),
            C::ChainEvent(c) => {
                self.on_chain_event(cx, c);
                Ok(())
            }
        };
        if let Err(refusal) = result {
            self.reject(cx.seq, refusal);
        }
    }

    /// A command refused as a whole (recorded by seq, counted by code).
    pub(crate) fn reject(&mut self, seq: Seq, refusal: Refusal) {
        *self.st.counters.refused.entry(refusal.code).or_default() += 1;
        if self.st.rejections_recent.len() >= RECENT_REJECTIONS_MAX {
            self.st.rejections_recent.remove(0);
        }
        self.st.rejections_recent.push((seq, refusal));
    }

    /// A result for an effect the withdrawal does not await (a duplicate, a late answer).
    pub(crate) fn ignore_result(&mut self) -> Result<(), Refusal> {
        self.st.counters.results_ignored += 1;
        Ok(())
    }

    // ----- registrations and settings -----

    fn on_register_chain(&mut self, c: &ChainParams) -> Result<(), Refusal> {
        c.check().map_err(|_| Refusal::of(RefuseCode::InvalidChainParams))?;
        if self.st.chains.contains_key(&c.chain) {
            return Err(RefuseCode::ChainExists.into());
        }
        if self.st.chains.len() >= CHAINS_MAX {
            return Err(RefuseCode::TooMany.into());
        }
        self.st.chains.insert(c.chain, c.clone());
        Ok(())
    }

    fn on_register_asset(&mut self, a: &AssetParams) -> Result<(), Refusal> {
        if !self.st.chains.contains_key(&a.chain) {
            return Err(RefuseCode::UnknownChain.into());
        }
        if a.scale_exp > crate::chain::SCALE_EXP_MAX {
            return Err(RefuseCode::InvalidAssetParams.into());
        }
        if self.st.assets.contains_key(&a.asset) {
            return Err(RefuseCode::AssetExists.into());
        }
        if self.st.assets.len() >= ASSETS_MAX {
            return Err(RefuseCode::TooMany.into());
        }
        self.st.assets.insert(a.asset, a.clone());
        Ok(())
    }

    fn on_register_vault(&mut self, cx: &mut Ctx<'_, '_>, v: &VaultParams) -> Result<(), Refusal> {
        if !self.st.chains.contains_key(&v.chain) {
            return Err(RefuseCode::UnknownChain.into());
        }
        if self.st.vaults.contains_key(&v.vault) {
            return Err(RefuseCode::VaultExists.into());
        }
        if self.st.vaults.len() >= VAULTS_MAX {
            return Err(RefuseCode::TooMany.into());
        }
        self.st.vaults.insert(v.vault, Vault { params: v.clone(), enabled: true, next_slot: v.next_slot });
        self.ix.chain_vaults.entry(v.chain).or_default().insert(v.vault);
        self.maybe_free.entry(v.chain).or_default().insert(v.vault);
        self.dispatch_chain(cx, v.chain, DISPATCH_PER_TICK_MAX);
        Ok(())
    }

    fn on_set_vault_enabled(&mut self, cx: &mut Ctx<'_, '_>, c: &SetVaultEnabled) -> Result<(), Refusal> {
        let v = self.st.vaults.get_mut(&c.vault).ok_or(Refusal::of(RefuseCode::UnknownVault))?;
        v.enabled = c.enabled;
        let chain = v.params.chain;
        if c.enabled {
            self.maybe_free.entry(chain).or_default().insert(c.vault);
            self.dispatch_chain(cx, chain, DISPATCH_PER_TICK_MAX);
        }
        Ok(())
    }

    fn on_set_setting(&mut self, s: &SetSetting) -> Result<(), Refusal> {
        if !s.key.validate(s.value) {
            return Err(RefuseCode::InvalidSetting.into());
        }
        self.st.settings.set(s.key, s.value);
        Ok(())
    }

    // ----- queries -----

    pub fn withdrawal(&self, id: WithdrawalId) -> Option<&Withdrawal> {
        self.st.withdrawals.get(&id).map(|w| &**w)
    }

    pub fn withdrawals(&self) -> impl Iterator<Item = &Withdrawal> {
        self.st.withdrawals.values().map(|w| &**w)
    }

    /// Withdrawals in `status`, by id, from `after` (exclusive), at most `limit`.
    pub fn list(&self, status: Status, after: Option<WithdrawalId>, limit: usize) -> Vec<&Withdrawal> {
        let Some(ids) = self.ix.by_status.get(&status) else { return Vec::new() };
        let from = after.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded);
        ids.range((from, std::ops::Bound::Unbounded))
            .take(limit)
            .filter_map(|id| self.st.withdrawals.get(id).map(|w| &**w))
            .collect()
    }

    pub fn count_in(&self, status: Status) -> usize {
        self.ix.by_status.get(&status).map_or(0, |s| s.len())
    }

    /// A request that was refused before it became a withdrawal (remembered for a while).
    pub fn refusal(&self, id: WithdrawalId) -> Option<Refusal> {
        self.st.refusals.get(&id).copied()
    }

    /// The withdrawal that sent a hash, and the attempt.
    pub fn by_tx(&self, hash: &TxHash) -> Option<(WithdrawalId, u32)> {
        self.ix.tx_index.get(hash).copied()
    }

    pub fn chain(&self, id: ChainId) -> Option<&ChainParams> {
        self.st.chains.get(&id)
    }
    pub fn chains(&self) -> impl Iterator<Item = &ChainParams> {
        self.st.chains.values()
    }
    pub fn asset(&self, id: AssetId) -> Option<&AssetParams> {
        self.st.assets.get(&id)
    }
    pub fn assets(&self) -> impl Iterator<Item = &AssetParams> {
        self.st.assets.values()
    }
    pub fn vault(&self, id: VaultId) -> Option<&Vault> {
        self.st.vaults.get(&id)
    }
    pub fn vaults(&self) -> impl Iterator<Item = &Vault> {
        self.st.vaults.values()
    }
    pub fn settings(&self) -> &crate::settings::Settings {
        &self.st.settings
    }
    pub fn setting(&self, key: SettingKey) -> u64 {
        self.st.settings.get(key)
    }
    pub fn counters(&self) -> &Counters {
        &self.st.counters
    }
    pub fn rejections_recent(&self) -> &[(u64, Refusal)] {
        &self.st.rejections_recent
    }
    pub fn seq_applied(&self) -> Seq {
        self.st.seq_applied
    }
    pub fn now_us(&self) -> u64 {
        self.st.now_us
    }

    /// Whether the dispatcher may give `vault` a new transaction now (and why not).
    pub fn vault_skip(&self, vault: VaultId) -> Option<crate::records::VaultSkip> {
        self.skip_reason(vault)
    }

    /// Slots of `vault` in flight now (see `chain`).
    pub fn vault_in_flight(&self, vault: VaultId) -> u32 {
        self.ix.vault_in_flight.get(&vault).copied().unwrap_or(0)
    }

    /// Checks the derived indexes against a rebuild from the rows, and the rows' own rules
    /// (O(state): tests and audits).
    pub fn check_invariants(&self) -> Result<(), String> {
        for v in self.st.vaults.values() {
            let cached = self.maybe_free.get(&v.params.chain).is_some_and(|s| s.contains(&v.params.vault));
            if self.skip_reason(v.params.vault).is_none() && !cached {
                return Err(format!("vault {:?} is free but not in the dispatch cache", v.params.vault));
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

impl Plugin for WithdrawalPlugin {
    const KIND: PluginKind = PluginKind::Withdrawal;

    fn apply(&mut self, entry: &Entry, step: &mut Step<'_>) {
        self.apply_entry(entry, step);
    }

    const ALERT_KINDS: &'static [&'static str] = &crate::alert::AlertKind::NAMES;

    fn state_hash(&self) -> u64 {
        checkpoint::hash_state(&self.st)
    }

    fn alerts_open(&self, out: &mut Vec<rtgs_core::plugin::PluginAlert>) {
        out.extend(self.st.alerts.values().map(|a| rtgs_core::plugin::PluginAlert {
            plugin: PluginKind::Withdrawal,
            id: a.id,
            kind: a.kind.name(),
            subject: crate::alert::subject(a.withdrawal),
            since_us: a.since_us,
        }));
    }

    fn digest(&self) -> u64 {
        use rtgs_core::hash::{fold, mix64};
        let st = &self.st;
        let c = &st.counters;
        [
            st.now_us,
            st.withdrawals.len() as u64,
            st.refusals.len() as u64,
            st.vaults.len() as u64,
            st.chains.len() as u64,
            st.assets.len() as u64,
            st.raw_cache.len() as u64,
            st.rejections_recent.len() as u64,
            c.operations_applied,
            c.results_ignored,
            c.webhooks_foreign,
            c.webhooks_duplicate,
            c.broadcasts,
            c.lookups,
            c.alerts,
            st.alerts.len() as u64,
            st.alert_id_last,
            c.reversals,
            c.archived,
            c.timers,
            self.ix.submitted.len() as u64,
            self.ix.queued.len() as u64,
            self.ix.timers.len() as u64,
            self.ix.tx_index.len() as u64,
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
        let maybe_free = ix.chain_vaults.clone();
        Ok(WithdrawalPlugin { st, ix, maybe_free })
    }
}
