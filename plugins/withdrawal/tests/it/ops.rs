//! Every operation in every state: allowed only where §3.2.1 allows it (and its own conditions
//! hold), refused with a code everywhere else — and recorded either way, with actor and
//! parameters.

use rtgs_chain_sim::answer::BroadcastOutcome;
use rtgs_withdrawal::command::RequestKind;
use rtgs_withdrawal::operation::*;
use rtgs_withdrawal::status::Status;
use rtgs_withdrawal::types::*;

use crate::support::*;

fn params_for(op: OperationKind) -> OpParams {
    match op {
        OperationKind::Boost => OpParams { fee: Some(1_000), ..OpParams::default() },
        OperationKind::BypassAml => OpParams { reason: Some(text("checked by hand")), ..OpParams::default() },
        OperationKind::EditNotes => {
            OpParams { notes: Some(text("call the customer")), ..OpParams::default() }
        }
        _ => OpParams::default(),
    }
}

/// What §3.2.1 says an operator's `op` in `status` answers (in the states `reach` makes).
fn expected(op: OperationKind, status: Status) -> Option<RefuseCode> {
    if !op.allowed_states().contains(&status) {
        return Some(RefuseCode::StateNotAllowed);
    }
    match (op, status) {
        // `reach` makes FAILED by a timeout, which raises no alert.
        (OperationKind::Dismiss, Status::Failed) => Some(RefuseCode::NoAlert),
        // `reach` leaves BROADCASTING waiting for the node's answer: one question at a time.
        (OperationKind::Boost | OperationKind::Drop, Status::Broadcasting) => Some(RefuseCode::AnswerAwaited),
        _ => None,
    }
}

#[test]
fn every_operation_in_every_state_is_applied_or_refused_and_recorded() {
    for op in OperationKind::ALL {
        for status in Status::ALL {
            let mut fx = Fx::new();
            let asset = if *status == Status::Signed { SOLA } else { USDC };
            let id = fx.reach(asset, *status);
            let before = fx.w(id).operations.len();
            let refused = fx.operate(id, *op, OPERATOR, params_for(*op));
            assert_eq!(refused.map(|r| r.code), expected(*op, *status), "{op:?} in {status:?}");
            let w = fx.w(id);
            assert_eq!(w.operations.len(), before + 1, "recorded either way");
            let rec = w.operations.last().expect("recorded");
            assert_eq!((*rec.actor(), rec.parameters()), (OPERATOR, &params_for(*op)));
            if refused.is_some() {
                assert_eq!(fx.status(id), *status, "a refused operation changes nothing");
            }
        }
    }
}

#[test]
fn applied_operations_do_what_they_say() {
    let mut fx = Fx::new();
    // bypass-aml: on to authorization.
    let id = fx.reach(USDC, Status::PendingAmlScreening);
    assert_eq!(
        fx.operate(id, OperationKind::BypassAml, OPERATOR, params_for(OperationKind::BypassAml)),
        None
    );
    assert_eq!(fx.status(id), Status::PendingAuthorization);
    // edit-notes anywhere, and notes cleared.
    assert_eq!(
        fx.operate(id, OperationKind::EditNotes, OPERATOR, params_for(OperationKind::EditNotes)),
        None
    );
    assert_eq!(fx.w(id).notes.as_ref().map(|n| n.as_str()), Some("call the customer"));
    assert_eq!(fx.operate(id, OperationKind::EditNotes, OPERATOR, OpParams::default()), None);
    assert_eq!(fx.w(id).notes, None);
    // dismiss: the alert acknowledged, the state unchanged.
    let stale = fx.reach(USDC, Status::Stale);
    assert!(fx.w(stale).alert_open);
    assert_eq!(fx.op(stale, OperationKind::Dismiss), None);
    assert_eq!((fx.status(stale), fx.w(stale).alert_open), (Status::Stale, false));
    assert_eq!(fx.op(stale, OperationKind::Dismiss).map(|r| r.code), Some(RefuseCode::NoAlert));
}

