//! The bridge from the node's [`EffectAdapter`] (raw effects in, journal commands out) to the
//! plugin's outside world — an [`LpAdapter`] and the P2P marketplace — and a ready-made
//! [`Workload`] for demos and the simulator.
//!
//! **Idempotency of results.** A result's `bmi` derives from what it answers:
//! `MR<effect id>.<answer digest>` for the LP's answer to an effect, `TW<escrow>` for a
//! trade-completion webhook; the marketplace names its own (`SO…`, `PAID…`, `DEC…`). An effect
//! executed twice (an old and a new owner) with the same answer gets the same `bmi` and the
//! sequencer keeps one; the LP's idempotency key makes a second execution get the first answer
//! replayed — so re-sending is harmless. When the LP's state moved between the two executions
//! (BUSY, then a reservation), both answers are journaled and the plugin judges the one it did
//! not wait for (a reservation nobody uses is released; a commit goes to an operator).

use rtgs_core::entry::{AccountId, Bmi, Currency, InputError, Payload, PluginCommand};
use rtgs_core::plugin::{Effect, EffectAdapter};

use crate::command::{MatchingCommand, SetLpAccount, SetPartnerSettings, SetTimings, SubmitOrder};
use crate::effect::MatchingEffect;
use crate::lp_sim::{LpAdapter, LpConfig, LpSim};
use crate::market_sim::{MarketConfig, MarketSim, UserPolicy};
use crate::settings::{PartnerSettings, Timings};
use crate::types::*;

/// The plugin's outside world driven as the node's [`EffectAdapter`].
pub struct NodeAdapter<L: LpAdapter> {
    pub lp: L,
    pub market: MarketSim,
    lp_results: Vec<MatchingCommand>,
    pub effects_executed: u64,
    pub effects_undecodable: u64,
    pub alerts: u64,
    pub results_polled: u64,
    pub results_unencodable: u64,
}

impl<L: LpAdapter> NodeAdapter<L> {
    pub fn new(lp: L, market: MarketSim) -> Self {
        NodeAdapter {
            lp,
            market,
            lp_results: Vec::new(),
            effects_executed: 0,
            effects_undecodable: 0,
            alerts: 0,
            results_polled: 0,
            results_unencodable: 0,
        }
    }
}

/// The `bmi` of an LP result (see the module docs): the effect it answers **and** a digest of
/// the answer. The same answer sent twice (an old and a new owner) is deduplicated; a different
/// one — the LP's state moved between two executions of one effect (BUSY to the first, a
/// reservation to the second) — is journaled too, so the plugin learns of a reservation it did
/// not wait for and releases it, instead of the sequencer refusing it as a conflict.
pub fn lp_result_bmi(cmd: &MatchingCommand) -> Result<Bmi, InputError> {
    match cmd {
        MatchingCommand::LpTradeCompleted(w) => Bmi::numbered("TW", w.escrow.0),
        other => {
            let (op, body) = other.encode();
            let digest = rtgs_core::hash::bytes64(u64::from(op), &body) as u32;
            Bmi::new(format!("MR{}.{digest:08x}", other.effect_id().unwrap_or(0)).as_bytes())
        }
    }
}

impl<L: LpAdapter> EffectAdapter for NodeAdapter<L> {
    fn execute(&mut self, effect: &Effect, now_us: u64) {
        match MatchingEffect::from_effect(effect) {
            Ok(e) => {
                self.effects_executed += 1;
                match &e {
                    MatchingEffect::LpReserve(_)
                    | MatchingEffect::LpRenew(_)
                    | MatchingEffect::LpConfirm(_)
                    | MatchingEffect::LpRelease(_) => self.lp.execute(effect.effect_id, &e, now_us),
                    MatchingEffect::HandOff(_) | MatchingEffect::AwaitingDecision(_) => {
                        self.market.execute(&e, now_us)
                    }
                    // The operators' console: counted here, the case itself is in the state.
                    MatchingEffect::Alert(_) => self.alerts += 1,
                }
            }
            // Not ours (another plugin's effect reached this adapter): a wiring bug, counted.
            Err(_) => self.effects_undecodable += 1,
        }
    }

    fn poll(&mut self, now_us: u64, out: &mut Vec<(Bmi, PluginCommand)>) {
        self.lp_results.clear();
        self.lp.poll(now_us, &mut self.lp_results);
        let mut results: Vec<(Result<Bmi, InputError>, MatchingCommand)> =
            self.lp_results.drain(..).map(|c| (lp_result_bmi(&c), c)).collect();
        let mut market = Vec::new();
        self.market.poll(now_us, &mut market);
        results.extend(market.into_iter().map(|(b, c)| (Ok(b), c)));
        for (bmi, cmd) in results {
            self.results_polled += 1;
            match (bmi, cmd.to_plugin_command()) {
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
        out.push(("adapter_alerts", self.alerts));
        self.lp.figures(out);
        self.market.figures(out);
    }
}

/// A matching workload: partners with their credit accounts, sellers with funded accounts, an
/// LP with a funded nostro account, and orders.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Workload {
    pub orders: u64,
    pub sellers: u64,
    pub partners: u64,
    pub currency: Currency,
    /// An order's amount, drawn in this range (minor units).
    pub amount_minor: (u64, u64),
    /// How long an order lives (its `expires_at` from its submission).
    pub order_ttl_us: u64,
    /// The windows of every partner; partner 1 of every 4 has no P2P.
    pub settings: PartnerSettings,
    /// Timings journaled at setup (none: the plugin's defaults).
    pub timings: Option<Timings>,
    pub seller_funds_minor: u64,
    pub lp_funds_minor: u64,
    pub lp_account: AccountId,
    pub seller_account_base: u64,
    pub credit_account_base: u64,
    pub seed: u64,
}

impl Workload {
    pub fn new(orders: u64, sellers: u64, seed: u64) -> Result<Self, InputError> {
        Ok(Workload {
            orders,
            sellers,
            partners: 4,
            currency: Currency::new(b"EUR")?,
            amount_minor: (10_000, 400_000),
            order_ttl_us: 3_600 * SECOND_US,
            settings: PartnerSettings::default(),
            timings: None,
            seller_funds_minor: 10_000_000_000,
            lp_funds_minor: 1_000_000_000_000,
            lp_account: AccountId(70_000_000),
            seller_account_base: 71_000_000,
            credit_account_base: 72_000_000,
            seed,
        })
    }

