//! The LP protocol (`TorqLpReservationClient`: reserve / renew / confirm / release) and its
//! answers.
//!
//! **One call in flight per session**, remembered with its effect id and key (`LpAwait`). An
//! answer is taken if it names the call and key the session waits for; anything else is judged
//! as what it is: a RESERVED nobody waits for is released at the LP (never leaked), a COMMITTED
//! nobody waits for is a live escrow and goes to an operator (never dropped), the rest is
//! counted and ignored. An answer overdue is asked for again with the same key (a lost answer:
//! the LP replays the first one).
//!
//! **Idempotency keys**: body + the session's attempt number (`types::IdempotencyKey`). The
//! attempt rises only when the LP says 330; BUSY, NO_POOL, a transport failure or a lost answer
//! keep it. A renewal's body names the lease it extends, so each renewal is its own request
//! while a retried one is the same.
//!
//! **Confirmation** (Phase 3 of the legacy waterfall, which the engine had lost — seed §4-c ☠️):
//! the escrow id and trade id the LP returns are recorded on the LP leg (same escrow again =
//! success, another = refused: ESCROW_RECORD_FAILED) and, in the same step, the trade record
//! execution finds it by (`TradeRecord`, the `torq_trades` mirror). A rejection compensates.

use crate::command::{LpAnswer, LpAnswered, LP_CODE_COMMITTED, LP_CODE_EXPIRED};
use crate::effect::{self, LpOnReservation, LpReserve, MatchingEffect, ReservationBody, ReserveBody};
use crate::plugin::{Cx, MatchingPlugin};
use crate::state::*;
use crate::types::*;

impl MatchingPlugin {
    /// `reserve` for the remainder the anchors leave.
    pub(crate) fn send_reserve(&mut self, cx: &mut Cx<'_, '_>, s: &mut Session, amount_minor: u64) {
        s.lp.amount_minor = amount_minor;
        let e = reserve_effect(s);
        self.send(cx, s, LpCall::Reserve, e);
    }

    pub(crate) fn send_confirm(&mut self, cx: &mut Cx<'_, '_>, s: &mut Session) {
        if let Some(e) = call_effect(s, LpCall::Confirm) {
            self.send(cx, s, LpCall::Confirm, e);
        }
    }

    fn send(&mut self, cx: &mut Cx<'_, '_>, s: &mut Session, call: LpCall, e: MatchingEffect) {
        let key = effect_key(&e);
        let effect_id = cx.fx.emit(&e);
        s.lp.awaiting = Some(LpAwait { call, effect_id, key, sent_at_us: cx.now });
        s.retry_at_us = None;
        self.st.counters.lp_calls += 1;
    }

    /// The answer to the call in flight is overdue: the same call again, same key.
    pub(crate) fn resend_if_overdue(&mut self, cx: &mut Cx<'_, '_>, s: &mut Session) -> bool {
        let Some(a) = s.lp.awaiting else { return false };
        if a.sent_at_us + self.st.timings.lp_answer_timeout_us > cx.now {
            return true;
        }
        let e = match a.call {
            LpCall::Reserve => Some(reserve_effect(s)),
            call => call_effect(s, call),
        };
        match e {
            Some(e) if effect_key(&e) == a.key => {
                let effect_id = cx.fx.emit(&e);
                s.lp.awaiting = Some(LpAwait { effect_id, sent_at_us: cx.now, ..a });
                self.st.counters.lp_resends += 1;
            }
            // The state moved on from what was asked: nothing to ask again.
            _ => s.lp.awaiting = None,
        }
        true
    }

