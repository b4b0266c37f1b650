//! The collection plugin's outside world in the simulator ([`crate::run_with_plugins`], `rtgs sim
//! --collection`): a chain simulator behind the [`NodeAdapter`], a [`Workload`] of deposits,
//! relayers registered at the start and `RunNow` every [`RUN_EVERY_US`] until the chain shows
//! every deposit swept, and the end-of-run checks. One chain for the whole cluster (a real
//! deployment points every center at the same chain RPC), so "no sweep broadcast twice" holds
//! across owner failovers.
//!
//! **End checks** (on a converged center's plugin): every deposit on chain is COLLECTED, every
//! batch CONFIRMED; the treasury holds exactly the deposits; one mined sweep per batch; and no
//! sweep was broadcast twice — every sweep transaction the chain ever saw is one of the hashes
//! its batch recorded (a second, different transaction for the same funds would not be).

use std::collections::BTreeSet;

use rtgs_collection::adapter::{NodeAdapter, Workload};
use rtgs_collection::chain_sim::{ChainConfig, ChainSim};
use rtgs_collection::command::CollectionCommand;
use rtgs_collection::state::{BatchStatus, RowStatus};
use rtgs_collection::types::{BatchId, ChainId};
use rtgs_collection::CollectionPlugin;
use rtgs_core::entry::{Bmi, PluginCommand, PluginKind};
use rtgs_core::plugin::{Effect, EffectAdapter, HostedPlugin, Plugin};
use rtgs_core::plugin_host::PluginHost;

use crate::SimPlugins;

/// Simulator µs between two `RunNow`s while deposits wait (20 chain seconds at the scale).
pub const RUN_EVERY_US: u64 = 20_000;
/// Chain µs per simulator µs: a 12 s block every 12 ms of simulated time.
pub const CHAIN_TIME_SCALE: u64 = 1_000;

pub struct CollectionSim {
    pub adapter: NodeAdapter<ChainSim>,
    pub workload: Workload,
    setup_sent: bool,
    run_next_us: u64,
    runs: u64,
}

impl CollectionSim {
    pub fn new(seed: u64, wallets: u64, relayers: u64) -> Self {
        let workload = Workload::new(wallets, relayers);
        let chain = workload.chain(ChainConfig::default(), seed, 0);
        CollectionSim {
            adapter: NodeAdapter::new(chain, 0, CHAIN_TIME_SCALE),
            workload,
            setup_sent: false,
            run_next_us: 0,
            runs: 0,
        }
    }

    fn deposits_total(&self) -> u128 {
        self.workload.amount_minor * u128::from(self.workload.wallets)
    }

    fn plugin(host: &PluginHost) -> Option<&CollectionPlugin> {
        host.plugin(PluginKind::Collection)?.as_any().downcast_ref()
    }
}

impl EffectAdapter for CollectionSim {
    fn execute(&mut self, effect: &Effect, now_us: u64) {
        self.adapter.execute(effect, now_us);
    }

    fn poll(&mut self, now_us: u64, out: &mut Vec<(Bmi, PluginCommand)>) {
        if !self.setup_sent {
            self.setup_sent = true;
            out.extend(self.workload.setup_commands(ChainId(1)));
        }
        self.adapter.poll(now_us, out);
        let swept = self.adapter.chain.treasury_balance(self.workload.token);
        if now_us >= self.run_next_us && swept < self.deposits_total() {
            self.run_next_us = now_us + RUN_EVERY_US;
            self.runs += 1;
            out.extend(self.workload.run_now(self.runs));
        }
    }
}

impl SimPlugins for CollectionSim {
    fn make(&self) -> Vec<Box<dyn HostedPlugin>> {
        // The set is named in rtgs-plugins, as for every engine; this world is its outside world.
        rtgs_plugins::PluginsConfig::collection(rtgs_plugins::CollectionConfig::default()).hosted()
    }

    fn answers(&self, command: &PluginCommand) -> Option<u64> {
        if command.plugin != PluginKind::Collection {
            return None;
        }
        CollectionCommand::decode(command.op, &command.body).ok()?.effect_id()
    }

    fn quiescent(&self, host: &PluginHost) -> bool {
        let Some(p) = Self::plugin(host) else { return false };
        let mut pending = Vec::new();
        Plugin::pending_effects(p, &mut pending);
        p.deposits().count() as u64 == self.workload.wallets
            && p.deposits().all(|r| matches!(r.status, RowStatus::Collected(_)))
            && p.batches().all(|b| !b.status.is_open())
            && pending.is_empty()
    }

    fn check_end(&self, host: &PluginHost) -> Result<(), String> {
        let p = Self::plugin(host).ok_or("no collection plugin")?;
        let chain = &self.adapter.chain;
        let queued = p.deposits().filter(|r| r.status == RowStatus::Queued).count();
        if queued > 0 || p.deposits().count() as u64 != self.workload.wallets {
            return Err(format!("{queued} deposits still queued of {}", p.deposits().count()));
        }
        if let Some(b) = p.batches().find(|b| b.status != BatchStatus::Confirmed) {
            return Err(format!("batch {:?} ended {:?}", b.id, b.status));
        }
        let treasury = chain.treasury_balance(self.workload.token);
        if treasury != self.deposits_total() {
            return Err(format!("treasury holds {treasury}, deposits were {}", self.deposits_total()));
        }
        let mined = chain.mined_sweeps();
        let batches: BTreeSet<_> = mined.iter().map(|m| m.0).collect();
        if batches.len() != mined.len() {
            return Err("a batch was swept twice on chain".into());
        }
        for rec in chain.ledger.txs.values().filter(|t| !t.cancel) {
            let recorded = p.batch(BatchId(rec.tx.tag)).is_some_and(|b| b.tx_hashes.contains(&rec.hash));
            if !recorded {
                return Err(format!(
                    "sweep {:?} of batch {:?} broadcast but never recorded",
                    rec.hash, rec.tx.tag
                ));
            }
        }
        Ok(())
    }
}
