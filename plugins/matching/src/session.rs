//! A session's bookkeeping: taking it out of the map and putting it back re-indexed, its timer,
//! windows opened and closed, reservations returned, orders ended, sellers' free amounts.
//!
//! **One timer per session** (`wake_at_us`, derived by [`next_wake`] after every change): the
//! next routing pass or retry, the renewal of an anchor at half its lease, the lapse of the LP's
//! lease, an LP answer overdue. The overdue sweep has its own index (`Index::overdue`), which
//! holds only sessions whose window is open or that await a decision.

use rtgs_core::ledger::LedgerIntent;

use crate::effect::{DecisionNeeded, MatchingEffect};
use crate::plugin::{Cx, MatchingPlugin};
use crate::settings::Timings;
use crate::state::*;
use crate::types::*;

/// When a session must be looked at next (see the module docs).
pub(crate) fn next_wake(s: &Session, t: &Timings) -> Option<u64> {
    let timeout = s.lp.awaiting.map(|a| a.sent_at_us.saturating_add(t.lp_answer_timeout_us));
    let times: [Option<u64>; 3] = match s.status {
        SessionStatus::Matching => {
            let renew = s.p2p.iter().map(|r| renew_at(r.expires_at_us, t.p2p_lease_us)).min();
            [s.retry_at_us, renew, timeout]
        }
        SessionStatus::Committed | SessionStatus::Compensating => {
            [s.retry_at_us, s.lp.held.map(|h| h.expires_at_us), timeout]
        }
        SessionStatus::AwaitingUserDecision
        | SessionStatus::PaymentInProgress
        | SessionStatus::Escalated
        | SessionStatus::DeadLetter
        | SessionStatus::Completed
        | SessionStatus::Cancelled
        | SessionStatus::ClosedByUser
        | SessionStatus::AutoClosed
        | SessionStatus::LpAlreadyCommitted
        | SessionStatus::Expired
        | SessionStatus::ResolvedByOperator => [None; 3],
    };
    times.into_iter().flatten().min()
}

/// A lease is renewed at half its length: `expires - lease / 2`.
pub(crate) fn renew_at(expires_at_us: u64, lease_us: u64) -> u64 {
    expires_at_us.saturating_sub(lease_us / 2)
}

impl MatchingPlugin {
    /// Runs `f` on a session taken out of the map, then puts it back with its timer, its
    /// overdue entry and its anchors re-indexed.
    pub(crate) fn with_session<R>(
        &mut self,
        id: SessionId,
        f: impl FnOnce(&mut Self, &mut Session) -> R,
    ) -> Option<R> {
        let mut s = self.st.sessions.remove(&id)?;
        if let Some(at) = s.wake_at_us {
            self.ix.wakes.remove(&(at, id));
        }
        if s.status.is_sweepable() {
            self.ix.overdue.remove(&(s.expires_at_us, id));
        }
        for r in &s.p2p {
            self.ix.anchors.remove(&(r.seller, id));
        }
        let result = f(self, &mut s);
        s.wake_at_us = next_wake(&s, &self.st.timings);
        if let Some(at) = s.wake_at_us {
            self.ix.wakes.insert((at, id));
        }
        if s.status.is_sweepable() {
            self.ix.overdue.insert((s.expires_at_us, id));
        }
        for r in &s.p2p {
            self.ix.anchors.insert((r.seller, id));
        }
        self.st.sessions.insert(id, s);
        Some(result)
    }

