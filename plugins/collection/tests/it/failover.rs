//! The plugin hosted by three centers with ownership of its effects: the owner dies with
//! effects unexecuted and results unjournaled, another center takes over through a journaled
//! `SetOwner`, re-executes everything pending, and the sweep completes — nothing lost, nothing
//! swept twice, every center (the dead one too, once it replays) in the same state.

use std::collections::{BTreeSet, HashMap};

use rtgs_collection::adapter::{NodeAdapter, Workload};
use rtgs_collection::chain_sim::{ChainConfig, ChainSim};
use rtgs_collection::types::ChainId;
use rtgs_collection::{BatchStatus, CollectionPlugin, RowStatus};
use rtgs_core::entry::{Bmi, CenterId, Entry, Payload, PluginCommand, PluginKind};
use rtgs_core::plugin::{EffectAdapter, Plugin};
use rtgs_core::plugin_host::{PluginHost, SetOwner};

use crate::support::START_US;

const STEP_US: u64 = 100_000;

/// A sequencer with a `bmi` dedupe (retry ⇒ nothing new, conflict ⇒ refused), a journal, three
/// hosts and one chain.
struct Cluster {
    journal: Vec<Entry>,
    bmis: HashMap<Bmi, PluginCommand>,
    refused_conflicts: u64,
    deduped: u64,
    hosts: Vec<PluginHost>,
    up: Vec<bool>,
    adapter: NodeAdapter<ChainSim>,
    now_us: u64,
    /// Results polled while no live owner could have journaled them (lost with the owner).
    results_lost: u64,
    effects_lost: u64,
}

impl Cluster {
    fn new(workload: &Workload) -> Self {
        let chain = workload.chain(ChainConfig::default(), 7, START_US);
        let hosts = (1..=3)
            .map(|c| {
                let mut h = PluginHost::new(CenterId(c), vec![Box::new(CollectionPlugin::new())])
                    .unwrap_or_else(|e| panic!("{e}"));
                h.set_live();
                h
            })
            .collect();
        let mut cluster = Cluster {
            journal: Vec::new(),
            bmis: HashMap::new(),
            refused_conflicts: 0,
            deduped: 0,
            hosts,
            up: vec![true; 3],
            adapter: NodeAdapter::new(chain, START_US, 1),
            now_us: START_US,
            results_lost: 0,
            effects_lost: 0,
        };
        for (bmi, c) in workload.setup_commands(ChainId(1)) {
            cluster.submit(bmi, c);
        }
        cluster
    }

    fn owner(&self) -> CenterId {
        let live = self.hosts.iter().zip(&self.up).find(|(_, up)| **up).map(|(h, _)| h);
        live.and_then(|h| h.owner(PluginKind::Collection)).map_or(CenterId(1), |o| o.0)
    }

    fn submit(&mut self, bmi: Bmi, c: PluginCommand) {
        match self.bmis.get(&bmi) {
            Some(before) if *before == c => self.deduped += 1,
            Some(_) => self.refused_conflicts += 1,
            None => {
                self.bmis.insert(bmi, c.clone());
                self.append(bmi, Payload::Plugin(c));
            }
        }
    }

    fn append(&mut self, bmi: Bmi, payload: Payload) {
        let seq = self.journal.len() as u64 + 1;
        let e = Entry { seq, epoch: 1, timestamp_us: self.now_us, origin: CenterId(1), bmi, payload };
        let digests: Vec<Option<u64>> = self
            .hosts
            .iter_mut()
            .zip(&self.up)
            .filter(|(_, up)| **up)
            .map(|(h, _)| h.apply(&e, &mut rtgs_core::ledger::Ledger::new()))
            .collect();
        assert!(digests.windows(2).all(|w| w[0] == w[1]), "centers disagree at seq {seq}");
        self.journal.push(e);
        self.execute_owned();
    }

    fn execute_owned(&mut self) {
        let mut effects = Vec::new();
        for (h, up) in self.hosts.iter_mut().zip(&self.up) {
            effects.clear();
            h.take_effects(&mut effects);
            if !*up {
                self.effects_lost += effects.len() as u64;
                continue;
            }
            for e in &effects {
                self.adapter.execute(e, self.now_us);
            }
        }
    }

    fn step(&mut self) {
        self.now_us += STEP_US;
        let mut results = Vec::new();
        self.adapter.poll(self.now_us, &mut results);
        let owner_up = self.up[self.owner().index()];
        for (bmi, c) in results {
            if owner_up {
                self.submit(bmi, c);
            } else {
                self.results_lost += 1;
            }
        }
        self.append(Bmi::NONE, Payload::Tick);
    }

    fn plugin(&self, center: usize) -> &CollectionPlugin {
        let p = self.hosts[center].plugin(PluginKind::Collection).and_then(|p| p.as_any().downcast_ref());
        p.unwrap_or_else(|| panic!("DC{} hosts the collection plugin", center + 1))
    }
}

