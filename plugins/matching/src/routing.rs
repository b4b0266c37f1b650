//! The routing pass of a session whose window is open, and the bundle commit.
//!
//! **Phases by time only.** While `now < p2p_phase_ends_at` the session tries P2P sellers and
//! never calls the LP (`MatchingRoutingWorkHandler.route()`'s gate). There is no early exit
//! (seed ☠️ "P2P 구간에는 조기 탈출이 없다"): an order with no P2P inventory at all still fills
//! its P2P phase; a partner that does not want to wait turns P2P off and gets the LP phase only.
//! A full P2P cover found in either phase commits at once (matching, not exiting).
//!
//! **Anchors.** When sellers can cover part of the order, the session reserves it (up to two
//! sellers, the largest free first): ledger holds with a lease, renewed at half of it while the
//! window is open, so that the LP phase can complete the bundle. An anchor that lapses (a
//! restart or an outage longer than the lease) reverts: its hold is released.
//!
//! **The commit** makes the legs of a bundle — at most 3 (LP, P2P#1, P2P#2), covering the order
//! exactly, no partial remainder — in one seq, with the holds they need in one intent group:
//! all legs or none. It refuses an order that already has live legs (no double match), and every
//! leg inherits the order's one deadline.

use rtgs_core::ledger::{IntentRejected, LedgerIntent};

use crate::effect::{HandOff, HandOffLeg, MatchingEffect};
use crate::limits::P2P_LEGS_MAX;
use crate::plugin::{Cx, MatchingPlugin};
use crate::session::renew_at;
use crate::state::*;
use crate::types::*;

/// Sellers taken for a P2P cover, with the amount each gives.
type Takes = Vec<(SellerId, Account, u64)>;

impl MatchingPlugin {
    /// Anchors past their lease revert; anchors at half their lease are renewed.
    pub(crate) fn tend_anchors(&mut self, cx: &mut Cx<'_, '_>, s: &mut Session) {
        let lease = self.st.timings.p2p_lease_us;
        let lapsed: Vec<P2pReservation> =
            s.p2p.iter().filter(|r| r.expires_at_us <= cx.now).copied().collect();
        if !lapsed.is_empty() {
            s.p2p.retain(|r| r.expires_at_us > cx.now);
            let intents: Vec<LedgerIntent> =
                lapsed.iter().map(|r| LedgerIntent::Release { id: r.hold_id }).collect();
            if let Err(e) = cx.step.apply_intents(&intents) {
                self.error(cx.seq, s.id, ErrorKind::HoldMissing, None, None, e.reason as u16);
            }
            for r in &lapsed {
                self.update_seller(r.seller, |x| x.reserved_minor -= r.amount_minor);
                self.st.counters.p2p_leases_lapsed += 1;
            }
            s.retry_at_us = Some(cx.now);
        }
        for r in &mut s.p2p {
            if renew_at(r.expires_at_us, lease) <= cx.now {
                r.expires_at_us = cx.now + lease;
                self.st.counters.p2p_renewals += 1;
            }
        }
    }

    /// One routing pass (see the module docs).
    pub(crate) fn route(&mut self, cx: &mut Cx<'_, '_>, s: &mut Session) {
        s.retry_at_us = None;
        if cx.now >= s.window_ends_at_us || s.lp.awaiting.is_some() || s.lp.held.is_some() {
            // The sweep closes the window; an LP answer is awaited.
            return;
        }
        let settings = self.st.settings_of(s.partner);
        if settings.use_p2p && self.try_full_p2p(cx, s) {
            return;
        }
        if cx.now < s.p2p_phase_ends_at_us {
            if settings.use_p2p {
                self.take_anchor(cx, s);
            }
            let next = (cx.now + self.st.timings.route_interval_us).min(s.p2p_phase_ends_at_us);
            s.retry_at_us = Some(self.hold_safe(cx.now, s, next));
            return;
        }
        // The LP phase: the gate is open.
        let remaining = s.amount_minor - s.p2p_reserved_minor();
        if !self.st.lp_accounts.contains_key(&s.currency) {
            // No LP for this currency: keep trying P2P until the window closes.
            s.retry_at_us = Some(self.hold_safe(cx.now, s, cx.now + self.st.timings.route_interval_us));
            return;
        }
        self.send_reserve(cx, s, remaining);
    }

