//! One test per transition of the table, each made by what makes it in production (a result,
//! a webhook, a timer, an operation), with the money it moves.

use rtgs_chain_sim::answer::{BroadcastOutcome, ReceiptStatus, RejectCode};
use rtgs_withdrawal::alert::AlertKind;
use rtgs_withdrawal::command::*;
use rtgs_withdrawal::effect::WithdrawalEffect;
use rtgs_withdrawal::operation::{OpParams, OperationKind};
use rtgs_withdrawal::records::Purpose;
use rtgs_withdrawal::settings::{HOUR_US, SECOND_US};
use rtgs_withdrawal::state::{AwaitKind, Money};
use rtgs_withdrawal::status::{Cause, Status};
use rtgs_withdrawal::types::*;

use crate::support::*;

fn last_cause(fx: &Fx, id: WithdrawalId) -> Cause {
    *fx.w(id).transitions.last().expect("a transition").cause()
}

#[test]
fn created_without_aml_is_submitted_and_held() {
    let mut fx = Fx::new();
    let id = fx.create(fx.request(USDC, 1_000, RequestKind::Standard, false));
    assert_eq!(fx.status(id), Status::Submitted);
    assert_eq!(fx.held(id), Some(1_000));
    assert_eq!(fx.balance(CUSTOMER), FUNDS - 1_000);
    assert_eq!(fx.w(id).money, Money::Held);
    assert_eq!(fx.w(id).amount_chain, 1_000 * 10_000, "USD cents to token units (10^4)");
    assert!(fx.take_effects().is_empty(), "nothing is asked before intake");
}

#[test]
fn created_with_aml_is_pending_screening_and_screened() {
    let mut fx = Fx::new();
    let id = fx.create(fx.request(USDC, 1_000, RequestKind::Standard, true));
    assert_eq!(fx.status(id), Status::PendingAmlScreening);
    assert_eq!(kinds(&fx.take_effects()), vec!["screen"]);
    assert_eq!(fx.awaiting(id).kind, AwaitKind::Screen);
}

#[test]
fn screening_passed_asks_for_authorization() {
    let mut fx = Fx::new();
    let id = fx.reach(USDC, Status::PendingAmlScreening);
    fx.take_effects();
    fx.screened(id, AmlVerdict::Accept);
    assert_eq!((fx.status(id), last_cause(&fx, id)), (Status::PendingAuthorization, Cause::ScreenPassed));
    assert_eq!(kinds(&fx.take_effects()), vec!["authorize"]);
}

#[test]
fn screening_rejected_or_frozen_is_rejected_and_released() {
    for (verdict, cause, alert) in [
        (AmlVerdict::Reject, Cause::ScreenRejected, vec![]),
        (AmlVerdict::Freeze, Cause::ScreenFrozen, vec![AlertKind::AmlFrozen]),
    ] {
        let mut fx = Fx::new();
        let id = fx.reach(USDC, Status::PendingAmlScreening);
        fx.take_effects();
        fx.screened(id, verdict);
        assert_eq!((fx.status(id), last_cause(&fx, id)), (Status::Rejected, cause));
        assert_eq!(fx.held(id), None);
        assert_eq!(fx.balance(CUSTOMER), FUNDS, "released");
        assert_eq!(fx.take_alerts(), alert);
    }
}

#[test]
fn intake_takes_submitted_ones_in_at_the_next_tick() {
    let mut fx = Fx::new();
    let id = fx.reach(USDC, Status::Submitted);
    fx.tick();
    assert_eq!((fx.status(id), last_cause(&fx, id)), (Status::PendingAuthorization, Cause::TakenIn));
    assert_eq!(kinds(&fx.take_effects()), vec!["authorize"]);
}