    /// A retry that was due after BUSY / a transport failure: the renewal if the lease is at
    /// half, else the confirmation (COMMITTED) or the release (COMPENSATING).
    pub(crate) fn lp_retry(&mut self, cx: &mut Cx<'_, '_>, s: &mut Session) {
        let renew_due =
            s.lp.held.is_some_and(|h| crate::session::renew_at(h.expires_at_us, h.lease_us) <= cx.now);
        let call = match s.status {
            SessionStatus::Committed if renew_due => LpCall::Renew,
            SessionStatus::Committed => LpCall::Confirm,
            SessionStatus::Compensating => LpCall::Release,
            _ => return,
        };
        if let Some(e) = call_effect(s, call) {
            self.send(cx, s, call, e);
        }
    }

    /// The LP's lease passed with no renewal: the reservation is gone (a lease that lapses
    /// reverts). Committed: compensate; compensating: the provider side is done.
    pub(crate) fn lp_lapsed(&mut self, cx: &mut Cx<'_, '_>, s: &mut Session) -> bool {
        let Some(h) = s.lp.held else { return false };
        if h.expires_at_us > cx.now || s.lp.awaiting.is_some() {
            return false;
        }
        self.st.counters.lp_leases_lapsed += 1;
        s.lp.held = None;
        match s.status {
            SessionStatus::Committed => self.compensate(cx, s),
            SessionStatus::Compensating => self.compensate_core(cx, s),
            _ => {}
        }
        true
    }

    /// Delay before the next try after BUSY / NO_POOL / a transport failure: the LP backoff,
    /// capped by `holdSafe`.
    fn backoff(&mut self, cx: &Cx<'_, '_>, s: &mut Session) {
        let delay = self.st.timings.lp_backoff_us(s.lp.retries);
        s.lp.retries = s.lp.retries.saturating_add(1);
        s.retry_at_us = Some(self.hold_safe(cx.now, s, cx.now + delay));
    }

    pub(crate) fn on_lp_answered(&mut self, cx: &mut Cx<'_, '_>, a: &LpAnswered) {
        self.count_answer(a.answer);
        if self.stray_answered(cx, a) {
            return;
        }
        let taken = self.with_session(a.session, |p, s| {
            let awaited = s.lp.awaiting.is_some_and(|w| w.call == a.call && w.key == a.key);
            if !awaited {
                return false;
            }
            // A retried window asks with the key an abandoned reserve had: one answer for both.
            p.st.abandoned.remove(&a.key);
            s.lp.awaiting = None;
            match a.call {
                LpCall::Reserve => p.reserve_answered(cx, s, a.answer),
                LpCall::Renew => p.renew_answered(cx, s, a.answer),
                LpCall::Confirm => p.confirm_answered(cx, s, a.answer),
                LpCall::Release => p.release_answered(cx, s, a.answer),
            }
            true
        });
        if taken == Some(true) {
            return;
        }
        if a.call == LpCall::Reserve && self.st.abandoned.contains_key(&a.key) {
            self.abandoned_answered(cx, a);
            return;
        }
        self.unawaited(cx, a);
    }

    /// The answer to a reserve its session stopped waiting for: a reservation goes back, a
    /// commit goes to an operator, "nothing reserved" ends it, "nothing known" asks again.
    fn abandoned_answered(&mut self, cx: &mut Cx<'_, '_>, a: &LpAnswered) {
        match a.answer {
            LpAnswer::Transport => return,
            LpAnswer::Reserved { .. } | LpAnswer::Committed { .. } => self.unawaited(cx, a),
            _ => {}
        }
        self.st.abandoned.remove(&a.key);
    }

    fn count_answer(&mut self, answer: LpAnswer) {
        let c = &mut self.st.counters;
        match answer {
            LpAnswer::Busy => c.lp_busy += 1,
            LpAnswer::NoPool => c.lp_no_pool += 1,
            LpAnswer::Expired => c.lp_expired_330 += 1,
            LpAnswer::Transport => c.lp_transport += 1,
            LpAnswer::Rejected { .. } | LpAnswer::CannotRelease => c.lp_rejected += 1,
            LpAnswer::Reserved { .. }
            | LpAnswer::Renewed { .. }
            | LpAnswer::Committed { .. }
            | LpAnswer::Released => {}
        }
    }

