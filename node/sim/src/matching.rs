//! The matching plugin's outside world in the simulator ([`crate::run_with_plugins`], `rtgs sim
//! --matching`): one faulty LP simulator and one marketplace for the whole cluster (a real
//! deployment points every center at the same LP), a workload of orders with windows of seconds,
//! and an operator who resolves the cases the plugin escalates.
//!
//! **Setup**: the workload's accounts (LP, sellers, partners) are opened and funded first
//! ([`SimPlugins::setup`]); the LP account, timings and partners' windows follow, then the
//! sellers' offers and the orders.
//!
//! **End checks** (on a converged center's plugin): its invariants hold (a bundle covers its
//! order exactly, an order has one session, sellers' reservations are their anchors and legs);
//! no order was matched twice; every escrow the LP committed is known to the plugin — recorded
//! on a leg or handed to an operator — so no LP call was lost or doubled in effect across owner
//! failovers.

use std::collections::BTreeMap;

use rtgs_core::entry::{Bmi, Payload, PluginCommand, PluginKind};
use rtgs_core::plugin::{Effect, EffectAdapter, HostedPlugin, Plugin};
use rtgs_core::plugin_host::PluginHost;
use rtgs_matching::adapter::{NodeAdapter, Workload};
use rtgs_matching::command::{MatchingCommand, Resolution, Resolve};
use rtgs_matching::effect::{AlertKind, MatchingEffect};
use rtgs_matching::lp_sim::{LpConfig, LpSim};
use rtgs_matching::state::{OrderStatus, SessionStatus};
use rtgs_matching::types::SECOND_US;
use rtgs_matching::MatchingPlugin;

use crate::SimPlugins;

/// Simulated µs from the start until the plugin's setup, the sellers' offers and the orders.
const SETUP_AT_US: u64 = 20_000;
const OFFERS_AT_US: u64 = 40_000;
const ORDERS_FROM_US: u64 = 60_000;
/// Orders are submitted over this long.
const ORDERS_SPREAD_US: u64 = 1_500_000;
/// The operator resolves a case this long after its alert.
const OPERATOR_DELAY_US: u64 = 100_000;

pub struct MatchingSim {
    pub adapter: NodeAdapter<LpSim>,
    pub workload: Workload,
    origin_us: Option<u64>,
    setup_sent: bool,
    orders_sent: u64,
    /// The operator's resolutions, due at a time.
    operator: BTreeMap<(u64, u64), (Bmi, PluginCommand)>,
    cases_seen: u64,
}

impl MatchingSim {
    pub fn new(seed: u64, orders: u64, sellers: u64) -> Self {
        let mut workload = Workload::new(orders, sellers, seed)
            .unwrap_or_else(|_| unreachable!("the workload's currency parses"))
            .with_windows(1, 1, 1)
            .with_quick_timings();
        workload.order_ttl_us = 6 * SECOND_US;
        workload.seller_funds_minor = 1_000_000;
        let lp = LpConfig {
            lease_us: 3 * SECOND_US,
            late_us: 3 * SECOND_US,
            complete_after_us: (100_000, 600_000),
            ..LpConfig::faulty()
        };
        let mut adapter = workload.adapter(lp, seed);
        let market = &mut adapter.market.cfg;
        market.pay_after_us = (100_000, 500_000);
        market.users.decide_after_us = (50_000, 300_000);
        market.churn_every_us = 300_000;
        market.leave_ppm = 200_000;
        market.never_pay_ppm = 50_000;
        MatchingSim {
            adapter,
            workload,
            origin_us: None,
            setup_sent: false,
            orders_sent: 0,
            operator: BTreeMap::new(),
            cases_seen: 0,
        }
    }

    fn plugin(host: &PluginHost) -> Option<&MatchingPlugin> {
        host.plugin(PluginKind::Matching)?.as_any().downcast_ref()
    }

    /// The operator answers an alert: an escalated session's legs are released (the LP's escrow
    /// dealt with out of band), a dead letter's compensation retried.
    fn operator_alert(&mut self, effect: &Effect, now_us: u64) {
        let Ok(MatchingEffect::Alert(a)) = MatchingEffect::from_effect(effect) else { return };
        let resolution = match a.kind {
            AlertKind::DeadLetter => Resolution::Retry,
            AlertKind::Escalated | AlertKind::LpAlreadyCommitted => Resolution::Release,
        };
        self.cases_seen += 1;
        let cmd = MatchingCommand::Resolve(Resolve { session: a.session, resolution });
        let bmi = Bmi::new(format!("RES{}.{}", a.session.0, a.case).as_bytes());
        if let (Ok(bmi), Ok(pc)) = (bmi, cmd.to_plugin_command()) {
            self.operator.insert((now_us + OPERATOR_DELAY_US, self.cases_seen), (bmi, pc));
        }
    }
}

