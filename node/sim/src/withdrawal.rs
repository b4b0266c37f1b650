//! The withdrawal plugin's outside world in the simulator ([`crate::run_with_plugins`], `rtgs
//! sim --withdrawal`): the plugin crate's simulated world (custody signer, AML screener, policy
//! engine, one chain per family) behind its `EffectAdapter`, the workload's ledger accounts and
//! registrations journaled first ([`SimPlugins::poll_payloads`]), then requests a few at a time
//! until the faults stop. One world for the whole cluster (a real deployment points every
//! center at the same custody and chain RPCs), so "no transaction broadcast twice" holds across
//! owner failovers. The world itself is calm by default: the faults under test are the
//! cluster's (crashes, failovers, lost answers, reordering); the world's own faults have their
//! tests in the plugin crate and `--withdrawal-faults` turns them on here too.
//!
//! **End checks** (on a converged center's plugin): every request journaled was taken or
//! refused, every withdrawal ended with nothing open (an AML alert is open in the replicated state, so
//! a crashed owner loses none, and the simulated operators read it off an up center and answer
//! it), at least one COMPLETED; no withdrawal paid twice on any chain and nothing on a chain the plugin did not sign and record; COMPLETED ones paid once and settled,
//! the others not paid and their money back (`rtgs_withdrawal::world::check_paid_once`). The
//! cluster's checks add identical plugin state on every center and conservation.

use rtgs_core::entry::{Bmi, Payload, PluginCommand, PluginKind};
use rtgs_core::plugin::{Effect, EffectAdapter, HostedPlugin, Plugin};
use rtgs_core::plugin_host::PluginHost;
use rtgs_plugins::WithdrawalConfig;
use rtgs_withdrawal::settings::SettingKey;
use rtgs_withdrawal::world::World;
use rtgs_withdrawal::{WithdrawalCommand, WithdrawalPlugin};

use crate::SimPlugins;

/// World µs per simulator µs: an EVM block every 2.4 ms, Bitcoin's every 120 ms.
pub const WORLD_TIME_SCALE: u64 = 5_000;
/// Requests wait this long after the setup was handed out (it is journaled first).
pub const REQUESTS_AFTER_US: u64 = 20_000;
/// Simulator µs between two batches of requests.
pub const REQUEST_EVERY_US: u64 = 5_000;
pub const REQUESTS_PER_BATCH: u64 = 3;

/// The plugin's timers for the simulator (seconds of journal time; a run lasts tens of them).
pub const SETTINGS: &[(SettingKey, u64)] = &[
    (SettingKey::AuthorizationTimeout, 3),
    (SettingKey::SignatureTimeout, 3),
    (SettingKey::QueuedTimeout, 6),
    (SettingKey::StaleThreshold, 1),
    (SettingKey::StaleCheckInterval, 1),
    (SettingKey::AmlTimeout, 1),
    (SettingKey::BroadcastMargin, 1),
    (SettingKey::ReorgCheck, 1),
];

pub struct WithdrawalSim {
    pub world: World,
    pub config: WithdrawalConfig,
    setup: Vec<(Bmi, Payload)>,
    setup_sent_us: Option<u64>,
    requests_sent: u64,
    request_next_us: u64,
    healed: bool,
}

impl WithdrawalSim {
    /// `requests` from `customers` over `vaults_per_chain` vaults per chain; `faults`: the
    /// world's own faults too.
    pub fn new(seed: u64, requests: u64, customers: u64, vaults_per_chain: u64, faults: bool) -> Self {
        let config = WithdrawalConfig {
            customers,
            vaults_per_chain,
            requests,
            world_time_scale: WORLD_TIME_SCALE,
            world_seed: seed,
            faults,
        };
        let setup = config.workload().setup_payloads(SETTINGS).unwrap_or_default();
        WithdrawalSim {
            world: config.world(0),
            config,
            setup,
            setup_sent_us: None,
            requests_sent: 0,
            request_next_us: 0,
            healed: false,
        }
    }

    fn plugin(host: &PluginHost) -> Option<&WithdrawalPlugin> {
        rtgs_plugins::withdrawal(host)
    }
}

impl EffectAdapter for WithdrawalSim {
    fn execute(&mut self, effect: &Effect, now_us: u64) {
        self.world.execute(effect, now_us);
    }

    fn poll(&mut self, now_us: u64, out: &mut Vec<(Bmi, PluginCommand)>) {
        self.world.poll(now_us, out);
        let Some(setup_us) = self.setup_sent_us else { return };
        if self.healed || now_us < setup_us + REQUESTS_AFTER_US || now_us < self.request_next_us {
            return;
        }
        self.request_next_us = now_us + REQUEST_EVERY_US;
        let until = (self.requests_sent + REQUESTS_PER_BATCH).min(self.config.requests);
        while self.requests_sent < until {
            // A request that does not fit the bounds is a workload bug: the end check names it.
            if let Ok(r) = self.config.request(self.requests_sent) {
                out.push(r);
            }
            self.requests_sent += 1;
        }
    }

    fn alerts_seen(&mut self, alerts: &[rtgs_core::plugin::PluginAlert], now_us: u64) {
        self.world.alerts_seen(alerts, now_us);
    }

    fn figures(&self, out: &mut Vec<(&'static str, u64)>) {
        self.world.figures(out);
    }
}

impl SimPlugins for WithdrawalSim {
    fn make(&self) -> Vec<Box<dyn HostedPlugin>> {
        rtgs_plugins::PluginsConfig::withdrawal(self.config.clone()).hosted()
    }

    fn answers(&self, command: &PluginCommand) -> Option<u64> {
        if command.plugin != PluginKind::Withdrawal {
            return None;
        }
        WithdrawalCommand::decode(command.op, &command.body).ok()?.effect_id()
    }

    fn poll_payloads(&mut self, now_us: u64, out: &mut Vec<(Bmi, Payload)>) {
        if self.setup_sent_us.is_none() {
            self.setup_sent_us = Some(now_us);
            out.append(&mut self.setup);
        }
    }

    fn heal(&mut self) {
        // Requests not sent yet are not sent: the run converges on those already out.
        self.healed = true;
    }

    fn quiescent(&self, host: &PluginHost) -> bool {
        let Some(p) = Self::plugin(host) else { return false };
        let mut pending = Vec::new();
        Plugin::pending_effects(p, &mut pending);
        p.counters().requests == self.requests_sent
            && p.withdrawals().all(|w| w.is_settled_final())
            && pending.is_empty()
    }

    fn check_end(&self, host: &PluginHost) -> Result<(), String> {
        let p = Self::plugin(host).ok_or("no withdrawal plugin")?;
        if p.counters().requests != self.requests_sent {
            return Err(format!("{} requests sent, {} journaled", self.requests_sent, p.counters().requests));
        }
        if let Some(w) = p.withdrawals().find(|w| !w.is_settled_final()) {
            return Err(format!("{:?} still {:?} (awaiting {:?})", w.id, w.status, w.awaiting));
        }
        // Something must have gone through: a run where every request was refused (the setup
        // lost, say) proves nothing.
        if self.requests_sent > 0 && p.count_in(rtgs_withdrawal::Status::Completed) == 0 {
            return Err(format!("none of {} requests completed", self.requests_sent));
        }
        p.check_invariants()?;
        rtgs_withdrawal::world::check_paid_once(&self.world, p)
    }
}