#[test]
fn approved_with_a_free_vault_asks_for_the_signature_of_its_slot() {
    let mut fx = Fx::new();
    let id = fx.reach(USDC, Status::PendingAuthorization);
    fx.take_effects();
    fx.decided(id, None);
    assert_eq!((fx.status(id), last_cause(&fx, id)), (Status::PendingSignature, Cause::Authorized));
    let effects = fx.take_effects();
    let Some((_, WithdrawalEffect::Sign(sign))) = effects.first() else { panic!("{effects:?}") };
    assert_eq!(
        (sign.raw.vault, sign.raw.slot, sign.raw.fee, sign.raw.purpose),
        (VaultId(1), 0, FEE, Purpose::Payment)
    );
    assert_eq!(fx.p().vault(VaultId(1)).map(|v| v.next_slot), Some(1));
    assert_eq!(*fx.w(id).vault_choices.get(0).expect("choice recorded").vault(), VaultId(1));
}

#[test]
fn blocked_by_policy_is_blocked_and_released() {
    let mut fx = Fx::new();
    let id = fx.reach(USDC, Status::PendingAuthorization);
    fx.decided(id, Some(17));
    assert_eq!((fx.status(id), fx.w(id).blocked_by_rule), (Status::Blocked, Some(17)));
    assert_eq!(fx.balance(CUSTOMER), FUNDS);
}

#[test]
fn no_approval_within_two_hours_fails_and_releases() {
    let mut fx = Fx::new();
    let id = fx.reach(USDC, Status::PendingAuthorization);
    fx.advance(2 * HOUR_US - SECOND_US).tick();
    assert_eq!(fx.status(id), Status::PendingAuthorization, "not yet");
    fx.advance(SECOND_US).tick();
    assert_eq!((fx.status(id), last_cause(&fx, id)), (Status::Failed, Cause::AuthorizationTimeout));
    assert_eq!(fx.balance(CUSTOMER), FUNDS);
}

#[test]
fn signed_is_recorded_whole_and_broadcast() {
    let mut fx = Fx::new();
    let id = fx.reach(USDC, Status::PendingSignature);
    fx.take_effects();
    let hash = fx.signed(id);
    assert_eq!((fx.status(id), last_cause(&fx, id)), (Status::Broadcasting, Cause::SignedAndBroadcast));
    let a = fx.w(id).attempts.get(0).expect("attempt").clone();
    assert_eq!(
        (*a.number(), *a.tx_hash(), a.sent_to().as_ref().map(|t| t.as_str())),
        (1, hash, Some("evm-node"))
    );
    let effects = fx.take_effects();
    let Some((_, WithdrawalEffect::Broadcast(b))) = effects.first() else { panic!("{effects:?}") };
    assert_eq!((b.tx_hash, &b.signed_payload), (hash, a.signed_payload()));
    assert_eq!(fx.p().by_tx(&hash), Some((id, 1)));
}

#[test]
fn sign_only_is_signed_and_not_broadcast() {
    let mut fx = Fx::new();
    let id = fx.create(fx.request(SOLA, 1_000, RequestKind::SignOnly, false));
    fx.tick();
    fx.decided(id, None);
    fx.take_effects();
    fx.signed(id);
    assert_eq!((fx.status(id), last_cause(&fx, id)), (Status::Signed, Cause::SignedOnly));
    assert!(fx.take_effects().is_empty(), "the customer broadcasts, not us");
    assert_eq!(*fx.w(id).attempts.get(0).expect("attempt").sent_to(), None);
    assert_eq!(fx.held(id), Some(1_000), "held until seen on chain or expired");
}

#[test]
fn cancelled_while_signing_gives_its_slot_back() {
    let mut fx = Fx::new();
    let id = fx.reach(USDC, Status::PendingSignature);
    assert_eq!(fx.p().vault(VaultId(1)).map(|v| v.next_slot), Some(1));
    assert_eq!(fx.operate(id, OperationKind::Cancel, PARTICIPANT, OpParams::default()), None);
    assert_eq!(fx.status(id), Status::Cancelled);
    assert_eq!(fx.p().vault(VaultId(1)).map(|v| v.next_slot), Some(0), "no nonce gap");
    assert!(fx.w(id).cancel_completed_at_us.is_set());
    assert_eq!(fx.balance(CUSTOMER), FUNDS);
    // The late signature is ignored.
    let ignored = fx.p().counters().results_ignored;
    let seq = fx.d.submit(&WithdrawalCommand::SignatureResult(SignatureResult {
        effect_id: 1,
        withdrawal: id,
        outcome: SignOutcome::Refused { code: 1 },
    }));
    assert!(seq.is_ok());
    assert_eq!(fx.p().counters().results_ignored, ignored + 1);
}