#[test]
fn no_effect_is_lost_across_a_failover_and_re_execution_is_harmless() {
    let w = Workload::new(40, 3);
    let mut c = Cluster::new(&w);
    // Deposits confirm on chain and are journaled.
    while c.plugin(0).deposits().count() < w.wallets as usize {
        c.step();
        assert!(c.now_us < START_US + 3_600_000_000, "deposits never confirmed");
    }
    let (bmi, run) = w.run_now(1).unwrap_or_else(|| panic!("run command"));
    c.submit(bmi, run);
    // Until DC1 has broadcast some sweeps whose results are not journaled yet.
    while c.plugin(0).batches().all(|b| b.tx_hashes.is_empty()) {
        c.step();
    }
    let broadcasting = c.plugin(0).batches().filter(|b| b.status == BatchStatus::Pending).count();
    assert!(broadcasting > 0, "some broadcasts are still unanswered when DC1 dies");
    c.up[0] = false;
    for _ in 0..20 {
        c.step();
    }
    assert!(c.results_lost > 0, "DC1 died with results it had not journaled");
    // DC2 takes over at the next term (DC3's concurrent proposal for the same term is refused).
    let term = c.hosts[1].owner(PluginKind::Collection).map_or(0, |o| o.1) + 1;
    let bmi = SetOwner::bmi(PluginKind::Collection, term).unwrap_or_else(|e| panic!("{e}"));
    for owner in [CenterId(2), CenterId(3)] {
        let cmd =
            SetOwner { term, owner }.to_command(PluginKind::Collection).unwrap_or_else(|e| panic!("{e}"));
        c.submit(bmi, cmd);
    }
    assert_eq!(c.owner(), CenterId(2));
    assert_eq!(c.refused_conflicts, 1, "one owner per term");
    let mut steps = 0;
    while c.plugin(1).deposits().any(|r| r.status == RowStatus::Queued) {
        c.step();
        steps += 1;
        assert!(steps < 20_000, "the sweep never completed after the failover");
    }
    for _ in 0..600 {
        c.step();
    }
    // Nothing lost: every deposit collected, the treasury holds every deposit, once.
    let p = c.plugin(1);
    assert!(p.deposits().all(|r| matches!(r.status, RowStatus::Collected(_))));
    assert!(p.batches().all(|b| b.status == BatchStatus::Confirmed), "every batch confirmed");
    let total = w.amount_minor * u128::from(w.wallets);
    assert_eq!(c.adapter.chain.treasury_balance(w.token), total);
    let swept: u128 = p.batches().map(|b| b.amount_minor).sum();
    assert_eq!(swept, total, "Σ swept = Σ deposits");
    // Harmless: the re-executed broadcasts were the same transactions — one mined sweep per
    // batch, and every hash on chain is one the plugin recorded.
    let mined = c.adapter.chain.mined_sweeps();
    let batches: BTreeSet<_> = mined.iter().map(|m| m.0).collect();
    assert_eq!(batches.len(), mined.len(), "no batch swept twice");
    for (batch, hash, _) in &mined {
        assert!(p.batch(*batch).is_some_and(|b| b.tx_hashes.contains(hash)));
    }
    let re_executed = c.adapter.chain.stats.already_known + c.adapter.chain.stats.nonce_too_low;
    assert!(re_executed > 0 || c.deduped > 0, "the new owner did re-execute effects DC1 had executed");
    // DC3 agrees; DC1 replays the whole journal into a fresh host and agrees too.
    assert_eq!(c.hosts[1].state_hash(), c.hosts[2].state_hash());
    let mut dc1 = PluginHost::new(CenterId(1), vec![Box::new(CollectionPlugin::new())])
        .unwrap_or_else(|e| panic!("{e}"));
    for e in &c.journal {
        dc1.apply(e, &mut rtgs_core::ledger::Ledger::new());
    }
    assert!(!dc1.has_effects(), "replay executes nothing");
    assert_eq!(dc1.state_hash(), c.hosts[1].state_hash());
    assert_eq!(Plugin::state_hash(c.plugin(1)), Plugin::state_hash(c.plugin(2)));
}

/// After a failover the re-executed broadcast's answer can reach the journal after the
/// transaction's webhook: the webhook is kept and applied once the answer records the hash.
#[test]
fn a_webhook_journaled_before_the_broadcast_answer_still_confirms() {
    use crate::support::*;
    use rtgs_collection::command::BroadcastOutcome;
    let mut fx = Fx::new();
    let b = fx.up_to_broadcast(&[(1, 2 * USDT, 5)], 10, 2 * USDT);
    let hash = hash_of(&sweep(&b));
    fx.webhook(hash, true, 11);
    assert_eq!(fx.batch(1).status, BatchStatus::Pending, "unknown hash: kept, not applied");
    assert_eq!(fx.p.counters().webhooks_foreign, 1);
    fx.broadcast_result(&b, BroadcastOutcome::Accepted);
    assert_eq!(fx.batch(1).status, BatchStatus::Confirmed, "the kept webhook confirmed it");
    assert_eq!(fx.row(1).status, RowStatus::Collected(rtgs_collection::types::BatchId(1)));
}
