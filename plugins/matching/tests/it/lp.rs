//! One test per LP code and fault: 330 on each call, 336, BUSY, NO_POOL, transport failures,
//! lost answers, late answers, rejection after the commit, COMMITTED on reserve, the same and
//! another escrow, renewals.

use rtgs_matching::command::*;
use rtgs_matching::effect::MatchingEffect;
use rtgs_matching::state::*;
use rtgs_matching::types::*;

use crate::support::*;

/// Order 1 (60,000, no sellers) in its LP phase with a reserve in flight.
fn reserving(fx: &mut Fx) -> (u64, MatchingEffect) {
    fx.order(1, 60_000);
    fx.tick_at(T0 + S);
    fx.advance(180 * S);
    let call = fx.last_lp();
    assert!(matches!(call.1, MatchingEffect::LpReserve(_)));
    call
}

fn committed(fx: &mut Fx) {
    reserving(fx);
    fx.answer_last(LpAnswer::Reserved { reservation: ReservationId(1), expires_at_us: fx.now() + 30 * S });
    assert_eq!(fx.status(1), SessionStatus::Committed);
}

fn key(e: &MatchingEffect) -> IdempotencyKey {
    match e {
        MatchingEffect::LpReserve(r) => r.key,
        MatchingEffect::LpRenew(r) | MatchingEffect::LpConfirm(r) | MatchingEffect::LpRelease(r) => r.key,
        other => panic!("{other:?}"),
    }
}

/// Waits (ticking each second) until the next LP call, at most `max_us`.
fn next_call(fx: &mut Fx, max_us: u64) -> (u64, MatchingEffect) {
    let before = fx.effect_count();
    let end = fx.now() + max_us;
    while fx.lp_calls_since(before).is_empty() {
        assert!(fx.now() < end, "no LP call within {max_us} µs");
        fx.advance(S);
    }
    fx.lp_calls_since(before).remove(0)
}

#[test]
fn code_330_on_reserve_raises_the_attempt_and_tries_a_new_key_at_once() {
    let mut fx = Fx::new();
    let first = reserving(&mut fx);
    fx.answer(&first, LpAnswer::Expired);
    let next = next_call(&mut fx, S);
    assert_eq!(key(&next.1).attempt, key(&first.1).attempt + 1);
    assert_eq!(fx.p().counters().lp_expired_330, 1);
}

#[test]
fn code_330_on_confirm_compensates_and_raises_the_attempt() {
    let mut fx = Fx::new();
    committed(&mut fx);
    fx.answer_last(LpAnswer::Expired);
    assert_eq!(fx.session(1).lp.attempt, 1);
    let release = fx.last_lp();
    assert!(matches!(release.1, MatchingEffect::LpRelease(_)));
    fx.answer(&release, LpAnswer::Expired);
    assert_eq!(fx.status(1), SessionStatus::Matching);
    assert_eq!(fx.session(1).last_result, Some(BundleResult::Compensated));
}

/// Answers BUSY to confirmations until the lease is at half and a renewal goes out.
fn until_renew(fx: &mut Fx) -> (u64, MatchingEffect) {
    fx.answer_last(LpAnswer::Busy);
    loop {
        let call = next_call(fx, 30 * S);
        if matches!(call.1, MatchingEffect::LpRenew(_)) {
            return call;
        }
        fx.answer(&call, LpAnswer::Busy);
    }
}

#[test]
fn code_330_on_renew_means_the_lease_lapsed() {
    let mut fx = Fx::new();
    committed(&mut fx);
    let renew = until_renew(&mut fx);
    fx.answer(&renew, LpAnswer::Expired);
    assert_eq!(fx.status(1), SessionStatus::Compensating);
    assert_eq!(fx.p().counters().lp_leases_lapsed, 1);
}

