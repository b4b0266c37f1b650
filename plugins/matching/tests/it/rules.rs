//! One test per state transition of orders and sessions (seed §0, mission §3.3).

use rtgs_matching::command::*;
use rtgs_matching::effect::MatchingEffect;
use rtgs_matching::settings::{PartnerSettings, Timings};
use rtgs_matching::state::*;
use rtgs_matching::types::*;

use crate::support::*;

/// OPEN → (intake, next Tick) MATCHING with a window of the partner's two phases.
#[test]
fn the_intake_binds_an_order_to_a_new_session_at_the_next_tick() {
    let mut fx = Fx::new();
    fx.order(1, 50_000);
    assert_eq!(fx.order_status(1), OrderStatus::Open);
    assert_eq!(fx.p().intake_len(), 1);
    fx.tick_at(T0 + S);
    let s = fx.session(1);
    assert_eq!((s.status, s.windows, s.amount_minor), (SessionStatus::Matching, 1, 50_000));
    assert_eq!(s.p2p_phase_ends_at_us, T0 + S + 180 * S);
    assert_eq!(s.window_ends_at_us, T0 + S + 300 * S);
    assert_eq!(s.expires_at_us, s.window_ends_at_us, "MATCHING: expires_at is the window's close");
    assert_eq!(fx.order_status(1), OrderStatus::Matching);
    assert_eq!(fx.p().intake_len(), 0);
}

/// MATCHING → PAYMENT_IN_PROGRESS: one seller covers the order in the P2P phase; its hold is made
/// and the legs handed off in the same step.
#[test]
fn one_seller_covering_the_order_commits_a_p2p_bundle_at_once() {
    let mut fx = Fx::new();
    fx.seller(1, 80_000);
    fx.order(1, 50_000);
    fx.tick_at(T0 + S);
    let s = fx.session(1);
    assert_eq!(s.status, SessionStatus::PaymentInProgress);
    let b = s.bundle.clone().unwrap_or_else(|| panic!("no bundle"));
    assert_eq!(b.legs.len(), 1);
    assert_eq!(
        (b.legs[0].kind, b.legs[0].amount_minor, b.legs[0].status),
        (LegKind::P2p, 50_000, LegStatus::Created)
    );
    assert_eq!(fx.balance(seller_account(1)), (SELLER_FUNDS - 50_000, 50_000), "the seller's funds are held");
    assert_eq!(fx.order_status(1), OrderStatus::Matched);
    let handoffs: Vec<_> =
        fx.effects_since(0).into_iter().filter(|(_, e)| matches!(e, MatchingEffect::HandOff(_))).collect();
    assert_eq!(handoffs.len(), 1);
    assert!(fx.lp_calls_since(0).is_empty(), "no LP call for a P2P bundle");
}

/// Two sellers together cover the order exactly: P2P#1 + P2P#2.
#[test]
fn two_sellers_cover_the_order_exactly() {
    let mut fx = Fx::new();
    fx.seller(1, 30_000);
    fx.seller(2, 45_000);
    fx.order(1, 60_000);
    fx.tick_at(T0 + S);
    let b = fx.session(1).bundle.unwrap_or_else(|| panic!("no bundle"));
    let amounts: Vec<u64> = b.legs.iter().map(|l| l.amount_minor).collect();
    assert_eq!(amounts.iter().sum::<u64>(), 60_000);
    assert_eq!(amounts, [45_000, 15_000], "the largest seller first, the second for the rest");
    assert_eq!(fx.p().seller(SellerId(2)).map(|s| s.free_minor()), Some(0));
    assert_eq!(fx.p().seller(SellerId(1)).map(|s| s.free_minor()), Some(15_000));
}

