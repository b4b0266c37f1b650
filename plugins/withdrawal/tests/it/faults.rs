//! One test per fault of the outside world, each forced on the next occurrence, then the run
//! must end with every withdrawal final and the end checks holding (no withdrawal paid twice,
//! nothing on chain that the plugin did not record, money where the status says).

use rtgs_chain_sim::evm::{BroadcastFault, WebhookFault};
use rtgs_withdrawal::alert::AlertKind;
use rtgs_withdrawal::chain::ChainFamily;
use rtgs_withdrawal::command::*;
use rtgs_withdrawal::records::AttemptOutcome;
use rtgs_withdrawal::status::{Cause, Status};
use rtgs_withdrawal::types::*;
use rtgs_withdrawal::world::workload::WorldConfig;

use crate::world::*;

fn evm_one(fault: BroadcastFault) -> (WFx, WithdrawalId) {
    let mut fx = WFx::calm(&[ChainFamily::Evm]);
    fx.evm().chain.force_broadcast_fault(fault);
    let id = fx.create(fx.request(0, 500, RequestKind::Standard, false));
    (fx, id)
}

fn ends(fx: &mut WFx, id: WithdrawalId, seconds: u64) -> Status {
    assert!(
        fx.run_until(seconds, |p| p.withdrawal(id).is_some_and(|w| w.is_settled_final())),
        "{:?}",
        fx.p().withdrawal(id)
    );
    check_end(fx);
    fx.status(id)
}

fn outcomes(fx: &WFx, id: WithdrawalId) -> Vec<AttemptOutcome> {
    fx.p().withdrawal(id).expect("exists").outcomes.iter().map(|o| *o.outcome()).collect()
}

fn alerts(fx: &WFx) -> Vec<AlertKind> {
    fx.d.adapter.alerts().iter().map(|(_, a)| a.kind).collect()
}

#[test]
fn a_dropped_transaction_is_found_unknown_sent_again_and_completes() {
    let (mut fx, id) = evm_one(BroadcastFault::Drop);
    assert_eq!(ends(&mut fx, id, 60), Status::Completed);
    let o = outcomes(&fx, id);
    assert!(o.contains(&AttemptOutcome::Resent), "{o:?}");
    assert!(alerts(&fx).contains(&AlertKind::Stale));
    assert_eq!(
        fx.p().withdrawal(id).map(|w| w.attempts.len()),
        Some(1),
        "the same payload, not a new transaction"
    );
}

#[test]
fn a_stuck_transaction_goes_stale_and_the_operators_boost_replaces_it() {
    let (mut fx, id) = evm_one(BroadcastFault::Stuck);
    assert_eq!(ends(&mut fx, id, 120), Status::Completed);
    let w = fx.p().withdrawal(id).expect("exists");
    assert!(w.transitions.iter().any(|t| *t.to() == Status::Stale));
    assert!(w.attempts.len() >= 2, "a replacement was signed");
    assert!(w.outcomes.iter().any(|o| *o.outcome() == AttemptOutcome::Replaced), "the stuck one replaced");
    assert!(fx.evm().chain.stats.replacements >= 1);
}

#[test]
fn a_reverted_transaction_fails_and_is_retried_in_a_new_round() {
    let mut cfg = WorldConfig::calm(5, TIME_SCALE);
    cfg.people.operator_retry = 1000;
    let mut fx = WFx::new(&[ChainFamily::Evm], cfg);
    fx.evm().chain.force_broadcast_fault(BroadcastFault::Revert);
    let id = fx.create(fx.request(0, 500, RequestKind::Standard, false));
    assert!(fx.run_until(120, |p| p.withdrawal(id).is_some_and(|w| w.status == Status::Completed)));
    check_end(&fx);
    let w = fx.p().withdrawal(id).expect("exists");
    assert_eq!((w.round, w.retry_count), (2, 1));
    assert!(w.transitions.iter().any(|t| *t.cause() == Cause::Reverted));
    assert!(alerts(&fx).contains(&AlertKind::Reverted));
}

#[test]
fn an_rpc_timeout_after_acceptance_is_checked_on_chain_not_sent_twice() {
    let (mut fx, id) = evm_one(BroadcastFault::TimeoutAfterAccept);
    assert_eq!(ends(&mut fx, id, 60), Status::Completed);
    let o = outcomes(&fx, id);
    assert_eq!(o.first(), Some(&AttemptOutcome::Ambiguous));
    assert!(o.contains(&AttemptOutcome::Submitted), "the check found it out: {o:?}");
    assert!(!o.contains(&AttemptOutcome::Resent), "nothing sent again");
}

