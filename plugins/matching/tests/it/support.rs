//! The fixture: a driver over a real ledger and plugin host, with accounts set up, whose effects
//! the tests answer by hand (the `Silent` adapter), and the checks run after every step.

use std::collections::BTreeMap;

use rtgs_core::entry::{AccountId, Bmi, Currency, PluginKind};
use rtgs_core::ledger::HoldKey;
use rtgs_core::plugin::Plugin;
use rtgs_matching::command::*;
use rtgs_matching::driver::{Driver, Silent};
use rtgs_matching::effect::MatchingEffect;
use rtgs_matching::settings::{PartnerSettings, Timings};
use rtgs_matching::state::*;
use rtgs_matching::types::*;
use rtgs_matching::MatchingPlugin;

pub const S: u64 = 1_000_000;
pub const T0: u64 = 1_000 * S;
pub const LP_ACCOUNT: AccountId = AccountId(900);
pub const CREDIT: AccountId = AccountId(800);
pub const PARTNER: PartnerId = PartnerId(1);
pub const SELLER_FUNDS: u64 = 1_000_000;
pub const LP_FUNDS: u64 = 100_000_000;

pub fn eur() -> Ccy {
    Ccy(Currency::new(b"EUR").unwrap_or_else(|e| panic!("{e}")))
}

pub fn seller_account(id: u64) -> AccountId {
    AccountId(100 + id)
}

pub struct Fx {
    pub d: Driver<Silent>,
    /// Run the checks after every step.
    pub check: bool,
    accounts: u64,
}

impl Fx {
    pub fn new() -> Fx {
        Fx::with(PartnerSettings::default(), Timings::default())
    }

    pub fn with(settings: PartnerSettings, timings: Timings) -> Fx {
        let mut fx = Fx {
            d: Driver::new(MatchingPlugin::with(settings, timings), Silent, T0),
            check: true,
            accounts: 0,
        };
        fx.open(LP_ACCOUNT, LP_FUNDS);
        fx.open(CREDIT, 0);
        for id in 1..=6 {
            fx.open(seller_account(id), SELLER_FUNDS);
        }
        fx.cmd(MatchingCommand::SetLpAccount(SetLpAccount { currency: eur(), account: Account(LP_ACCOUNT) }));
        fx
    }

    pub fn open(&mut self, account: AccountId, funds: u64) {
        use rtgs_core::entry::Payload;
        self.accounts += 1;
        let bmi = |p: &str| Bmi::numbered(p, self.accounts).unwrap_or(Bmi::NONE);
        self.d.submit_payload(bmi("OPEN"), Payload::AccountOpen { account, currency: eur().0 });
        if funds > 0 {
            self.d.submit_payload(bmi("FUND"), Payload::AccountFund { account, amount_minor: funds });
        }
    }

    pub fn p(&self) -> &MatchingPlugin {
        self.d.plugin()
    }

    /// Journals a command and checks.
    pub fn cmd(&mut self, c: MatchingCommand) {
        self.d.submit(&c).unwrap_or_else(|e| panic!("{e}"));
        self.verify();
    }

    pub fn seller(&mut self, id: u64, offer_minor: u64) {
        self.cmd(MatchingCommand::SellerOffer(SellerOffer {
            seller: SellerId(id),
            account: Account(seller_account(id)),
            currency: eur(),
            offer_minor,
        }));
    }

    pub fn order(&mut self, id: u64, amount_minor: u64) {
        self.order_until(id, amount_minor, T0 + 3_600 * S);
    }

    pub fn order_until(&mut self, id: u64, amount_minor: u64, expires_at_us: u64) {
        self.cmd(MatchingCommand::SubmitOrder(SubmitOrder {
            order: OrderId(id),
            partner: PARTNER,
            customer: CustomerRef([id as u8; 16]),
            currency: eur(),
            amount_minor,
            credit_account: Account(CREDIT),
            expires_at_us,
        }));
    }

    pub fn decide(&mut self, order: u64, decision: Decision) {
        self.cmd(MatchingCommand::Decide(Decide { order: OrderId(order), decision }));
    }

    pub fn settings(&mut self, settings: PartnerSettings) {
        self.cmd(MatchingCommand::SetPartnerSettings(SetPartnerSettings {
            partner: PARTNER,
            settings: Some(settings),
        }));
    }

    /// A `Tick` at `at_us` (absolute).
    pub fn tick_at(&mut self, at_us: u64) {
        self.d.set_now(at_us);
        self.d.tick();
        self.verify();
    }

    /// A `Tick` every second for `dt_us`.
    pub fn advance(&mut self, dt_us: u64) {
        let end = self.d.now_us() + dt_us;
        while self.d.now_us() < end {
            let next = (self.d.now_us() + S).min(end);
            self.tick_at(next);
        }
    }

    pub fn now(&self) -> u64 {
        self.d.now_us()
    }

    pub fn order_status(&self, id: u64) -> OrderStatus {
        self.p().order(OrderId(id)).map(|o| o.status).unwrap_or_else(|| panic!("no order {id}"))
    }

