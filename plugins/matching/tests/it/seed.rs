//! One test per ☠️ paragraph of seed 002 — each is a bug its authors already paid for. The test
//! names carry the paragraph; the doc comment says what it was.

use rtgs_core::entry::{CenterId, PluginKind};
use rtgs_core::ledger::LedgerIntent;
use rtgs_core::plugin_host::PluginHost;
use rtgs_matching::checkpoint::Index;
use rtgs_matching::command::*;
use rtgs_matching::effect::MatchingEffect;
use rtgs_matching::settings::{PartnerSettings, Timings};
use rtgs_matching::state::*;
use rtgs_matching::types::*;

use crate::support::*;

/// Drives order 1 (60,000, seller 1 anchors 10,000) to COMMITTED with LP reservation 1.
fn committed(fx: &mut Fx) -> SessionId {
    fx.seller(1, 10_000);
    fx.order(1, 60_000);
    fx.tick_at(T0 + S);
    fx.advance(180 * S);
    assert!(matches!(fx.last_lp().1, MatchingEffect::LpReserve(_)));
    fx.answer_last(LpAnswer::Reserved { reservation: ReservationId(1), expires_at_us: fx.now() + 30 * S });
    assert_eq!(fx.status(1), SessionStatus::Committed);
    fx.session(1).id
}

/// Window closed unmatched: order 1 (100,000, nothing to match) awaits a decision.
fn awaiting_decision(fx: &mut Fx) {
    fx.order(1, 100_000);
    fx.tick_at(T0 + S);
    fx.tick_at(T0 + 181 * S);
    fx.answer_last(LpAnswer::NoPool);
    fx.tick_at(T0 + 301 * S);
    assert_eq!(fx.status(1), SessionStatus::AwaitingUserDecision);
}

/// ☠️ §0 "엔진 모델에서 무효인 것": `match_wait_until`, the attempt threshold that CANCELS
/// (`finishAttempt`, `attempts >= maxAttempts`) and system retries do not exist. An order whose
/// own deadline is far away still gets one window and then waits for the user; a user retrying
/// more often than the legacy's 5 attempts is never cancelled; without a decision nothing is
/// retried.
#[test]
fn seed_0_legacy_wait_threshold_cancel_and_system_retry_are_gone() {
    let mut fx = Fx::with(
        PartnerSettings { p2p_phase_s: 5, lp_phase_s: 5, decision_grace_s: 30, use_p2p: true },
        Timings::default(),
    );
    fx.order_until(1, 100_000, T0 + 1_500 * S);
    fx.tick_at(T0 + S);
    for round in 0..7 {
        fx.advance(5 * S);
        if let Some((_, MatchingEffect::LpReserve(_))) = fx.lp_calls_since(0).last().cloned() {
            fx.answer_last(LpAnswer::NoPool);
        }
        fx.advance(6 * S);
        assert_eq!(fx.status(1), SessionStatus::AwaitingUserDecision, "round {round}: one window per try");
        assert_eq!(fx.order_status(1), OrderStatus::Matching, "round {round}: never cancelled by the system");
        fx.decide(1, Decision::Retry);
    }
    assert_eq!(fx.session(1).windows, 8);
    // No decision this time: the grace auto-closes; nothing retries on its own.
    fx.advance(20 * S);
    fx.advance(40 * S);
    assert_eq!(fx.status(1), SessionStatus::AutoClosed);
    let windows = fx.session(1).windows;
    fx.advance(200 * S);
    assert_eq!(fx.session(1).windows, windows, "no system retry");
    assert_eq!(fx.p().counters().sessions, 1);
    assert_eq!(fx.order_status(1), OrderStatus::Idle);
}

/// ☠️ §0 "P2P 구간에는 조기 탈출이 없다": an order with no P2P inventory at all still fills its
/// P2P phase — no LP call before `p2p_phase_ends_at`, the first one right then.
#[test]
fn seed_0_no_early_exit_from_the_p2p_phase() {
    let mut fx = Fx::new();
    fx.order(1, 100_000);
    fx.tick_at(T0 + S);
    let ends = fx.session(1).p2p_phase_ends_at_us;
    while fx.now() + S < ends {
        fx.advance(S);
        assert!(fx.lp_calls_since(0).is_empty(), "an LP call at {} before the P2P phase ended", fx.now());
    }
    fx.tick_at(ends);
    assert_eq!(reserves(&fx.lp_calls_since(0)).len(), 1, "the gate opens at the phase's end");
}

