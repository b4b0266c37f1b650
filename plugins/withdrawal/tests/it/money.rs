//! Money through ledger intents (mission.md §3.2.1, §3.4): held at acceptance, released,
//! settled, reversed — and settled again, not twice. Every fixture step also checks the
//! ledger's conservation (`Σ balances + Σ holds = Σ funded`) and the plugin's invariants.

use rtgs_chain_sim::answer::{BroadcastOutcome, ReceiptStatus};
use rtgs_withdrawal::alert::AlertKind;
use rtgs_withdrawal::chain::AssetParams;
use rtgs_withdrawal::command::*;
use rtgs_withdrawal::operation::RefuseCode;
use rtgs_withdrawal::settings::SECOND_US;
use rtgs_withdrawal::state::Money;
use rtgs_withdrawal::status::Status;
use rtgs_withdrawal::types::*;

use crate::support::*;

#[test]
fn a_request_the_ledger_cannot_hold_is_refused_with_its_iso_reason() {
    let mut fx = Fx::new();
    let id = fx.create(fx.request(USDC, FUNDS + 1, RequestKind::Standard, false));
    assert!(fx.p().withdrawal(id).is_none(), "never became a withdrawal");
    let r = fx.p().refusal(id).expect("refusal kept");
    assert_eq!((r.code, r.iso_code()), (RefuseCode::LedgerRefused, Some("AM04")));
    let mut unknown = fx.request(USDC, 5, RequestKind::Standard, false);
    unknown.account = LedgerAccount(4242);
    let id = fx.create(unknown);
    assert_eq!(fx.p().refusal(id).and_then(|r| r.iso_code()), Some("AC01"));
    assert_eq!(fx.balance(CUSTOMER), FUNDS);
}

#[test]
fn requests_are_checked_for_their_kind_and_chain() {
    let mut fx = Fx::new();
    let cases = [
        (fx.request(AssetId(99), 5, RequestKind::Standard, false), RefuseCode::UnknownAsset),
        (fx.request(USDC, 0, RequestKind::Standard, false), RefuseCode::AmountZero),
        (fx.request(USDC, u64::MAX, RequestKind::Standard, false), RefuseCode::AmountTooLarge),
        // Sign-only needs a validity window and unordered slots (Solana, Algorand).
        (fx.request(USDC, 5, RequestKind::SignOnly, false), RefuseCode::KindNotAllowed),
        (fx.request(XTZ, 5, RequestKind::SignOnly, false), RefuseCode::KindNotAllowed),
        (fx.request(USDC, 0, RequestKind::Raw(Digest([1; 32])), true), RefuseCode::KindNotAllowed),
        (
            CreateWithdrawal { destination: None, ..fx.request(USDC, 5, RequestKind::Standard, false) },
            RefuseCode::KindNotAllowed,
        ),
        (
            CreateWithdrawal {
                destination: Some(text(&"x".repeat(129))),
                ..fx.request(USDC, 5, RequestKind::Standard, false)
            },
            RefuseCode::InvalidText,
        ),
    ];
    for (req, code) in cases {
        let id = fx.create(req.clone());
        assert_eq!(fx.p().refusal(id).map(|r| r.code), Some(code), "{req:?}");
    }
    assert_eq!(fx.p().withdrawals().count(), 0);
    assert_eq!(fx.balance(CUSTOMER), FUNDS);
}

#[test]
fn a_reorged_completion_that_comes_back_completes_again_without_a_second_debit() {
    let mut fx = Fx::new();
    let id = fx.reach(USDC, Status::Completed);
    let hash = fx.last_hash(id);
    fx.reorged(id, hash, 10);
    assert!(fx.w(id).reorg_since_us.is_some());
    // Back in a block (webhooks), then at the threshold again.
    fx.included(id, hash, 12);
    fx.confirmed(id, hash, 12, EVM_CONFIRMATIONS, true);
    let w = fx.w(id);
    assert_eq!((w.status, w.money, w.reorg_since_us), (Status::Completed, Money::Settled, None));
    assert_eq!((fx.balance(SETTLEMENT), fx.balance(CUSTOMER)), (1_000, FUNDS - 1_000), "debited once");
    let live = fx.w(id).confirmations.iter().filter(|c| c.is_live()).count();
    let reorged = fx.w(id).confirmations.iter().filter(|c| !c.is_live()).count();
    assert_eq!((live, reorged), (2, 2), "old rows kept with reorged_at, new rows appended");
}