    fn reserve_answered(&mut self, cx: &mut Cx<'_, '_>, s: &mut Session, answer: LpAnswer) {
        match answer {
            LpAnswer::Reserved { reservation, expires_at_us } => {
                s.lp.retries = 0;
                let lease_us = expires_at_us.saturating_sub(cx.now);
                let hold = LpHold { reservation, amount_minor: s.lp.amount_minor, expires_at_us, lease_us };
                self.commit_with_lp(cx, s, hold);
            }
            LpAnswer::Committed { reservation, escrow, .. } => {
                self.lp_already_committed(cx, s, reservation, escrow)
            }
            // That key is dead for ever: the next try is a new key, at once.
            LpAnswer::Expired => {
                s.lp.attempt += 1;
                s.retry_at_us = Some(cx.now);
            }
            // No reservation was made (BUSY, NO_POOL) or nothing is known (transport): the same
            // key stays good — changing it would undo the duplicate protection.
            LpAnswer::Busy | LpAnswer::NoPool | LpAnswer::Transport | LpAnswer::Rejected { .. } => {
                self.backoff(cx, s)
            }
            LpAnswer::Renewed { .. } | LpAnswer::Released | LpAnswer::CannotRelease => {
                self.st.counters.answers_ignored += 1;
                s.retry_at_us = Some(cx.now);
            }
        }
    }

    /// RESERVED: the bundle commits in this seq (the LP leg's hold with it), then `confirm`. The
    /// remainder must still be what the reservation covers; if the anchors changed meanwhile, or
    /// the commit is refused, the reservation goes back to the LP and the session plans again.
    fn commit_with_lp(&mut self, cx: &mut Cx<'_, '_>, s: &mut Session, hold: LpHold) {
        let fits = s.status == SessionStatus::Matching
            && cx.now < s.window_ends_at_us
            && s.p2p_reserved_minor() + hold.amount_minor == s.amount_minor;
        if !(fits && self.commit(cx, s, Some(hold))) {
            self.release_stray(cx, s.id, hold.reservation, s.lp.attempt);
            self.backoff(cx, s);
        }
    }

    /// ☠️ Seed §4-c: `reserve` answering COMMITTED means a confirmation whose answer was lost;
    /// that escrow cannot be released (336, trade-cancel API only). Never dropped silently: the
    /// session ends LP_ALREADY_COMMITTED, an error record names the reservation, an operator
    /// gets the case. The anchors go back; the order lives on.
    fn lp_already_committed(&mut self, cx: &mut Cx<'_, '_>, s: &mut Session, r: ReservationId, e: EscrowId) {
        self.error(cx.seq, s.id, ErrorKind::LpAlreadyCommitted, Some(r), Some(e), 0);
        self.st.counters.lp_already_committed += 1;
        self.open_case(cx, s, EscalationReason::LpAlreadyCommitted, Some(r), Some(e));
        self.return_reservations(cx, s);
        self.end_session(cx.now, s, SessionStatus::LpAlreadyCommitted);
        self.set_order_status(s.order, OrderStatus::Idle);
    }

    fn renew_answered(&mut self, cx: &mut Cx<'_, '_>, s: &mut Session, answer: LpAnswer) {
        match answer {
            LpAnswer::Renewed { expires_at_us } => {
                if let Some(h) = s.lp.held.as_mut() {
                    h.expires_at_us = expires_at_us;
                }
                self.st.counters.lp_renewals += 1;
                s.lp.retries = 0;
                // Back to what the session was doing.
                s.retry_at_us = Some(cx.now);
            }
            // The lease is gone at the LP: that key is dead; compensate (provider first: the
            // release of a gone reservation is answered RELEASED, and costs one call).
            LpAnswer::Expired => {
                s.lp.attempt += 1;
                self.st.counters.lp_leases_lapsed += 1;
                self.compensate(cx, s);
            }
            LpAnswer::Committed { reservation, escrow, trade } => {
                self.confirm_answered(cx, s, LpAnswer::Committed { reservation, escrow, trade })
            }
            _ => self.backoff(cx, s),
        }
    }