/// ☠️ §0 "끝난 세션의 주문은 레거시가 닫는다": the engine neither kills nor revives an order.
/// After its session ended without a match the order lives on (IDLE) — not cancelled, not
/// claimed again — until its own `expires_at` ends it.
#[test]
fn seed_0_a_finished_sessions_order_is_ended_by_its_own_deadline() {
    let mut fx = Fx::new();
    fx.order_until(1, 100_000, T0 + 2_000 * S);
    fx.tick_at(T0 + S);
    fx.tick_at(T0 + 181 * S);
    fx.answer_last(LpAnswer::NoPool);
    fx.tick_at(T0 + 301 * S);
    fx.tick_at(T0 + 602 * S);
    assert_eq!(fx.status(1), SessionStatus::AutoClosed);
    fx.advance(60 * S);
    fx.tick_at(T0 + 1_999 * S);
    assert_eq!(fx.order_status(1), OrderStatus::Idle);
    assert_eq!(fx.p().counters().sessions, 1);
    fx.tick_at(T0 + 2_000 * S);
    assert_eq!(fx.order_status(1), OrderStatus::Expired);
    assert_eq!(fx.p().counters().cancelled, 0);
}

/// ☠️ §0 "번들을 확정한 세션의 주문은 다시 집지 않는다": a matched order is never claimed again
/// (one session, the intake empty, even after a compensation sends it back to MATCHING), and
/// the data-level defense holds: a state with a second session or a second bundle on one order
/// is refused (`commitBundle`'s `P2P_DEPOSIT_ORDER_ALREADY_HAS_LEGS`).
#[test]
fn seed_0_a_committed_order_is_never_claimed_again() {
    let mut fx = Fx::new();
    committed(&mut fx);
    fx.answer_last(LpAnswer::Rejected { code: 422 });
    fx.answer_last(LpAnswer::Released);
    assert_eq!(fx.order_status(1), OrderStatus::Matching, "back to MATCHING under its session");
    fx.advance(30 * S);
    assert_eq!((fx.p().intake_len(), fx.p().counters().sessions), (0, 1));
    fx.answer_last(LpAnswer::Reserved { reservation: ReservationId(2), expires_at_us: fx.now() + 30 * S });
    assert_eq!(fx.status(1), SessionStatus::Committed);

    // Forge the double match and let the checkpoint's checks judge it.
    let mut buf = Vec::new();
    rtgs_core::plugin::Plugin::encode(fx.p(), &mut buf);
    let (st, _) = rtgs_matching::checkpoint::read_state(&buf).unwrap_or_else(|e| panic!("{e}"));
    let mut two_sessions = st.clone();
    let mut second = two_sessions.sessions.values().next().cloned().unwrap_or_else(|| panic!("no session"));
    two_sessions.session_id_last += 1;
    second.id = SessionId(two_sessions.session_id_last);
    two_sessions.sessions.insert(second.id, second);
    assert!(Index::build(&two_sessions).is_err(), "a second session on one order");
    let mut doubled = st;
    if let Some(b) = doubled.sessions.values_mut().next().and_then(|s| s.bundle.as_mut()) {
        let extra = b.legs[0];
        b.legs.push(extra);
    }
    assert!(Index::build(&doubled).is_err(), "legs beyond the order's amount");
}