    /// A new session for an order the intake claimed (in this same step: there is no claim
    /// without a session, so there is nothing for a zombie reaper to revert).
    pub(crate) fn open_session(&mut self, now: u64, order_id: OrderId) {
        let Some(o) = self.st.orders.get_mut(&order_id) else { return };
        self.st.session_id_last += 1;
        let id = SessionId(self.st.session_id_last);
        o.status = OrderStatus::Matching;
        o.session = Some(id);
        let s = Session {
            id,
            order: order_id,
            partner: o.partner,
            currency: o.currency,
            amount_minor: o.amount_minor,
            status: SessionStatus::Matching,
            opened_at_us: now,
            window_opened_at_us: now,
            p2p_phase_ends_at_us: now,
            window_ends_at_us: now,
            expires_at_us: now,
            windows: 0,
            window_closes: 0,
            p2p: Vec::new(),
            lp: LpState::default(),
            bundle: None,
            bundles_committed: 0,
            compensations: 0,
            retry_at_us: None,
            wake_at_us: None,
            last_result: None,
            last_decision: None,
            ended_at_us: None,
        };
        self.st.sessions.insert(id, Box::new(s));
        self.st.counters.sessions += 1;
        self.with_session(id, |p, s| p.open_window(now, s));
    }

    /// A window: the P2P phase (zero for a partner without P2P), then the LP phase. The first
    /// routing pass is now.
    pub(crate) fn open_window(&mut self, now: u64, s: &mut Session) {
        let set = self.st.settings_of(s.partner);
        s.status = SessionStatus::Matching;
        s.window_opened_at_us = now;
        s.p2p_phase_ends_at_us = now + set.effective_p2p_phase_us();
        s.window_ends_at_us = s.p2p_phase_ends_at_us + set.lp_phase_us();
        s.expires_at_us = s.window_ends_at_us;
        s.windows += 1;
        s.retry_at_us = Some(now);
        s.lp.retries = 0;
        self.st.counters.windows_opened += 1;
    }

    /// The overdue sweep closed the window unmatched: every reservation goes back, the session
    /// waits for the user's decision until the grace ends.
    pub(crate) fn close_window(&mut self, cx: &mut Cx<'_, '_>, s: &mut Session) {
        self.return_reservations(cx, s);
        let grace = self.st.settings_of(s.partner).grace_us();
        s.status = SessionStatus::AwaitingUserDecision;
        s.expires_at_us = cx.now.saturating_add(grace);
        s.window_closes += 1;
        s.retry_at_us = None;
        self.st.counters.windows_closed += 1;
        let notice = DecisionNeeded {
            session: s.id,
            order: s.order,
            window: s.windows,
            grace_ends_at_us: s.expires_at_us,
        };
        cx.fx.emit(&MatchingEffect::AwaitingDecision(notice));
    }

    /// Returns the anchors (ledger holds released) and hands a `reserve` in flight over to the
    /// abandoned reserves (asked again until answered, then released: `lp::abandoned_answered`).
    /// An LP reservation held is released at the LP (a stray release, pending until answered).
    pub(crate) fn return_reservations(&mut self, cx: &mut Cx<'_, '_>, s: &mut Session) {
        self.return_anchors(cx, s);
        if let Some(a) = s.lp.awaiting.take().filter(|a| a.call == LpCall::Reserve) {
            let abandoned = AbandonedReserve {
                session: s.id,
                partner: s.partner,
                currency: s.currency,
                amount_minor: s.lp.amount_minor,
                key: a.key,
                effect_id: a.effect_id,
                sent_at_us: a.sent_at_us,
            };
            self.st.abandoned.insert(a.key, abandoned);
        }
        if let Some(h) = s.lp.held.take() {
            self.release_stray(cx, s.id, h.reservation, s.lp.attempt);
        }
    }

    /// Releases every anchor of the session in one intent group.
    pub(crate) fn return_anchors(&mut self, cx: &mut Cx<'_, '_>, s: &mut Session) {
        if s.p2p.is_empty() {
            return;
        }
        let intents: Vec<LedgerIntent> =
            s.p2p.iter().map(|r| LedgerIntent::Release { id: r.hold_id }).collect();
        if let Err(e) = cx.step.apply_intents(&intents) {
            // Only this plugin can release its holds: a missing one is a bug, recorded (the
            // anchors are forgotten either way: the money is wherever the ledger says).
            self.error(cx.seq, s.id, ErrorKind::HoldMissing, None, None, e.reason as u16);
        }
        for r in std::mem::take(&mut s.p2p) {
            self.update_seller(r.seller, |x| x.reserved_minor -= r.amount_minor);
        }
    }

