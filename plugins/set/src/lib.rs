//! # rtgs-plugins: the set of plugins, named once
//!
//! Every place that hosts plugins — the embedded engine, the production engine, the API's read
//! model, the audit, the demo — gets them from here, so adding a plugin is one edit of this crate
//! (and of the closed [`PluginKind`] enum in the core), not six.
//!
//! # Layout
//! * [`PluginsConfig`] — which plugins run and how their (simulated) outside worlds are made;
//!   serde with `deny_unknown_fields`, built by the CLI's flags, validated by [`PluginsConfig::check`].
//! * [`PluginsConfig::hosted`] / [`PluginsConfig::host`] — fresh plugins for a center's host
//!   (every center must get the same set: their step digests are in the state hash).
//! * [`Adapters`] — the enabled plugins' outside worlds behind one `EffectAdapter`: each effect is
//!   routed to the adapter of its plugin, results of all are polled.
//! * [`collection`], [`matching`], [`withdrawal`] — typed read access to a host's plugins (the
//!   API's queries, reports).
//! * [`WithdrawalConfig`] — the withdrawal plugin's simulated world (screener, policy engine,
//!   custody, one chain per family) and its workload: what a host journals first
//!   ([`WithdrawalConfig::setup`]) and the requests it may send.
//!
//! Depends on the plugin crates and the core only: no I/O (the chain simulators are sans-IO too).

use rtgs_collection::adapter::{NodeAdapter, Workload};
use rtgs_collection::chain_sim::{ChainConfig, ChainSim};
use rtgs_collection::CollectionPlugin;
use rtgs_core::entry::{Bmi, CenterId, PluginCommand, PluginKind};
use rtgs_core::plugin::{Effect, EffectAdapter, HostedPlugin};
use rtgs_core::plugin_host::PluginHost;
use rtgs_matching::adapter::{NodeAdapter as MatchingAdapter, Workload as MatchingWorkload};
use rtgs_matching::lp_sim::{LpConfig, LpSim};
use rtgs_matching::market_sim::MarketSim;
use rtgs_matching::MatchingPlugin;
use rtgs_withdrawal::world::workload::{Workload as WithdrawalWorkload, WorldConfig};
use rtgs_withdrawal::world::World as WithdrawalWorld;
use rtgs_withdrawal::WithdrawalPlugin;
use serde::{Deserialize, Serialize};

/// Where every simulated chain's clock starts (µs).
pub const CHAIN_START_US: u64 = 1_000_000;

/// The matching plugin's figures that count orders and sessions still in flight: a driver
/// waiting for a cycle to end waits until they are all 0 (the demo, `rtgs match`).
pub const MATCHING_IN_FLIGHT_FIGURES: [&str; 5] = [
    "matching_orders_open",
    "matching_orders_matching",
    "matching_sessions_matching",
    "matching_awaiting_user_decision",
    "matching_payment_in_progress",
];

/// The plugins a cluster runs. Every center of a cluster must run the same set.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginsConfig {
    /// Wallet sweeping (seed 000) over a chain simulator.
    pub collection: Option<CollectionConfig>,
    /// P2P deposit matching (seed 002) over an LP simulator and a simulated marketplace.
    pub matching: Option<MatchingConfig>,
    /// Customers' withdrawals (seed 001) against a simulated custody, screener, policy engine
    /// and one chain per family.
    #[serde(default)]
    pub withdrawal: Option<WithdrawalConfig>,
}

/// The matching plugin's outside world: an LP simulator and a marketplace whose sellers offer
/// from the workload's seller accounts — the same on every center (same seed, same workload).
/// Its presence is the plugin's one switch: there is no intake switch of its own (seed ☠️ 정정 ②).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatchingConfig {
    /// Orders a demo submits (the node's own outside world does not make orders: participants do).
    pub orders: u64,
    /// Sellers in the marketplace (their accounts are the workload's; a demo opens and funds them).
    pub sellers: u64,
    /// The LP misbehaves (BUSY, NO_POOL, transport failures, lost and late answers, rejections).
    pub lp_faults: bool,
    pub seed: u64,
    /// The workload partners' windows, in seconds (P2P phase, LP phase, decision grace).
    pub p2p_phase_s: u32,
    pub lp_phase_s: u32,
    pub decision_grace_s: u32,
    /// Journal the plugin's short timings at setup (windows of seconds: demos).
    #[serde(default)]
    pub quick_timings: bool,
    /// The marketplace's sellers offer this long after the adapter's first poll (a demo opens
    /// their accounts first; an offer naming an unknown account is refused).
    #[serde(default)]
    pub market_start_ms: u64,
    /// The marketplace never offers on its own: its opening offers come from outside
    /// ([`MatchingConfig::opening_offers`], sent by `rtgs match` after it opened the sellers'
    /// accounts). A production node cannot know when that happens.
    #[serde(default)]
    pub market_opening_outside: bool,
    /// How long an order lives unless its user ends it (none: the workload's hour). A trade the
    /// LP never completes keeps its order in payment until then.
    #[serde(default)]
    pub order_ttl_s: Option<u64>,
}

