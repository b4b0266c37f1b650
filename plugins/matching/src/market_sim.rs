//! The P2P side of the outside world, simulated: the marketplace's sellers (appearing, leaving,
//! offering part of their funds), the payment rail that confirms a buyer's payment per leg
//! (CODEF in the seed), and the users who answer the widget's decision prompt.
//!
//! Everything it journals is a pure function of the seed and of what it answers, and its `bmi`
//! names exactly that (`SO<seller>.<version>`, `PAID<session>.<bundle>.<leg>`,
//! `DEC<order>.<window>`): every center's copy of the simulator produces the same commands under
//! the same `bmi`s, so the sequencer's dedupe keeps one.

use std::collections::{BTreeMap, BTreeSet};

use rtgs_core::entry::{AccountId, Bmi, Currency};
use rtgs_core::hash::mix64;

use crate::command::{Decide, Decision, LegPaid, MatchingCommand, SellerOffer};
use crate::effect::{DecisionNeeded, HandOff, MatchingEffect};
use crate::state::LegKind;
use crate::types::*;

/// The users' answers to a decision prompt (chances per million; the rest never answer, and the
/// grace ends their session AUTO_CLOSED).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct UserPolicy {
    pub retry_ppm: u32,
    pub cancel_ppm: u32,
    pub close_ppm: u32,
    pub decide_after_us: (u64, u64),
}

/// The marketplace and rail, and how they behave.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct MarketConfig {
    pub sellers: u64,
    /// Seller `i` (from 0) is `SellerId(i + 1)` with ledger account `seller_account_base + i`.
    pub seller_account_base: u64,
    pub currency: Currency,
    /// A seller's offer at each version, drawn in this range (minor units).
    pub offer_minor: (u64, u64),
    /// A seller changes its offer about this often (0: never).
    pub churn_every_us: u64,
    /// At a change, the seller leaves (offer 0) with this chance.
    pub leave_ppm: u32,
    pub pay_after_us: (u64, u64),
    /// A buyer never pays a leg (the order's deadline then ends it).
    pub never_pay_ppm: u32,
    pub users: UserPolicy,
    /// The sellers' first offers wait this long after the first poll (a node whose sellers'
    /// accounts are opened by the same run: an offer naming an unknown account is refused).
    /// `u64::MAX`: never — the opening offers come from outside ([`MarketSim::opening_offers`],
    /// sent by whoever opens the accounts).
    pub start_after_us: u64,
}

impl MarketConfig {
    pub fn new(sellers: u64, seller_account_base: u64, currency: Currency) -> Self {
        MarketConfig {
            sellers,
            seller_account_base,
            currency,
            offer_minor: (50_000, 500_000),
            churn_every_us: 0,
            leave_ppm: 0,
            pay_after_us: (SECOND_US, 3 * SECOND_US),
            never_pay_ppm: 0,
            users: UserPolicy {
                retry_ppm: 0,
                cancel_ppm: 0,
                close_ppm: 0,
                decide_after_us: (SECOND_US, 2 * SECOND_US),
            },
            start_after_us: 0,
        }
    }

    pub fn seller(&self, i: u64) -> (SellerId, AccountId) {
        (SellerId(i + 1), AccountId(self.seller_account_base + i))
    }
}

/// Counts (figures).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct MarketStats {
    pub offers: u64,
    pub hand_offs: u64,
    pub legs_paid: u64,
    pub legs_never_paid: u64,
    pub prompts: u64,
    pub decisions: u64,
}

/// The simulated marketplace, rail and users (see the module docs).
pub struct MarketSim {
    pub cfg: MarketConfig,
    seed: u64,
    origin_us: Option<u64>,
    versions: Vec<u32>,
    churns_done: u64,
    started: bool,
    scheduled: BTreeSet<(SessionId, u32, u8)>,
    prompted: BTreeSet<(OrderId, u32)>,
    outbox: BTreeMap<(u64, u64), (Bmi, MatchingCommand)>,
    out_seq: u64,
    pub stats: MarketStats,
}

impl MarketSim {
    pub fn new(cfg: MarketConfig, seed: u64) -> Self {
        MarketSim {
            cfg,
            seed: mix64(seed ^ 0x4D41_524B_4554),
            origin_us: None,
            versions: vec![0; cfg.sellers as usize],
            churns_done: 0,
            started: false,
            scheduled: BTreeSet::new(),
            prompted: BTreeSet::new(),
            outbox: BTreeMap::new(),
            out_seq: 0,
            stats: MarketStats::default(),
        }
    }

    /// A number in `lo..hi` from the seed and some words: the same everywhere.
    fn draw(&self, words: &[u64], lo: u64, hi: u64) -> u64 {
        let h = words.iter().fold(self.seed, |h, w| mix64(h ^ w));
        lo + h % hi.saturating_sub(lo).max(1)
    }

    fn chance(&self, words: &[u64], ppm: u32) -> bool {
        ppm > 0 && self.draw(words, 0, 1_000_000) < u64::from(ppm)
    }

    /// Seller `i`'s offer at `version` (0 if it left).
    pub fn offer(&self, i: u64, version: u32) -> u64 {
        if version > 0 && self.chance(&[1, i, u64::from(version)], self.cfg.leave_ppm) {
            return 0;
        }
        let (lo, hi) = self.cfg.offer_minor;
        self.draw(&[2, i, u64::from(version)], lo, hi)
    }