#[test]
fn participants_may_cancel_only_their_own_and_nothing_else() {
    let mut fx = Fx::new();
    let id = fx.reach(USDC, Status::Submitted);
    let other = Actor { kind: ActorKind::Participant, id: ActorId(8) };
    assert_eq!(
        fx.operate(id, OperationKind::Cancel, other, OpParams::default()).map(|r| r.code),
        Some(RefuseCode::NotOwner)
    );
    assert_eq!(
        fx.operate(id, OperationKind::EditNotes, PARTICIPANT, params_for(OperationKind::EditNotes))
            .map(|r| r.code),
        Some(RefuseCode::OperatorOnly)
    );
    assert_eq!(fx.status(id), Status::Submitted);
    assert_eq!(fx.operate(id, OperationKind::Cancel, PARTICIPANT, OpParams::default()), None);
    assert_eq!(fx.status(id), Status::Cancelled);
}

#[test]
fn boost_and_drop_follow_the_chains_replacement_rules() {
    let mut fx = Fx::new();
    let id = fx.reach(USDC, Status::Broadcasting);
    // An answer is awaited: one question at a time.
    assert_eq!(fx.op(id, OperationKind::Drop).map(|r| r.code), Some(RefuseCode::AnswerAwaited));
    fx.broadcast_answer(id, BroadcastOutcome::Accepted);
    let low = OpParams { fee: Some(109), ..OpParams::default() };
    assert_eq!(
        fx.operate(id, OperationKind::Boost, OPERATOR, low).map(|r| r.code),
        Some(RefuseCode::FeeTooLow)
    );
    let no_fee = OpParams::default();
    assert_eq!(
        fx.operate(id, OperationKind::Boost, OPERATOR, no_fee).map(|r| r.code),
        Some(RefuseCode::FeeTooLow)
    );
    let ok = OpParams { fee: Some(110), ..OpParams::default() };
    assert_eq!(fx.operate(id, OperationKind::Boost, OPERATOR, ok), None);
    assert!(fx.w(id).last_boost_at_us.is_some());
    fx.signed(id);
    fx.broadcast_answer(id, BroadcastOutcome::Accepted);
    assert_eq!(fx.w(id).fee, 110);
    // Boosting again is measured against the boost.
    let again = OpParams { fee: Some(120), ..OpParams::default() };
    assert_eq!(
        fx.operate(id, OperationKind::Boost, OPERATOR, again).map(|r| r.code),
        Some(RefuseCode::FeeTooLow)
    );
    // Bitcoin: full RBF, the old rate + 1 sat/vB.
    let btc = fx.reach(BTC, Status::Broadcasting);
    fx.broadcast_answer(btc, BroadcastOutcome::Accepted);
    let same = OpParams { fee: Some(10), ..OpParams::default() };
    assert_eq!(
        fx.operate(btc, OperationKind::Boost, OPERATOR, same).map(|r| r.code),
        Some(RefuseCode::FeeTooLow)
    );
    let plus_one = OpParams { fee: Some(11), ..OpParams::default() };
    assert_eq!(fx.operate(btc, OperationKind::Boost, OPERATOR, plus_one), None);
    // Solana and Tezos have no same-slot replacement.
    for asset in [SOLA, XTZ] {
        let id = fx.reach(asset, Status::Broadcasting);
        fx.broadcast_answer(id, BroadcastOutcome::Accepted);
        assert_eq!(
            fx.op(id, OperationKind::Drop).map(|r| r.code),
            Some(RefuseCode::NotReplaceable),
            "{asset:?}"
        );
    }
}