impl Default for MatchingConfig {
    fn default() -> Self {
        MatchingConfig {
            orders: 100_000,
            sellers: 500,
            lp_faults: false,
            seed: 1,
            p2p_phase_s: 180,
            lp_phase_s: 120,
            decision_grace_s: 300,
            quick_timings: false,
            market_start_ms: 0,
            market_opening_outside: false,
            order_ttl_s: None,
        }
    }
}

/// The withdrawal plugin's outside world and workload: the same on every center (same seeds).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WithdrawalConfig {
    /// Funded customer accounts requests are drawn from.
    pub customers: u64,
    /// Vaults registered per chain (the round-robin's choice).
    pub vaults_per_chain: u64,
    /// Requests a demo or the simulator sends (the adapter itself sends none).
    pub requests: u64,
    /// World µs per journal µs (blocks in milliseconds).
    pub world_time_scale: u64,
    pub world_seed: u64,
    /// Every fault of the world on (dropped, stuck, reverted, reorged transactions; lost and
    /// duplicate webhooks; signer and screener timeouts; operators and customers who never act).
    pub faults: bool,
}

impl Default for WithdrawalConfig {
    fn default() -> Self {
        WithdrawalConfig {
            customers: 100,
            vaults_per_chain: 4,
            requests: 1_000,
            world_time_scale: 1_000,
            world_seed: 1,
            faults: true,
        }
    }
}

impl MatchingConfig {
    /// The workload: accounts, settings and orders (checked by [`PluginsConfig::check`]).
    pub fn workload(&self) -> MatchingWorkload {
        let base = MatchingWorkload::new(self.orders, self.sellers, self.seed)
            .unwrap_or_else(|_| unreachable!("the workload's currency is a constant that parses"));
        let mut w = base.with_windows(self.p2p_phase_s, self.lp_phase_s, self.decision_grace_s);
        if let Some(ttl_s) = self.order_ttl_s {
            w.order_ttl_us = ttl_s.saturating_mul(1_000_000);
        }
        if self.quick_timings {
            w.with_quick_timings()
        } else {
            w
        }
    }

    pub fn lp(&self) -> LpConfig {
        if self.lp_faults {
            LpConfig::faulty()
        } else {
            LpConfig::default()
        }
    }

    pub fn adapter(&self) -> MatchingAdapter<LpSim> {
        let mut market = self.workload().market();
        market.start_after_us =
            if self.market_opening_outside { u64::MAX } else { self.market_start_ms.saturating_mul(1_000) };
        MatchingAdapter::new(LpSim::new(self.lp(), self.seed), MarketSim::new(market, self.seed))
    }

    /// The marketplace's opening offers — the same commands under the same `bmi`s as a node's
    /// simulated marketplace would send (same sellers, same seed) — for a driver that sends them
    /// once the sellers' accounts exist.
    pub fn opening_offers(&self) -> Vec<(Bmi, PluginCommand)> {
        MarketSim::new(self.workload().market(), self.seed)
            .opening_offers()
            .into_iter()
            .filter_map(|(bmi, c)| Some((bmi, c.to_plugin_command().ok()?)))
            .collect()
    }
}

impl WithdrawalConfig {
    pub fn workload(&self) -> WithdrawalWorkload {
        let mut w = WithdrawalWorkload::new(self.customers, self.vaults_per_chain, self.world_seed);
        // Validity windows of seconds, not hours: a demo sees them pass.
        w.short_windows = true;
        w
    }

    pub fn world_config(&self) -> WorldConfig {
        if self.faults {
            WorldConfig::faulty(self.world_seed, self.world_time_scale)
        } else {
            WorldConfig::calm(self.world_seed, self.world_time_scale)
        }
    }

    /// What a fresh cluster journals before the first request: ledger accounts opened and
    /// funded, chains, assets and vaults registered, the demo's timers (seconds, not hours).
    pub fn setup(&self) -> Result<Vec<(Bmi, rtgs_core::entry::Payload)>, rtgs_core::entry::InputError> {
        self.workload().setup_payloads(&WithdrawalWorkload::demo_settings())
    }

