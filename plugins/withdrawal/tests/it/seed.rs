//! The seed's cases end to end, against the simulated world: each withdrawal goes the whole way
//! through the journal (requests, the services' answers, broadcasts, webhooks, timers).

use rtgs_withdrawal::chain::ChainFamily;
use rtgs_withdrawal::command::*;
use rtgs_withdrawal::operation::{Actor, ActorKind, OpParams, OperationKind};
use rtgs_withdrawal::status::{Cause, Status};
use rtgs_withdrawal::types::*;
use rtgs_withdrawal::world::workload::WorldConfig;

use crate::world::*;

fn path(fx: &WFx, id: WithdrawalId) -> Vec<Status> {
    fx.p().withdrawal(id).expect("exists").transitions.iter().map(|t| *t.to()).collect()
}

#[test]
fn without_aml_every_family_completes_along_the_seeds_path() {
    let mut fx = WFx::calm(ChainFamily::ALL);
    let ids: Vec<_> = (0..ChainFamily::ALL.len())
        .map(|i| fx.create(fx.request(i, 500, RequestKind::Standard, false)))
        .collect();
    assert!(fx.run_until(120, |p| ids
        .iter()
        .all(|id| p.withdrawal(*id).is_some_and(|w| w.status == Status::Completed))));
    for id in &ids {
        use Status::*;
        assert_eq!(
            path(&fx, *id),
            vec![Submitted, PendingAuthorization, PendingSignature, Broadcasting, Confirming, Completed]
        );
    }
    check_end(&fx);
    for i in 0..ChainFamily::ALL.len() {
        assert_eq!(fx.balance(fx.wl.settlement(i)), 500, "{:?}", fx.wl.families[i]);
    }
}

#[test]
fn with_aml_it_is_screened_first() {
    let mut fx = WFx::calm(&[ChainFamily::Evm]);
    let id = fx.create(fx.request(0, 500, RequestKind::Standard, true));
    assert!(fx.run_until(60, |p| p.withdrawal(id).is_some_and(|w| w.status == Status::Completed)));
    use Status::*;
    assert_eq!(
        path(&fx, id),
        vec![
            PendingAmlScreening,
            PendingAuthorization,
            PendingSignature,
            Broadcasting,
            Confirming,
            Completed
        ]
    );
    check_end(&fx);
}

#[test]
fn aml_rejections_policy_blocks_and_timeouts_end_without_money_moving() {
    let mut cfg = WorldConfig::calm(3, TIME_SCALE);
    cfg.screener.reject = 1000;
    let mut fx = WFx::new(&[ChainFamily::Evm], cfg);
    let rejected = fx.create(fx.request(0, 500, RequestKind::Standard, true));
    fx.d.adapter.policy =
        Box::new(rtgs_withdrawal::world::services::PolicySim { amount_chain_max: 1, block: 0, seed: 1 });
    let blocked = fx.create(fx.request(0, 500, RequestKind::Standard, false));
    assert!(fx.run_until(60, WFx::quiescent));
    assert_eq!(fx.status(rejected), Status::Rejected);
    assert_eq!(fx.status(blocked), Status::Blocked);
    assert_eq!(fx.p().withdrawal(blocked).and_then(|w| w.blocked_by_rule), Some(1));
    assert_eq!(fx.balance(fx.wl.customer(0)), fx.wl.funds_per_customer);
    check_end(&fx);
}

#[test]
fn no_approval_and_no_signature_fail_on_their_timers() {
    let mut cfg = WorldConfig::calm(4, TIME_SCALE);
    cfg.custody.approval_timeout = 1000;
    let mut fx = WFx::new(&[ChainFamily::Evm], cfg);
    let id = fx.create(fx.request(0, 500, RequestKind::Standard, false));
    assert!(fx.run_until(60, WFx::quiescent));
    assert_eq!(fx.p().withdrawal(id).and_then(|w| w.fail_cause), Some(Cause::AuthorizationTimeout));
    let mut cfg = WorldConfig::calm(4, TIME_SCALE);
    cfg.custody.sign_timeout = 1000;
    let mut fx = WFx::new(&[ChainFamily::Evm], cfg);
    let id = fx.create(fx.request(0, 500, RequestKind::Standard, false));
    assert!(fx.run_until(60, WFx::quiescent));
    assert_eq!(fx.p().withdrawal(id).and_then(|w| w.fail_cause), Some(Cause::SignatureTimeout));
    check_end(&fx);
}