/// Partial P2P inventory is anchored in the P2P phase; the LP phase reserves the rest and the
/// bundle (LP, P2P#1, P2P#2) commits on RESERVED, then CONFIRMED → PAYMENT_IN_PROGRESS.
#[test]
fn anchors_and_the_lp_make_a_three_leg_bundle() {
    let mut fx = Fx::new();
    fx.seller(1, 20_000);
    fx.seller(2, 10_000);
    fx.order(1, 100_000);
    fx.tick_at(T0 + S);
    let s = fx.session(1);
    assert_eq!(s.p2p.len(), 1, "one anchor per pass, the largest seller first");
    fx.advance(10 * S);
    let s = fx.session(1);
    assert_eq!(s.p2p.iter().map(|r| r.amount_minor).sum::<u64>(), 30_000, "two anchors");
    assert!(fx.lp_calls_since(0).is_empty(), "no LP call in the P2P phase");
    fx.advance(s.p2p_phase_ends_at_us - fx.now());
    assert_eq!(fx.session(1).p2p.len(), 2, "the anchors were renewed all along");
    let calls = fx.lp_calls_since(0);
    let r = reserves(&calls);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].body.amount_minor, 70_000, "the LP reserves the remainder");
    fx.answer_last(LpAnswer::Reserved { reservation: ReservationId(7), expires_at_us: fx.now() + 30 * S });
    assert_eq!(fx.status(1), SessionStatus::Committed);
    let b = fx.session(1).bundle.unwrap_or_else(|| panic!("no bundle"));
    assert_eq!(b.legs.iter().map(|l| l.kind).collect::<Vec<_>>(), [LegKind::Lp, LegKind::P2p, LegKind::P2p]);
    assert_eq!(fx.balance(LP_ACCOUNT).1, 70_000, "the LP leg is held on the LP's account");
    assert!(matches!(fx.last_lp().1, MatchingEffect::LpConfirm(_)));
    fx.answer_last(LpAnswer::Committed {
        reservation: ReservationId(7),
        escrow: EscrowId(3),
        trade: TradeId(4),
    });
    assert_eq!(fx.status(1), SessionStatus::PaymentInProgress);
    assert_eq!(fx.session(1).last_result, Some(BundleResult::Confirmed));
}

/// Anchors are renewed at half their lease while the window is open.
#[test]
fn an_anchor_is_renewed_at_half_its_lease() {
    let mut fx = Fx::new();
    fx.seller(1, 20_000);
    fx.order(1, 100_000);
    fx.tick_at(T0 + S);
    let first = fx.session(1).p2p[0].expires_at_us;
    assert_eq!(first, T0 + S + 30 * S);
    fx.advance(14 * S);
    assert_eq!(fx.session(1).p2p[0].expires_at_us, first, "not before half the lease");
    fx.advance(S);
    assert_eq!(fx.session(1).p2p[0].expires_at_us, T0 + 16 * S + 30 * S, "renewed at half");
    assert!(fx.p().counters().p2p_renewals >= 1);
}

/// A lease that lapses reverts: after an outage longer than the lease (no Tick), the anchor is
/// found past its expiry and its hold is released.
#[test]
fn an_anchor_found_past_its_lease_is_returned() {
    let mut fx = Fx::new();
    fx.seller(1, 20_000);
    fx.order(1, 100_000);
    fx.tick_at(T0 + S);
    assert_eq!(fx.balance(seller_account(1)).1, 20_000);
    fx.cmd(MatchingCommand::SellerOffer(SellerOffer {
        seller: SellerId(1),
        account: rtgs_matching::types::Account(seller_account(1)),
        currency: eur(),
        offer_minor: 20_000,
    }));
    // No Tick for 40 s: the sequencer was down.
    fx.tick_at(T0 + 41 * S);
    assert_eq!(fx.p().counters().p2p_leases_lapsed, 1);
    // Returned, then the same pass anchors it again with a fresh lease.
    let s = fx.session(1);
    assert!(s.p2p.iter().all(|r| r.expires_at_us > fx.now()), "{:?}", s.p2p);
}