    /// Request `n` of the workload (deterministic from the seed).
    pub fn request(&self, n: u64) -> Result<(Bmi, PluginCommand), rtgs_core::entry::InputError> {
        self.workload().request(n)
    }

    /// The simulated world, its clock starting at `start_us`.
    pub fn world(&self, start_us: u64) -> WithdrawalWorld {
        self.workload().world(&self.world_config(), start_us)
    }
}

/// The collection plugin's outside world: a chain simulator with one deposit per wallet and
/// funded relayers — the same on every center (same seed, same workload).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CollectionConfig {
    pub wallets: u64,
    pub relayers: u64,
    /// How much faster the simulated chain's clock runs than the journal's (12 s blocks).
    pub chain_time_scale: u64,
    pub chain_seed: u64,
}

impl Default for CollectionConfig {
    fn default() -> Self {
        CollectionConfig { wallets: 100_000, relayers: 1_000, chain_time_scale: 1_000, chain_seed: 1 }
    }
}

impl CollectionConfig {
    pub fn workload(&self) -> Workload {
        Workload::new(self.wallets, self.relayers)
    }
}

/// A configuration that cannot run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

impl PluginsConfig {
    /// Only the collection plugin, with these settings.
    pub fn collection(c: CollectionConfig) -> Self {
        PluginsConfig { collection: Some(c), ..PluginsConfig::default() }
    }

    /// Only the matching plugin, with these settings.
    pub fn matching(c: MatchingConfig) -> Self {
        PluginsConfig { matching: Some(c), ..PluginsConfig::default() }
    }

    /// Only the withdrawal plugin, with these settings.
    pub fn withdrawal(w: WithdrawalConfig) -> Self {
        PluginsConfig { withdrawal: Some(w), ..PluginsConfig::default() }
    }

    pub fn is_empty(&self) -> bool {
        self.kinds().is_empty()
    }

    /// The enabled plugins, in the host's order.
    pub fn kinds(&self) -> Vec<PluginKind> {
        let mut kinds = Vec::new();
        if self.collection.is_some() {
            kinds.push(PluginKind::Collection);
        }
        if self.matching.is_some() {
            kinds.push(PluginKind::Matching);
        }
        if self.withdrawal.is_some() {
            kinds.push(PluginKind::Withdrawal);
        }
        kinds
    }

    /// Refuses settings that cannot run (checked at start and by `--check` flags).
    pub fn check(&self) -> Result<(), ConfigError> {
        if let Some(c) = &self.collection {
            if c.relayers == 0 {
                return Err(ConfigError("collection: at least one relayer is needed".into()));
            }
            if c.chain_time_scale == 0 {
                return Err(ConfigError("collection: the chain time scale must be at least 1".into()));
            }
        }
        if let Some(m) = &self.matching {
            let w = m.workload();
            w.settings.validate().map_err(|e| ConfigError(format!("matching: {e}")))?;
        }
        if let Some(w) = &self.withdrawal {
            if w.customers == 0 || w.vaults_per_chain == 0 {
                return Err(ConfigError("withdrawal: at least one customer and one vault per chain".into()));
            }
            if w.world_time_scale == 0 {
                return Err(ConfigError("withdrawal: the world time scale must be at least 1".into()));
            }
        }
        Ok(())
    }

    /// Fresh plugins of every enabled kind, in the host's order.
    pub fn hosted(&self) -> Vec<Box<dyn HostedPlugin>> {
        let mut plugins: Vec<Box<dyn HostedPlugin>> = Vec::new();
        if self.collection.is_some() {
            plugins.push(Box::new(CollectionPlugin::new()));
        }
        if self.matching.is_some() {
            plugins.push(Box::new(MatchingPlugin::new()));
        }
        if self.withdrawal.is_some() {
            plugins.push(Box::new(WithdrawalPlugin::new()));
        }
        plugins
    }

    /// A fresh host for center `center` (`CenterId(0)`: a replica that is no center — never
    /// owner, never live, it executes nothing).
    pub fn host(&self, center: CenterId) -> PluginHost {
        // Kinds are distinct by construction: `new` cannot refuse them.
        PluginHost::new(center, self.hosted()).unwrap_or_else(|_| PluginHost::empty(center))
    }