    fn confirm_answered(&mut self, cx: &mut Cx<'_, '_>, s: &mut Session, answer: LpAnswer) {
        match answer {
            LpAnswer::Committed { reservation, escrow, trade } => {
                self.record_escrow(cx, s, reservation, escrow, trade)
            }
            LpAnswer::Busy | LpAnswer::Transport => {
                self.result(s, BundleResult::Blocked);
                self.backoff(cx, s);
            }
            LpAnswer::Expired => {
                s.lp.attempt += 1;
                self.compensate(cx, s);
            }
            LpAnswer::NoPool | LpAnswer::Rejected { .. } => self.compensate(cx, s),
            LpAnswer::Reserved { .. }
            | LpAnswer::Renewed { .. }
            | LpAnswer::Released
            | LpAnswer::CannotRelease => {
                self.st.counters.answers_ignored += 1;
                self.backoff(cx, s);
            }
        }
    }

    /// Records the LP's escrow and trade on the LP leg and the trade record, then hands off.
    fn record_escrow(
        &mut self,
        cx: &mut Cx<'_, '_>,
        s: &mut Session,
        r: ReservationId,
        e: EscrowId,
        t: TradeId,
    ) {
        let Some(leg) = s.bundle.as_mut().and_then(|b| b.legs.iter_mut().find(|l| l.kind == LegKind::Lp))
        else {
            return;
        };
        let taken_elsewhere = self.st.trades.get(&e).is_some_and(|x| x.session != s.id);
        match leg.escrow {
            Some(recorded) if recorded == e => return,
            Some(_) => {}
            None if leg.reservation == Some(r) && !taken_elsewhere => {
                leg.escrow = Some(e);
                leg.trade = Some(t);
                let amount_minor = leg.amount_minor;
                let record = TradeRecord {
                    escrow: e,
                    trade: t,
                    session: s.id,
                    order: s.order,
                    partner: s.partner,
                    amount_minor,
                    recorded_at_us: cx.now,
                    completed: false,
                };
                self.st.trades.insert(e, record);
                s.lp.held = None;
                self.result(s, BundleResult::Confirmed);
                if s.status == SessionStatus::Committed {
                    self.hand_off(cx, s);
                }
                // Its completion webhook may have been journaled first (after a failover).
                if let Some(trade) = self.st.early_webhooks.remove(&e) {
                    self.lp_leg_completed(cx, s, e, trade);
                }
                return;
            }
            None => {}
        }
        let recorded = leg.escrow;
        self.escrow_record_failed(cx, s, recorded, e);
    }

    fn release_answered(&mut self, cx: &mut Cx<'_, '_>, s: &mut Session, answer: LpAnswer) {
        match answer {
            // Released, or already gone: the provider side is done; now the core side.
            // The reservation stays named until the core side is done too: a retry of a
            // failed core side releases it again (idempotent, same key) before the core.
            LpAnswer::Released | LpAnswer::Expired => self.compensate_core(cx, s),
            // 336: committed after all — a live escrow, irreversible.
            LpAnswer::CannotRelease => {
                let r = s.lp.held.map(|h| h.reservation);
                self.error(cx.seq, s.id, ErrorKind::ReleaseRefused, r, None, LP_CODE_COMMITTED);
                self.escalate(cx, s, EscalationReason::ReleaseRefused, r, None);
            }
            _ => self.backoff(cx, s),
        }
    }