#[test]
fn a_reorged_completion_found_back_by_the_lookup_stays_settled() {
    let mut fx = Fx::new();
    let id = fx.reach(USDC, Status::Completed);
    let hash = fx.last_hash(id);
    fx.reorged(id, hash, 10);
    fx.advance(601 * SECOND_US).tick();
    fx.looked(id, 20, Some(1), vec![(hash, mined(14, true))]);
    let w = fx.w(id);
    assert_eq!((w.status, w.money, w.reorg_since_us), (Status::Completed, Money::Settled, None));
    assert_eq!(fx.balance(SETTLEMENT), 1_000);
    assert_eq!(fx.p().counters().reversals, 0);
}

#[test]
fn a_pending_reorged_completion_is_asked_about_again() {
    let mut fx = Fx::new();
    let id = fx.reach(USDC, Status::Completed);
    let hash = fx.last_hash(id);
    fx.reorged(id, hash, 10);
    fx.advance(601 * SECOND_US).tick();
    fx.looked(id, 20, Some(0), vec![(hash, ReceiptStatus::Pending)]);
    assert_eq!(fx.status(id), Status::Completed);
    assert!(fx.w(id).reorg_since_us.is_some(), "still open");
    fx.advance(601 * SECOND_US).tick();
    assert!(fx.w(id).awaiting.is_some(), "asked again");
}

#[test]
fn a_refused_settlement_waits_with_an_alert_and_is_tried_again() {
    let mut fx = Fx::new();
    fx.cmd(WithdrawalCommand::RegisterAsset(AssetParams {
        asset: AssetId(9),
        chain: EVM,
        token: TokenId(2),
        currency: CurrencyCode(*b"USD"),
        scale_exp: 4,
        settlement_account: LedgerAccount(777),
    }));
    let id = fx.reach(AssetId(9), Status::Confirming);
    let hash = fx.last_hash(id);
    fx.take_effects();
    fx.confirmed(id, hash, 10, EVM_CONFIRMATIONS, true);
    assert_eq!(fx.status(id), Status::Confirming, "the settlement account does not exist (AC01)");
    assert_eq!(fx.take_alerts(), vec![AlertKind::LedgerRefused]);
    assert_eq!(fx.held(id), Some(1_000));
    fx.d.open_account(777, b"USD", 0).expect("valid");
    fx.advance(31 * 60 * SECOND_US).tick();
    fx.looked(id, 30, Some(1), vec![(hash, mined(10, true))]);
    assert_eq!(fx.status(id), Status::Completed);
    assert_eq!(fx.balance(777), 1_000);
}

#[test]
fn every_way_to_end_returns_or_pays_the_money_exactly_once() {
    let mut fx = Fx::new();
    let mut ended = Vec::new();
    for s in [Status::Cancelled, Status::Rejected, Status::Blocked, Status::Failed, Status::Completed] {
        ended.push((fx.reach(USDC, s), s));
    }
    for (id, s) in &ended {
        assert_eq!(fx.held(*id), None, "{s:?}");
        let expected = if *s == Status::Completed { Money::Settled } else { Money::Released };
        assert_eq!(fx.w(*id).money, expected);
    }
    assert_eq!(fx.balance(SETTLEMENT), 1_000);
    assert_eq!(fx.balance(CUSTOMER), FUNDS - 1_000);
    // A drop's refusal keeps the original (and its hold).
    let id = fx.reach(USDC, Status::Broadcasting);
    fx.broadcast_answer(id, BroadcastOutcome::Accepted);
    fx.op(id, rtgs_withdrawal::operation::OperationKind::Drop);
    fx.signed(id);
    fx.broadcast_answer(
        id,
        BroadcastOutcome::Rejected(rtgs_chain_sim::answer::RejectCode::ReplacementUnderpriced),
    );
    assert_eq!((fx.status(id), fx.held(id)), (Status::Broadcasting, Some(1_000)));
}