    /// The set of plugins of these kinds, with default settings (an audit rebuilding the set a
    /// checkpoint holds: only the plugins matter there, not their outside worlds). `None` if a
    /// kind is not built.
    pub fn of_kinds(kinds: &[PluginKind]) -> Option<Self> {
        let mut config = PluginsConfig::default();
        for kind in kinds {
            match kind {
                PluginKind::Collection => config.collection = Some(CollectionConfig::default()),
                PluginKind::Matching => config.matching = Some(MatchingConfig::default()),
                PluginKind::Withdrawal => config.withdrawal = Some(WithdrawalConfig::default()),
            }
        }
        Some(config)
    }

    /// Each enabled plugin, fresh, with its own outside world (an engine that runs one adapter
    /// task per plugin); in the host's order.
    pub fn with_adapters(&self) -> Vec<(Box<dyn HostedPlugin>, Box<dyn EffectAdapter>)> {
        let Adapters { collection, matching, withdrawal } = self.adapters();
        let mut out: Vec<(Box<dyn HostedPlugin>, Box<dyn EffectAdapter>)> = Vec::new();
        if let Some(adapter) = collection {
            out.push((Box::new(CollectionPlugin::new()), Box::new(adapter)));
        }
        if let Some(adapter) = matching {
            out.push((Box::new(MatchingPlugin::new()), Box::new(adapter)));
        }
        if let Some(world) = withdrawal {
            out.push((Box::new(WithdrawalPlugin::new()), Box::new(world)));
        }
        out
    }

    /// The enabled plugins' outside worlds, their clocks starting at the engine's `now_us`.
    pub fn adapters(&self) -> Adapters {
        Adapters {
            collection: self.collection.as_ref().map(|c| {
                let chain = c.workload().chain(ChainConfig::default(), c.chain_seed, CHAIN_START_US);
                NodeAdapter::new(chain, CHAIN_START_US, c.chain_time_scale)
            }),
            matching: self.matching.as_ref().map(MatchingConfig::adapter),
            withdrawal: self.withdrawal.as_ref().map(|w| w.world(CHAIN_START_US)),
        }
    }
}

/// The enabled plugins' outside worlds, one adapter per plugin (see the crate docs).
pub struct Adapters {
    pub collection: Option<NodeAdapter<ChainSim>>,
    pub matching: Option<MatchingAdapter<LpSim>>,
    pub withdrawal: Option<WithdrawalWorld>,
}

impl Adapters {
    /// The adapter of `kind`, if that plugin runs.
    fn of(&mut self, kind: PluginKind) -> Option<&mut dyn EffectAdapter> {
        match kind {
            PluginKind::Collection => self.collection.as_mut().map(|a| a as &mut dyn EffectAdapter),
            PluginKind::Matching => self.matching.as_mut().map(|a| a as &mut dyn EffectAdapter),
            PluginKind::Withdrawal => self.withdrawal.as_mut().map(|a| a as &mut dyn EffectAdapter),
        }
    }
}

impl EffectAdapter for Adapters {
    fn execute(&mut self, effect: &Effect, now_us: u64) {
        // An effect of a plugin without an adapter cannot come from this set's hosts.
        if let Some(a) = self.of(effect.plugin) {
            a.execute(effect, now_us);
        }
    }

    fn poll(&mut self, now_us: u64, out: &mut Vec<(Bmi, PluginCommand)>) {
        if let Some(a) = self.collection.as_mut() {
            a.poll(now_us, out);
        }
        if let Some(a) = self.matching.as_mut() {
            a.poll(now_us, out);
        }
        if let Some(a) = self.withdrawal.as_mut() {
            a.poll(now_us, out);
        }
    }

    fn alerts_seen(&mut self, alerts: &[rtgs_core::plugin::PluginAlert], now_us: u64) {
        // Only the withdrawal world plays operators who answer alerts.
        if let Some(a) = self.withdrawal.as_mut() {
            a.alerts_seen(alerts, now_us);
        }
    }