    /// An answer the session did not wait for (see the module docs).
    fn unawaited(&mut self, cx: &mut Cx<'_, '_>, a: &LpAnswered) {
        let current = self.st.sessions.get(&a.session).map(|s| {
            let held = s.lp.held.map(|h| h.reservation);
            let leg = s.bundle.as_ref().and_then(|b| b.lp_leg()).map(|l| (l.reservation, l.escrow));
            (held, leg)
        });
        match a.answer {
            LpAnswer::Reserved { reservation, .. } => {
                let ours = current.is_some_and(|(held, leg)| {
                    held == Some(reservation) || leg.is_some_and(|(r, _)| r == Some(reservation))
                });
                if !ours && !self.st.strays.contains_key(&reservation) {
                    let attempt = self.st.sessions.get(&a.session).map_or(0, |s| s.lp.attempt);
                    self.release_stray(cx, a.session, reservation, attempt);
                    return;
                }
            }
            LpAnswer::Committed { reservation, escrow, .. } => {
                let recorded = current.is_some_and(|(_, leg)| leg.is_some_and(|(_, e)| e == Some(escrow)));
                let known = self.st.escalations.values().any(|x| x.escrow == Some(escrow));
                if !recorded && !known {
                    // A late confirmation (or reserve) for a reservation the session let go.
                    self.error(
                        cx.seq,
                        a.session,
                        ErrorKind::OrphanEscrow,
                        Some(reservation),
                        Some(escrow),
                        0,
                    );
                    self.with_session(a.session, |p, s| {
                        p.open_case(cx, s, EscalationReason::OrphanEscrow, Some(reservation), Some(escrow))
                    });
                    return;
                }
            }
            _ => {}
        }
        self.st.counters.answers_ignored += 1;
    }

    /// A reservation no session uses goes back to the LP; the release is pending until
    /// answered.
    pub(crate) fn release_stray(
        &mut self,
        cx: &mut Cx<'_, '_>,
        session: SessionId,
        r: ReservationId,
        attempt: u32,
    ) {
        let body = ReservationBody { session, reservation: r, amount_minor: 0, nonce: 0 };
        let key = effect::reservation_key(effect::op::LP_RELEASE, &body, attempt);
        let effect_id = cx.fx.emit(&MatchingEffect::LpRelease(LpOnReservation { body, key }));
        self.st
            .strays
            .insert(r, StrayRelease { session, reservation: r, key, effect_id, sent_at_us: cx.now });
        self.st.counters.lp_calls += 1;
    }

    /// The answer to a stray release.
    fn stray_answered(&mut self, cx: &mut Cx<'_, '_>, a: &LpAnswered) -> bool {
        let Some(r) = a.reservation else { return false };
        let Some(stray) = self.st.strays.get(&r).copied() else { return false };
        if a.call != LpCall::Release || a.key != stray.key {
            return false;
        }
        match a.answer {
            LpAnswer::Released | LpAnswer::Expired => {
                self.st.strays.remove(&r);
                self.st.counters.strays_released += 1;
            }
            LpAnswer::CannotRelease => {
                self.st.strays.remove(&r);
                self.error(
                    cx.seq,
                    stray.session,
                    ErrorKind::ReleaseRefused,
                    Some(r),
                    None,
                    LP_CODE_COMMITTED,
                );
                self.with_session(stray.session, |p, s| {
                    p.open_case(cx, s, EscalationReason::ReleaseRefused, Some(r), None)
                });
            }
            // Tried again when overdue (`resend_strays`).
            _ => {}
        }
        true
    }

    /// Abandoned reserves whose answer is overdue are asked again, same key.
    pub(crate) fn resend_abandoned(&mut self, cx: &mut Cx<'_, '_>) {
        let timeout = self.st.timings.lp_answer_timeout_us;
        let due: Vec<AbandonedReserve> = self
            .st
            .abandoned
            .values()
            .filter(|r| r.sent_at_us + timeout <= cx.now)
            .take(256)
            .copied()
            .collect();
        for r in due {
            if !cx.fx.room_for_session() {
                return;
            }
            let effect_id = cx.fx.emit(&abandoned_effect(&r));
            self.st.abandoned.insert(r.key, AbandonedReserve { effect_id, sent_at_us: cx.now, ..r });
            self.st.counters.lp_resends += 1;
        }
    }

