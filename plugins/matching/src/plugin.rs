//! [`MatchingPlugin`]: the `Plugin` implementation, command routing, the input commands (orders,
//! decisions, settings, sellers' offers, operators' resolutions) and the read queries.
//!
//! The rules live in sibling modules: `tick` (what a `Tick` does: order deadlines, the overdue
//! sweep, the intake, session timers), `session` (the session's timers and its indexes, windows,
//! reservations returned), `routing` (the routing pass: P2P anchors, the LP gate, the atomic
//! bundle commit), `lp` (the LP protocol and its answers), `compensation` (provider first, then
//! the core side; escalations and dead letters) and `payment` (hand-off, paid legs, settlement,
//! operators' resolutions).

use rtgs_core::entry::{Entry, Payload, PluginKind, Seq};
use rtgs_core::plugin::{Effect, Plugin, PluginDecodeError, Step};

use crate::checkpoint::{self, Index};
use crate::command::*;
use crate::effect::Effects;
use crate::limits::{
    ORDERS_LIVE_MAX, ORDER_AMOUNT_MINOR_MAX, PARTNERS_MAX, REJECTIONS_RECENT_MAX, SELLERS_MAX,
};
use crate::settings::{PartnerSettings, Timings};
use crate::state::*;
use crate::types::*;

/// The matching plugin: deterministic state over the journal (see the crate docs).
#[derive(Clone, Debug)]
pub struct MatchingPlugin {
    pub(crate) st: State,
    pub(crate) ix: Index,
}

impl Default for MatchingPlugin {
    fn default() -> Self {
        Self::new()
    }
}

/// What one entry's step may use: its seq and time, the effect ids it hands out, and the
/// ledger (through the step's intents).
pub(crate) struct Cx<'s, 'l> {
    pub seq: Seq,
    pub now: u64,
    pub fx: Effects<'s>,
    pub step: &'s mut Step<'l>,
}

impl MatchingPlugin {
    pub fn new() -> Self {
        Self::with(PartnerSettings::default(), Timings::default())
    }

    /// A plugin with other defaults (their ranges are the caller's to respect; see
    /// [`PartnerSettings::validate`] and [`Timings::validate`]).
    pub fn with(default_settings: PartnerSettings, timings: Timings) -> Self {
        let st = State { default_settings, timings, ..State::default() };
        MatchingPlugin { st, ix: Index::default() }
    }

    // ----- routing -----

    fn on_command(&mut self, cx: &mut Cx<'_, '_>, cmd: &MatchingCommand) {
        use MatchingCommand as C;
        let result = match cmd {
            C::SubmitOrder(c) => self.on_submit(cx, c),
            C::Decide(c) => self.on_decide(cx, c),
            C::SetPartnerSettings(c) => self.on_partner_settings(c),
            C::SetLpAccount(c) => self.on_lp_account(cx, c),
            C::SellerOffer(c) => self.on_seller_offer(cx, c),
            C::Resolve(c) => self.on_resolve(cx, c),
            C::SetTimings(c) => self.on_timings(c),
            C::LpAnswered(c) => {
                self.on_lp_answered(cx, c);
                Ok(())
            }
            C::LegPaid(c) => self.on_leg_paid(cx, c),
            C::LpTradeCompleted(c) => {
                self.on_trade_completed(cx, c);
                Ok(())
            }
        };
        if let Err(kind) = result {
            self.reject(cx.seq, kind);
        }
    }

    pub(crate) fn reject(&mut self, seq: Seq, kind: RejectKind) {
        *self.st.rejected.entry(kind).or_default() += 1;
        if self.st.rejections_recent.len() >= REJECTIONS_RECENT_MAX {
            self.st.rejections_recent.remove(0);
        }
        self.st.rejections_recent.push(Rejection { seq, kind });
    }

    // ----- inputs -----

