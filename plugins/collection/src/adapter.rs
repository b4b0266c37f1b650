//! The bridge from the node's [`EffectAdapter`] (raw effects in, journal commands out) to a
//! [`ChainAdapter`] — here the chain simulator — and a ready-made workload for demos and the
//! simulator ([`Workload`]).
//!
//! **Idempotency keys.** A result's `bmi` derives from what it answers: `CR<effect id>` for the
//! answer to an effect, `DEP<deposit id>` for a confirmed deposit, `WH<hash of the webhook>`
//! for a webhook. An effect executed twice (old and new owner) yields the same `bmi`; the
//! sequencer answers a retry with the original seq and refuses different content (DUPL), and
//! the plugin ignores a result for an effect it no longer awaits — three layers, each enough.
//!
//! **Time.** The chain runs on its own clock: `chain_us = chain_start_us + (now_us - first
//! now_us) × time_scale`. With a scale above 1 a demo sees blocks (12 s) in milliseconds; the
//! plugin's own timers (schedules, stale checks) still follow the journal's timestamps.

use rtgs_core::entry::{Bmi, PluginCommand};
use rtgs_core::plugin::{Effect, EffectAdapter};

use crate::chain_sim::{ChainAdapter, ChainConfig, ChainSim};
use crate::command::{CollectionCommand, RegisterRelayer};
use crate::effect::CollectionEffect;
use crate::types::{DepositId, PartnerId, RelayerId, TokenId, WalletId};

/// A [`ChainAdapter`] driven as the node's [`EffectAdapter`].
pub struct NodeAdapter<A: ChainAdapter> {
    pub chain: A,
    pub time_scale: u64,
    chain_start_us: u64,
    origin_us: Option<u64>,
    results: Vec<CollectionCommand>,
    pub effects_executed: u64,
    pub effects_undecodable: u64,
    pub results_polled: u64,
    pub results_unencodable: u64,
}

impl<A: ChainAdapter> NodeAdapter<A> {
    pub fn new(chain: A, chain_start_us: u64, time_scale: u64) -> Self {
        NodeAdapter {
            chain,
            time_scale: time_scale.max(1),
            chain_start_us,
            origin_us: None,
            results: Vec::new(),
            effects_executed: 0,
            effects_undecodable: 0,
            results_polled: 0,
            results_unencodable: 0,
        }
    }

    /// The chain's clock at driver time `now_us`.
    pub fn chain_us(&mut self, now_us: u64) -> u64 {
        let origin = *self.origin_us.get_or_insert(now_us);
        self.chain_start_us.saturating_add(now_us.saturating_sub(origin).saturating_mul(self.time_scale))
    }
}

/// The `bmi` of a result (see the module docs).
pub fn result_bmi(cmd: &CollectionCommand) -> Result<Bmi, rtgs_core::entry::InputError> {
    if let Some(id) = cmd.effect_id() {
        return Bmi::numbered("CR", id);
    }
    match cmd {
        CollectionCommand::DepositConfirmed(d) => Bmi::numbered("DEP", d.deposit.0),
        other => {
            let (op, body) = other.encode();
            Bmi::numbered(if op == crate::command::op::TX_WEBHOOK { "WH" } else { "RS" }, {
                rtgs_core::hash::bytes64(u64::from(op), &body)
            })
        }
    }
}

impl<A: ChainAdapter + Send> EffectAdapter for NodeAdapter<A> {
    fn execute(&mut self, effect: &Effect, now_us: u64) {
        let chain_us = self.chain_us(now_us);
        match CollectionEffect::from_effect(effect) {
            Ok(e) => {
                self.effects_executed += 1;
                self.chain.execute(effect.effect_id, &e, chain_us);
            }
            // Not ours (another plugin's effect reached this adapter): a wiring bug, counted.
            Err(_) => self.effects_undecodable += 1,
        }
    }

    fn poll(&mut self, now_us: u64, out: &mut Vec<(Bmi, PluginCommand)>) {
        let chain_us = self.chain_us(now_us);
        self.results.clear();
        self.chain.poll(chain_us, &mut self.results);
        for cmd in &self.results {
            self.results_polled += 1;
            match (result_bmi(cmd), cmd.to_plugin_command()) {
                (Ok(bmi), Ok(pc)) => out.push((bmi, pc)),
                // Results are built from bounded effects; one over the limits is an adapter
                // bug, counted rather than journaled.
                _ => self.results_unencodable += 1,
            }
        }
    }

    fn figures(&self, out: &mut Vec<(&'static str, u64)>) {
        out.push(("adapter_effects_executed", self.effects_executed));
        out.push(("adapter_results_polled", self.results_polled));
        out.push(("adapter_effects_undecodable", self.effects_undecodable));
        self.chain.figures(out);
    }
}

/// A sweep workload: `wallets` deposit wallets of one partner, one deposit each, approved, and
/// `relayers` funded relayer accounts.
#[derive(Copy, Clone, Debug)]
pub struct Workload {
    pub wallets: u64,
    pub relayers: u64,
    pub partner: PartnerId,
    pub token: TokenId,
    /// Per deposit, in token minor units (default: 2.0 of a 6-decimal token, above the 1 USD
    /// minimum and with gas under the 10 % ratio).
    pub amount_minor: u128,
}

impl Workload {
    pub fn new(wallets: u64, relayers: u64) -> Self {
        Workload { wallets, relayers, partner: PartnerId(1), token: TokenId(1), amount_minor: 2_000_000 }
    }

    pub fn wallet(&self, i: u64) -> WalletId {
        WalletId(1_000 + i)
    }

    pub fn relayer(&self, i: u64) -> RelayerId {
        RelayerId(9_000_000 + i)
    }

    /// A chain simulator with the deposits sent (mined in its next block) and the relayers
    /// funded; the deposits reach the journal through the adapter as they confirm.
    pub fn chain(&self, cfg: ChainConfig, seed: u64, start_us: u64) -> ChainSim {
        let mut sim = ChainSim::new(cfg, seed, start_us);
        for i in 0..self.relayers {
            sim.fund_native(self.relayer(i).0, 1_000_000_000_000_000_000_000);
        }
        for i in 0..self.wallets {
            sim.deposit(DepositId(i + 1), self.partner, self.wallet(i), self.token, self.amount_minor);
            sim.approve(self.wallet(i), self.token, u128::MAX);
        }
        sim
    }

    /// The commands that register the relayers (to submit before the first run), with their
    /// `bmi`s.
    pub fn setup_commands(&self, chain: crate::types::ChainId) -> Vec<(Bmi, PluginCommand)> {
        (0..self.relayers)
            .filter_map(|i| {
                let c = CollectionCommand::RegisterRelayer(RegisterRelayer {
                    chain,
                    relayer: self.relayer(i),
                    next_nonce: 0,
                });
                Some((Bmi::numbered("RLY", self.relayer(i).0).ok()?, c.to_plugin_command().ok()?))
            })
            .collect()
    }

    /// `RunNow` for the workload's partner, with a `bmi` unique per `round`.
    pub fn run_now(&self, round: u64) -> Option<(Bmi, PluginCommand)> {
        let c = CollectionCommand::RunNow(crate::command::RunNow { partner: Some(self.partner) });
        Some((Bmi::numbered("RUN", round).ok()?, c.to_plugin_command().ok()?))
    }
}