    /// Caps a retry time at half of the remaining lease of every anchor the session holds
    /// (`holdSafe`): a backoff longer than the lease would let the anchor die.
    pub(crate) fn hold_safe(&self, now: u64, s: &Session, at: u64) -> u64 {
        let lease = self.st.timings.p2p_lease_us;
        let anchors = s.p2p.iter().map(|r| renew_at(r.expires_at_us, lease).max(now));
        let lp = s.lp.held.map(|h| now + h.expires_at_us.saturating_sub(now) / 2);
        anchors.chain(lp).fold(at, u64::min).max(now)
    }

    /// Covers what the anchors leave with one or two more sellers, if the book allows; holds
    /// and commits in this step. `true` if committed.
    fn try_full_p2p(&mut self, cx: &mut Cx<'_, '_>, s: &mut Session) -> bool {
        // A seller whose funds turned out lower than its offer is cut and the search runs again.
        for _ in 0..4 {
            let remaining = s.amount_minor - s.p2p_reserved_minor();
            let Some(takes) = self.plan_cover(cx, s, remaining) else { return false };
            match self.hold_takes(cx, s, &takes) {
                Ok(new) => {
                    s.p2p.extend(new);
                    self.commit(cx, s, None);
                    return true;
                }
                Err(refused) => self.cut_seller(cx, s.id, refused),
            }
        }
        false
    }

    /// Reserves the largest free seller as an anchor (while there is room for one).
    fn take_anchor(&mut self, cx: &mut Cx<'_, '_>, s: &mut Session) {
        for _ in 0..4 {
            if s.p2p.len() >= P2P_LEGS_MAX {
                return;
            }
            let remaining = s.amount_minor - s.p2p_reserved_minor();
            let Some((seller, account, free)) = self.largest_free(cx, s, u64::MAX) else { return };
            let take = vec![(seller, account, free.min(remaining))];
            match self.hold_takes(cx, s, &take) {
                Ok(new) => {
                    s.p2p.extend(new);
                    return;
                }
                Err(refused) => self.cut_seller(cx, s.id, refused),
            }
        }
    }

    /// One seller with `remaining` free, else (with two slots) the largest plus one that covers
    /// the rest. Sellers already anchoring this session are not taken twice.
    fn plan_cover(&mut self, cx: &mut Cx<'_, '_>, s: &Session, remaining: u64) -> Option<Takes> {
        let slots = P2P_LEGS_MAX - s.p2p.len();
        if slots == 0 || remaining == 0 {
            return None;
        }
        if let Some((seller, account, _)) = self.smallest_covering(cx, s, remaining, None) {
            return Some(vec![(seller, account, remaining)]);
        }
        if slots < 2 {
            return None;
        }
        let (big, big_account, big_free) = self.largest_free(cx, s, remaining)?;
        let rest = remaining - big_free;
        let (other, other_account, _) = self.smallest_covering(cx, s, rest, Some(big))?;
        Some(vec![(big, big_account, big_free), (other, other_account, rest)])
    }

    /// The seller with the least free amount that is at least `amount` (ties: lowest id).
    fn smallest_covering(
        &mut self,
        cx: &mut Cx<'_, '_>,
        s: &Session,
        amount: u64,
        except: Option<SellerId>,
    ) -> Option<(SellerId, Account, u64)> {
        let lo = (s.currency, amount, SellerId(0));
        let hi = (s.currency, u64::MAX, SellerId(u64::MAX));
        let found: Vec<(u64, SellerId)> = self
            .ix
            .free
            .range(lo..=hi)
            .filter(|(_, _, id)| Some(*id) != except && !s.p2p.iter().any(|r| r.seller == *id))
            .take(8)
            .map(|(_, free, id)| (*free, *id))
            .collect();
        found.into_iter().find_map(|(free, id)| self.usable(cx, id, free).filter(|x| x.2 >= amount))
    }

