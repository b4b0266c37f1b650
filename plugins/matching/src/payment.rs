//! After the commit: paid legs, settlement, the order's deadline over committed legs, the user's
//! decisions and operators' resolutions.
//!
//! **Settlement is all legs or none**: once every leg is PAID (P2P legs by the P2P rail's
//! confirmation, the LP leg by the LP's completion webhook) one intent group settles every hold
//! to the order's credit account. The webhook finds its leg through the trade record (the
//! `torq_trades` mirror, seed ☠️ "레그 UPDATE 만으로는 레일이 이어지지 않는다"), and a second
//! webhook for the same escrow changes nothing (seed ☠️: two handlers of one webhook would settle
//! twice).

use rtgs_core::ledger::LedgerIntent;

use crate::command::{Decision, LegPaid, LpTradeCompleted, Resolution};
use crate::limits::EARLY_WEBHOOKS_MAX;
use crate::plugin::{Cx, MatchingPlugin};
use crate::state::*;
use crate::types::*;

impl MatchingPlugin {
    pub(crate) fn on_leg_paid(&mut self, cx: &mut Cx<'_, '_>, c: &LegPaid) -> Result<(), RejectKind> {
        self.with_session(c.session, |p, s| {
            let paying = matches!(s.status, SessionStatus::PaymentInProgress | SessionStatus::Escalated);
            let b = s.bundle.as_mut().filter(|b| b.number == c.bundle).ok_or(RejectKind::UnknownLeg)?;
            let leg = b.legs.get_mut(usize::from(c.leg)).ok_or(RejectKind::UnknownLeg)?;
            match (leg.kind, leg.status) {
                (LegKind::P2p, LegStatus::Created) if paying => leg.status = LegStatus::Paid,
                // The same confirmation again (a re-executed hand-off, a resent notice).
                (LegKind::P2p, LegStatus::Paid | LegStatus::Settled) => {
                    p.st.counters.webhooks_duplicate += 1;
                    return Ok(());
                }
                _ => return Err(RejectKind::UnknownLeg),
            }
            p.st.counters.legs_paid += 1;
            p.settle_if_paid(cx, s);
            Ok(())
        })
        .unwrap_or(Err(RejectKind::UnknownSession))
    }

    pub(crate) fn on_trade_completed(&mut self, cx: &mut Cx<'_, '_>, c: &LpTradeCompleted) {
        match self.st.trades.get(&c.escrow) {
            Some(t) if t.completed => self.st.counters.webhooks_duplicate += 1,
            Some(t) => {
                let session = t.session;
                self.with_session(session, |p, s| p.lp_leg_completed(cx, s, c.escrow, c.trade));
            }
            None => {
                // Before the confirmation's answer (after a failover): kept until it records the
                // escrow. Beyond the bound the oldest is dropped — the LP's expiry backstop
                // (a trade lookup) is then what finds it.
                if self.st.early_webhooks.len() >= EARLY_WEBHOOKS_MAX {
                    self.st.early_webhooks.pop_first();
                }
                self.st.early_webhooks.insert(c.escrow, c.trade);
                self.st.counters.webhooks_early += 1;
            }
        }
    }

    /// The LP leg with this escrow is paid.
    pub(crate) fn lp_leg_completed(
        &mut self,
        cx: &mut Cx<'_, '_>,
        s: &mut Session,
        escrow: EscrowId,
        _trade: TradeId,
    ) {
        if let Some(t) = self.st.trades.get_mut(&escrow) {
            t.completed = true;
        }
        let leg = s.bundle.as_mut().and_then(|b| b.legs.iter_mut().find(|l| l.escrow == Some(escrow)));
        if let Some(leg) = leg.filter(|l| l.status == LegStatus::Created) {
            leg.status = LegStatus::Paid;
            self.st.counters.legs_paid += 1;
            self.settle_if_paid(cx, s);
        }
    }

