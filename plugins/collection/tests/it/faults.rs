//! One test per chain fault, through the journal driver and the chain simulator.
//!
//! Timeline of every test: deposits at START, mined 12 s later and confirmed 3 blocks deep; the
//! hourly run at START + 1 h reads balances at the safe height and broadcasts; the stale monitor
//! (armed by the first tick) checks hourly for transactions broadcast more than 60 min ago.

use rtgs_collection::alert::AlertKind;
use rtgs_collection::chain_sim::{BroadcastFault, TxState, WebhookFault};
use rtgs_collection::effect::CollectionEffect;
use rtgs_collection::settings::{HOUR_US, MINUTE_US};
use rtgs_collection::state::*;
use rtgs_collection::types::*;

use crate::support::*;

fn alerts(w: &World) -> Vec<AlertKind> {
    // Raised so far (the open ones may have closed since).
    w.p().counters().alerts_raised.keys().copied().collect()
}

fn one_deposit_world(seed: u64) -> World {
    let mut w = World::new(seed);
    w.deposit(1, wallet(1), 2 * USDT);
    w
}

#[test]
fn the_happy_path_confirms_within_minutes_of_the_run() {
    let mut w = one_deposit_world(1);
    w.run(HOUR_US + 5 * MINUTE_US);
    assert_eq!(w.batches_with(BatchStatus::Confirmed), vec![BatchId(1)]);
    w.check_money();
    w.check_all_collected();
    assert!(alerts(&w).is_empty());
}

#[test]
fn a_dropped_tx_goes_stale_and_a_gas_bump_recovers_it() {
    let mut w = one_deposit_world(2);
    w.sim().force_broadcast_fault(BroadcastFault::Drop);
    w.run(HOUR_US + 5 * MINUTE_US);
    // The node said "accepted": BROADCASTING, and nothing happens on chain.
    assert_eq!(w.batches_with(BatchStatus::Broadcasting), vec![BatchId(1)]);
    w.run(2 * HOUR_US + 30 * MINUTE_US);
    assert_eq!(w.batches_with(BatchStatus::Stale), vec![BatchId(1)]);
    assert_eq!(alerts(&w), vec![AlertKind::StuckTx]);
    assert!(!w.p().relayer_available(RELAYER));
    assert_eq!(w.row_status(1), Some(RowStatus::Queued));
    w.run_with_operator(HOUR_US);
    let b = w.p().batch(BatchId(1)).expect("batch").clone();
    assert_eq!(b.status, BatchStatus::Confirmed);
    assert_eq!(b.tx_hashes.len(), 2, "original and replacement");
    assert!(w.p().relayer_available(RELAYER));
    w.check_money();
    w.check_all_collected();
}

#[test]
fn a_stuck_tx_blocks_later_nonces_until_it_is_replaced() {
    let mut w = World::new(3);
    w.deposit(1, wallet(1), 2 * USDT);
    w.deposit(2, wallet(2), 3 * USDT);
    w.sim().force_broadcast_fault(BroadcastFault::Stuck);
    w.run(HOUR_US + 5 * MINUTE_US);
    // Nonce 0 is stuck, nonce 1 waits behind it (EVM nonce order).
    assert_eq!(w.batches_with(BatchStatus::Broadcasting), vec![BatchId(1), BatchId(2)]);
    assert_eq!(w.d.adapter.mempool_len(), 2);
    w.run(2 * HOUR_US + 30 * MINUTE_US);
    assert_eq!(w.batches_with(BatchStatus::Stale), vec![BatchId(1), BatchId(2)]);
    // A third wallet's batch is not given to the paused relayer.
    w.deposit(3, wallet(3), 2 * USDT);
    w.run(HOUR_US);
    assert!(w
        .p()
        .batches()
        .any(|b| b.key.wallet == wallet(3) && b.status == BatchStatus::Pending && b.nonce.is_none()));
    w.run_with_operator(2 * HOUR_US);
    assert_eq!(w.batches_with(BatchStatus::Confirmed).len(), 3);
    w.check_money();
    w.check_all_collected();
}

#[test]
fn a_revert_fails_the_batch_and_the_next_run_sweeps_again() {
    let mut w = one_deposit_world(4);
    w.sim().force_broadcast_fault(BroadcastFault::Revert);
    w.run(HOUR_US + 5 * MINUTE_US);
    let b1 = w.p().batch(BatchId(1)).expect("batch").clone();
    assert_eq!((b1.status, b1.fail_reason), (BatchStatus::Failed, Some(FailReason::Reverted)));
    assert_eq!(w.row_status(1), Some(RowStatus::Queued));
    assert_eq!(alerts(&w), vec![AlertKind::Reverted]);
    w.run(HOUR_US);
    assert_eq!(w.batches_with(BatchStatus::Confirmed), vec![BatchId(2)]);
    assert_eq!(w.p().batch(BatchId(2)).and_then(|b| b.nonce), Some(1), "a revert consumes its nonce");
    w.check_money();
    w.check_all_collected();
}

