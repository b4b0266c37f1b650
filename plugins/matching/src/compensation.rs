//! Compensation after a commit the LP rejects, escalations and dead letters.
//!
//! **Provider first, core after** (seed ☠️ "보상의 순서", 2026-09-11). The criterion is not which
//! side hurts less but which intermediate state the next pass can take over:
//!
//! ```text
//! core first:     core ok → provider fails  ⇒ the retry starts from confirm again, the commit is
//!                                             refused (reservation RELEASED) and the provider's
//!                                             release is never reached again
//! provider first: provider ok → core fails  ⇒ the retry releases at the provider again
//!                                             (idempotent, same key) and tries the core again
//! ```
//!
//! So the session goes COMPENSATING and sends `release` for the LP reservation; only its answer
//! (RELEASED, or 330: already gone) lets the core side run — legs CANCELLED, seller funds
//! released, order back to MATCHING — in one intent group. A failed core side is
//! COMPENSATION_FAILED: a dead letter, stopped, retried by an operator through the same path.
//!
//! **Re-planning after a backoff** (seed ☠️ "보상이 성공해도 세션은 스스로 다시 계획하지
//! 못했다"): a compensated session is a retry, not a completion — it goes back to MATCHING with
//! its next routing pass after the LP backoff, not at once (that would hammer the fund path with
//! commit/compensate pairs until the window closes) and not never (the legacy left it with no
//! queue row, window open, until the sweep).
//!
//! **Irreversible states are never compensated automatically**: a leg past CREATED or a live
//! escrow ⇒ ESCALATED, an operator decides. Compensations and escalations are journal entries'
//! effects like everything else: events, never deletions — the cancelled legs stay recorded.

use rtgs_core::ledger::LedgerIntent;

use crate::effect::{Alert, AlertKind, MatchingEffect};
use crate::plugin::{Cx, MatchingPlugin};
use crate::state::*;
use crate::types::*;

impl MatchingPlugin {
    /// The LP rejected after the commit (or its lease lapsed): see the module docs.
    pub(crate) fn compensate(&mut self, cx: &mut Cx<'_, '_>, s: &mut Session) {
        if s.bundle.as_ref().is_some_and(|b| b.is_irreversible()) {
            let leg = s.bundle.as_ref().and_then(|b| b.lp_leg());
            let (r, e) = (leg.and_then(|l| l.reservation), leg.and_then(|l| l.escrow));
            self.escalate(cx, s, EscalationReason::IrreversibleOnReject, r, e);
            return;
        }
        s.status = SessionStatus::Compensating;
        s.retry_at_us = None;
        if s.lp.held.is_some() {
            self.lp_retry(cx, s);
        } else {
            self.compensate_core(cx, s);
        }
    }

    /// The core side, once the provider's side is done.
    pub(crate) fn compensate_core(&mut self, cx: &mut Cx<'_, '_>, s: &mut Session) {
        let Some(b) = s.bundle.as_mut() else { return };
        let live: Vec<usize> =
            (0..b.legs.len()).filter(|&i| b.legs[i].status == LegStatus::Created).collect();
        let intents: Vec<LedgerIntent> =
            live.iter().map(|&i| LedgerIntent::Release { id: b.legs[i].hold_id }).collect();
        if let Err(e) = cx.step.apply_intents(&intents) {
            let code = e.reason as u16;
            self.error(cx.seq, s.id, ErrorKind::CompensationFailed, None, None, code);
            self.dead_letter(cx, s, DeadLetterKind::CompensationFailed, code, None, None);
            self.result(s, BundleResult::CompensationFailed);
            return;
        }
        let mut freed: Vec<(SellerId, u64)> = Vec::new();
        for &i in &live {
            let leg = &mut b.legs[i];
            leg.status = LegStatus::Cancelled;
            if let Some(seller) = leg.seller {
                freed.push((seller, leg.amount_minor));
            }
        }
        for (seller, amount) in freed {
            self.update_seller(seller, |x| x.reserved_minor -= amount);
        }
        s.lp.held = None;
        s.compensations += 1;
        self.result(s, BundleResult::Compensated);
        // A dead letter retried by an operator is done now; escalations stay (a live escrow
        // is not this path's to close).
        self.close_dead_letters(cx.now, s.id);
        let deadline = self.st.orders.get(&s.order).map_or(0, |o| o.expires_at_us);
        if cx.now >= deadline {
            self.end_session(cx.now, s, SessionStatus::Expired);
            self.end_order(cx.now, s.order, OrderStatus::Expired);
            self.st.counters.expired += 1;
            return;
        }
        self.set_order_status(s.order, OrderStatus::Matching);
        s.status = SessionStatus::Matching;
        s.expires_at_us = s.window_ends_at_us;
        let backoff = self.st.timings.lp_backoff_us(s.compensations - 1);
        s.retry_at_us = Some(cx.now + backoff);
    }