    /// A new order waits for the intake (the next `Tick`). The same order again is a retry of
    /// the same request (accepted, nothing changes); other content under its id is refused.
    fn on_submit(&mut self, cx: &mut Cx<'_, '_>, c: &SubmitOrder) -> Result<(), RejectKind> {
        if let Some(o) = self.st.orders.get(&c.order) {
            let same = o.partner == c.partner
                && o.customer == c.customer
                && o.currency == c.currency
                && o.amount_minor == c.amount_minor
                && o.credit_account == c.credit_account
                && o.expires_at_us == c.expires_at_us;
            return if same { Ok(()) } else { Err(RejectKind::OrderExists) };
        }
        if c.amount_minor == 0 || c.amount_minor > ORDER_AMOUNT_MINOR_MAX {
            return Err(RejectKind::InvalidOrder);
        }
        if c.expires_at_us <= cx.now {
            return Err(RejectKind::AlreadyExpired);
        }
        match cx.step.account_currency(c.credit_account.0) {
            None => return Err(RejectKind::UnknownAccount),
            Some(cur) if cur != c.currency.0 => return Err(RejectKind::CurrencyMismatch),
            Some(_) => {}
        }
        if self.ix.live_orders >= ORDERS_LIVE_MAX {
            return Err(RejectKind::TooManyOrders);
        }
        let order = Order {
            id: c.order,
            partner: c.partner,
            customer: c.customer,
            currency: c.currency,
            amount_minor: c.amount_minor,
            credit_account: c.credit_account,
            expires_at_us: c.expires_at_us,
            created_at_us: cx.now,
            status: OrderStatus::Open,
            session: None,
            deadline_handled: false,
            ended_at_us: None,
        };
        self.ix.intake.insert(c.order);
        self.ix.deadlines.insert((c.expires_at_us, c.order));
        self.ix.live_orders += 1;
        self.st.orders.insert(c.order, order);
        self.st.counters.orders += 1;
        Ok(())
    }

    fn on_partner_settings(&mut self, c: &SetPartnerSettings) -> Result<(), RejectKind> {
        match c.settings {
            None => {
                self.st.partners.remove(&c.partner);
            }
            Some(s) => {
                s.validate().map_err(|_| RejectKind::InvalidSetting)?;
                if !self.st.partners.contains_key(&c.partner) && self.st.partners.len() >= PARTNERS_MAX {
                    return Err(RejectKind::TooManyPartners);
                }
                // Windows already open keep their times: a setting applies to the next window.
                self.st.partners.insert(c.partner, s);
            }
        }
        Ok(())
    }

    /// New timings apply from now: every session's timer is derived again.
    fn on_timings(&mut self, c: &SetTimings) -> Result<(), RejectKind> {
        c.timings.validate().map_err(|_| RejectKind::InvalidSetting)?;
        self.st.timings = c.timings;
        let ids: Vec<SessionId> = self.st.sessions.keys().copied().collect();
        for id in ids {
            self.with_session(id, |_, _| ());
        }
        Ok(())
    }

    fn on_lp_account(&mut self, cx: &mut Cx<'_, '_>, c: &SetLpAccount) -> Result<(), RejectKind> {
        match cx.step.account_currency(c.account.0) {
            None => Err(RejectKind::UnknownAccount),
            Some(cur) if cur != c.currency.0 => Err(RejectKind::CurrencyMismatch),
            Some(_) => {
                self.st.lp_accounts.insert(c.currency, c.account);
                Ok(())
            }
        }
    }

    /// A seller appears, changes its offer (partial availability) or leaves (0). An offer cut
    /// below what it has reserved returns anchors (reservations not committed) until it fits;
    /// committed legs stay.
    fn on_seller_offer(&mut self, cx: &mut Cx<'_, '_>, c: &SellerOffer) -> Result<(), RejectKind> {
        match self.st.sellers.get(&c.seller) {
            Some(s) if s.account != c.account || s.currency != c.currency => {
                return Err(RejectKind::SellerConflict)
            }
            Some(_) => {}
            None => {
                match cx.step.account_currency(c.account.0) {
                    None => return Err(RejectKind::UnknownAccount),
                    Some(cur) if cur != c.currency.0 => return Err(RejectKind::CurrencyMismatch),
                    Some(_) => {}
                }
                if self.st.sellers.len() >= SELLERS_MAX {
                    return Err(RejectKind::TooManySellers);
                }
                let seller = Seller {
                    id: c.seller,
                    account: c.account,
                    currency: c.currency,
                    offer_minor: 0,
                    reserved_minor: 0,
                    sold_minor: 0,
                };
                self.st.sellers.insert(c.seller, seller);
            }
        }
        self.update_seller(c.seller, |s| s.offer_minor = c.offer_minor);
        self.fit_anchors_to_offer(cx, c.seller);
        Ok(())
    }