#[test]
fn a_missing_webhook_is_made_up_by_the_stale_monitor() {
    let mut w = one_deposit_world(5);
    w.sim().force_webhook_fault(WebhookFault::Missing);
    w.run(HOUR_US + 30 * MINUTE_US);
    assert_eq!(w.batches_with(BatchStatus::Broadcasting), vec![BatchId(1)]);
    w.run(2 * HOUR_US + 30 * MINUTE_US);
    assert_eq!(w.batches_with(BatchStatus::Confirmed), vec![BatchId(1)]);
    assert_eq!(alerts(&w), vec![AlertKind::MissedWebhook]);
    assert!(w
        .p()
        .batch(BatchId(1))
        .and_then(|b| b.receipt)
        .is_some_and(|r| r.gas_cost_usd_micros == GAS_USD_MICROS));
    w.check_money();
    w.check_all_collected();
}

#[test]
fn a_delayed_webhook_is_harmless_before_or_after_the_stale_monitor() {
    // Delayed 20 minutes: confirmed by the webhook, no alert.
    let mut w = one_deposit_world(6);
    w.sim().force_webhook_fault(WebhookFault::DelayUs(20 * MINUTE_US));
    w.run(HOUR_US + 10 * MINUTE_US);
    assert_eq!(w.batches_with(BatchStatus::Broadcasting), vec![BatchId(1)]);
    w.run(20 * MINUTE_US);
    assert_eq!(w.batches_with(BatchStatus::Confirmed), vec![BatchId(1)]);
    assert!(alerts(&w).is_empty());

    // Delayed 5 hours: the stale monitor confirms first; the webhook is then a duplicate.
    let mut w = one_deposit_world(7);
    w.sim().force_webhook_fault(WebhookFault::DelayUs(5 * HOUR_US));
    w.run(4 * HOUR_US);
    assert_eq!(w.batches_with(BatchStatus::Confirmed), vec![BatchId(1)]);
    let ignored = w.p().counters().results_ignored;
    let before = w.p().batch(BatchId(1)).cloned();
    w.run(3 * HOUR_US);
    assert_eq!(w.p().counters().results_ignored, ignored + 1);
    assert_eq!(w.p().batch(BatchId(1)).cloned(), before);
    w.check_money();
    w.check_all_collected();
}

#[test]
fn reorgs_shallower_than_the_confirmation_depth_confirm_everything_once() {
    let mut w = World::new(8);
    w.sim().faults.reorg = 400;
    for i in 0..6 {
        w.deposit(i + 1, wallet(i % 3), (i as u128 + 2) * USDT);
    }
    w.run(90 * MINUTE_US);
    w.deposit(7, wallet(0), 5 * USDT);
    w.run_with_operator(3 * HOUR_US);
    assert!(w.d.adapter.stats.reorgs > 10, "reorgs happened: {:?}", w.d.adapter.stats);
    w.check_money();
    w.check_all_collected();
}

#[test]
fn an_rpc_timeout_after_acceptance_is_resolved_by_a_chain_check() {
    let mut w = one_deposit_world(9);
    w.sim().force_broadcast_fault(BroadcastFault::TimeoutAfterAccept);
    w.run(HOUR_US + 5 * MINUTE_US);
    assert_eq!(w.batches_with(BatchStatus::Confirmed), vec![BatchId(1)]);
    // Found on chain by the check: never sent again, and the nonce was not reused.
    assert_eq!(w.d.adapter.stats.broadcasts, 1);
    let lookups =
        w.d.effects()
            .iter()
            .filter(|e| matches!(CollectionEffect::from_effect(e), Ok(CollectionEffect::LookupReceipts(_))))
            .count();
    assert_eq!(lookups, 1);
    assert_eq!(w.p().relayer(RELAYER).map(|r| r.next_nonce), Some(1));
    w.check_money();
    w.check_all_collected();
}

#[test]
fn an_rpc_timeout_before_acceptance_resends_the_same_transaction() {
    let mut w = one_deposit_world(10);
    w.sim().force_broadcast_fault(BroadcastFault::TimeoutBeforeAccept);
    w.run(HOUR_US + 5 * MINUTE_US);
    assert_eq!(w.batches_with(BatchStatus::Confirmed), vec![BatchId(1)]);
    assert_eq!(w.d.adapter.stats.broadcasts, 2);
    let b = w.p().batch(BatchId(1)).expect("batch");
    assert_eq!((b.nonce, b.tx_hashes.len()), (Some(0), 1), "same nonce, same signed transaction");
    w.check_money();
    w.check_all_collected();
}