    /// Hands the session to an operator.
    pub(crate) fn escalate(
        &mut self,
        cx: &mut Cx<'_, '_>,
        s: &mut Session,
        reason: EscalationReason,
        reservation: Option<ReservationId>,
        escrow: Option<EscrowId>,
    ) {
        self.open_case(cx, s, reason, reservation, escrow);
        s.status = SessionStatus::Escalated;
        s.retry_at_us = None;
        s.lp.awaiting = None;
        self.result(s, BundleResult::Escalated);
    }

    /// An escalation record (and an alert), without changing the session's state.
    pub(crate) fn open_case(
        &mut self,
        cx: &mut Cx<'_, '_>,
        s: &Session,
        reason: EscalationReason,
        reservation: Option<ReservationId>,
        escrow: Option<EscrowId>,
    ) -> u64 {
        let id = self.st.escalations.last_key_value().map_or(1, |(k, _)| k + 1);
        let case = Escalation {
            id,
            session: s.id,
            order: s.order,
            reason,
            reservation,
            escrow,
            at_us: cx.now,
            resolved: None,
            resolved_at_us: None,
        };
        self.st.escalations.insert(id, case);
        self.alert(cx, AlertKind::Escalated, s.id, id);
        id
    }

    pub(crate) fn escrow_record_failed(
        &mut self,
        cx: &mut Cx<'_, '_>,
        s: &mut Session,
        recorded: Option<EscrowId>,
        offered: EscrowId,
    ) {
        let r = s.lp.held.map(|h| h.reservation);
        self.error(cx.seq, s.id, ErrorKind::EscrowConflict, r, Some(offered), 0);
        self.dead_letter(cx, s, DeadLetterKind::EscrowRecordFailed, 0, recorded, Some(offered));
        self.result(s, BundleResult::EscrowRecordFailed);
    }

    /// Stops the session in the dead-letter queue until an operator acts.
    fn dead_letter(
        &mut self,
        cx: &mut Cx<'_, '_>,
        s: &mut Session,
        kind: DeadLetterKind,
        reason_code: u16,
        escrow_recorded: Option<EscrowId>,
        escrow_offered: Option<EscrowId>,
    ) {
        let id = self.st.dead_letters.last_key_value().map_or(1, |(k, _)| k + 1);
        let letter = DeadLetter {
            id,
            session: s.id,
            kind,
            reason_code,
            escrow_recorded,
            escrow_offered,
            at_us: cx.now,
            retries: 0,
            resolved_at_us: None,
        };
        self.st.dead_letters.insert(id, letter);
        s.status = SessionStatus::DeadLetter;
        s.retry_at_us = None;
        s.lp.awaiting = None;
        self.alert(cx, AlertKind::DeadLetter, s.id, id);
    }

    pub(crate) fn alert(&mut self, cx: &mut Cx<'_, '_>, kind: AlertKind, session: SessionId, case: u64) {
        cx.fx.emit(&MatchingEffect::Alert(Alert { kind, session, case }));
        self.st.counters.alerts += 1;
    }

    /// Marks the session's open escalations and dead letters resolved; how many there were.
    pub(crate) fn close_cases(
        &mut self,
        now: u64,
        session: SessionId,
        how: crate::command::Resolution,
    ) -> usize {
        let mut closed = 0;
        for c in self.st.escalations.values_mut().filter(|c| c.session == session && c.resolved.is_none()) {
            c.resolved = Some(how);
            c.resolved_at_us = Some(now);
            closed += 1;
        }
        closed + self.close_dead_letters(now, session)
    }

    fn close_dead_letters(&mut self, now: u64, session: SessionId) -> usize {
        let mut closed = 0;
        for d in
            self.st.dead_letters.values_mut().filter(|d| d.session == session && d.resolved_at_us.is_none())
        {
            d.resolved_at_us = Some(now);
            closed += 1;
        }
        closed
    }
}