#[test]
fn pending_signature_fails_on_timeout_refusal_or_a_signature_too_late() {
    // Timeout.
    let mut fx = Fx::new();
    let id = fx.reach(USDC, Status::PendingSignature);
    fx.advance(2 * HOUR_US + SECOND_US).tick();
    assert_eq!((fx.status(id), last_cause(&fx, id)), (Status::Failed, Cause::SignatureTimeout));
    assert_eq!(fx.p().vault(VaultId(1)).map(|v| v.next_slot), Some(0));
    // Refused by the signer.
    let id = fx.reach(USDC, Status::PendingSignature);
    fx.sign_refused(id);
    assert_eq!((fx.status(id), last_cause(&fx, id)), (Status::Failed, Cause::SignatureRefused));
    // A Solana signature that arrives after its blockhash would expire is never broadcast.
    let id = fx.reach(SOLA, Status::PendingSignature);
    fx.take_effects();
    fx.advance(90 * SECOND_US);
    fx.signed(id);
    assert_eq!((fx.status(id), last_cause(&fx, id)), (Status::Failed, Cause::SignatureExpired));
    let effects = fx.take_effects();
    assert!(!kinds(&effects).contains(&"broadcast"), "{effects:?}");
    assert_eq!(fx.take_alerts(), vec![AlertKind::SignatureExpired]);
    assert_eq!(fx.balance(CUSTOMER), FUNDS);
}

#[test]
fn chain_entry_makes_it_confirming() {
    let mut fx = Fx::new();
    let id = fx.reach(USDC, Status::Broadcasting);
    let hash = fx.last_hash(id);
    fx.broadcast_answer(id, BroadcastOutcome::Accepted);
    fx.included(id, hash, 10);
    assert_eq!((fx.status(id), last_cause(&fx, id)), (Status::Confirming, Cause::Included));
    assert_eq!(fx.w(id).confirmations.len(), 1);
}

#[test]
fn a_confirmed_drop_cancels_a_broadcast_withdrawal() {
    let mut fx = Fx::new();
    let id = fx.reach(USDC, Status::Broadcasting);
    fx.broadcast_answer(id, BroadcastOutcome::Accepted);
    assert_eq!(fx.op(id, OperationKind::Drop), None);
    let drop = fx.signed(id);
    fx.broadcast_answer(id, BroadcastOutcome::Accepted);
    assert_eq!(fx.status(id), Status::Broadcasting, "CANCELLED only when the drop confirms");
    fx.included(id, drop, 11);
    assert_eq!(fx.status(id), Status::Broadcasting);
    fx.confirmed(id, drop, 11, EVM_CONFIRMATIONS, true);
    assert_eq!((fx.status(id), last_cause(&fx, id)), (Status::Cancelled, Cause::DropConfirmed));
    assert_eq!(fx.balance(CUSTOMER), FUNDS);
    let drop_attempt = fx.w(id).attempts.get(1).expect("drop attempt");
    assert_eq!((*drop_attempt.purpose(), *drop_attempt.fee()), (Purpose::Drop, 110), "+10 %");
}

#[test]
fn threshold_completes_and_settles_to_the_settlement_account() {
    let mut fx = Fx::new();
    let id = fx.reach(USDC, Status::Confirming);
    let hash = fx.last_hash(id);
    fx.confirmed(id, hash, 10, EVM_CONFIRMATIONS - 1, true);
    assert_eq!(fx.status(id), Status::Confirming, "below the chain's threshold");
    fx.confirmed(id, hash, 10, EVM_CONFIRMATIONS, true);
    assert_eq!((fx.status(id), last_cause(&fx, id)), (Status::Completed, Cause::Threshold));
    assert_eq!(fx.held(id), None);
    assert_eq!(fx.balance(SETTLEMENT), 1_000);
    assert_eq!(fx.balance(CUSTOMER), FUNDS - 1_000);
}