#[test]
fn a_certain_rejection_releases_the_nonce_for_the_next_run() {
    let mut w = one_deposit_world(11);
    w.sim().force_broadcast_fault(BroadcastFault::Reject);
    w.run(HOUR_US + 5 * MINUTE_US);
    let b1 = w.p().batch(BatchId(1)).expect("batch").clone();
    assert_eq!(b1.status, BatchStatus::Failed);
    assert!(matches!(b1.fail_reason, Some(FailReason::BroadcastRejected(_))));
    assert_eq!(w.p().relayer(RELAYER).map(|r| (r.next_nonce, r.lock)), Some((0, None)));
    w.run(HOUR_US);
    assert_eq!(w.p().batch(BatchId(2)).map(|b| (b.status, b.nonce)), Some((BatchStatus::Confirmed, Some(0))));
    w.check_money();
    w.check_all_collected();
}

#[test]
fn a_failed_balance_read_is_retried_next_run() {
    let mut w = one_deposit_world(12);
    w.sim().force_read_failure();
    w.run(HOUR_US + 5 * MINUTE_US);
    assert_eq!(w.p().batches().count(), 0);
    let skip = w.p().group(&key(wallet(1))).and_then(|g| g.last_skip).expect("skip");
    assert_eq!(skip.reason, SkipReason::ReadFailed);
    w.run(HOUR_US);
    w.check_money();
    w.check_all_collected();
}

#[test]
fn executing_the_same_broadcast_twice_is_harmless() {
    let mut w = one_deposit_world(13);
    // The run reads at START + 1 h; the read's answer, journaled 10 s later, sends the sweep.
    w.d.run_until(START_US + HOUR_US + 10_000_000, 10_000_000);
    let broadcast = w.d.effects().last().cloned().expect("the run's first broadcast");
    assert!(matches!(CollectionEffect::from_effect(&broadcast), Ok(CollectionEffect::Broadcast(_))));
    // Again while it is in the mempool: "already known".
    w.d.reexecute(std::slice::from_ref(&broadcast));
    assert_eq!(w.d.adapter.stats.already_known, 1);
    w.run(5 * MINUTE_US);
    // Again once mined: "nonce too low" — and the plugin ignores both answers.
    w.d.reexecute(std::slice::from_ref(&broadcast));
    w.run(MINUTE_US);
    assert_eq!(w.d.adapter.stats.nonce_too_low, 1);
    assert_eq!(w.d.adapter.mined_sweeps().len(), 1);
    assert!(w.p().counters().results_ignored >= 2);
    w.check_money();
    w.check_all_collected();
}

#[test]
fn a_deposit_landing_after_the_balance_read_stays_queued_and_its_funds_stay_put() {
    // The seed's race: the webhook marked every QUEUED row of the wallet COLLECTED, including a
    // deposit that arrived after the balance was read.
    let mut w = one_deposit_world(14);
    // Mined in the block at START + 1 h, above the safe height the run reads at.
    w.d.run_until(START_US + HOUR_US - 5_000_000, 5_000_000);
    w.deposit(2, wallet(1), 7 * USDT);
    w.run(10 * MINUTE_US);
    let b1 = w.p().batch(BatchId(1)).expect("batch").clone();
    assert_eq!((b1.status, b1.amount_minor), (BatchStatus::Confirmed, 2 * USDT));
    assert_eq!(w.row_status(1), Some(RowStatus::Collected(BatchId(1))));
    let row2 = w.p().deposit(DepositId(2)).expect("confirmed by now").clone();
    assert!(row2.block_height > b1.read_height);
    assert_eq!(row2.status, RowStatus::Queued);
    assert_eq!(w.d.adapter.token_balance(wallet(1).0, TOKEN), 7 * USDT, "its funds are still there");
    w.check_money();
    w.run(HOUR_US);
    w.check_money();
    w.check_all_collected();
}

#[test]
fn the_stale_relayer_is_skipped_while_another_relayer_carries_on() {
    let mut w = World::with(15, rtgs_collection::chain_sim::ChainConfig::default(), &[RELAYER, RELAYER_2]);
    w.deposit(1, wallet(1), 2 * USDT);
    w.sim().force_broadcast_fault(BroadcastFault::Stuck);
    w.run(3 * HOUR_US + 30 * MINUTE_US);
    assert_eq!(w.batches_with(BatchStatus::Stale), vec![BatchId(1)]);
    w.deposit(2, wallet(2), 2 * USDT);
    w.run(HOUR_US);
    let b2 = w.p().batches().find(|b| b.key.wallet == wallet(2)).expect("batch").clone();
    assert_eq!((b2.status, b2.relayer), (BatchStatus::Confirmed, Some(RELAYER_2)));
    let stuck = w.p().batch(BatchId(1)).and_then(|b| b.tx_hashes.first().copied()).expect("hash");
    assert!(!matches!(w.d.adapter.tx(&stuck).map(|t| t.state), Some(TxState::Mined { .. })));
    w.run_with_operator(HOUR_US);
    w.check_money();
    w.check_all_collected();
}