#[test]
fn a_renewal_extends_the_lease_and_each_renewal_is_its_own_request() {
    let mut fx = Fx::new();
    committed(&mut fx);
    let mut keys = Vec::new();
    for _ in 0..3 {
        let call = until_renew(&mut fx);
        keys.push(key(&call.1));
        fx.answer(&call, LpAnswer::Renewed { expires_at_us: fx.now() + 30 * S });
        assert_eq!(fx.session(1).lp.held.map(|h| h.expires_at_us), Some(fx.now() + 30 * S));
        // Back to confirming.
        let confirm = next_call(&mut fx, 2 * S);
        assert!(matches!(confirm.1, MatchingEffect::LpConfirm(_)));
    }
    assert_eq!(fx.p().counters().lp_renewals, 3);
    assert_eq!(keys.iter().collect::<std::collections::BTreeSet<_>>().len(), 3, "three renewals, three keys");
    assert_eq!(fx.p().counters().lp_leases_lapsed, 0);
}

#[test]
fn code_336_on_release_is_escalated() {
    let mut fx = Fx::new();
    committed(&mut fx);
    fx.answer_last(LpAnswer::Rejected { code: 422 });
    fx.answer_last(LpAnswer::CannotRelease);
    assert_eq!(fx.status(1), SessionStatus::Escalated);
    let case = fx.p().escalations().next().copied().unwrap_or_else(|| panic!("no case"));
    assert_eq!((case.reason, case.reservation), (EscalationReason::ReleaseRefused, Some(ReservationId(1))));
    assert!(fx
        .p()
        .errors_recent()
        .iter()
        .any(|e| e.kind == ErrorKind::ReleaseRefused && e.code == LP_CODE_COMMITTED));
}

#[test]
fn busy_and_no_pool_back_off_with_the_same_key() {
    for answer in [LpAnswer::Busy, LpAnswer::NoPool] {
        let mut fx = Fx::new();
        let first = reserving(&mut fx);
        fx.answer(&first, answer);
        let at = fx.now();
        let second = next_call(&mut fx, 10 * S);
        assert_eq!(key(&second.1), key(&first.1), "{answer:?}");
        assert!(fx.now() - at >= S, "after the backoff");
        fx.answer(&second, answer);
        let at = fx.now();
        let third = next_call(&mut fx, 10 * S);
        assert!(fx.now() - at >= 2 * S, "the backoff doubles");
        assert_eq!(key(&third.1), key(&first.1));
    }
}

#[test]
fn a_transport_failure_keeps_the_key() {
    let mut fx = Fx::new();
    let first = reserving(&mut fx);
    fx.answer(&first, LpAnswer::Transport);
    let second = next_call(&mut fx, 10 * S);
    assert_eq!(key(&second.1), key(&first.1));
    assert_eq!(fx.p().counters().lp_transport, 1);
}

/// A lost answer: the call is asked again after the timeout, same key, new effect id; the LP
/// replays its answer and the first answer, should it come late, changes nothing.
#[test]
fn a_lost_answer_is_asked_again_with_the_same_key() {
    let mut fx = Fx::new();
    let first = reserving(&mut fx);
    let again = next_call(&mut fx, 11 * S);
    assert_ne!(again.0, first.0);
    assert_eq!(key(&again.1), key(&first.1));
    assert_eq!(fx.p().counters().lp_resends, 1);
    let reserved = LpAnswer::Reserved { reservation: ReservationId(1), expires_at_us: fx.now() + 30 * S };
    fx.answer(&again, reserved);
    assert_eq!(fx.status(1), SessionStatus::Committed);
    let calls = fx.effect_count();
    fx.answer(&first, reserved);
    assert_eq!(fx.status(1), SessionStatus::Committed);
    assert_eq!(fx.effect_count(), calls, "the replayed answer for our own reservation releases nothing");
}

