//! What a `Tick` does, in this order: orders whose own deadline passed, the overdue sweep, the
//! intake, the sessions' timers, LP releases owed. Each is bounded per `Tick` (and by the
//! entry's effect budget); what is left waits for the next one, at most a second later.
//!
//! **The overdue sweep** (seed 정정 ④, mission §3.3.1) acts on two kinds of session only: a
//! window open and past its close ⇒ WINDOW_CLOSE (→ AWAITING_USER_DECISION, every reservation
//! returned); awaiting a decision and past the grace ⇒ AUTO_CLOSED. It reads `Index::overdue`,
//! which holds nothing else — a session whose bundle is committed or whose payment is in
//! progress passes its `expires_at` normally and is never there — and a session leaves it with
//! the transition, so each happens once per session (per window). It goes through the journal
//! like everything else: it runs on the `Tick`, in every center, at the same seq.
//!
//! **The intake** claims OPEN orders that no session was ever bound to, and binds each to a new
//! session in the same step. Nothing ever puts an order back: an order bound to a session is
//! never claimed again — a reclaim would be a retry the user did not press, and for a matched
//! order a double match.

use crate::limits::{DEADLINES_PER_TICK_MAX, INTAKE_PER_TICK_MAX, SWEEPS_PER_TICK_MAX, WAKES_PER_TICK_MAX};
use crate::plugin::{Cx, MatchingPlugin};
use crate::state::*;
use crate::types::*;

impl MatchingPlugin {
    pub(crate) fn on_tick(&mut self, cx: &mut Cx<'_, '_>) {
        self.expire_orders(cx);
        self.sweep(cx);
        self.intake(cx);
        self.wake_sessions(cx);
        self.resend_strays(cx);
        self.resend_abandoned(cx);
    }

    fn expire_orders(&mut self, cx: &mut Cx<'_, '_>) {
        for _ in 0..DEADLINES_PER_TICK_MAX {
            if !cx.fx.room_for_session() {
                return;
            }
            let Some(&(at, id)) = self.ix.deadlines.first() else { return };
            if at > cx.now {
                return;
            }
            // Whatever the order's state, its deadline is dealt with now.
            self.ix.deadlines.remove(&(at, id));
            if let Some(o) = self.st.orders.get_mut(&id) {
                o.deadline_handled = true;
            }
            self.order_deadline(cx, id);
        }
    }

    /// The order's own `expires_at` ends it (seed ☠️ "끝난 세션의 주문은 레거시가 닫는다": the
    /// engine neither kills nor revives orders; the order's deadline does). A committed bundle
    /// whose legs are all still CREATED and hold no escrow is released; anything irreversible
    /// goes to an operator.
    fn order_deadline(&mut self, cx: &mut Cx<'_, '_>, id: OrderId) {
        let Some(o) = self.st.orders.get(&id) else { return };
        match (o.status, o.session) {
            (OrderStatus::Open, _) => {
                self.ix.intake.remove(&id);
                self.expire_order(cx.now, id);
            }
            (OrderStatus::Idle, _) => self.expire_order(cx.now, id),
            (OrderStatus::Matching | OrderStatus::Matched, Some(session)) => {
                self.with_session(session, |p, s| p.session_deadline(cx, s));
            }
            _ => {}
        }
    }

    fn expire_order(&mut self, now: u64, id: OrderId) {
        self.end_order(now, id, OrderStatus::Expired);
        self.st.counters.expired += 1;
    }

    fn session_deadline(&mut self, cx: &mut Cx<'_, '_>, s: &mut Session) {
        match s.status {
            SessionStatus::Matching | SessionStatus::AwaitingUserDecision => {
                self.return_reservations(cx, s);
                self.end_session(cx.now, s, SessionStatus::Expired);
                self.expire_order(cx.now, s.order);
            }
            SessionStatus::PaymentInProgress => self.payment_deadline(cx, s),
            SessionStatus::Committed => {
                self.escalate(cx, s, EscalationReason::DeadlinePassed, None, None);
            }
            // The compensation checks the deadline when it is done; an operator has the others.
            SessionStatus::Compensating
            | SessionStatus::Escalated
            | SessionStatus::DeadLetter
            | SessionStatus::Completed
            | SessionStatus::Cancelled
            | SessionStatus::ClosedByUser
            | SessionStatus::AutoClosed
            | SessionStatus::LpAlreadyCommitted
            | SessionStatus::Expired
            | SessionStatus::ResolvedByOperator => {}
        }
    }

    fn sweep(&mut self, cx: &mut Cx<'_, '_>) {
        for _ in 0..SWEEPS_PER_TICK_MAX {
            if !cx.fx.room_for_session() {
                return;
            }
            let Some(&(at, id)) = self.ix.overdue.first() else { return };
            if at > cx.now {
                return;
            }
            self.with_session(id, |p, s| match s.status {
                SessionStatus::Matching => p.close_window(cx, s),
                SessionStatus::AwaitingUserDecision => p.auto_close(cx.now, s),
                // Not sweepable: `with_session` never leaves one in the index.
                _ => unreachable!("a {} session in the overdue index", s.status.name()),
            });
        }
    }

    /// No decision within the grace: AUTO_CLOSED — its own state and counter, never
    /// CLOSED_BY_USER. The order lives on (IDLE) until it expires or the user cancels it.
    fn auto_close(&mut self, now: u64, s: &mut Session) {
        self.end_session(now, s, SessionStatus::AutoClosed);
        self.set_order_status(s.order, OrderStatus::Idle);
        self.st.counters.auto_closed += 1;
    }

    fn intake(&mut self, cx: &mut Cx<'_, '_>) {
        for _ in 0..INTAKE_PER_TICK_MAX {
            if !cx.fx.room_for_session() {
                return;
            }
            let Some(id) = self.ix.intake.pop_first() else { return };
            self.open_session(cx.now, id);
        }
    }

    fn wake_sessions(&mut self, cx: &mut Cx<'_, '_>) {
        for _ in 0..WAKES_PER_TICK_MAX {
            if !cx.fx.room_for_session() {
                return;
            }
            let Some(&(at, id)) = self.ix.wakes.first() else { return };
            if at > cx.now {
                return;
            }
            self.ix.wakes.remove(&(at, id));
            self.with_session(id, |p, s| p.on_wake(cx, s));
        }
    }

    /// A session's timer fired: leases first (lapsed ones revert, due ones renew), then an LP
    /// answer overdue is asked again (same key), then the retry or routing pass that is due.
    fn on_wake(&mut self, cx: &mut Cx<'_, '_>, s: &mut Session) {
        match s.status {
            SessionStatus::Matching => {
                self.tend_anchors(cx, s);
                if self.resend_if_overdue(cx, s) {
                    return;
                }
                if s.retry_at_us.is_some_and(|at| at <= cx.now) {
                    self.route(cx, s);
                }
            }
            SessionStatus::Committed | SessionStatus::Compensating => {
                if self.lp_lapsed(cx, s) || self.resend_if_overdue(cx, s) {
                    return;
                }
                if s.lp.awaiting.is_none() && s.retry_at_us.is_some_and(|at| at <= cx.now) {
                    s.retry_at_us = None;
                    self.lp_retry(cx, s);
                }
            }
            _ => {}
        }
    }
}