    fn push(&mut self, at_us: u64, bmi: Option<Bmi>, cmd: MatchingCommand) {
        let Some(bmi) = bmi else { return };
        self.out_seq += 1;
        self.outbox.insert((at_us, self.out_seq), (bmi, cmd));
    }

    fn offer_command(&self, i: u64) -> (Option<Bmi>, MatchingCommand) {
        let version = self.versions[i as usize];
        let (seller, account) = self.cfg.seller(i);
        let cmd = MatchingCommand::SellerOffer(SellerOffer {
            seller,
            account: Account(account),
            currency: Ccy(self.cfg.currency),
            offer_minor: self.offer(i, version),
        });
        (Bmi::new(format!("SO{}.{version}", seller.0).as_bytes()).ok(), cmd)
    }

    /// Every seller's offer at its current version (a fresh simulator: the opening offers its
    /// first poll sends once started), under the same `bmi`s. For a driver that opens the
    /// sellers' accounts itself and sends these after them (`rtgs match` on the production
    /// engine, whose nodes cannot know when the accounts exist).
    pub fn opening_offers(&self) -> Vec<(Bmi, MatchingCommand)> {
        (0..self.cfg.sellers)
            .filter_map(|i| {
                let (bmi, cmd) = self.offer_command(i);
                Some((bmi?, cmd))
            })
            .collect()
    }

    /// Executes a hand-off (the rail watches each P2P leg's payment) or a decision prompt.
    pub fn execute(&mut self, effect: &MatchingEffect, now_us: u64) {
        match effect {
            MatchingEffect::HandOff(h) => self.hand_off(h, now_us),
            MatchingEffect::AwaitingDecision(d) => self.prompt(d, now_us),
            _ => {}
        }
    }

    fn hand_off(&mut self, h: &HandOff, now_us: u64) {
        self.stats.hand_offs += 1;
        for leg in h.legs.iter().filter(|l| l.kind == LegKind::P2p) {
            if !self.scheduled.insert((h.session, h.bundle, leg.index)) {
                continue; // a re-executed hand-off: each leg is watched once
            }
            let words = [3, h.session.0, u64::from(h.bundle), u64::from(leg.index)];
            if self.chance(&words, self.cfg.never_pay_ppm) {
                self.stats.legs_never_paid += 1;
                continue;
            }
            let (lo, hi) = self.cfg.pay_after_us;
            let at = now_us + self.draw(&words, lo, hi);
            let bmi = Bmi::new(format!("PAID{}.{}.{}", h.session.0, h.bundle, leg.index).as_bytes()).ok();
            let cmd =
                MatchingCommand::LegPaid(LegPaid { session: h.session, bundle: h.bundle, leg: leg.index });
            self.push(at, bmi, cmd);
        }
    }

    fn prompt(&mut self, d: &DecisionNeeded, now_us: u64) {
        if !self.prompted.insert((d.order, d.window)) {
            return;
        }
        self.stats.prompts += 1;
        let u = self.cfg.users;
        let roll = self.draw(&[4, d.order.0, u64::from(d.window)], 0, 1_000_000) as u32;
        let decision = if roll < u.retry_ppm {
            Decision::Retry
        } else if roll < u.retry_ppm + u.cancel_ppm {
            Decision::Cancel
        } else if roll < u.retry_ppm + u.cancel_ppm + u.close_ppm {
            Decision::Close
        } else {
            return;
        };
        let (lo, hi) = u.decide_after_us;
        let at = now_us + self.draw(&[5, d.order.0, u64::from(d.window)], lo, hi);
        let bmi = Bmi::new(format!("DEC{}.{}", d.order.0, d.window).as_bytes()).ok();
        self.push(at, bmi, MatchingCommand::Decide(Decide { order: d.order, decision }));
    }

    /// Offers (all at the first poll, then the changes due), payments and decisions due.
    pub fn poll(&mut self, now_us: u64, out: &mut Vec<(Bmi, MatchingCommand)>) {
        let origin = *self.origin_us.get_or_insert(now_us);
        if !self.started && now_us - origin >= self.cfg.start_after_us {
            self.started = true;
            for i in 0..self.cfg.sellers {
                let (bmi, cmd) = self.offer_command(i);
                self.push(now_us, bmi, cmd);
            }
        }
        if self.cfg.churn_every_us > 0 && self.cfg.sellers > 0 {
            let due = (now_us - origin) / self.cfg.churn_every_us;
            while self.churns_done < due {
                self.churns_done += 1;
                let i = self.draw(&[6, self.churns_done], 0, self.cfg.sellers);
                self.versions[i as usize] += 1;
                let (bmi, cmd) = self.offer_command(i);
                self.push(now_us, bmi, cmd);
            }
        }
        while let Some(entry) = self.outbox.first_entry() {
            if entry.key().0 > now_us {
                break;
            }
            let (bmi, cmd) = entry.remove();
            match cmd {
                MatchingCommand::SellerOffer(_) => self.stats.offers += 1,
                MatchingCommand::LegPaid(_) => self.stats.legs_paid += 1,
                MatchingCommand::Decide(_) => self.stats.decisions += 1,
                _ => {}
            }
            out.push((bmi, cmd));
        }
    }

    pub fn figures(&self, out: &mut Vec<(&'static str, u64)>) {
        let s = &self.stats;
        out.extend([
            ("market_offers", s.offers),
            ("market_hand_offs", s.hand_offs),
            ("market_legs_paid", s.legs_paid),
            ("market_legs_never_paid", s.legs_never_paid),
            ("market_prompts", s.prompts),
            ("market_decisions", s.decisions),
        ]);
    }
}