#[test]
fn solana_sign_only_completes_when_the_customer_broadcasts_and_fails_when_it_never_does() {
    let mut fx = WFx::calm(&[ChainFamily::Solana]);
    let sent = fx.create(fx.request(0, 500, RequestKind::SignOnly, false));
    assert!(fx.run_until(60, |p| p.withdrawal(sent).is_some_and(|w| w.status == Status::Completed)));
    use Status::*;
    assert_eq!(
        path(&fx, sent),
        vec![Submitted, PendingAuthorization, PendingSignature, Signed, Confirming, Completed]
    );
    assert_eq!(fx.d.adapter.stats.chain_broadcasts, 0, "not broadcast by us");
    assert_eq!(fx.d.adapter.stats.customer_broadcasts, 1);
    fx.d.adapter.people.customer_never = 1000;
    let never = fx.create(fx.request(0, 500, RequestKind::SignOnly, false));
    assert!(fx.run_until(60, |p| p.withdrawal(never).is_some_and(|w| w.status.is_final())));
    assert_eq!(fx.p().withdrawal(never).and_then(|w| w.fail_cause), Some(Cause::ValidityPassed));
    check_end(&fx);
}

#[test]
fn cancel_before_broadcast_and_drop_after_it() {
    let mut fx = WFx::calm(&[ChainFamily::Evm]);
    let early = fx.create(fx.request(0, 500, RequestKind::Standard, false));
    let participant = Actor { kind: ActorKind::Participant, id: ActorId(fx.wl.customer(0)) };
    fx.d.submit(&WithdrawalCommand::Operate(Operate {
        withdrawal: early,
        operation: OperationKind::Cancel,
        actor: participant,
        params: OpParams::default(),
    }))
    .expect("fits");
    assert_eq!(fx.status(early), Status::Cancelled);
    // Stuck on chain: dropped by the operator, CANCELLED when the drop confirms.
    fx.evm().chain.force_broadcast_fault(rtgs_chain_sim::evm::BroadcastFault::Stuck);
    let late = fx.create(fx.request(0, 500, RequestKind::Standard, false));
    assert!(fx.run_until(30, |p| p
        .withdrawal(late)
        .is_some_and(|w| w.status == Status::Broadcasting && w.awaiting.is_none())));
    fx.d.submit(&WithdrawalCommand::Operate(Operate {
        withdrawal: late,
        operation: OperationKind::Drop,
        actor: Actor { kind: ActorKind::Operator, id: ActorId(1) },
        params: OpParams::default(),
    }))
    .expect("fits");
    assert!(fx.run_until(60, |p| p.withdrawal(late).is_some_and(|w| w.status.is_final())));
    assert_eq!(fx.status(late), Status::Cancelled);
    assert_eq!(fx.balance(fx.wl.customer(0)), fx.wl.funds_per_customer);
    check_end(&fx);
}

#[test]
fn raw_signing_and_its_cache() {
    let mut fx = WFx::calm(&[ChainFamily::Evm]);
    let first = fx.create(fx.request(0, 0, RequestKind::Raw(Digest([3; 32])), false));
    assert!(fx.run_until(30, |p| p.withdrawal(first).is_some_and(|w| w.status == Status::Completed)));
    let cached = fx.create(fx.request(0, 0, RequestKind::Raw(Digest([3; 32])), false));
    fx.run_s(2);
    use Status::*;
    assert_eq!(path(&fx, first), vec![Submitted, PendingAuthorization, PendingSignature, Completed]);
    assert_eq!(path(&fx, cached), vec![Submitted, Completed]);
    check_end(&fx);
}

#[test]
fn bitcoins_unconfirmed_chain_and_round_robin_over_vaults() {
    let mut fx = WFx::calm(&[ChainFamily::Utxo]);
    let ids: Vec<_> = (0..60).map(|_| fx.create(fx.request(0, 10, RequestKind::Standard, false))).collect();
    assert!(fx.run_until(600, |p| ids
        .iter()
        .all(|id| p.withdrawal(*id).is_some_and(|w| w.status == Status::Completed))));
    let vaults: std::collections::BTreeSet<_> =
        ids.iter().filter_map(|id| fx.p().withdrawal(*id).and_then(|w| w.vault)).collect();
    assert_eq!(vaults.len(), 2, "both vaults used");
    let queued = ids.iter().filter(|id| path(&fx, **id).contains(&Status::Queued)).count();
    assert!(queued > 0, "two vaults of 25 unconfirmed each cannot take 60 at once");
    assert_eq!(fx.seq(ChainFamily::Utxo).stats.mempool_limit, 0, "the plugin never hit the node's limit");
    check_end(&fx);
}