/// ☠️ §4-c "재설계가 잃어버린 Phase 3": (1) the escrow the LP returns is written on the LP leg;
/// (2) an LP rejection after the commit is compensated — not left MATCHED with sellers' funds
/// sold and the session stuck in BUNDLE_READY.
#[test]
fn seed_4c_phase3_escrow_is_recorded_and_a_rejection_compensated() {
    let mut fx = Fx::new();
    committed(&mut fx);
    fx.answer_last(LpAnswer::Committed {
        reservation: ReservationId(1),
        escrow: EscrowId(42),
        trade: TradeId(43),
    });
    let leg = fx.session(1).bundle.and_then(|b| b.lp_leg().copied()).unwrap_or_else(|| panic!("no LP leg"));
    assert_eq!((leg.escrow, leg.trade), (Some(EscrowId(42)), Some(TradeId(43))));

    let mut fx = Fx::new();
    committed(&mut fx);
    fx.answer_last(LpAnswer::Rejected { code: 422 });
    fx.answer_last(LpAnswer::Released);
    let s = fx.session(1);
    assert_eq!((s.status, s.last_result), (SessionStatus::Matching, Some(BundleResult::Compensated)));
    assert!(s.bundle.is_some_and(|b| b.legs.iter().all(|l| l.status == LegStatus::Cancelled)));
    assert_eq!(fx.balance(seller_account(1)), (SELLER_FUNDS, 0), "the seller's funds are free again");
    assert_eq!(fx.balance(LP_ACCOUNT), (LP_FUNDS, 0));
    assert_eq!(fx.order_status(1), OrderStatus::Matching);
}

/// ☠️ §4-c ①-b "레그 UPDATE 만으로는 레일이 이어지지 않는다": everything after the confirmation
/// finds the trade by its escrow. The trade record is written with the leg, in the same step,
/// and the LP's completion webhook reaches the leg through it.
#[test]
fn seed_4c_1b_the_trade_record_connects_the_rail() {
    let mut fx = Fx::new();
    let id = committed(&mut fx);
    fx.answer_last(LpAnswer::Committed {
        reservation: ReservationId(1),
        escrow: EscrowId(42),
        trade: TradeId(43),
    });
    let t = fx.p().trade(EscrowId(42)).copied().unwrap_or_else(|| panic!("no trade record"));
    assert_eq!((t.session, t.order, t.trade, t.amount_minor), (id, OrderId(1), TradeId(43), 50_000));
    fx.cmd(MatchingCommand::LegPaid(LegPaid { session: id, bundle: 1, leg: 1 }));
    fx.cmd(MatchingCommand::LpTradeCompleted(LpTradeCompleted { escrow: EscrowId(42), trade: TradeId(43) }));
    assert_eq!(fx.status(1), SessionStatus::Completed);
    assert_eq!(fx.balance(CREDIT), (60_000, 0));
}

/// ☠️ §4-c "commitBundle 은 클레임을 계속 같은 트랜잭션에 둔다": the legs, the seller funds' holds
/// and the order's claim are one step, so a buyer's cancel is either before it (nothing is
/// committed; the LP's late reservation is released) or after it (refused) — never between,
/// leaving holds with no owner.
#[test]
fn seed_4c_commit_keeps_the_claim_in_the_same_step() {
    // Cancel first.
    let mut fx = Fx::new();
    fx.seller(1, 10_000);
    fx.order(1, 60_000);
    fx.tick_at(T0 + S);
    fx.advance(180 * S);
    let reserve = fx.last_lp();
    fx.decide(1, Decision::Cancel);
    fx.answer(
        &reserve,
        LpAnswer::Reserved { reservation: ReservationId(9), expires_at_us: fx.now() + 30 * S },
    );
    assert_eq!(fx.status(1), SessionStatus::Cancelled);
    assert!(holds_in_ledger(&fx.d).is_empty(), "no hold without an owner");
    assert!(
        matches!(fx.last_lp().1, MatchingEffect::LpRelease(ref r) if r.body.reservation == ReservationId(9)),
        "the late reservation goes back to the LP"
    );
    // Commit first.
    let mut fx = Fx::new();
    committed(&mut fx);
    fx.decide(1, Decision::Cancel);
    assert_eq!(fx.p().rejected(RejectKind::DecisionNotAllowed), 1);
    assert_eq!(holds_of_state(fx.p()).len(), 2, "every hold belongs to a leg");
}