    /// Other windows (the defaults stay 180 / 120 / 300 s).
    pub fn with_windows(mut self, p2p_s: u32, lp_s: u32, grace_s: u32) -> Self {
        self.settings = PartnerSettings {
            use_p2p: true,
            p2p_phase_s: p2p_s,
            lp_phase_s: lp_s,
            decision_grace_s: grace_s,
        };
        self
    }

    /// Journals [`Timings::quick`] at setup (windows of seconds).
    pub fn with_quick_timings(mut self) -> Self {
        self.timings = Some(Timings::quick());
        self
    }

    pub fn partner(&self, i: u64) -> (PartnerId, AccountId) {
        (PartnerId(i + 1), AccountId(self.credit_account_base + i))
    }

    /// The marketplace of this workload: its sellers offer from their funded accounts, buyers
    /// pay, users answer decision prompts (retry, cancel, close, or nothing).
    pub fn market(&self) -> MarketConfig {
        let mut m = MarketConfig::new(self.sellers, self.seller_account_base, self.currency);
        m.offer_minor = (self.amount_minor.0, self.amount_minor.1.saturating_mul(2));
        m.users = UserPolicy {
            retry_ppm: 250_000,
            cancel_ppm: 150_000,
            close_ppm: 250_000,
            decide_after_us: (SECOND_US / 2, SECOND_US),
        };
        m
    }

    /// The outside world of this workload.
    pub fn adapter(&self, lp: LpConfig, seed: u64) -> NodeAdapter<LpSim> {
        NodeAdapter::new(LpSim::new(lp, seed), MarketSim::new(self.market(), seed))
    }

    /// Accounts to open and fund first (plain ledger commands), with their `bmi`s.
    pub fn setup_payloads(&self) -> Vec<(Bmi, Payload)> {
        let mut accounts = vec![(self.lp_account, self.lp_funds_minor)];
        for i in 0..self.sellers {
            accounts.push((AccountId(self.seller_account_base + i), self.seller_funds_minor));
        }
        for i in 0..self.partners {
            accounts.push((self.partner(i).1, 0));
        }
        let mut out = Vec::new();
        for (a, funds) in accounts {
            if let Ok(bmi) = Bmi::numbered("MO", a.0) {
                out.push((bmi, Payload::AccountOpen { account: a, currency: self.currency }));
            }
            if let (true, Ok(bmi)) = (funds > 0, Bmi::numbered("MF", a.0)) {
                out.push((bmi, Payload::AccountFund { account: a, amount_minor: funds }));
            }
        }
        out
    }

    /// The LP's account and the partners' settings (after the accounts exist).
    pub fn setup_commands(&self) -> Vec<(Bmi, PluginCommand)> {
        let mut cmds = vec![(
            Bmi::new(b"MLP"),
            MatchingCommand::SetLpAccount(SetLpAccount {
                currency: Ccy(self.currency),
                account: Account(self.lp_account),
            }),
        )];
        if let Some(timings) = self.timings {
            cmds.push((Bmi::new(b"MTIM"), MatchingCommand::SetTimings(SetTimings { timings })));
        }
        for i in 0..self.partners {
            let settings = PartnerSettings { use_p2p: i % 4 != 3, ..self.settings };
            let partner = self.partner(i).0;
            cmds.push((
                Bmi::numbered("MPS", partner.0),
                MatchingCommand::SetPartnerSettings(SetPartnerSettings { partner, settings: Some(settings) }),
            ));
        }
        cmds.into_iter().filter_map(|(b, c)| Some((b.ok()?, c.to_plugin_command().ok()?))).collect()
    }

    /// Order `n` (from 0), submitted at `now_us`: its amount and partner from the seed.
    pub fn order(&self, n: u64, now_us: u64) -> Option<(Bmi, PluginCommand)> {
        use rtgs_core::hash::mix64;
        let h = mix64(self.seed ^ mix64(n ^ 0x0D0E));
        let (lo, hi) = self.amount_minor;
        let (partner, credit) = self.partner(h % self.partners.max(1));
        let mut customer = [0u8; 16];
        customer[..8].copy_from_slice(&mix64(h ^ 1).to_le_bytes());
        customer[8..].copy_from_slice(&n.to_le_bytes());
        let cmd = MatchingCommand::SubmitOrder(SubmitOrder {
            order: OrderId(n + 1),
            partner,
            customer: CustomerRef(customer),
            currency: Ccy(self.currency),
            amount_minor: lo + mix64(h ^ 2) % hi.saturating_sub(lo).max(1),
            credit_account: Account(credit),
            expires_at_us: now_us + self.order_ttl_us,
        });
        Some((Bmi::numbered("MORD", n + 1).ok()?, cmd.to_plugin_command().ok()?))
    }
}