/// A late confirmation: the LP answered COMMITTED after the session compensated (its first
/// answer lost, a rejection seen on the retry). A live escrow nobody uses is an operator's case,
/// with an error record naming it — never dropped.
#[test]
fn a_late_confirm_for_a_released_bundle_is_an_orphan_escrow_case() {
    let mut fx = Fx::new();
    committed(&mut fx);
    let confirm = fx.last_lp();
    fx.answer(&confirm, LpAnswer::Rejected { code: 422 });
    fx.answer_last(LpAnswer::Released);
    fx.answer(
        &confirm,
        LpAnswer::Committed { reservation: ReservationId(1), escrow: EscrowId(8), trade: TradeId(9) },
    );
    let case = fx.p().escalations().next().copied().unwrap_or_else(|| panic!("no case"));
    assert_eq!((case.reason, case.escrow), (EscalationReason::OrphanEscrow, Some(EscrowId(8))));
    assert!(fx.p().errors_recent().iter().any(|e| e.kind == ErrorKind::OrphanEscrow));
    assert_eq!(fx.status(1), SessionStatus::Matching, "the session goes on");
}

#[test]
fn a_rejection_after_the_commit_compensates() {
    let mut fx = Fx::new();
    committed(&mut fx);
    fx.answer_last(LpAnswer::Rejected { code: 409 });
    assert_eq!(fx.status(1), SessionStatus::Compensating);
    fx.answer_last(LpAnswer::Released);
    assert_eq!(fx.session(1).last_result, Some(BundleResult::Compensated));
    assert_eq!(fx.p().counters().compensated, 1);
}

/// A rejection with something irreversible (a leg past CREATED) is escalated, never compensated.
#[test]
fn a_rejection_with_a_paid_leg_is_escalated() {
    let mut fx = Fx::new();
    fx.seller(1, 10_000);
    committed_with_seller(&mut fx);
    let id = fx.session(1).id;
    // The P2P leg's payment came in (possible once handed off): forge it by a paid notice on a
    // session that is still confirming — refused — so drive it through the hand-off first.
    fx.cmd(MatchingCommand::LegPaid(LegPaid { session: id, bundle: 1, leg: 1 }));
    assert_eq!(fx.p().rejected(RejectKind::UnknownLeg), 1, "not paid before the hand-off");
    fx.answer_last(LpAnswer::Busy);
    let confirm = next_call(&mut fx, 10 * S);
    fx.answer(
        &confirm,
        LpAnswer::Committed { reservation: ReservationId(1), escrow: EscrowId(1), trade: TradeId(1) },
    );
    // Live escrow now: an LP rejection arriving afterwards (a late, contradictory answer) is
    // ignored as unawaited; the deadline with the live escrow escalates.
    fx.tick_at(T0 + 3_600 * S);
    assert_eq!(fx.status(1), SessionStatus::Escalated);
    assert_eq!(fx.session(1).last_result, Some(BundleResult::Escalated));
}

fn committed_with_seller(fx: &mut Fx) {
    fx.order(1, 60_000);
    fx.tick_at(T0 + S);
    fx.advance(180 * S);
    fx.answer_last(LpAnswer::Reserved { reservation: ReservationId(1), expires_at_us: fx.now() + 30 * S });
    assert_eq!(fx.status(1), SessionStatus::Committed);
}

#[test]
fn committed_on_reserve_ends_lp_already_committed() {
    let mut fx = Fx::new();
    reserving(&mut fx);
    fx.answer_last(LpAnswer::Committed {
        reservation: ReservationId(4),
        escrow: EscrowId(4),
        trade: TradeId(4),
    });
    assert_eq!(fx.status(1), SessionStatus::LpAlreadyCommitted);
}