/// ☠️ §4-c "보상의 순서 — 제공자 먼저, Core 나중": on a rejection the LP reservation is released
/// first and the core side waits for that answer (a BUSY release leaves the core untouched and is
/// retried with the same key). If the core side then fails, the dead letter's retry goes through
/// the provider again (idempotent) and reaches the core again.
#[test]
fn seed_4c_compensation_releases_the_provider_first() {
    let mut fx = Fx::new();
    let id = committed(&mut fx);
    let held = holds_in_ledger(&fx.d);
    fx.answer_last(LpAnswer::Rejected { code: 422 });
    let release = fx.last_lp();
    assert!(matches!(release.1, MatchingEffect::LpRelease(_)), "{release:?}");
    assert_eq!(fx.status(1), SessionStatus::Compensating);
    assert_eq!(holds_in_ledger(&fx.d), held, "the core side waits for the provider");
    fx.answer(&release, LpAnswer::Busy);
    assert_eq!(holds_in_ledger(&fx.d), held);
    fx.advance(2 * S);
    let again = fx.last_lp();
    assert_ne!(again.0, release.0);
    assert_eq!(key_of(&again.1), key_of(&release.1), "the same release, the same key");

    // Provider done; the core fails (one of its holds vanished: forged here).
    fx.check = false;
    let (&lost, _) = held.iter().next().unwrap_or_else(|| panic!("no hold"));
    fx.d.replica.ledger_mut().apply_intents(PluginKind::Matching, &[LedgerIntent::Release { id: lost }]).ok();
    fx.answer(&again, LpAnswer::Released);
    assert_eq!(fx.status(1), SessionStatus::DeadLetter);
    assert_eq!(fx.session(1).last_result, Some(BundleResult::CompensationFailed));
    assert_eq!(fx.p().dead_letters().count(), 1);
    // Put the hold back, and the operator retries: the same release (same key), then the core.
    let (account, amount) = held[&lost];
    fx.d.replica
        .ledger_mut()
        .apply_intents(
            PluginKind::Matching,
            &[LedgerIntent::Hold { id: lost, account, amount_minor: amount }],
        )
        .ok();
    fx.check = true;
    fx.verify();
    let before = fx.effect_count();
    fx.cmd(MatchingCommand::Resolve(Resolve { session: id, resolution: Resolution::Retry }));
    let retry = fx.lp_calls_since(before).pop().unwrap_or_else(|| panic!("no release on retry"));
    assert_eq!(key_of(&retry.1), key_of(&release.1));
    fx.answer(&retry, LpAnswer::Released);
    assert_eq!(fx.status(1), SessionStatus::Matching);
    assert!(holds_in_ledger(&fx.d).is_empty());
    assert!(fx.p().dead_letters().all(|d| d.resolved_at_us.is_some()));
}

fn key_of(e: &MatchingEffect) -> IdempotencyKey {
    match e {
        MatchingEffect::LpReserve(r) => r.key,
        MatchingEffect::LpRenew(r) | MatchingEffect::LpConfirm(r) | MatchingEffect::LpRelease(r) => r.key,
        other => panic!("not an LP call: {other:?}"),
    }
}

/// ☠️ §4-c "보상이 성공해도 세션은 스스로 다시 계획하지 못했다": a compensated session plans
/// again by itself — after the LP backoff, not at once and not never.
#[test]
fn seed_4c_a_compensated_session_plans_again_after_a_backoff() {
    let mut fx = Fx::new();
    committed(&mut fx);
    fx.answer_last(LpAnswer::Rejected { code: 422 });
    fx.answer_last(LpAnswer::Released);
    let compensated_at = fx.now();
    let s = fx.session(1);
    assert_eq!(s.retry_at_us, Some(compensated_at + Timings::default().lp_backoff_us(0)));
    let before = fx.effect_count();
    fx.tick_at(compensated_at + Timings::default().lp_backoff_us(0) - 1);
    assert!(fx.lp_calls_since(before).is_empty(), "not at once");
    fx.tick_at(compensated_at + Timings::default().lp_backoff_us(0));
    assert_eq!(reserves(&fx.lp_calls_since(before)).len(), 1, "a new plan after the backoff");
}