#[test]
fn an_rpc_timeout_before_acceptance_sends_the_same_payload_again() {
    let (mut fx, id) = evm_one(BroadcastFault::TimeoutBeforeAccept);
    assert_eq!(ends(&mut fx, id, 60), Status::Completed);
    assert!(outcomes(&fx, id).contains(&AttemptOutcome::Resent));
}

#[test]
fn a_certain_refusal_fails_before_anything_left_and_the_retry_completes() {
    let mut cfg = WorldConfig::calm(6, TIME_SCALE);
    cfg.people.operator_retry = 1000;
    let mut fx = WFx::new(&[ChainFamily::Evm], cfg);
    fx.evm().chain.force_broadcast_fault(BroadcastFault::Reject);
    let id = fx.create(fx.request(0, 500, RequestKind::Standard, false));
    assert!(fx.run_until(120, |p| p.withdrawal(id).is_some_and(|w| w.status == Status::Completed)));
    check_end(&fx);
    let w = fx.p().withdrawal(id).expect("exists");
    assert_eq!(w.fail_cause, None);
    assert!(w.transitions.iter().any(|t| *t.cause() == Cause::BroadcastRejected));
}

#[test]
fn a_missing_webhook_is_made_up_for_by_the_monitors_lookup() {
    let mut fx = WFx::calm(&[ChainFamily::Evm]);
    fx.evm().chain.faults.webhook_missing = 1000;
    let id = fx.create(fx.request(0, 500, RequestKind::Standard, false));
    assert_eq!(ends(&mut fx, id, 60), Status::Completed);
    let w = fx.p().withdrawal(id).expect("exists");
    assert!(w.transitions.iter().any(|t| *t.cause() == Cause::Threshold));
}

#[test]
fn a_delayed_webhook_changes_nothing_but_time() {
    let mut fx = WFx::calm(&[ChainFamily::Evm]);
    fx.evm().chain.force_webhook_fault(WebhookFault::DelayUs(60_000_000));
    let id = fx.create(fx.request(0, 500, RequestKind::Standard, false));
    assert_eq!(ends(&mut fx, id, 60), Status::Completed);
}

#[test]
fn duplicate_webhooks_are_one_journal_entry_or_recognised_by_the_plugin() {
    let mut cfg = WorldConfig::calm(8, TIME_SCALE);
    cfg.people.webhook_duplicate = 1000;
    let mut fx = WFx::new(&[ChainFamily::Evm], cfg);
    let id = fx.create(fx.request(0, 500, RequestKind::Standard, false));
    assert_eq!(ends(&mut fx, id, 60), Status::Completed);
    assert!(fx.d.adapter.stats.webhooks_duplicated > 0);
    assert!(fx.d.duplicates_dropped > 0, "the sequencer's dedupe took them");
    // A duplicate that gets past the sequencer (another bmi) is recognised by the plugin.
    let w = fx.p().withdrawal(id).expect("exists").clone();
    let c = w.confirmations.last().expect("confirmed");
    let before = fx.p().counters().webhooks_duplicate;
    fx.d.submit(&WithdrawalCommand::ChainEvent(ChainEvent {
        chain: w.chain,
        tx_hash: *c.tx_hash(),
        event: ChainEventKind::Confirmed {
            block_hash: *c.block_hash(),
            height: *c.block_height(),
            depth: *c.depth(),
            success: true,
        },
    }))
    .expect("fits");
    assert_eq!(fx.p().counters().webhooks_duplicate, before + 1);
    assert_eq!(fx.p().withdrawal(id).map(|x| x.confirmations.len()), Some(w.confirmations.len()));
}

#[test]
fn shallow_reorgs_under_the_threshold_never_undo_a_completion() {
    let mut fx = WFx::calm(&[ChainFamily::Evm]);
    fx.evm().chain.faults.reorg = 300;
    let ids: Vec<_> = (0..10).map(|_| fx.create(fx.request(0, 10, RequestKind::Standard, false))).collect();
    assert!(
        fx.run_until(300, |p| ids.iter().all(|id| p.withdrawal(*id).is_some_and(|w| w.is_settled_final())))
    );
    assert!(fx.evm().chain.stats.reorgs > 0);
    assert!(ids.iter().all(|id| fx.status(*id) == Status::Completed));
    assert_eq!(fx.p().counters().reversals, 0);
    check_end(&fx);
}