/// MATCHING → AWAITING_USER_DECISION when the window closes unmatched; every reservation back.
#[test]
fn the_window_closes_unmatched_into_a_decision_with_reservations_returned() {
    let mut fx = Fx::new();
    fx.seller(1, 20_000);
    fx.order(1, 100_000);
    fx.tick_at(T0 + S);
    fx.tick_at(T0 + 181 * S);
    fx.answer_last(LpAnswer::NoPool);
    fx.tick_at(T0 + 301 * S);
    let s = fx.session(1);
    assert_eq!(s.status, SessionStatus::AwaitingUserDecision);
    assert!(s.p2p.is_empty());
    assert_eq!(fx.balance(seller_account(1)), (SELLER_FUNDS, 0), "the anchor went back");
    assert_eq!(s.expires_at_us, T0 + 301 * S + 300 * S, "expires_at moved to the grace's end");
    assert_eq!(fx.order_status(1), OrderStatus::Matching, "the order lives on");
    let prompts = fx
        .effects_since(0)
        .into_iter()
        .filter(|(_, e)| matches!(e, MatchingEffect::AwaitingDecision(_)))
        .count();
    assert_eq!(prompts, 1, "the widget is told once");
}

fn awaiting(fx: &mut Fx) {
    fx.order(1, 100_000);
    fx.tick_at(T0 + S);
    fx.tick_at(T0 + 181 * S);
    fx.answer_last(LpAnswer::NoPool);
    fx.tick_at(T0 + 301 * S);
    assert_eq!(fx.status(1), SessionStatus::AwaitingUserDecision);
}

/// AWAITING_USER_DECISION → MATCHING: retry opens a new window in the same session.
#[test]
fn retry_opens_a_new_window_in_the_same_session() {
    let mut fx = Fx::new();
    awaiting(&mut fx);
    let id = fx.session(1).id;
    fx.decide(1, Decision::Retry);
    let s = fx.session(1);
    assert_eq!((s.id, s.status, s.windows), (id, SessionStatus::Matching, 2));
    assert_eq!(s.window_ends_at_us, fx.now() + 300 * S);
    assert_eq!(fx.p().counters().sessions, 1);
}

/// AWAITING_USER_DECISION → CLOSED_BY_USER; the order lives on (IDLE).
#[test]
fn close_ends_the_session_only() {
    let mut fx = Fx::new();
    awaiting(&mut fx);
    fx.decide(1, Decision::Close);
    assert_eq!(fx.status(1), SessionStatus::ClosedByUser);
    assert_eq!(fx.order_status(1), OrderStatus::Idle);
    assert_eq!((fx.p().counters().closed_by_user, fx.p().counters().auto_closed), (1, 0));
}

/// AWAITING_USER_DECISION → CANCELLED: session and order.
#[test]
fn cancel_ends_session_and_order() {
    let mut fx = Fx::new();
    awaiting(&mut fx);
    fx.decide(1, Decision::Cancel);
    assert_eq!(fx.status(1), SessionStatus::Cancelled);
    assert_eq!(fx.order_status(1), OrderStatus::Cancelled);
}

/// MATCHING → CANCELLED by the user while the window is open: anchors back.
#[test]
fn cancel_while_matching_returns_the_anchors() {
    let mut fx = Fx::new();
    fx.seller(1, 20_000);
    fx.order(1, 100_000);
    fx.tick_at(T0 + S);
    fx.decide(1, Decision::Cancel);
    assert_eq!(fx.status(1), SessionStatus::Cancelled);
    assert_eq!(fx.balance(seller_account(1)), (SELLER_FUNDS, 0));
}

/// OPEN → CANCELLED before the intake; IDLE → CANCELLED.
#[test]
fn an_unbound_or_idle_order_can_be_cancelled() {
    let mut fx = Fx::new();
    fx.order(1, 100_000);
    fx.decide(1, Decision::Cancel);
    assert_eq!(fx.order_status(1), OrderStatus::Cancelled);
    fx.tick_at(T0 + S);
    assert!(fx.p().session_of(OrderId(1)).is_none(), "never claimed");
    let mut fx = Fx::new();
    awaiting(&mut fx);
    fx.decide(1, Decision::Close);
    fx.decide(1, Decision::Cancel);
    assert_eq!(fx.order_status(1), OrderStatus::Cancelled);
}