    pub fn session(&self, order: u64) -> Session {
        self.p().session_of(OrderId(order)).cloned().unwrap_or_else(|| panic!("order {order} has no session"))
    }

    pub fn status(&self, order: u64) -> SessionStatus {
        self.session(order).status
    }

    /// Every effect emitted from index `from`, decoded.
    pub fn effects_since(&self, from: usize) -> Vec<(u64, MatchingEffect)> {
        self.d.effects()[from..]
            .iter()
            .filter_map(|e| Some((e.effect_id, MatchingEffect::from_effect(e).ok()?)))
            .collect()
    }

    pub fn effect_count(&self) -> usize {
        self.d.effects().len()
    }

    /// LP calls emitted from index `from`.
    pub fn lp_calls_since(&self, from: usize) -> Vec<(u64, MatchingEffect)> {
        self.effects_since(from)
            .into_iter()
            .filter(|(_, e)| {
                matches!(
                    e,
                    MatchingEffect::LpReserve(_)
                        | MatchingEffect::LpRenew(_)
                        | MatchingEffect::LpConfirm(_)
                        | MatchingEffect::LpRelease(_)
                )
            })
            .collect()
    }

    /// The last LP call emitted.
    pub fn last_lp(&self) -> (u64, MatchingEffect) {
        self.lp_calls_since(0).pop().unwrap_or_else(|| panic!("no LP call emitted"))
    }

    /// Answers an LP call as the LP would.
    pub fn answer(&mut self, call: &(u64, MatchingEffect), answer: LpAnswer) {
        let (effect_id, e) = call;
        let (session, call, key, reservation) = match e {
            MatchingEffect::LpReserve(r) => (r.body.session, LpCall::Reserve, r.key, None),
            MatchingEffect::LpRenew(r) => (r.body.session, LpCall::Renew, r.key, Some(r.body.reservation)),
            MatchingEffect::LpConfirm(r) => {
                (r.body.session, LpCall::Confirm, r.key, Some(r.body.reservation))
            }
            MatchingEffect::LpRelease(r) => {
                (r.body.session, LpCall::Release, r.key, Some(r.body.reservation))
            }
            other => panic!("not an LP call: {other:?}"),
        };
        self.cmd(MatchingCommand::LpAnswered(LpAnswered {
            effect_id: *effect_id,
            session,
            call,
            key,
            reservation,
            answer,
        }));
    }

    /// Answers the last LP call.
    pub fn answer_last(&mut self, answer: LpAnswer) {
        let call = self.last_lp();
        self.answer(&call, answer);
    }

    /// The plugin's invariants, conservation, and the ledger's holds of this plugin exactly
    /// the anchors and live legs of the plugin's state.
    pub fn verify(&self) {
        if !self.check {
            return;
        }
        self.p().check_invariants().unwrap_or_else(|e| panic!("invariants: {e}"));
        self.d.ledger().check_conservation().unwrap_or_else(|e| panic!("conservation: {e:?}"));
        assert_eq!(holds_of_state(self.p()), holds_in_ledger(&self.d), "plugin holds vs ledger holds");
    }

    pub fn balance(&self, a: AccountId) -> (u64, u64) {
        self.d.ledger().account(a).map(|x| (x.balance_minor, x.held_minor)).unwrap_or((0, 0))
    }

    /// Round trip through a checkpoint: the same state and hash.
    pub fn checkpoint_round_trip(&self) {
        let mut buf = Vec::new();
        Plugin::encode(self.p(), &mut buf);
        let back = MatchingPlugin::decode(&buf).unwrap_or_else(|_| panic!("checkpoint does not decode"));
        assert_eq!(back.state_hash(), self.p().state_hash());
        back.check_invariants().unwrap_or_else(|e| panic!("{e}"));
    }
}

/// The holds the plugin's state says it has: hold id → (account, amount).
pub fn holds_of_state(p: &MatchingPlugin) -> BTreeMap<u64, (AccountId, u64)> {
    let mut out = BTreeMap::new();
    for s in p.sessions() {
        for r in &s.p2p {
            out.insert(r.hold_id, (r.account.0, r.amount_minor));
        }
        if let Some(b) = &s.bundle {
            for l in b.legs.iter().filter(|l| matches!(l.status, LegStatus::Created | LegStatus::Paid)) {
                out.insert(l.hold_id, (l.account.0, l.amount_minor));
            }
        }
    }
    out
}

pub fn holds_in_ledger<A: rtgs_core::plugin::EffectAdapter>(
    d: &Driver<A>,
) -> BTreeMap<u64, (AccountId, u64)> {
    d.ledger()
        .holds()
        .filter(|(k, _)| k.plugin == PluginKind::Matching)
        .map(|(HoldKey { id, .. }, h)| (*id, (h.account, h.amount_minor)))
        .collect()
}

/// The effects of a kind.
pub fn reserves(effects: &[(u64, MatchingEffect)]) -> Vec<rtgs_matching::effect::LpReserve> {
    effects
        .iter()
        .filter_map(|(_, e)| match e {
            MatchingEffect::LpReserve(r) => Some(*r),
            _ => None,
        })
        .collect()
}