/// ☠️ §4-c "LP 경계 — 예약은 V2, 확정 이후는 레거시": the confirmation's escrow id and trade id
/// are the hand-off to execution — the trade record (identity, amount, partner: no seller data)
/// and the hand-off effect's LP leg carry them.
#[test]
fn seed_4c_lp_boundary_the_confirmation_is_the_hand_off() {
    let mut fx = Fx::new();
    let id = committed(&mut fx);
    let before = fx.effect_count();
    fx.answer_last(LpAnswer::Committed {
        reservation: ReservationId(1),
        escrow: EscrowId(42),
        trade: TradeId(43),
    });
    let t = fx.p().trade(EscrowId(42)).copied().unwrap_or_else(|| panic!("no trade record"));
    assert_eq!(
        t,
        TradeRecord {
            escrow: EscrowId(42),
            trade: TradeId(43),
            session: id,
            order: OrderId(1),
            partner: PARTNER,
            amount_minor: 50_000,
            recorded_at_us: fx.now(),
            completed: false,
        }
    );
    let handoff = fx
        .effects_since(before)
        .into_iter()
        .find_map(|(_, e)| match e {
            MatchingEffect::HandOff(h) => Some(h),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no hand-off"));
    let lp = handoff.legs.iter().find(|l| l.kind == LegKind::Lp).copied();
    assert_eq!(lp.map(|l| (l.escrow, l.seller)), Some((Some(EscrowId(42)), None)));
}

/// ☠️ §4-c "torq_trades 를 배제하자는 제안이 나오면": one post-confirmation pipe per escrow — the
/// LP sends its webhook once, and one sent twice still settles once.
#[test]
fn seed_4c_one_pipe_per_escrow_a_webhook_twice_settles_once() {
    let mut fx = Fx::new();
    let id = committed(&mut fx);
    fx.answer_last(LpAnswer::Committed {
        reservation: ReservationId(1),
        escrow: EscrowId(42),
        trade: TradeId(43),
    });
    fx.cmd(MatchingCommand::LegPaid(LegPaid { session: id, bundle: 1, leg: 1 }));
    for _ in 0..2 {
        fx.cmd(MatchingCommand::LpTradeCompleted(LpTradeCompleted {
            escrow: EscrowId(42),
            trade: TradeId(43),
        }));
    }
    assert_eq!(fx.balance(CREDIT), (60_000, 0), "settled once");
    assert_eq!(fx.p().counters().webhooks_duplicate, 1);
}

/// ☠️ §4-c "멱등키는 본문의 함수가 아니다": the key is body + attempt number. After the LP says
/// 330 the same body gets a new key (the seed's ① reserve → ② lease expires → ③ same key → 330
/// for ever); BUSY does not change it; the attempt is state, kept across a checkpoint.
#[test]
fn seed_4c_the_idempotency_key_carries_the_attempt_number() {
    let mut fx = Fx::new();
    fx.order(1, 60_000);
    fx.tick_at(T0 + S);
    fx.advance(180 * S);
    let first = fx.last_lp();
    fx.answer(&first, LpAnswer::Busy);
    fx.advance(2 * S);
    let busy_retry = fx.last_lp();
    assert_eq!(key_of(&busy_retry.1), key_of(&first.1), "BUSY keeps the key");
    fx.answer(
        &busy_retry,
        LpAnswer::Reserved { reservation: ReservationId(1), expires_at_us: fx.now() + 30 * S },
    );
    // The confirmation is blocked until the lease is gone; the LP says 330.
    fx.answer_last(LpAnswer::Expired);
    assert_eq!(fx.session(1).lp.attempt, 1);
    fx.answer_last(LpAnswer::Released);
    fx.checkpoint_round_trip();
    fx.advance(3 * S);
    let next = fx.last_lp();
    let (MatchingEffect::LpReserve(a), MatchingEffect::LpReserve(b)) = (&first.1, &next.1) else {
        panic!("not reserves: {first:?} {next:?}")
    };
    assert_eq!(a.body, b.body, "the same body (same remainder)");
    assert_ne!(a.key, b.key, "a new key");
    assert_eq!((a.key.attempt, b.key.attempt), (0, 1));
}

/// ☠️ §4-c "reserve 가 COMMITTED 를 돌려주는 경우 — 조용히 버리지 않는다": the session ends
/// LP_ALREADY_COMMITTED, an error record names the reservation, an operator gets the case, the
/// anchors go back.
#[test]
fn seed_4c_reserve_answering_committed_is_never_dropped() {
    let mut fx = Fx::new();
    fx.seller(1, 10_000);
    fx.order(1, 60_000);
    fx.tick_at(T0 + S);
    fx.advance(180 * S);
    fx.answer_last(LpAnswer::Committed {
        reservation: ReservationId(77),
        escrow: EscrowId(5),
        trade: TradeId(6),
    });
    assert_eq!(fx.status(1), SessionStatus::LpAlreadyCommitted);
    assert_eq!(fx.order_status(1), OrderStatus::Idle);
    let e = fx.p().errors_recent().last().copied().unwrap_or_else(|| panic!("no error record"));
    assert_eq!(
        (e.kind, e.reservation, e.escrow),
        (ErrorKind::LpAlreadyCommitted, Some(ReservationId(77)), Some(EscrowId(5)))
    );
    let case = fx.p().escalations().next().copied().unwrap_or_else(|| panic!("no case"));
    assert_eq!(
        (case.reason, case.reservation),
        (EscalationReason::LpAlreadyCommitted, Some(ReservationId(77)))
    );
    assert!(holds_in_ledger(&fx.d).is_empty());
    assert_eq!(fx.p().counters().lp_already_committed, 1);
}

/// ☠️ §4-b "컷오버 전제 정정 — 「V1 을 끈다」는 한 값이 아니다": a switch that reads differently
/// per service silently routed matching elsewhere. Here hosting the plugin *is* the switch: there
/// is no intake flag of its own — a hosted plugin's intake claims every order at the next Tick
/// (and the set refuses any second switch: `rtgs-plugins` tests; the API answers 404
/// `matching_disabled` where it is not hosted: `rtgs-api` tests).
#[test]
fn seed_4b_cutover_hosting_is_the_only_switch() {
    let mut fx = Fx::new();
    for id in 1..=5 {
        fx.order(id, 1_000);
    }
    fx.tick_at(T0 + S);
    assert_eq!(fx.p().intake_len(), 0);
    assert!((1..=5).all(|id| fx.order_status(id) == OrderStatus::Matching));
}

/// ☠️ §4-b "정정 ②": two switches make "which one is real" — the matching plugin has one
/// configuration and no second key: the plugin's settings are the partner's windows only, and a
/// partner without P2P is a setting, not a switch that turns the engine off.
#[test]
fn seed_4b_correction_2_one_key_no_second_switch() {
    let mut fx =
        Fx::with(PartnerSettings { use_p2p: false, ..PartnerSettings::default() }, Timings::default());
    fx.order(1, 1_000);
    fx.tick_at(T0 + S);
    assert_eq!(fx.status(1), SessionStatus::Matching, "still matched by the engine");
    assert_eq!(reserves(&fx.lp_calls_since(0)).len(), 1);
}

/// ☠️ §4-b "정정 ③ — 폐기됨": repeating sessions during a waiting time and handing the order
/// back to the intake is a system retry (and, through `finishAttempt`, an auto-cancel). The order
/// of a closed window is never returned to OPEN or to the intake, and no second session exists.
#[test]
fn seed_4b_correction_3_no_repeated_sessions_no_reclaim() {
    let mut fx = Fx::new();
    awaiting_decision(&mut fx);
    for _ in 0..3 {
        fx.advance(200 * S);
        assert_eq!(fx.p().intake_len(), 0);
        assert_ne!(fx.order_status(1), OrderStatus::Open);
    }
    assert_eq!(fx.status(1), SessionStatus::AutoClosed);
    assert_eq!((fx.p().counters().sessions, fx.session(1).windows), (1, 1));
}

/// ☠️ §4-b "정정 ④ — 세션을 끝내 주는 쪽이 없었다": a session nobody wakes is ended by the
/// overdue sweep through the ordered path — here an LP that never answers. The sweep acts once
/// per session, and never on one whose payment is in progress past its window.
#[test]
fn seed_4b_correction_4_the_overdue_sweep_ends_sessions_nobody_wakes() {
    let mut fx = Fx::new();
    fx.seller(1, 5_000);
    fx.order(1, 5_000);
    fx.order(2, 100_000);
    fx.tick_at(T0 + S);
    assert_eq!(fx.status(1), SessionStatus::PaymentInProgress);
    fx.advance(400 * S);
    assert_eq!(
        fx.status(2),
        SessionStatus::AwaitingUserDecision,
        "the LP never answered; the sweep closed it"
    );
    assert!(fx.p().counters().lp_resends > 0, "the unanswered reserve was asked again meanwhile");
    assert_eq!(fx.status(1), SessionStatus::PaymentInProgress, "never swept");
    fx.advance(400 * S);
    let s = fx.session(2);
    assert_eq!((s.status, s.window_closes), (SessionStatus::AutoClosed, 1), "once");
    let prompts = fx
        .effects_since(0)
        .into_iter()
        .filter(|(_, e)| matches!(e, MatchingEffect::AwaitingDecision(_)))
        .count();
    assert_eq!(prompts, 1);
    assert_eq!(fx.p().counters().windows_closed, 1);
}

/// ☠️ §4-b (grace 120 s: "LP 최대 백오프를 올리면 함께 올릴 것"): the sweep must not fight a
/// session that is still working. An LP backoff longer than the anchor's lease never lets the
/// anchor lapse (`holdSafe`: retries at most half the lease apart), and an answer that arrives
/// after the sweep closed the window is released at the LP, never attached.
#[test]
fn seed_4b_sweep_and_backoff_do_not_fight() {
    let timings = Timings { lp_backoff_max_us: 60 * S, lp_backoff_base_us: 8 * S, ..Timings::default() };
    let mut fx = Fx::with(PartnerSettings::default(), timings);
    fx.seller(1, 10_000);
    fx.order(1, 60_000);
    fx.tick_at(T0 + S);
    fx.advance(180 * S);
    let mut sent = vec![fx.now()];
    while fx.now() < T0 + 290 * S {
        let call = fx.last_lp();
        fx.answer(&call, LpAnswer::Busy);
        let before = fx.effect_count();
        while fx.lp_calls_since(before).is_empty() && fx.now() < T0 + 290 * S {
            fx.advance(S);
        }
        sent.push(fx.now());
    }
    assert_eq!(fx.p().counters().p2p_leases_lapsed, 0, "the anchor never lapsed");
    assert!(sent.windows(2).all(|w| w[1] - w[0] <= 15 * S), "retries at most half a lease apart: {sent:?}");
    let late = fx.last_lp();
    fx.advance(15 * S);
    assert_eq!(fx.status(1), SessionStatus::AwaitingUserDecision);
    fx.answer(&late, LpAnswer::Reserved { reservation: ReservationId(3), expires_at_us: fx.now() + 30 * S });
    assert!(
        matches!(fx.last_lp().1, MatchingEffect::LpRelease(ref r) if r.body.reservation == ReservationId(3))
    );
    assert!(holds_in_ledger(&fx.d).is_empty());
}

/// ☠️ §4-b "컷오버는 폴백이 없다": what remains when the plugin is switched off — the bundles'
/// holds stay in the ledger (money, in every statement) and a center refuses to start from a
/// checkpoint holding matching state without the plugin, rather than drop it silently.
#[test]
fn seed_4b_cutover_has_no_fallback_what_remains_is_visible() {
    let mut fx = Fx::new();
    committed(&mut fx);
    let held = holds_in_ledger(&fx.d);
    assert_eq!(held.len(), 2);
    let mut buf = Vec::new();
    fx.d.replica.host().encode(&mut buf);
    let mut without = PluginHost::empty(CenterId(1));
    assert!(without.restore(&buf).is_err(), "another plugin set is refused");
    assert_eq!(PluginHost::kinds_in(&buf), Some(vec![PluginKind::Matching]));
    assert_eq!(holds_of_state(fx.p()), held, "every remaining hold is named by the plugin's state");
}