    /// Stray releases whose answer is overdue (or was BUSY) are sent again, same key.
    pub(crate) fn resend_strays(&mut self, cx: &mut Cx<'_, '_>) {
        let timeout = self.st.timings.lp_answer_timeout_us;
        let due: Vec<StrayRelease> =
            self.st.strays.values().filter(|r| r.sent_at_us + timeout <= cx.now).take(256).copied().collect();
        for r in due {
            if !cx.fx.room_for_session() {
                return;
            }
            let body =
                ReservationBody { session: r.session, reservation: r.reservation, amount_minor: 0, nonce: 0 };
            let effect_id = cx.fx.emit(&MatchingEffect::LpRelease(LpOnReservation { body, key: r.key }));
            self.st.strays.insert(r.reservation, StrayRelease { effect_id, sent_at_us: cx.now, ..r });
            self.st.counters.lp_resends += 1;
        }
    }

    pub(crate) fn result(&mut self, s: &mut Session, r: BundleResult) {
        s.last_result = Some(r);
        let c = &mut self.st.counters;
        match r {
            BundleResult::Confirmed => c.confirmed += 1,
            BundleResult::Blocked => c.blocked += 1,
            BundleResult::Compensated => c.compensated += 1,
            BundleResult::Escalated => c.escalated += 1,
            BundleResult::CompensationFailed => c.compensation_failed += 1,
            BundleResult::EscrowRecordFailed => c.escrow_record_failed += 1,
        }
    }
}

/// The `reserve` a session's state asks for.
pub(crate) fn reserve_effect(s: &Session) -> MatchingEffect {
    let body = ReserveBody {
        session: s.id,
        partner: s.partner,
        currency: s.currency,
        amount_minor: s.lp.amount_minor,
    };
    MatchingEffect::LpReserve(LpReserve { body, key: effect::reserve_key(&body, s.lp.attempt) })
}

/// The `reserve` an abandoned one asks again.
pub(crate) fn abandoned_effect(r: &AbandonedReserve) -> MatchingEffect {
    let body = ReserveBody {
        session: r.session,
        partner: r.partner,
        currency: r.currency,
        amount_minor: r.amount_minor,
    };
    MatchingEffect::LpReserve(LpReserve { body, key: r.key })
}

/// The call on the session's LP reservation, if it holds one.
pub(crate) fn call_effect(s: &Session, call: LpCall) -> Option<MatchingEffect> {
    let h = s.lp.held?;
    let (op, nonce) = match call {
        LpCall::Renew => (effect::op::LP_RENEW, h.expires_at_us),
        LpCall::Confirm => (effect::op::LP_CONFIRM, 0),
        LpCall::Release => (effect::op::LP_RELEASE, 0),
        LpCall::Reserve => return None,
    };
    let body =
        ReservationBody { session: s.id, reservation: h.reservation, amount_minor: h.amount_minor, nonce };
    let e = LpOnReservation { body, key: effect::reservation_key(op, &body, s.lp.attempt) };
    Some(match call {
        LpCall::Renew => MatchingEffect::LpRenew(e),
        LpCall::Confirm => MatchingEffect::LpConfirm(e),
        _ => MatchingEffect::LpRelease(e),
    })
}

pub(crate) fn effect_key(e: &MatchingEffect) -> IdempotencyKey {
    match e {
        MatchingEffect::LpReserve(r) => r.key,
        MatchingEffect::LpRenew(r) | MatchingEffect::LpConfirm(r) | MatchingEffect::LpRelease(r) => r.key,
        MatchingEffect::HandOff(_) | MatchingEffect::Alert(_) | MatchingEffect::AwaitingDecision(_) => {
            IdempotencyKey::default()
        }
    }
}

const _: () = assert!(LP_CODE_EXPIRED == 330 && LP_CODE_COMMITTED == 336);