/// Decisions outside their state are refused (and change nothing).
#[test]
fn decisions_in_the_wrong_state_are_refused() {
    let mut fx = Fx::new();
    fx.order(1, 100_000);
    fx.decide(1, Decision::Retry);
    fx.tick_at(T0 + S);
    fx.decide(1, Decision::Retry);
    fx.decide(1, Decision::Close);
    fx.decide(9, Decision::Cancel);
    assert_eq!(fx.status(1), SessionStatus::Matching);
    assert_eq!(fx.p().rejected(RejectKind::DecisionNotAllowed), 3);
    assert_eq!(fx.p().rejected(RejectKind::UnknownOrder), 1);
}

/// AWAITING_USER_DECISION → AUTO_CLOSED after the grace: its own state and counter.
#[test]
fn no_decision_within_the_grace_auto_closes() {
    let mut fx = Fx::new();
    awaiting(&mut fx);
    fx.tick_at(T0 + 600 * S);
    assert_eq!(fx.status(1), SessionStatus::AwaitingUserDecision, "not before the grace ends");
    fx.tick_at(T0 + 601 * S);
    assert_eq!(fx.status(1), SessionStatus::AutoClosed);
    assert_eq!(fx.order_status(1), OrderStatus::Idle);
    assert_eq!((fx.p().counters().auto_closed, fx.p().counters().closed_by_user), (1, 0));
}

/// PAYMENT_IN_PROGRESS → COMPLETED: every leg paid settles every hold to the credit account.
#[test]
fn paid_legs_settle_all_together() {
    let mut fx = Fx::new();
    fx.seller(1, 30_000);
    fx.seller(2, 45_000);
    fx.order(1, 60_000);
    fx.tick_at(T0 + S);
    let s = fx.session(1);
    fx.cmd(MatchingCommand::LegPaid(LegPaid { session: s.id, bundle: 1, leg: 0 }));
    assert_eq!(fx.status(1), SessionStatus::PaymentInProgress, "not until every leg is paid");
    assert_eq!(fx.balance(CREDIT), (0, 0));
    fx.cmd(MatchingCommand::LegPaid(LegPaid { session: s.id, bundle: 1, leg: 1 }));
    assert_eq!(fx.status(1), SessionStatus::Completed);
    assert_eq!(fx.order_status(1), OrderStatus::Completed);
    assert_eq!(fx.balance(CREDIT), (60_000, 0));
    assert_eq!(fx.balance(seller_account(2)), (SELLER_FUNDS - 45_000, 0));
    assert_eq!(fx.p().seller(SellerId(2)).map(|s| (s.sold_minor, s.offer_minor)), Some((45_000, 0)));
}

/// The order's own deadline: OPEN, MATCHING, AWAITING and IDLE orders expire; a P2P bundle with
/// legs all CREATED is released.
#[test]
fn the_orders_own_deadline_expires_it_in_every_live_state() {
    let mut fx = Fx::new();
    fx.seller(1, 10_000);
    fx.order_until(1, 5_000, T0 + 100 * S);
    fx.order_until(2, 500_000, T0 + 100 * S);
    fx.tick_at(T0 + S);
    fx.order_until(3, 5_000, T0 + 50 * S);
    fx.cmd(MatchingCommand::Decide(Decide { order: OrderId(3), decision: Decision::Cancel }));
    fx.order_until(4, 5_000, T0 + 60 * S);
    assert_eq!(fx.status(1), SessionStatus::PaymentInProgress);
    assert_eq!(fx.status(2), SessionStatus::Matching);
    fx.tick_at(T0 + 30 * S);
    fx.tick_at(T0 + 100 * S);
    assert_eq!((fx.order_status(1), fx.status(1)), (OrderStatus::Expired, SessionStatus::Expired));
    assert_eq!((fx.order_status(2), fx.status(2)), (OrderStatus::Expired, SessionStatus::Expired));
    assert_eq!(fx.order_status(3), OrderStatus::Cancelled);
    assert_eq!(fx.order_status(4), OrderStatus::Expired);
    assert_eq!(fx.balance(seller_account(1)), (SELLER_FUNDS, 0), "the unpaid leg's hold is released");
}