    /// The user's decision (seed §0): retry (a new window, same session), cancel (session and
    /// order CANCELLED) or close (CLOSED_BY_USER). Cancel is also accepted while the window is
    /// open and for an order the intake has not bound yet or whose session ended.
    fn on_decide(&mut self, cx: &mut Cx<'_, '_>, c: &Decide) -> Result<(), RejectKind> {
        let order = self.st.orders.get(&c.order).ok_or(RejectKind::UnknownOrder)?;
        let (status, session) = (order.status, order.session);
        match (c.decision, status, session) {
            (Decision::Cancel, OrderStatus::Open | OrderStatus::Idle, _) => {
                self.ix.intake.remove(&c.order);
                self.end_order(cx.now, c.order, OrderStatus::Cancelled);
                self.st.counters.cancelled += 1;
                Ok(())
            }
            (_, OrderStatus::Matching, Some(id)) => {
                let done = self.with_session(id, |p, s| p.decide(cx, s, c.decision));
                done.unwrap_or(Err(RejectKind::UnknownSession))
            }
            _ => Err(RejectKind::DecisionNotAllowed),
        }
    }

    fn on_resolve(&mut self, cx: &mut Cx<'_, '_>, c: &Resolve) -> Result<(), RejectKind> {
        self.with_session(c.session, |p, s| p.resolve(cx, s, c.resolution))
            .unwrap_or(Err(RejectKind::UnknownSession))
    }

    // ----- queries -----

    pub fn order(&self, id: OrderId) -> Option<&Order> {
        self.st.orders.get(&id)
    }

    pub fn orders(&self) -> impl Iterator<Item = &Order> {
        self.st.orders.values()
    }

    pub fn session(&self, id: SessionId) -> Option<&Session> {
        self.st.sessions.get(&id).map(|s| &**s)
    }

    pub fn sessions(&self) -> impl Iterator<Item = &Session> {
        self.st.sessions.values().map(|s| &**s)
    }

    /// The session an order is bound to.
    pub fn session_of(&self, order: OrderId) -> Option<&Session> {
        self.st.orders.get(&order)?.session.and_then(|s| self.st.sessions.get(&s)).map(|s| &**s)
    }

    pub fn seller(&self, id: SellerId) -> Option<&Seller> {
        self.st.sellers.get(&id)
    }

    pub fn sellers(&self) -> impl Iterator<Item = &Seller> {
        self.st.sellers.values()
    }

    /// The LP trade handed to execution for an escrow (the `torq_trades` mirror).
    pub fn trade(&self, escrow: EscrowId) -> Option<&TradeRecord> {
        self.st.trades.get(&escrow)
    }

    pub fn trades(&self) -> impl Iterator<Item = &TradeRecord> {
        self.st.trades.values()
    }

    pub fn escalations(&self) -> impl Iterator<Item = &Escalation> {
        self.st.escalations.values()
    }

    pub fn dead_letters(&self) -> impl Iterator<Item = &DeadLetter> {
        self.st.dead_letters.values()
    }

    pub fn errors_recent(&self) -> &[ErrorRecord] {
        &self.st.errors_recent
    }

    pub fn rejections_recent(&self) -> &[Rejection] {
        &self.st.rejections_recent
    }

    pub fn rejected(&self, kind: RejectKind) -> u64 {
        self.st.rejected.get(&kind).copied().unwrap_or(0)
    }

    pub fn counters(&self) -> &Counters {
        &self.st.counters
    }

    /// The settings in force for a partner (its own, or the defaults).
    pub fn settings_of(&self, partner: PartnerId) -> PartnerSettings {
        self.st.settings_of(partner)
    }

    /// Whether the partner has settings of its own.
    pub fn has_own_settings(&self, partner: PartnerId) -> bool {
        self.st.partners.contains_key(&partner)
    }

    pub fn timings(&self) -> &Timings {
        &self.st.timings
    }

    pub fn lp_account(&self, currency: Ccy) -> Option<Account> {
        self.st.lp_accounts.get(&currency).copied()
    }

    pub fn now_us(&self) -> u64 {
        self.st.now_us
    }

    pub fn seq_applied(&self) -> Seq {
        self.st.seq_applied
    }

    /// Orders waiting for the intake.
    pub fn intake_len(&self) -> usize {
        self.ix.intake.len()
    }