#[test]
fn a_revert_while_confirming_fails_and_releases() {
    let mut fx = Fx::new();
    let id = fx.reach(USDC, Status::Confirming);
    let hash = fx.last_hash(id);
    fx.take_effects();
    fx.confirmed(id, hash, 10, EVM_CONFIRMATIONS, false);
    assert_eq!((fx.status(id), last_cause(&fx, id)), (Status::Failed, Cause::Reverted));
    assert_eq!(fx.take_alerts(), vec![AlertKind::Reverted]);
    assert_eq!(fx.balance(CUSTOMER), FUNDS);
}

#[test]
fn approved_without_a_free_vault_waits_queued_and_a_freed_vault_dispatches_it() {
    let mut fx = Fx::new();
    let id = fx.reach(USDC, Status::Queued);
    assert_eq!(last_cause(&fx, id), Cause::Authorized);
    fx.take_effects();
    fx.cmd(WithdrawalCommand::SetVaultEnabled(SetVaultEnabled { vault: VaultId(1), enabled: true }));
    assert_eq!((fx.status(id), last_cause(&fx, id)), (Status::PendingSignature, Cause::SlotAssigned));
    assert_eq!(kinds(&fx.take_effects()), vec!["sign"]);
}

#[test]
fn queued_two_hours_fails() {
    let mut fx = Fx::new();
    let id = fx.reach(USDC, Status::Queued);
    fx.advance(2 * HOUR_US + SECOND_US).tick();
    assert_eq!((fx.status(id), last_cause(&fx, id)), (Status::Failed, Cause::QueuedTimeout));
    assert_eq!(fx.balance(CUSTOMER), FUNDS);
}

#[test]
fn cancel_before_broadcast_from_every_state_that_allows_it() {
    for from in [Status::Submitted, Status::PendingAmlScreening, Status::PendingAuthorization, Status::Queued]
    {
        let mut fx = Fx::new();
        let id = fx.reach(USDC, from);
        assert_eq!(fx.operate(id, OperationKind::Cancel, PARTICIPANT, OpParams::default()), None, "{from:?}");
        assert_eq!((fx.status(id), last_cause(&fx, id)), (Status::Cancelled, Cause::Cancel));
        assert_eq!(fx.balance(CUSTOMER), FUNDS);
        assert!(fx.w(id).cancel_attempted_at_us.is_some() && fx.w(id).cancel_completed_at_us.is_set());
    }
}

#[test]
fn no_receipt_past_the_threshold_is_stale_and_pauses_the_vault() {
    let mut fx = Fx::new();
    let id = fx.reach(USDC, Status::Broadcasting);
    let hash = fx.last_hash(id);
    fx.broadcast_answer(id, BroadcastOutcome::Accepted);
    fx.take_effects();
    fx.make_stale(id, vec![(hash, ReceiptStatus::Pending)]);
    assert_eq!((fx.status(id), last_cause(&fx, id)), (Status::Stale, Cause::NoReceipt));
    let effects = fx.take_effects();
    assert!(kinds(&effects).contains(&"lookup") && fx.take_alerts() == vec![AlertKind::Stale]);
    assert_eq!(fx.p().vault_skip(VaultId(1)), Some(rtgs_withdrawal::records::VaultSkip::Stale));
    assert_eq!(fx.held(id), Some(1_000));
}

#[test]
fn a_certain_refusal_of_the_first_send_fails_and_gives_the_nonce_back() {
    let mut fx = Fx::new();
    let id = fx.reach(USDC, Status::Broadcasting);
    fx.broadcast_answer(id, BroadcastOutcome::Rejected(RejectCode::InsufficientFunds));
    assert_eq!((fx.status(id), last_cause(&fx, id)), (Status::Failed, Cause::BroadcastRejected));
    assert_eq!(fx.p().vault(VaultId(1)).map(|v| v.next_slot), Some(0));
    assert_eq!(fx.balance(CUSTOMER), FUNDS);
}

#[test]
fn a_receipt_appearing_moves_stale_to_confirming() {
    let mut fx = Fx::new();
    let id = fx.reach(USDC, Status::Stale);
    let hash = fx.last_hash(id);
    fx.included(id, hash, 30);
    assert_eq!((fx.status(id), last_cause(&fx, id)), (Status::Confirming, Cause::ReceiptAppeared));
    assert_eq!(fx.p().vault_skip(VaultId(1)), None, "the vault is healthy again");
}