    fn figures(&self, out: &mut Vec<(&'static str, u64)>) {
        if let Some(a) = &self.collection {
            a.figures(out);
        }
        if let Some(a) = &self.matching {
            a.figures(out);
        }
        if let Some(a) = &self.withdrawal {
            a.figures(out);
        }
    }
}

/// The collection plugin of a host, if it runs there.
pub fn collection(host: &PluginHost) -> Option<&CollectionPlugin> {
    host.plugin(PluginKind::Collection)?.as_any().downcast_ref()
}

/// The matching plugin of a host, if it runs there.
pub fn matching(host: &PluginHost) -> Option<&MatchingPlugin> {
    host.plugin(PluginKind::Matching)?.as_any().downcast_ref()
}

/// The withdrawal plugin of a host, if it runs there.
pub fn withdrawal(host: &PluginHost) -> Option<&WithdrawalPlugin> {
    host.plugin(PluginKind::Withdrawal)?.as_any().downcast_ref()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_place_names_the_set_and_routes_effects_by_plugin() {
        let none = PluginsConfig::default();
        assert!(none.is_empty() && none.hosted().is_empty() && none.host(CenterId(1)).is_empty());
        let c = PluginsConfig::collection(CollectionConfig {
            wallets: 3,
            relayers: 1,
            ..CollectionConfig::default()
        });
        assert_eq!(c.kinds(), vec![PluginKind::Collection]);
        let host = c.host(CenterId(2));
        assert_eq!(host.kinds().collect::<Vec<_>>(), vec![PluginKind::Collection]);
        assert!(collection(&host).is_some());
        assert!(collection(&none.host(CenterId(2))).is_none());
        let pairs = c.with_adapters();
        assert_eq!(
            pairs.iter().map(|(p, _)| p.kind()).collect::<Vec<_>>(),
            c.kinds(),
            "one adapter per plugin"
        );
        let mut adapters = c.adapters();
        // An effect of a plugin that is not in the set goes nowhere (and does not panic).
        adapters
            .execute(&Effect { plugin: PluginKind::Withdrawal, effect_id: 1, op: 1, body: Vec::new() }, 0);
        let mut figures = Vec::new();
        adapters.figures(&mut figures);
        assert!(figures.iter().any(|(n, _)| *n == "adapter_effects_executed"));
    }

    #[test]
    fn withdrawal_is_in_the_set_beside_collection() {
        let both = PluginsConfig {
            collection: Some(CollectionConfig { wallets: 3, relayers: 1, ..CollectionConfig::default() }),
            withdrawal: Some(WithdrawalConfig {
                customers: 2,
                vaults_per_chain: 1,
                ..WithdrawalConfig::default()
            }),
            matching: None,
        };
        assert!(both.check().is_ok());
        assert_eq!(both.kinds(), vec![PluginKind::Collection, PluginKind::Withdrawal]);
        let host = both.host(CenterId(1));
        assert_eq!(host.kinds().collect::<Vec<_>>(), both.kinds());
        assert!(withdrawal(&host).is_some() && collection(&host).is_some());
        assert!(
            withdrawal(&PluginsConfig::collection(CollectionConfig::default()).host(CenterId(1))).is_none()
        );
        let pairs = both.with_adapters();
        assert_eq!(pairs.iter().map(|(p, _)| p.kind()).collect::<Vec<_>>(), both.kinds());
        // An audit rebuilding a checkpoint's set of plugins knows the withdrawal plugin now.
        assert_eq!(PluginsConfig::of_kinds(&both.kinds()).map(|c| c.kinds()), Some(both.kinds()));
        let mut adapters = both.adapters();
        // A withdrawal effect reaches the withdrawal world (which counts what it cannot read).
        adapters
            .execute(&Effect { plugin: PluginKind::Withdrawal, effect_id: 1, op: 250, body: Vec::new() }, 0);
        assert_eq!(adapters.withdrawal.as_ref().map(|w| w.stats.effects_undecodable), Some(1));
        let mut figures = Vec::new();
        adapters.figures(&mut figures);
        assert!(figures.iter().any(|(n, _)| *n == "withdrawal_operator_actions"));
    }

    #[test]
    fn withdrawal_setup_and_requests_run_through_its_world() {
        use rtgs_withdrawal::driver::Driver;
        let c = WithdrawalConfig {
            customers: 3,
            vaults_per_chain: 2,
            requests: 40,
            faults: false,
            ..Default::default()
        };
        let start_us = 1_000_000;
        let mut d = Driver::new(c.world(CHAIN_START_US), start_us);
        let setup = c.setup().expect("setup fits");
        assert!(setup.iter().any(|(_, p)| matches!(p, rtgs_core::entry::Payload::AccountOpen { .. })));
        for (bmi, payload) in setup {
            assert!(d.submit_payload(bmi, payload).is_some(), "setup bmis are distinct");
        }
        for n in 0..c.requests {
            let (bmi, pc) = c.request(n).expect("request fits");
            d.submit_payload(bmi, rtgs_core::entry::Payload::Plugin(pc));
        }
        d.run_for(600_000_000, 100_000);
        let p = &d.plugin;
        assert_eq!(p.counters().requests, c.requests);
        assert!(p.withdrawals().all(|w| w.status.is_final()), "a calm world ends every withdrawal");
        assert!(p.count_in(rtgs_withdrawal::Status::Completed) > 0);
        p.check_invariants().expect("indexes and money agree");
    }

    #[test]
    fn config_is_strict_and_checked() {
        let bad = r#"{"collection": {"wallets": 1, "relayers": 1, "chain_time_scale": 1, "chain_seed": 1, "x": 2}}"#;
        assert!(serde_json::from_str::<PluginsConfig>(bad).is_err(), "unknown fields are refused");
        let zero = PluginsConfig::collection(CollectionConfig { relayers: 0, ..CollectionConfig::default() });
        assert!(zero.check().is_err());
        assert!(PluginsConfig::collection(CollectionConfig::default()).check().is_ok());
        let no_vault = WithdrawalConfig { vaults_per_chain: 0, ..WithdrawalConfig::default() };
        assert!(PluginsConfig::withdrawal(no_vault).check().is_err());
        let frozen = WithdrawalConfig { world_time_scale: 0, ..WithdrawalConfig::default() };
        assert!(PluginsConfig::withdrawal(frozen).check().is_err());
        assert!(PluginsConfig::withdrawal(WithdrawalConfig::default()).check().is_ok());
        let old = r#"{"collection": null}"#;
        assert_eq!(serde_json::from_str::<PluginsConfig>(old).ok(), Some(PluginsConfig::default()));
        let bad_window =
            PluginsConfig::matching(MatchingConfig { lp_phase_s: 0, ..MatchingConfig::default() });
        assert!(bad_window.check().is_err());
    }

    /// A node whose marketplace opens from outside never offers on its own, and the offers the
    /// driver sends (`rtgs match`) are the ones the marketplace would have sent, under the same
    /// `bmi`s (both sent: one entry).
    #[test]
    fn opening_offers_from_outside_are_the_marketplaces_own() {
        let m = MatchingConfig { sellers: 5, ..MatchingConfig::default() };
        let (mut own, mut offers) = (m.adapter(), Vec::new());
        own.poll(1_000, &mut offers);
        assert_eq!(offers.len(), 5);
        assert_eq!(offers, m.opening_offers());
        let outside = MatchingConfig { market_opening_outside: true, ..m };
        let (mut quiet, mut none) = (outside.adapter(), Vec::new());
        quiet.poll(1_000, &mut none);
        quiet.poll(1_000 + 3_600_000_000, &mut none);
        assert!(none.is_empty(), "{none:?}");
    }

    /// ☠️ Seed 002 §4-b 정정 ②: one switch. Hosting the matching plugin is its only switch —
    /// a second key (an intake switch) is refused, not silently ignored.
    #[test]
    fn matching_has_one_switch_and_routes_its_effects() {
        let mut json = serde_json::to_value(PluginsConfig::matching(MatchingConfig::default()))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(serde_json::from_value::<PluginsConfig>(json.clone()).is_ok());
        json["matching"]["intake_enabled"] = serde_json::Value::Bool(false);
        assert!(serde_json::from_value::<PluginsConfig>(json).is_err(), "no second switch");
        let both = PluginsConfig {
            collection: Some(CollectionConfig { wallets: 1, relayers: 1, ..CollectionConfig::default() }),
            matching: Some(MatchingConfig { orders: 1, sellers: 1, ..MatchingConfig::default() }),
            withdrawal: None,
        };
        assert_eq!(both.kinds(), vec![PluginKind::Collection, PluginKind::Matching]);
        let host = both.host(CenterId(1));
        assert!(matching(&host).is_some() && collection(&host).is_some());
        assert_eq!(PluginsConfig::of_kinds(&both.kinds()).map(|c| c.kinds()), Some(both.kinds()));
        let pairs = both.with_adapters();
        assert_eq!(pairs.iter().map(|(p, _)| p.kind()).collect::<Vec<_>>(), both.kinds());
        let mut adapters = both.adapters();
        adapters
            .execute(&Effect { plugin: PluginKind::Matching, effect_id: 1, op: 999, body: Vec::new() }, 0);
        let mut figures = Vec::new();
        adapters.figures(&mut figures);
        let undecodable =
            figures.iter().filter(|(n, v)| *n == "adapter_effects_undecodable" && *v == 1).count();
        assert_eq!(undecodable, 1, "the matching effect reached the matching adapter only: {figures:?}");
    }
}