    /// The seller with the most free amount below `below` (ties: highest id).
    fn largest_free(
        &mut self,
        cx: &mut Cx<'_, '_>,
        s: &Session,
        below: u64,
    ) -> Option<(SellerId, Account, u64)> {
        let lo = (s.currency, 1, SellerId(0));
        let hi = (s.currency, below.saturating_sub(1), SellerId(u64::MAX));
        if lo > hi {
            return None;
        }
        let found: Vec<(u64, SellerId)> = self
            .ix
            .free
            .range(lo..=hi)
            .rev()
            .filter(|(_, _, id)| !s.p2p.iter().any(|r| r.seller == *id))
            .take(8)
            .map(|(_, free, id)| (*free, *id))
            .collect();
        found.into_iter().find_map(|(free, id)| self.usable(cx, id, free))
    }

    /// A seller's free amount as the ledger can hold it: an offer above the account's available
    /// balance is cut to it here (the seller's funds are the truth), and the seller skipped if
    /// nothing is left.
    fn usable(&mut self, cx: &mut Cx<'_, '_>, id: SellerId, free: u64) -> Option<(SellerId, Account, u64)> {
        let seller = *self.st.sellers.get(&id)?;
        let available = cx.step.available_minor(seller.account.0).unwrap_or(0);
        if available >= free {
            return Some((id, seller.account, free));
        }
        self.update_seller(id, |x| x.offer_minor = x.reserved_minor + available);
        (available > 0).then_some((id, seller.account, available))
    }

    /// Holds the takes in one intent group (all or none), as anchors with a fresh lease.
    fn hold_takes(
        &mut self,
        cx: &mut Cx<'_, '_>,
        s: &Session,
        takes: &Takes,
    ) -> Result<Vec<P2pReservation>, SellerId> {
        let lease = self.st.timings.p2p_lease_us;
        let new: Vec<P2pReservation> = takes
            .iter()
            .map(|&(seller, account, amount_minor)| P2pReservation {
                hold_id: self.hold_id_next(),
                seller,
                account,
                amount_minor,
                expires_at_us: cx.now + lease,
            })
            .collect();
        let intents: Vec<LedgerIntent> = new
            .iter()
            .map(|r| LedgerIntent::Hold { id: r.hold_id, account: r.account.0, amount_minor: r.amount_minor })
            .collect();
        match cx.step.apply_intents(&intents) {
            Ok(()) => {
                for r in &new {
                    self.update_seller(r.seller, |x| x.reserved_minor += r.amount_minor);
                }
                Ok(new)
            }
            Err(IntentRejected { index, reason }) => {
                let seller = new.get(index).map_or(SellerId(0), |r| r.seller);
                self.error(cx.seq, s.id, ErrorKind::SellerHoldRefused, None, None, reason as u16);
                self.st.counters.holds_refused += 1;
                Err(seller)
            }
        }
    }

    /// The ledger refused a seller's hold: its offer is cut to what it has reserved.
    fn cut_seller(&mut self, _cx: &mut Cx<'_, '_>, _session: SessionId, seller: SellerId) {
        self.update_seller(seller, |x| x.offer_minor = x.reserved_minor);
    }