#[test]
fn a_confirmed_drop_cancels_a_stale_withdrawal() {
    let mut fx = Fx::new();
    let id = fx.reach(USDC, Status::Stale);
    assert_eq!(fx.op(id, OperationKind::Drop), None);
    let drop = fx.signed(id);
    fx.broadcast_answer(id, BroadcastOutcome::Accepted);
    fx.confirmed(id, drop, 31, EVM_CONFIRMATIONS, true);
    assert_eq!((fx.status(id), last_cause(&fx, id)), (Status::Cancelled, Cause::DropConfirmed));
    assert_eq!(fx.balance(CUSTOMER), FUNDS);
}

#[test]
fn stale_fails_once_the_chain_shows_its_nonce_used_by_another_transaction() {
    let mut fx = Fx::new();
    let id = fx.reach(USDC, Status::Stale);
    let hash = fx.last_hash(id);
    fx.advance(61 * SECOND_US).tick();
    assert_eq!(fx.awaiting(id).kind, AwaitKind::Lookup, "a STALE one is checked again every interval");
    fx.looked(id, 40, Some(1), vec![(hash, ReceiptStatus::Unknown)]);
    assert_eq!((fx.status(id), last_cause(&fx, id)), (Status::Failed, Cause::SlotUsedElsewhere));
    assert_eq!(fx.balance(CUSTOMER), FUNDS);
}

#[test]
fn signed_seen_on_chain_is_confirming_then_completed() {
    let mut fx = Fx::new();
    let id = fx.reach(SOLA, Status::Signed);
    let hash = fx.last_hash(id);
    fx.included(id, hash, 5);
    assert_eq!((fx.status(id), last_cause(&fx, id)), (Status::Confirming, Cause::Included));
    fx.confirmed(id, hash, 5, 32, true);
    assert_eq!(fx.status(id), Status::Completed);
    assert_eq!(fx.balance(SETTLEMENT), 1_000);
}

#[test]
fn signed_unseen_past_its_validity_fails() {
    let mut fx = Fx::new();
    let id = fx.reach(SOLA, Status::Signed);
    let hash = fx.last_hash(id);
    fx.advance(89 * SECOND_US).tick();
    assert!(fx.w(id).awaiting.is_none(), "no check before the validity passed");
    fx.advance(40 * SECOND_US).tick();
    assert_eq!(fx.awaiting(id).kind, AwaitKind::Lookup);
    fx.looked(id, 300, None, vec![(hash, ReceiptStatus::Unknown)]);
    assert_eq!((fx.status(id), last_cause(&fx, id)), (Status::Failed, Cause::ValidityPassed));
    assert_eq!(fx.balance(CUSTOMER), FUNDS);
}

#[test]
fn raw_signing_completes_when_signed_and_moves_no_money() {
    let mut fx = Fx::new();
    let id = fx.create(fx.request(USDC, 0, RequestKind::Raw(Digest([4; 32])), false));
    assert_eq!(fx.held(id), None);
    fx.tick();
    fx.decided(id, None);
    assert_eq!(fx.awaiting(id).kind, AwaitKind::SignRaw);
    fx.raw_signed(id);
    assert_eq!((fx.status(id), last_cause(&fx, id)), (Status::Completed, Cause::RawSigned));
    assert!(fx.w(id).raw_signature.is_set());
    assert_eq!((fx.balance(CUSTOMER), fx.balance(SETTLEMENT)), (FUNDS, 0));
}

#[test]
fn a_cached_raw_signature_completes_at_intake() {
    let mut fx = Fx::new();
    let first = fx.create(fx.request(USDC, 0, RequestKind::Raw(Digest([4; 32])), false));
    fx.tick();
    fx.decided(first, None);
    fx.raw_signed(first);
    fx.take_effects();
    let again = fx.create(fx.request(USDC, 0, RequestKind::Raw(Digest([4; 32])), false));
    fx.tick();
    assert_eq!((fx.status(again), last_cause(&fx, again)), (Status::Completed, Cause::CachedSignature));
    assert_eq!(fx.w(again).raw_signature.get(), fx.w(first).raw_signature.get());
    assert!(fx.take_effects().is_empty(), "no ceremony");
}

