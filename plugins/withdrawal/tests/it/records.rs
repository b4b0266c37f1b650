//! Append-only records with set-once fields: rows are only appended, an attempt's payloads and
//! hash never change, an outcome is its own row, a confirmation's `reorged_at` is set once.
//! (That no code outside `records` can rewrite a row is checked by the compiler: see the
//! `compile_fail` examples in `rtgs_withdrawal::records`.)

use rtgs_chain_sim::answer::{AmbiguousCode, BroadcastOutcome, ReceiptStatus};
use rtgs_withdrawal::records::*;
use rtgs_withdrawal::status::Status;

use crate::support::*;

#[test]
fn attempts_are_immutable_and_outcomes_are_appended_rows() {
    let mut fx = Fx::new();
    let id = fx.reach(USDC, Status::Broadcasting);
    let first = fx.w(id).attempts.get(0).expect("attempt").clone();
    // An ambiguous answer, the chain checked, the same payload sent again, accepted.
    fx.broadcast_answer(id, BroadcastOutcome::Ambiguous(AmbiguousCode::Timeout));
    fx.looked(id, 5, Some(0), vec![(*first.tx_hash(), ReceiptStatus::Unknown)]);
    fx.broadcast_answer(id, BroadcastOutcome::Accepted);
    assert_eq!(fx.w(id).attempts.len(), 1, "a re-send is not a new attempt");
    assert_eq!(fx.w(id).attempts.get(0), Some(&first), "and changes nothing of it");
    let outcomes: Vec<AttemptOutcome> = fx.w(id).outcomes.iter().map(|o| *o.outcome()).collect();
    assert_eq!(outcomes, vec![AttemptOutcome::Ambiguous, AttemptOutcome::Resent, AttemptOutcome::Submitted]);
    assert!(fx.w(id).outcomes.iter().all(|o| *o.attempt() == 1));
}

#[test]
fn reorged_at_is_set_once_and_rows_are_kept() {
    let mut fx = Fx::new();
    let id = fx.reach(USDC, Status::Confirming);
    let hash = fx.last_hash(id);
    fx.reorged(id, hash, 10);
    let row = *fx.w(id).confirmations.get(0).expect("row kept");
    assert!(!row.is_live());
    let at = row.reorged_at_us().value();
    // The same report again changes nothing (counted as a duplicate) ...
    let dup = fx.p().counters().webhooks_duplicate;
    fx.advance(1_000).reorged(id, hash, 10);
    assert_eq!(fx.p().counters().webhooks_duplicate, dup + 1);
    assert_eq!(fx.w(id).confirmations.get(0).map(|c| c.reorged_at_us().value()), Some(at));
    // ... and the type refuses a second write.
    let mut log = fx.w(id).confirmations.clone();
    assert_eq!(log.mark_row_reorged(0, 1), Err(AlreadySet));
    assert_eq!(log.get(0).map(|c| c.reorged_at_us().value()), Some(at));
}

#[test]
fn set_once_fields_refuse_a_second_value() {
    let mut s: SetOnce<u64> = SetOnce::default();
    assert_eq!(s.set(1), Ok(()));
    assert_eq!(s.set(1), Err(AlreadySet));
    assert_eq!(s.set(2), Err(AlreadySet));
    assert_eq!(s.value(), Some(1));
    let mut fx = Fx::new();
    let id = fx.reach(USDC, Status::Cancelled);
    let mut w = fx.w(id).clone();
    assert_eq!(w.cancel_completed_at_us.set(5), Err(AlreadySet));
}

#[test]
fn operations_and_transitions_only_grow() {
    let mut fx = Fx::new();
    let id = fx.reach(USDC, Status::Submitted);
    let mut seen = 0;
    for op in [
        rtgs_withdrawal::operation::OperationKind::Retry,
        rtgs_withdrawal::operation::OperationKind::Dismiss,
        rtgs_withdrawal::operation::OperationKind::Cancel,
    ] {
        let before = fx.w(id).operations.clone();
        fx.op(id, op);
        let after = &fx.w(id).operations;
        assert_eq!(after.len(), before.len() + 1);
        assert_eq!(&after.as_slice()[..before.len()], before.as_slice(), "earlier rows untouched");
        seen += 1;
    }
    assert_eq!(fx.w(id).operations.len(), seen);
    let t: Vec<Status> = fx.w(id).transitions.iter().map(|t| *t.to()).collect();
    assert_eq!(t, vec![Status::Submitted, Status::Cancelled]);
}
