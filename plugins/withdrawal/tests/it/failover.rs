//! Owner failover: the owner that executed effects dies with their answers; the new owner
//! executes everything pending again — rebuilt from the state, so the same signature request
//! and the same signed payload — and no transaction is ever broadcast twice.

use rtgs_core::plugin::{Effect, Plugin};
use rtgs_withdrawal::chain::ChainFamily;
use rtgs_withdrawal::command::RequestKind;
use rtgs_withdrawal::state::AwaitKind;
use rtgs_withdrawal::status::Status;

use crate::world::*;

/// Runs until some withdrawal awaits `kind`, then kills the owner: its unanswered results are
/// lost, and the next owner executes what is pending.
fn fail_over_at(fx: &mut WFx, kind: AwaitKind) -> usize {
    assert!(fx.run_until(60, |p| p.withdrawals().any(|w| w.awaiting.is_some_and(|a| a.kind == kind))));
    let lost = fx.d.adapter.lose_answers();
    let mut pending: Vec<Effect> = Vec::new();
    Plugin::pending_effects(&fx.d.plugin, &mut pending);
    fx.d.reexecute(&pending);
    lost
}

#[test]
fn failover_mid_broadcast_sends_the_same_signed_payload_and_nothing_twice() {
    let mut fx = WFx::calm(&[ChainFamily::Evm]);
    let id = fx.create(fx.request(0, 500, RequestKind::Standard, false));
    let lost = fail_over_at(&mut fx, AwaitKind::Broadcast);
    assert!(lost >= 1, "the broadcast's answer was in flight");
    assert!(fx.run_until(60, |p| p.withdrawal(id).is_some_and(|w| w.status == Status::Completed)));
    let evm = fx.evm();
    assert_eq!(evm.chain.stats.already_known, 1, "the re-sent payload was the same transaction");
    assert_eq!(evm.chain.ledger.txs.len(), 1, "one transaction on chain");
    assert_eq!(fx.p().withdrawal(id).map(|w| w.attempts.len()), Some(1));
    check_end(&fx);
}

#[test]
fn failover_mid_signature_signs_the_same_raw_transaction_again() {
    let mut fx = WFx::calm(&[ChainFamily::Evm]);
    let id = fx.create(fx.request(0, 500, RequestKind::Standard, false));
    fail_over_at(&mut fx, AwaitKind::Sign);
    assert!(fx.run_until(60, |p| p.withdrawal(id).is_some_and(|w| w.status == Status::Completed)));
    assert!(
        fx.d.duplicates_dropped > 0 || fx.p().counters().results_ignored > 0,
        "the second answer went nowhere"
    );
    assert_eq!(fx.evm().chain.ledger.txs.len(), 1);
    check_end(&fx);
}

#[test]
fn failovers_at_every_kind_of_wait_under_faults_end_consistent() {
    for (i, kind) in
        [AwaitKind::Screen, AwaitKind::Authorize, AwaitKind::Sign, AwaitKind::Broadcast, AwaitKind::Lookup]
            .into_iter()
            .enumerate()
    {
        let mut fx = WFx::new(
            ChainFamily::ALL,
            rtgs_withdrawal::world::workload::WorldConfig::faulty(20 + i as u64, TIME_SCALE),
        );
        for n in 0..30 {
            let (bmi, pc) = fx.wl.request(n).expect("fits");
            fx.d.submit_payload(bmi, rtgs_core::entry::Payload::Plugin(pc));
        }
        if fx.run_until(120, |p| p.withdrawals().any(|w| w.awaiting.is_some_and(|a| a.kind == kind))) {
            fail_over_at(&mut fx, kind);
        }
        assert!(fx.run_until(900, WFx::quiescent), "{kind:?}");
        check_end(&fx);
    }
}