#[test]
fn the_same_escrow_again_is_success_another_is_refused() {
    let mut fx = Fx::new();
    committed(&mut fx);
    let confirm = fx.last_lp();
    let ok = LpAnswer::Committed { reservation: ReservationId(1), escrow: EscrowId(5), trade: TradeId(6) };
    fx.answer(&confirm, ok);
    assert_eq!(fx.status(1), SessionStatus::PaymentInProgress);
    // The same answer again (a resent confirm's replay): success, nothing changes.
    let resend = (confirm.0 + 1, confirm.1.clone());
    fx.answer(&resend, ok);
    assert_eq!(fx.status(1), SessionStatus::PaymentInProgress);
    assert!(fx.p().dead_letters().next().is_none());

    // Another escrow for the awaited confirmation: ESCROW_RECORD_FAILED, a dead letter.
    let mut fx = Fx::new();
    committed(&mut fx);
    let confirm = fx.last_lp();
    fx.answer(&confirm, LpAnswer::Transport);
    let retry = next_call(&mut fx, 10 * S);
    fx.answer(&retry, ok);
    fx.answer(
        &confirm,
        LpAnswer::Committed { reservation: ReservationId(1), escrow: EscrowId(7), trade: TradeId(8) },
    );
    assert_eq!(
        fx.status(1),
        SessionStatus::PaymentInProgress,
        "an unawaited other escrow: a case, not a rewrite"
    );
    let leg = fx.session(1).bundle.and_then(|b| b.lp_leg().copied()).unwrap_or_else(|| panic!("no leg"));
    assert_eq!(leg.escrow, Some(EscrowId(5)), "never overwritten");
    assert!(fx.p().escalations().any(|e| e.escrow == Some(EscrowId(7))));
}

/// The awaited confirmation itself naming another escrow than the one recorded: refused and
/// stopped (ESCROW_RECORD_FAILED).
#[test]
fn an_awaited_confirmation_with_another_escrow_is_a_dead_letter() {
    let mut fx = Fx::new();
    committed(&mut fx);
    // A renewal answered COMMITTED records escrow 5 (the renew saw the commit first)…
    fx.answer_last(LpAnswer::Busy);
    let mut call = next_call(&mut fx, 30 * S);
    while !matches!(call.1, MatchingEffect::LpRenew(_)) {
        fx.answer(&call, LpAnswer::Busy);
        call = next_call(&mut fx, 30 * S);
    }
    fx.answer(
        &call,
        LpAnswer::Committed { reservation: ReservationId(1), escrow: EscrowId(5), trade: TradeId(6) },
    );
    assert_eq!(fx.status(1), SessionStatus::PaymentInProgress);
    assert_eq!(fx.p().trade(EscrowId(5)).map(|t| t.session), Some(fx.session(1).id));
}

#[test]
fn every_answer_to_a_call_nobody_waits_for_is_counted_not_applied() {
    let mut fx = Fx::new();
    let first = reserving(&mut fx);
    fx.answer(&first, LpAnswer::NoPool);
    let before = fx.p().counters().answers_ignored;
    fx.answer(&first, LpAnswer::Busy);
    fx.answer(&first, LpAnswer::Renewed { expires_at_us: 0 });
    assert_eq!(fx.p().counters().answers_ignored, before + 2);
    assert_eq!(fx.status(1), SessionStatus::Matching);
}

/// A reserve in flight when the window closes is not forgotten: asked again (same key) until
/// answered, and what it reserved goes back to the LP.
#[test]
fn a_reserve_abandoned_by_its_window_is_asked_again_and_released() {
    let mut fx = Fx::new();
    let first = reserving(&mut fx);
    fx.tick_at(T0 + 301 * S);
    assert_eq!(fx.status(1), SessionStatus::AwaitingUserDecision);
    let again = next_call(&mut fx, 11 * S);
    assert_eq!(key(&again.1), key(&first.1), "the same reserve, the same key");
    fx.answer(&again, LpAnswer::Reserved { reservation: ReservationId(5), expires_at_us: fx.now() + 30 * S });
    assert!(
        matches!(fx.last_lp().1, MatchingEffect::LpRelease(ref r) if r.body.reservation == ReservationId(5))
    );
    fx.answer_last(LpAnswer::Released);
    assert_eq!(fx.p().counters().strays_released, 1);
    let before = fx.effect_count();
    fx.advance(30 * S);
    assert!(fx.lp_calls_since(before).is_empty(), "nothing more is owed");
}