#[test]
fn if_the_original_confirms_before_the_drop_it_completes() {
    let mut fx = Fx::new();
    let id = fx.reach(USDC, Status::Broadcasting);
    let original = fx.last_hash(id);
    fx.broadcast_answer(id, BroadcastOutcome::Accepted);
    assert_eq!(fx.op(id, OperationKind::Drop), None);
    fx.signed(id);
    fx.broadcast_answer(id, BroadcastOutcome::Accepted);
    fx.confirmed(id, original, 12, EVM_CONFIRMATIONS, true);
    assert_eq!(fx.status(id), Status::Completed);
    assert_eq!(fx.balance(SETTLEMENT), 1_000);
    assert!(fx.w(id).cancel_attempted_at_us.is_some() && !fx.w(id).cancel_completed_at_us.is_set());
}

#[test]
fn retry_only_when_nothing_can_confirm_and_not_beyond_the_limit() {
    let mut fx = Fx::new();
    let id = fx.reach(USDC, Status::Failed);
    for round in 2..=9 {
        assert_eq!(fx.op(id, OperationKind::Retry), None, "retry to round {round}");
        assert_eq!(fx.w(id).round, round);
        fx.sign_refused(id);
        assert_eq!(fx.status(id), Status::Failed);
    }
    assert_eq!(fx.op(id, OperationKind::Retry).map(|r| r.code), Some(RefuseCode::TooManyRetries));
    // Raw signing has no round to retry.
    let raw = fx.create(fx.request(USDC, 0, RequestKind::Raw(Digest([1; 32])), false));
    fx.tick();
    fx.decided(raw, None);
    fx.sign_refused(raw);
    assert_eq!(fx.op(raw, OperationKind::Retry).map(|r| r.code), Some(RefuseCode::KindNotAllowed));
}

#[test]
fn retry_and_rescreen_hold_again_or_are_refused_by_the_ledger() {
    let mut fx = Fx::new();
    let id = fx.reach(USDC, Status::Rejected);
    // The customer spends its money meanwhile: the hold is refused (AM04), nothing changes.
    let rest = fx.balance(CUSTOMER);
    let spend = rtgs_core::entry::Payload::Transfer(rtgs_core::entry::Transfer {
        debtor: rtgs_core::entry::AccountId(CUSTOMER),
        creditor: rtgs_core::entry::AccountId(SETTLEMENT),
        amount_minor: rest,
        currency: rtgs_core::entry::Currency::new(b"USD").expect("valid"),
    });
    fx.d.submit_payload(rtgs_core::entry::Bmi::new(b"SPEND").expect("valid"), spend);
    let refused = fx.op(id, OperationKind::RescreenAml).expect("refused");
    assert_eq!((refused.code, refused.iso_code()), (RefuseCode::LedgerRefused, Some("AM04")));
    assert_eq!(fx.status(id), Status::Rejected);
    // The customer funds it again: rescreen holds and goes.
    fx.d.open_account(CUSTOMER + 1, b"USD", 0).ok();
    assert_eq!(fx.status(id), Status::Rejected);
}

#[test]
fn operations_per_withdrawal_are_bounded() {
    let mut fx = Fx::new();
    let id = fx.reach(USDC, Status::Submitted);
    for _ in 0..rtgs_withdrawal::limits::OPERATIONS_PER_WITHDRAWAL_MAX {
        fx.operate(id, OperationKind::EditNotes, OPERATOR, params_for(OperationKind::EditNotes));
    }
    let n = fx.w(id).operations.len();
    fx.cmd(rtgs_withdrawal::command::WithdrawalCommand::Operate(rtgs_withdrawal::command::Operate {
        withdrawal: id,
        operation: OperationKind::Cancel,
        actor: PARTICIPANT,
        params: OpParams::default(),
    }));
    assert_eq!(fx.w(id).operations.len(), n, "not recorded beyond the bound");
    assert_eq!(fx.status(id), Status::Submitted, "and not applied");
    assert_eq!(fx.p().counters().operations_refused.get(&RefuseCode::TooManyOperations), Some(&1));
}