    fn settle_if_paid(&mut self, cx: &mut Cx<'_, '_>, s: &mut Session) {
        let all_paid = s.bundle.as_ref().is_some_and(|b| b.legs.iter().all(|l| l.status == LegStatus::Paid));
        // An escalated session waits for its operator even when everything is paid.
        if all_paid && s.status == SessionStatus::PaymentInProgress {
            self.settle(cx, s);
        }
    }

    /// Every live leg's hold goes to the order's credit account, in one group.
    fn settle(&mut self, cx: &mut Cx<'_, '_>, s: &mut Session) -> bool {
        let Some(credit) = self.st.orders.get(&s.order).map(|o| o.credit_account) else { return false };
        let Some(b) = s.bundle.as_mut() else { return false };
        let live = |l: &Leg| matches!(l.status, LegStatus::Created | LegStatus::Paid);
        let intents: Vec<LedgerIntent> = b
            .legs
            .iter()
            .filter(|l| live(l))
            .map(|l| LedgerIntent::Settle { id: l.hold_id, to: credit.0 })
            .collect();
        if let Err(e) = cx.step.apply_intents(&intents) {
            self.error(cx.seq, s.id, ErrorKind::SettleRefused, None, None, e.reason as u16);
            // An operator's own settle that fails leaves the case as it was.
            if s.status == SessionStatus::PaymentInProgress {
                self.escalate(cx, s, EscalationReason::SettleRefused, None, None);
            }
            return false;
        }
        let mut sold: Vec<(SellerId, u64)> = Vec::new();
        for l in b.legs.iter_mut().filter(|l| live(l)) {
            l.status = LegStatus::Settled;
            if let Some(seller) = l.seller {
                sold.push((seller, l.amount_minor));
            }
        }
        for (seller, amount) in sold {
            self.update_seller(seller, |x| {
                x.reserved_minor -= amount;
                x.offer_minor = x.offer_minor.saturating_sub(amount);
                x.sold_minor += amount;
            });
        }
        self.end_session(cx.now, s, SessionStatus::Completed);
        self.end_order(cx.now, s.order, OrderStatus::Completed);
        self.st.counters.completed += 1;
        true
    }

    /// Every live leg's hold goes back to its account, in one group; the legs end `status`.
    fn release_legs(&mut self, cx: &mut Cx<'_, '_>, s: &mut Session, status: LegStatus) -> bool {
        let Some(b) = s.bundle.as_mut() else { return true };
        let live = |l: &Leg| matches!(l.status, LegStatus::Created | LegStatus::Paid);
        let intents: Vec<LedgerIntent> =
            b.legs.iter().filter(|l| live(l)).map(|l| LedgerIntent::Release { id: l.hold_id }).collect();
        if let Err(e) = cx.step.apply_intents(&intents) {
            self.error(cx.seq, s.id, ErrorKind::HoldMissing, None, None, e.reason as u16);
            return false;
        }
        let mut freed: Vec<(SellerId, u64)> = Vec::new();
        for l in b.legs.iter_mut().filter(|l| live(l)) {
            l.status = status;
            if let Some(seller) = l.seller {
                freed.push((seller, l.amount_minor));
            }
        }
        for (seller, amount) in freed {
            self.update_seller(seller, |x| x.reserved_minor -= amount);
        }
        true
    }

    /// The order's deadline over a bundle handed to execution: legs all CREATED and no escrow ⇒
    /// released, session and order EXPIRED; anything irreversible ⇒ an operator.
    pub(crate) fn payment_deadline(&mut self, cx: &mut Cx<'_, '_>, s: &mut Session) {
        if s.bundle.as_ref().is_some_and(|b| b.is_irreversible()) {
            self.escalate(cx, s, EscalationReason::DeadlinePassed, None, None);
            return;
        }
        if self.release_legs(cx, s, LegStatus::Expired) {
            self.end_session(cx.now, s, SessionStatus::Expired);
            self.end_order(cx.now, s.order, OrderStatus::Expired);
            self.st.counters.expired += 1;
        }
    }