    /// Applies one journal entry (what [`Plugin::apply`] does).
    pub fn apply_entry(&mut self, entry: &Entry, step: &mut Step<'_>) {
        // Idempotent by seq: a republished entry changes nothing.
        if entry.seq <= self.st.seq_applied {
            return;
        }
        self.st.seq_applied = entry.seq;
        self.st.now_us = self.st.now_us.max(entry.timestamp_us);
        let mut out = Vec::new();
        {
            let mut cx =
                Cx { seq: entry.seq, now: self.st.now_us, fx: Effects::new(entry.seq, &mut out), step };
            match &entry.payload {
                Payload::Tick => self.on_tick(&mut cx),
                Payload::Plugin(c) if c.plugin == PluginKind::Matching => {
                    match MatchingCommand::decode(c.op, &c.body) {
                        Ok(cmd) => self.on_command(&mut cx, &cmd),
                        Err(_) => self.reject(entry.seq, RejectKind::Malformed),
                    }
                }
                _ => {}
            }
        }
        step.effects().append(&mut out);
    }

    /// Rebuilds the indexes from primary data and compares them with the live ones; checks the
    /// state's invariants (every bundle covers its order exactly, no order matched twice, holds
    /// and reservations agree).
    pub fn check_invariants(&self) -> Result<(), String> {
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

/// The matching plugin's alert kinds: an escalated session, a dead letter.
const ALERT_KINDS: [&str; 2] = ["escalated", "dead_letter"];

impl Plugin for MatchingPlugin {
    const KIND: PluginKind = PluginKind::Matching;
    const ALERT_KINDS: &'static [&'static str] = &ALERT_KINDS;

    fn apply(&mut self, entry: &Entry, step: &mut Step<'_>) {
        self.apply_entry(entry, step);
    }

    fn state_hash(&self) -> u64 {
        checkpoint::hash_state(&self.st)
    }

    fn digest(&self) -> u64 {
        use rtgs_core::hash::{fold, mix64};
        let st = &self.st;
        let c = &st.counters;
        [
            st.now_us,
            st.orders.len() as u64,
            st.sessions.len() as u64,
            st.sellers.len() as u64,
            st.session_id_last,
            st.hold_id_last,
            st.trades.len() as u64,
            st.escalations.len() as u64,
            st.dead_letters.len() as u64,
            st.strays.len() as u64,
            st.abandoned.len() as u64,
            st.early_webhooks.len() as u64,
            st.rejections_recent.len() as u64,
            c.windows_closed,
            c.bundles_committed,
            c.compensated,
            c.lp_calls,
            c.legs_paid,
            c.p2p_renewals,
            c.answers_ignored,
            self.ix.intake.len() as u64,
            self.ix.wakes.len() as u64,
            self.ix.overdue.len() as u64,
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

    /// Derived from state (a failover cannot lose one): every escalation not yet resolved and
    /// every dead letter not yet resolved is an open alert, closed by its resolution. Ids stay
    /// apart by kind (escalation `2n`, dead letter `2n + 1`). O(escalations + dead letters): both
    /// are rare. The `Alert` effect stays a notification to the owner's operators.
    fn alerts_open(&self, out: &mut Vec<rtgs_core::plugin::PluginAlert>) {
        use rtgs_core::plugin::PluginAlert;
        for e in self.st.escalations.values().filter(|e| e.resolved.is_none()) {
            out.push(PluginAlert {
                plugin: Self::KIND,
                id: e.id << 1,
                kind: ALERT_KINDS[0],
                subject: format!("session:{}", e.session.0),
                since_us: e.at_us,
            });
        }
        for d in self.st.dead_letters.values().filter(|d| d.resolved_at_us.is_none()) {
            out.push(PluginAlert {
                plugin: Self::KIND,
                id: (d.id << 1) | 1,
                kind: ALERT_KINDS[1],
                subject: format!("session:{}", d.session.0),
                since_us: d.at_us,
            });
        }
    }

    fn encode(&self, out: &mut Vec<u8>) {
        checkpoint::write_state(&self.st, out);
    }

    fn decode(buf: &[u8]) -> Result<Self, PluginDecodeError> {
        let (st, ix) = checkpoint::read_state(buf).map_err(|_| PluginDecodeError)?;
        Ok(MatchingPlugin { st, ix })
    }
}