    /// Ends a live order (its deadline leaves the index).
    pub(crate) fn end_order(&mut self, now: u64, id: OrderId, status: OrderStatus) {
        let Some(o) = self.st.orders.get_mut(&id) else { return };
        if !o.status.is_live() {
            return;
        }
        if !o.deadline_handled {
            self.ix.deadlines.remove(&(o.expires_at_us, id));
        }
        self.ix.live_orders -= 1;
        o.status = status;
        o.ended_at_us = Some(now);
    }

    pub(crate) fn set_order_status(&mut self, id: OrderId, status: OrderStatus) {
        if let Some(o) = self.st.orders.get_mut(&id) {
            o.status = status;
        }
    }

    /// Ends a session: terminal status, nothing left in flight.
    pub(crate) fn end_session(&mut self, now: u64, s: &mut Session, status: SessionStatus) {
        debug_assert!(status.kind() == SessionKind::Terminal);
        s.status = status;
        s.retry_at_us = None;
        s.lp.awaiting = None;
        s.ended_at_us = Some(now);
    }

    /// Changes a seller and keeps its entry in the free index right.
    pub(crate) fn update_seller(&mut self, id: SellerId, f: impl FnOnce(&mut Seller)) {
        let Some(s) = self.st.sellers.get_mut(&id) else { return };
        if s.free_minor() > 0 {
            self.ix.free.remove(&(s.currency, s.free_minor(), id));
        }
        f(s);
        if s.free_minor() > 0 {
            self.ix.free.insert((s.currency, s.free_minor(), id));
        }
    }

    /// A seller's offer fell below what it has reserved: anchors go back (oldest sessions
    /// first) until it fits; committed legs stay.
    pub(crate) fn fit_anchors_to_offer(&mut self, cx: &mut Cx<'_, '_>, seller: SellerId) {
        let sessions: Vec<SessionId> = self
            .ix
            .anchors
            .range((seller, SessionId(0))..=(seller, SessionId(u64::MAX)))
            .map(|(_, s)| *s)
            .collect();
        for id in sessions {
            let over = self.st.sellers.get(&seller).is_some_and(|s| s.reserved_minor > s.offer_minor);
            if !over {
                break;
            }
            self.with_session(id, |p, s| p.return_anchor_of(cx, s, seller));
        }
    }

    fn return_anchor_of(&mut self, cx: &mut Cx<'_, '_>, s: &mut Session, seller: SellerId) {
        let Some(i) = s.p2p.iter().position(|r| r.seller == seller) else { return };
        let r = s.p2p.remove(i);
        if let Err(e) = cx.step.apply_intents(&[LedgerIntent::Release { id: r.hold_id }]) {
            self.error(cx.seq, s.id, ErrorKind::HoldMissing, None, None, e.reason as u16);
        }
        self.update_seller(seller, |x| x.reserved_minor -= r.amount_minor);
        // The session plans again at once with what is left.
        s.retry_at_us = Some(cx.now);
    }

    /// An error record (bounded; the counters keep totals).
    pub(crate) fn error(
        &mut self,
        seq: rtgs_core::entry::Seq,
        session: SessionId,
        kind: ErrorKind,
        reservation: Option<ReservationId>,
        escrow: Option<EscrowId>,
        code: u16,
    ) {
        if self.st.errors_recent.len() >= crate::limits::ERRORS_RECENT_MAX {
            self.st.errors_recent.remove(0);
        }
        self.st.errors_recent.push(ErrorRecord { seq, session, kind, reservation, escrow, code });
    }

    pub(crate) fn hold_id_next(&mut self) -> u64 {
        self.st.hold_id_last += 1;
        self.st.hold_id_last
    }
}