    /// Commits the bundle: the anchors become P2P legs, plus the LP leg (its hold on the LP's
    /// account applied here, in the same group), in this one seq. `lp`: the LP's reservation.
    /// Returns false if the commit was refused (nothing changed then but the refusal's record).
    pub(crate) fn commit(&mut self, cx: &mut Cx<'_, '_>, s: &mut Session, lp: Option<LpHold>) -> bool {
        if self.order_has_live_legs(s) {
            // `P2P_DEPOSIT_ORDER_ALREADY_HAS_LEGS`: never twice the order's amount.
            self.st.counters.commits_refused_live_legs += 1;
            return false;
        }
        let Some(order) = self.st.orders.get(&s.order) else { return false };
        let (deadline, credit) = (order.expires_at_us, order.credit_account);
        let mut legs: Vec<Leg> = s
            .p2p
            .iter()
            .map(|r| Leg {
                kind: LegKind::P2p,
                hold_id: r.hold_id,
                account: r.account,
                seller: Some(r.seller),
                amount_minor: r.amount_minor,
                deadline_us: deadline,
                status: LegStatus::Created,
                reservation: None,
                escrow: None,
                trade: None,
            })
            .collect();
        if let Some(h) = lp {
            let Some(&lp_account) = self.st.lp_accounts.get(&s.currency) else { return false };
            let hold_id = self.hold_id_next();
            let intent =
                LedgerIntent::Hold { id: hold_id, account: lp_account.0, amount_minor: h.amount_minor };
            if let Err(e) = cx.step.apply_intents(&[intent]) {
                self.error(
                    cx.seq,
                    s.id,
                    ErrorKind::LpHoldRefused,
                    Some(h.reservation),
                    None,
                    e.reason as u16,
                );
                self.st.counters.holds_refused += 1;
                return false;
            }
            legs.insert(
                0,
                Leg {
                    kind: LegKind::Lp,
                    hold_id,
                    account: lp_account,
                    seller: None,
                    amount_minor: h.amount_minor,
                    deadline_us: deadline,
                    status: LegStatus::Created,
                    reservation: Some(h.reservation),
                    escrow: None,
                    trade: None,
                },
            );
        }
        let covered: u64 = legs.iter().map(|l| l.amount_minor).sum();
        // The plan is built to cover exactly; anything else is a bug (checked again on decode).
        assert_eq!(covered, s.amount_minor, "a bundle must cover its order exactly");
        let _ = credit;
        s.p2p.clear();
        s.bundles_committed += 1;
        s.bundle =
            Some(Bundle { number: s.bundles_committed, committed_at_us: cx.now, legs, handoff_effect: None });
        s.retry_at_us = None;
        s.lp.retries = 0;
        self.set_order_status(s.order, OrderStatus::Matched);
        self.st.counters.bundles_committed += 1;
        match lp {
            Some(h) => {
                s.lp.held = Some(h);
                s.status = SessionStatus::Committed;
                self.send_confirm(cx, s);
            }
            None => self.hand_off(cx, s),
        }
        true
    }

    /// Whether the order already has a leg that is not cancelled or expired.
    pub(crate) fn order_has_live_legs(&self, s: &Session) -> bool {
        let live =
            |b: &Bundle| b.legs.iter().any(|l| matches!(l.status, LegStatus::Created | LegStatus::Paid));
        let order = self.st.orders.get(&s.order);
        let bound = order.and_then(|o| o.session).filter(|id| *id != s.id);
        s.bundle.as_ref().is_some_and(live)
            || bound
                .and_then(|id| self.st.sessions.get(&id))
                .and_then(|o| o.bundle.as_ref())
                .is_some_and(live)
            || order.is_some_and(|o| o.status == OrderStatus::Matched)
    }

    /// The legs go to execution: PAYMENT_IN_PROGRESS, the hand-off pending while a P2P leg is
    /// unpaid.
    pub(crate) fn hand_off(&mut self, cx: &mut Cx<'_, '_>, s: &mut Session) {
        s.status = SessionStatus::PaymentInProgress;
        s.retry_at_us = None;
        let Some(b) = s.bundle.as_mut() else { return };
        let effect = MatchingEffect::HandOff(handoff_of(s.id, s.order, b));
        b.handoff_effect = Some(cx.fx.emit(&effect));
    }
}

/// The hand-off of a bundle, rebuilt the same from the state (pending effects).
pub(crate) fn handoff_of(session: SessionId, order: OrderId, b: &Bundle) -> HandOff {
    HandOff {
        session,
        order,
        bundle: b.number,
        legs: b
            .legs
            .iter()
            .enumerate()
            .map(|(i, l)| HandOffLeg {
                index: i as u8,
                kind: l.kind,
                seller: l.seller,
                escrow: l.escrow,
                amount_minor: l.amount_minor,
                deadline_us: l.deadline_us,
            })
            .collect(),
    }
}