    /// The user's decision on the order's session (see `on_decide`).
    pub(crate) fn decide(
        &mut self,
        cx: &mut Cx<'_, '_>,
        s: &mut Session,
        d: Decision,
    ) -> Result<(), RejectKind> {
        match (d, s.status) {
            (Decision::Retry, SessionStatus::AwaitingUserDecision) => {
                self.open_window(cx.now, s);
                self.st.counters.retries_by_user += 1;
            }
            (Decision::Close, SessionStatus::AwaitingUserDecision) => {
                self.end_session(cx.now, s, SessionStatus::ClosedByUser);
                self.set_order_status(s.order, OrderStatus::Idle);
                self.st.counters.closed_by_user += 1;
            }
            (Decision::Cancel, SessionStatus::Matching | SessionStatus::AwaitingUserDecision) => {
                self.return_reservations(cx, s);
                self.end_session(cx.now, s, SessionStatus::Cancelled);
                self.end_order(cx.now, s.order, OrderStatus::Cancelled);
                self.st.counters.cancelled += 1;
            }
            _ => return Err(RejectKind::DecisionNotAllowed),
        }
        s.last_decision = Some(d);
        Ok(())
    }

    /// An operator's decision on an escalated or dead-lettered session (or on the open case of
    /// a session that ended LP_ALREADY_COMMITTED).
    pub(crate) fn resolve(
        &mut self,
        cx: &mut Cx<'_, '_>,
        s: &mut Session,
        r: Resolution,
    ) -> Result<(), RejectKind> {
        let stuck = matches!(s.status, SessionStatus::Escalated | SessionStatus::DeadLetter);
        match r {
            Resolution::Release if stuck => {
                if !self.release_legs(cx, s, LegStatus::Cancelled) {
                    return Err(RejectKind::ResolutionNotAllowed);
                }
                if let Some(h) = s.lp.held.take() {
                    self.release_stray(cx, s.id, h.reservation, s.lp.attempt);
                }
                self.end_session(cx.now, s, SessionStatus::ResolvedByOperator);
                let expired = self.st.orders.get(&s.order).is_some_and(|o| o.expires_at_us <= cx.now);
                if expired {
                    self.end_order(cx.now, s.order, OrderStatus::Expired);
                    self.st.counters.expired += 1;
                } else {
                    self.set_order_status(s.order, OrderStatus::Idle);
                }
            }
            Resolution::Settle if stuck => {
                if !self.settle(cx, s) {
                    return Err(RejectKind::ResolutionNotAllowed);
                }
            }
            Resolution::Retry if s.status == SessionStatus::DeadLetter && self.compensation_failed(s.id) => {
                for d in self
                    .st
                    .dead_letters
                    .values_mut()
                    .filter(|d| d.session == s.id && d.resolved_at_us.is_none())
                {
                    d.retries += 1;
                }
                s.status = SessionStatus::Compensating;
                self.compensate(cx, s);
                return Ok(());
            }
            Resolution::Release if !stuck => {
                // A case without a stuck session (LP_ALREADY_COMMITTED, an orphan escrow): the
                // operator dealt with the escrow at the LP; nothing of ours moves.
                return if self.close_cases(cx.now, s.id, r) > 0 {
                    Ok(())
                } else {
                    Err(RejectKind::ResolutionNotAllowed)
                };
            }
            _ => return Err(RejectKind::ResolutionNotAllowed),
        }
        self.close_cases(cx.now, s.id, r);
        Ok(())
    }

    fn compensation_failed(&self, session: SessionId) -> bool {
        self.st.dead_letters.values().any(|d| {
            d.session == session && d.resolved_at_us.is_none() && d.kind == DeadLetterKind::CompensationFailed
        })
    }
}