#[test]
fn rescreen_moves_an_aml_rejection_back_to_screening_and_holds_again() {
    let mut fx = Fx::new();
    let id = fx.reach(USDC, Status::Rejected);
    assert_eq!(fx.balance(CUSTOMER), FUNDS);
    assert_eq!(fx.op(id, OperationKind::RescreenAml), None);
    assert_eq!((fx.status(id), last_cause(&fx, id)), (Status::PendingAmlScreening, Cause::AmlRescreened));
    assert_eq!(fx.held(id), Some(1_000));
}

#[test]
fn retry_starts_a_new_round_held_and_queued() {
    let mut fx = Fx::new();
    let id = fx.reach(USDC, Status::Broadcasting);
    fx.broadcast_answer(id, BroadcastOutcome::Rejected(RejectCode::InsufficientFunds));
    assert_eq!(fx.op(id, OperationKind::Retry), None);
    let w = fx.w(id);
    assert_eq!((w.round, w.retry_count), (2, 1));
    // The retry went QUEUED, and the free vault took it at once.
    let path: Vec<Status> = w.transitions.iter().rev().take(2).map(|t| *t.to()).collect();
    assert_eq!(path, vec![Status::PendingSignature, Status::Queued]);
    assert_eq!(fx.held(id), Some(1_000));
}

#[test]
fn a_completed_transaction_reorged_away_for_good_is_reversed_and_failed() {
    let mut fx = Fx::new();
    let id = fx.reach(USDC, Status::Completed);
    let hash = fx.last_hash(id);
    assert_eq!(fx.balance(SETTLEMENT), 1_000);
    fx.reorged(id, hash, 10);
    assert_eq!(fx.status(id), Status::Completed, "is it coming back? the chain is asked later");
    assert!(fx.w(id).confirmations.iter().all(|c| !c.is_live()), "reorged_at set, rows kept");
    fx.advance(601 * SECOND_US).tick();
    assert_eq!(fx.awaiting(id).kind, AwaitKind::ReorgLookup);
    fx.looked(id, 15, Some(1), vec![(hash, ReceiptStatus::Unknown)]);
    assert_eq!((fx.status(id), last_cause(&fx, id)), (Status::Failed, Cause::ReorgedAway));
    assert_eq!(fx.w(id).money, Money::Reversed);
    assert_eq!((fx.balance(SETTLEMENT), fx.balance(CUSTOMER)), (0, FUNDS), "reversed");
    assert_eq!(fx.p().counters().reversals, 1);
}

#[test]
fn an_aml_alert_stays_open_in_the_state_until_someone_answers() {
    // An alert is state, not a message: nothing to raise again, nothing a crashed owner could
    // lose. It stays open (same id) however long nobody answers; an answer closes it.
    let mut fx = Fx::new();
    let id = fx.reach(USDC, Status::PendingAmlScreening);
    fx.take_effects();
    fx.screened(id, AmlVerdict::Alert);
    assert_eq!(fx.take_alerts(), vec![AlertKind::AmlAlert]);
    let open = *fx.p().alert_of(AlertKind::AmlAlert, id).expect("open");
    assert_eq!((open.closes_at_us, open.since_us), (None, fx.p().now_us()), "a condition");
    assert_eq!(fx.w(id).timer_us, None, "no timer: nothing is raised again");
    fx.advance(5 * HOUR_US).tick();
    assert_eq!(fx.p().alert_of(AlertKind::AmlAlert, id), Some(&open), "still open, the same id");
    assert!(fx.take_alerts().is_empty());
    // An operator bypasses it: on to the approvers, the condition ended.
    let params = OpParams { reason: Some(text("reviewed")), ..OpParams::default() };
    assert_eq!(fx.operate(id, OperationKind::BypassAml, OPERATOR, params), None);
    assert_eq!(fx.status(id), Status::PendingAuthorization);
    assert_eq!(fx.p().alert_of(AlertKind::AmlAlert, id), None);
    fx.advance(3 * HOUR_US).tick();
    assert!(fx.take_alerts().is_empty());
    fx.check();
}