#[test]
fn a_deep_reorg_that_brings_it_back_completes_again_and_one_that_does_not_reverses() {
    for conflicting in [false, true] {
        let mut fx = WFx::calm(&[ChainFamily::Evm]);
        let id = fx.create(fx.request(0, 500, RequestKind::Standard, false));
        assert_eq!(ends(&mut fx, id, 60), Status::Completed);
        let settlement = fx.wl.settlement(0);
        assert_eq!(fx.balance(settlement), 500);
        let now = fx.d.adapter.world_us(fx.d.now_us());
        let depth = fx.evm().chain.tip();
        fx.evm().reorg_deep(depth, conflicting, now);
        fx.run_s(1);
        assert!(fx.run_until(120, |p| p.withdrawal(id).is_some_and(|w| w.is_settled_final())));
        let stats = fx.evm().chain.stats.clone();
        let w = fx.p().withdrawal(id).expect("exists");
        assert!(
            w.confirmations.iter().any(|c| !c.is_live()),
            "reorged rows kept: {:?} {stats:?}",
            w.confirmations
        );
        if conflicting {
            assert_eq!((w.status, w.fail_cause), (Status::Failed, Some(Cause::ReorgedAway)));
            assert_eq!(fx.balance(settlement), 0, "reversed");
            assert_eq!(fx.balance(fx.wl.customer(0)), fx.wl.funds_per_customer);
        } else {
            assert_eq!(w.status, Status::Completed, "completed again");
            assert_eq!(fx.balance(settlement), 500, "not debited twice");
        }
        check_end(&fx);
    }
}

#[test]
fn signer_and_screener_timeouts_are_retried_or_timed_out() {
    // The screener does not answer: the plugin asks again and alerts after three.
    let mut cfg = WorldConfig::calm(9, TIME_SCALE);
    cfg.screener.timeout = 1000;
    let mut fx = WFx::new(&[ChainFamily::Evm], cfg);
    let id = fx.create(fx.request(0, 500, RequestKind::Standard, true));
    fx.run_s(20);
    assert!(alerts(&fx).contains(&AlertKind::AmlNoAnswer));
    let screenings = fx.d.effects().iter().filter(|e| e.op == rtgs_withdrawal::effect::op::SCREEN).count();
    assert!(screenings >= 3, "asked again: {screenings}");
    // The operator (answering the alert) bypassed or rescreened; once the screener answers, on it goes.
    fx.d.adapter.screener = Box::new(rtgs_withdrawal::world::services::ScreenerSim::new(
        rtgs_withdrawal::world::services::ScreenerConfig::CALM,
        1,
    ));
    assert_eq!(ends(&mut fx, id, 120), Status::Completed);
}

#[test]
fn a_signature_arriving_after_its_blockhash_expired_is_never_broadcast() {
    let mut cfg = WorldConfig::calm(10, TIME_SCALE);
    // Signing takes longer than Solana's (short) window.
    cfg.custody.sign_latency_us = 9_000_000 * TIME_SCALE;
    let mut fx = WFx::new(&[ChainFamily::Solana], cfg);
    let id = fx.create(fx.request(0, 500, RequestKind::Standard, false));
    assert_eq!(ends(&mut fx, id, 60), Status::Failed);
    let w = fx.p().withdrawal(id).expect("exists");
    assert_eq!(w.fail_cause, Some(Cause::SignatureExpired));
    assert_eq!(fx.d.adapter.stats.chain_broadcasts, 0);
    assert!(w.outcomes.iter().any(|o| *o.outcome() == AttemptOutcome::Expired));
}

#[test]
fn faults_of_every_kind_at_once_on_every_family_end_consistent() {
    let mut fx = WFx::new(ChainFamily::ALL, WorldConfig::faulty(11, TIME_SCALE));
    let mut ids = Vec::new();
    for n in 0..120 {
        let (bmi, pc) = fx.wl.request(n).expect("fits");
        if let Some(seq) = fx.d.submit_payload(bmi, rtgs_core::entry::Payload::Plugin(pc)) {
            ids.push(WithdrawalId(seq));
        }
        fx.d.run_for(20_000, 20_000);
    }
    assert!(
        fx.run_until(900, WFx::quiescent),
        "{:?}",
        fx.p()
            .withdrawals()
            .filter(|w| !w.is_settled_final())
            .map(|w| (w.id, w.status, w.awaiting))
            .collect::<Vec<_>>()
    );
    check_end(&fx);
    let completed = fx.p().count_in(Status::Completed);
    assert!(completed > 60, "most complete: {completed}");
}