impl EffectAdapter for MatchingSim {
    fn execute(&mut self, effect: &Effect, now_us: u64) {
        self.operator_alert(effect, now_us);
        self.adapter.execute(effect, now_us);
    }

    fn poll(&mut self, now_us: u64, out: &mut Vec<(Bmi, PluginCommand)>) {
        let origin = *self.origin_us.get_or_insert(now_us);
        let since = now_us - origin;
        if since >= SETUP_AT_US && !self.setup_sent {
            self.setup_sent = true;
            out.extend(self.workload.setup_commands());
        }
        if since >= OFFERS_AT_US {
            self.adapter.poll(now_us, out);
        }
        if since >= ORDERS_FROM_US {
            let due = ((since - ORDERS_FROM_US) as u128 * u128::from(self.workload.orders)
                / u128::from(ORDERS_SPREAD_US)) as u64;
            while self.orders_sent < due.min(self.workload.orders) {
                out.extend(self.workload.order(self.orders_sent, now_us));
                self.orders_sent += 1;
            }
        }
        while let Some(entry) = self.operator.first_entry() {
            if entry.key().0 > now_us {
                break;
            }
            out.push(entry.remove());
        }
    }
}

impl SimPlugins for MatchingSim {
    fn make(&self) -> Vec<Box<dyn HostedPlugin>> {
        // The set is named in rtgs-plugins, as for every engine; this world is its outside world.
        rtgs_plugins::PluginsConfig::matching(rtgs_plugins::MatchingConfig::default()).hosted()
    }

    fn setup(&self) -> Vec<(Bmi, Payload)> {
        self.workload.setup_payloads()
    }

    fn answers(&self, command: &PluginCommand) -> Option<u64> {
        if command.plugin != PluginKind::Matching {
            return None;
        }
        MatchingCommand::decode(command.op, &command.body).ok()?.effect_id()
    }

    /// Faults stop: the LP behaves from now on (the run must converge).
    fn heal(&mut self) {
        let lp = &mut self.adapter.lp.cfg;
        *lp = LpConfig {
            lease_us: lp.lease_us,
            complete_after_us: lp.complete_after_us,
            ..LpConfig::default()
        };
    }

    fn quiescent(&self, host: &PluginHost) -> bool {
        let Some(p) = Self::plugin(host) else { return false };
        let mut pending = Vec::new();
        Plugin::pending_effects(p, &mut pending);
        let settled = p.orders().all(|o| match o.status {
            OrderStatus::Completed | OrderStatus::Cancelled | OrderStatus::Expired => true,
            // An operator's case: the plugin waits for a person, nothing automatic is left.
            OrderStatus::Matched => p
                .session_of(o.id)
                .is_some_and(|s| matches!(s.status, SessionStatus::Escalated | SessionStatus::DeadLetter)),
            OrderStatus::Open | OrderStatus::Matching | OrderStatus::Idle => false,
        });
        self.orders_sent == self.workload.orders && settled && pending.is_empty() && self.operator.is_empty()
    }

    fn check_end(&self, host: &PluginHost) -> Result<(), String> {
        let p = Self::plugin(host).ok_or("no matching plugin")?;
        p.check_invariants()?;
        let c = p.counters();
        if c.orders != self.workload.orders || c.bundles_committed == 0 {
            return Err(format!(
                "{} of {} orders journaled, {} bundles committed: the workload did not run",
                c.orders, self.workload.orders, c.bundles_committed
            ));
        }
        let doubles = rtgs_matching::double_matches(p);
        if doubles > 0 {
            return Err(format!("{doubles} orders matched twice"));
        }
        for (reservation, escrow) in self.adapter.lp.escrows() {
            let recorded = p.trade(escrow).is_some();
            let case = p.escalations().any(|c| c.escrow == Some(escrow));
            if !recorded && !case {
                return Err(format!(
                    "the LP's escrow {escrow:?} (reservation {reservation:?}) is known to nobody"
                ));
            }
        }
        Ok(())
    }
}