/// A seller that leaves takes its anchors back; its committed legs stay.
#[test]
fn a_seller_leaving_returns_its_anchors_not_its_legs() {
    let mut fx = Fx::new();
    fx.seller(1, 20_000);
    fx.seller(2, 5_000);
    fx.order(1, 100_000);
    fx.order(2, 5_000);
    fx.tick_at(T0 + S);
    assert_eq!(fx.status(2), SessionStatus::PaymentInProgress);
    assert_eq!(fx.session(1).p2p.len(), 1);
    fx.seller(1, 0);
    fx.seller(2, 0);
    assert!(fx.session(1).p2p.is_empty());
    assert_eq!(fx.balance(seller_account(1)), (SELLER_FUNDS, 0));
    assert_eq!(fx.balance(seller_account(2)).1, 5_000, "the leg stays held");
}

/// An offer above the seller's funds is cut to them: the ledger is the truth.
#[test]
fn an_offer_above_the_sellers_funds_is_cut() {
    let mut fx = Fx::new();
    fx.seller(1, 5 * SELLER_FUNDS);
    fx.order(1, 2 * SELLER_FUNDS);
    fx.tick_at(T0 + S);
    let s = fx.session(1);
    assert_eq!(s.p2p.iter().map(|r| r.amount_minor).sum::<u64>(), SELLER_FUNDS);
    assert_eq!(fx.p().seller(SellerId(1)).map(|s| s.free_minor()), Some(0));
}

/// A partner's settings apply to the next window, not to one already open.
#[test]
fn partner_settings_apply_to_the_next_window() {
    let mut fx = Fx::new();
    fx.order(1, 100_000);
    fx.tick_at(T0 + S);
    fx.settings(PartnerSettings { p2p_phase_s: 10, lp_phase_s: 5, decision_grace_s: 7, use_p2p: true });
    assert_eq!(fx.session(1).window_ends_at_us, T0 + 301 * S);
    fx.order(2, 100_000);
    fx.tick_at(T0 + 2 * S);
    let s2 = fx.session(2);
    assert_eq!((s2.p2p_phase_ends_at_us, s2.window_ends_at_us), (T0 + 12 * S, T0 + 17 * S));
    fx.cmd(MatchingCommand::SetPartnerSettings(SetPartnerSettings {
        partner: PARTNER,
        settings: Some(PartnerSettings { p2p_phase_s: 0, ..PartnerSettings::default() }),
    }));
    assert_eq!(fx.p().rejected(RejectKind::InvalidSetting), 1);
}

/// Orders are checked: amount, deadline, account and currency, and an id is one order.
#[test]
fn bad_orders_are_refused() {
    let mut fx = Fx::new();
    fx.order(1, 0);
    fx.order_until(2, 10, T0 - 1);
    let bad_account = |fx: &mut Fx, id: u64, account| {
        fx.cmd(MatchingCommand::SubmitOrder(SubmitOrder {
            order: OrderId(id),
            partner: PARTNER,
            customer: CustomerRef([0; 16]),
            currency: eur(),
            amount_minor: 10,
            credit_account: rtgs_matching::types::Account(account),
            expires_at_us: T0 + 100 * S,
        }))
    };
    bad_account(&mut fx, 3, rtgs_core::entry::AccountId(4_242));
    fx.order(4, 10);
    fx.order(4, 10);
    fx.order(4, 11);
    let p = fx.p();
    assert_eq!(p.rejected(RejectKind::InvalidOrder), 1);
    assert_eq!(p.rejected(RejectKind::AlreadyExpired), 1);
    assert_eq!(p.rejected(RejectKind::UnknownAccount), 1);
    assert_eq!(
        p.rejected(RejectKind::OrderExists),
        1,
        "the same order again is a retry, other content is not"
    );
    assert_eq!(p.orders().count(), 1);
}

/// Operators: an escalated session's legs released (→ RESOLVED_BY_OPERATOR, order IDLE) or
/// settled (→ COMPLETED).
#[test]
fn operators_resolve_escalated_sessions() {
    for resolution in [Resolution::Release, Resolution::Settle] {
        let mut fx = Fx::new();
        fx.seller(1, 10_000);
        fx.order(1, 60_000);
        fx.tick_at(T0 + S);
        fx.tick_at(T0 + 181 * S);
        fx.answer_last(LpAnswer::Reserved {
            reservation: ReservationId(1),
            expires_at_us: fx.now() + 30 * S,
        });
        fx.answer_last(LpAnswer::Committed {
            reservation: ReservationId(1),
            escrow: EscrowId(5),
            trade: TradeId(6),
        });
        let id = fx.session(1).id;
        // A P2P leg paid, then the order's deadline passes: irreversible ⇒ escalated.
        fx.cmd(MatchingCommand::LegPaid(LegPaid { session: id, bundle: 1, leg: 1 }));
        fx.tick_at(T0 + 3_600 * S);
        assert_eq!(fx.status(1), SessionStatus::Escalated);
        // The escalation is an open alert of the state (every center shows it) until resolved.
        let open = |fx: &Fx| {
            let mut out = Vec::new();
            rtgs_core::plugin::Plugin::alerts_open(fx.p(), &mut out);
            out.into_iter().map(|a| (a.kind, a.subject)).collect::<Vec<_>>()
        };
        assert_eq!(open(&fx), vec![("escalated", format!("session:{}", id.0))]);
        fx.cmd(MatchingCommand::Resolve(Resolve { session: id, resolution }));
        assert!(open(&fx).is_empty(), "a resolved escalation is no open alert");
        let want = match resolution {
            Resolution::Release => (SessionStatus::ResolvedByOperator, OrderStatus::Expired, (0, 0)),
            _ => (SessionStatus::Completed, OrderStatus::Completed, (60_000, 0)),
        };
        assert_eq!((fx.status(1), fx.order_status(1), fx.balance(CREDIT)), want, "{resolution:?}");
        assert!(fx.p().escalations().all(|e| e.resolved == Some(resolution)));
        fx.cmd(MatchingCommand::Resolve(Resolve { session: id, resolution }));
        assert_eq!(fx.p().rejected(RejectKind::ResolutionNotAllowed), 1, "only once");
    }
}

/// The LP phase only, for a partner without P2P: the first pass reserves at the LP.
#[test]
fn a_partner_without_p2p_reserves_at_the_lp_at_once() {
    let mut fx =
        Fx::with(PartnerSettings { use_p2p: false, ..PartnerSettings::default() }, Timings::default());
    fx.seller(1, 1_000_000);
    fx.order(1, 50_000);
    fx.tick_at(T0 + S);
    let s = fx.session(1);
    assert_eq!(s.window_ends_at_us - s.window_opened_at_us, 120 * S);
    assert_eq!(s.p2p_phase_ends_at_us, s.window_opened_at_us, "the gate is open from the start");
    assert_eq!(reserves(&fx.lp_calls_since(0)).len(), 1);
    assert!(s.p2p.is_empty(), "no seller is touched");
}

/// Timings are journaled: new ones apply to every session's next timer.
#[test]
fn timings_are_set_through_the_journal() {
    let mut fx = Fx::new();
    fx.seller(1, 20_000);
    fx.order(1, 100_000);
    fx.tick_at(T0 + S);
    let quick = Timings { p2p_lease_us: 4 * S, ..Timings::default() };
    fx.cmd(MatchingCommand::SetTimings(SetTimings { timings: quick }));
    assert_eq!(fx.p().timings().p2p_lease_us, 4 * S);
    assert_eq!(fx.session(1).p2p[0].expires_at_us, T0 + 31 * S, "a lease granted stays");
    fx.advance(29 * S);
    assert!(fx.session(1).p2p[0].expires_at_us <= fx.now() + 4 * S, "renewed with the new lease");
    fx.cmd(MatchingCommand::SetTimings(SetTimings { timings: Timings { p2p_lease_us: 1, ..quick } }));
    assert_eq!(fx.p().rejected(RejectKind::InvalidSetting), 1);
}
