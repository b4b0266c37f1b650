//! The collection rules issue 14 found broken, each with the case that showed it.

use crate::support::*;
use rtgs_collection::alert::{AlertKind, AlertSubject};
use rtgs_collection::command::*;
use rtgs_collection::settings::{SettingKey, SettingScope, HOUR_US, MINUTE_US};
use rtgs_collection::state::*;
use rtgs_collection::types::*;
use rtgs_collection::CollectionPlugin;
use rtgs_core::plugin::Plugin;

// ----- a deposit confirmed after its batch -----

/// Confirms a broadcast batch with a webhook mined at `height`.
fn confirm(fx: &mut Fx, b: &Fx1, height: u64) {
    fx.broadcast_result(b, BroadcastOutcome::Accepted);
    fx.webhook(hash_of(&sweep(b)), true, height);
}

#[test]
fn a_deposit_journaled_after_its_batch_was_confirmed_is_credited_to_that_batch() {
    let mut fx = Fx::new();
    // The balance read at height 10 holds deposit 1 (height 5) and deposit 2 (height 8), whose
    // confirmation has not reached the journal yet.
    let b1 = fx.up_to_broadcast(&[(1, 2 * USDT, 5)], 10, 4 * USDT);
    confirm(&mut fx, &b1, 12);
    assert_eq!(fx.batch(1).status, BatchStatus::Confirmed);
    // Now it does: its funds were swept by batch 1.
    fx.deposit(2, wallet(1), 2 * USDT, 8);
    assert_eq!(fx.row(2).status, RowStatus::Collected(BatchId(1)), "credited to the batch that swept it");
    assert_eq!(fx.batch(1).deposits, vec![DepositId(1), DepositId(2)]);
    assert_eq!(fx.p.queued_count(), 0);
    // A deposit above the read height is not in batch 1: it waits for the next run.
    fx.deposit(3, wallet(1), 2 * USDT, 11);
    assert_eq!(fx.row(3).status, RowStatus::Queued);
    let read = only(&fx.run_schedule(), is_read);
    let b2 = only(&fx.read(read.id, 20, vec![bal(wallet(1), 2 * USDT)]), is_broadcast);
    confirm(&mut fx, &b2, 22);
    // Batch 2 collects deposit 3 only: nothing is credited twice or to the wrong batch, and
    // each batch's rows add up to what it swept.
    assert_eq!(fx.batch(2).deposits, vec![DepositId(3)]);
    assert_eq!(fx.row(2).status, RowStatus::Collected(BatchId(1)));
    // Late confirmations in any order: height 15 went into batch 2 (read at 20), height 9 into
    // batch 1 (read at 10), height 25 into none yet.
    fx.deposit(4, wallet(1), USDT, 15);
    fx.deposit(5, wallet(1), USDT, 9);
    fx.deposit(6, wallet(1), USDT, 25);
    assert_eq!(fx.row(4).status, RowStatus::Collected(BatchId(2)));
    assert_eq!(fx.row(5).status, RowStatus::Collected(BatchId(1)));
    assert_eq!(fx.row(6).status, RowStatus::Queued);
    // The same confirmation again changes nothing.
    fx.deposit(4, wallet(1), USDT, 15);
    assert_eq!(fx.batch(2).deposits, vec![DepositId(3), DepositId(4)]);
    assert_eq!(fx.batch(1).deposits, vec![DepositId(1), DepositId(2), DepositId(5)]);
}

#[test]
fn a_late_deposit_is_not_credited_to_a_batch_that_failed() {
    let mut fx = Fx::new();
    let b1 = fx.up_to_broadcasting(&[(1, 2 * USDT, 5)], 10, 4 * USDT);
    fx.webhook(hash_of(&sweep(&b1)), false, 12); // reverted: nothing moved
    fx.deposit(2, wallet(1), 2 * USDT, 8);
    assert_eq!(fx.row(2).status, RowStatus::Queued);
}

// ----- stale age from the latest send -----

#[test]
fn a_gas_bump_restarts_the_stale_age() {
    let mut fx = Fx::new();
    fx.tick(); // arms the stale monitor: checks at START + 1 h, + 2 h ...
               // Broadcast at START + 1 h (the scheduled run), threshold 60 min.
    let b = fx.up_to_broadcasting(&[(1, 2 * USDT, 5)], 10, 2 * USDT);
    // The operator bumps its gas 50 minutes later; the replacement is accepted.
    fx.at(START_US + HOUR_US + 50 * MINUTE_US);
    let gas = sweep(&b).gas_price_wei * 2;
    let bump = only(
        &fx.cmd(CollectionCommand::BumpGas(BumpGas { batch: BatchId(1), gas_price_wei: gas })),
        is_broadcast,
    );
    fx.broadcast_result(&bump, BroadcastOutcome::Accepted);
    // The check at START + 2 h: 60 min since the first broadcast, 10 since the bump — not stale.
    let out = fx.tick_at(START_US + 2 * HOUR_US);
    assert_eq!(count(&out, is_lookup), 0, "looked up 10 minutes after a bump: {out:?}");
    assert_eq!(fx.batch(1).status, BatchStatus::Broadcasting);
    // An hour after the bump it is looked up, and with no receipt it is STALE.
    let lookup = only(&fx.tick_at(START_US + 3 * HOUR_US), is_lookup);
    fx.receipts(&lookup, 0, &[ReceiptStatus::Pending, ReceiptStatus::Pending]);
    assert_eq!(fx.batch(1).status, BatchStatus::Stale);
}

#[test]
fn a_lookup_after_an_ambiguous_bump_does_not_mark_stale_before_the_threshold() {
    let mut fx = Fx::new();
    fx.tick();
    let b = fx.up_to_broadcasting(&[(1, 2 * USDT, 5)], 10, 2 * USDT);
    // 65 minutes after the broadcast, the bump's answer is ambiguous: looked up at once.
    fx.at(START_US + 2 * HOUR_US + 5 * MINUTE_US);
    let gas = sweep(&b).gas_price_wei * 2;
    let bump = only(
        &fx.cmd(CollectionCommand::BumpGas(BumpGas { batch: BatchId(1), gas_price_wei: gas })),
        is_broadcast,
    );
    let out = fx.broadcast_result(&bump, BroadcastOutcome::Ambiguous(AmbiguousCode::Timeout));
    let lookup = only(&out, is_lookup);
    fx.receipts(&lookup, 0, &[ReceiptStatus::Pending, ReceiptStatus::Pending]);
    assert_eq!(fx.batch(1).status, BatchStatus::Broadcasting, "the replacement went out just now");
}

// ----- a bound on waiting for a relayer -----

/// Two batches, one relayer busy with the first (its broadcast unanswered): the second waits.
fn one_waits() -> (Fx, Fx1) {
    let mut fx = Fx::new();
    fx.relayer(RELAYER, 0);
    fx.deposit(1, wallet(1), 2 * USDT, 5);
    fx.deposit(2, wallet(2), 2 * USDT, 5);
    let read = only(&fx.run_schedule(), is_read); // START + 1 h
    let b1 =
        only(&fx.read(read.id, 10, vec![bal(wallet(1), 2 * USDT), bal(wallet(2), 2 * USDT)]), is_broadcast);
    assert_eq!((fx.batch(2).status, fx.batch(2).relayer), (BatchStatus::Pending, None));
    (fx, b1)
}

#[test]
fn a_batch_waiting_for_a_relayer_beyond_the_bound_opens_an_alert_until_a_relayer_takes_it() {
    let (mut fx, _) = one_waits();
    let waiting = AlertSubject::Batch(BatchId(2));
    // The default bound is 60 minutes of journal time.
    fx.tick_at(START_US + HOUR_US + 59 * MINUTE_US);
    assert_eq!(open_kinds(&fx.p), vec![]);
    // (The stale monitor sends batch 1's unanswered broadcast again.)
    assert_eq!(count(&fx.tick_at(START_US + 2 * HOUR_US), is_broadcast), 1);
    let open = *fx.p.alert(AlertKind::PendingTooLong, waiting).expect("pending_too_long open");
    assert_eq!(open.since_us, START_US + 2 * HOUR_US);
    // The batch keeps its place, PENDING; the alert stays open, the same one, while it waits.
    let b1 = only(&fx.tick_at(START_US + 3 * HOUR_US), is_broadcast);
    assert_eq!(fx.batch(2).status, BatchStatus::Pending);
    assert_eq!(fx.p.alert(AlertKind::PendingTooLong, waiting), Some(&open));
    assert_eq!(
        fx.p.alert(AlertKind::PendingTooLong, AlertSubject::Batch(BatchId(1))),
        None,
        "not waiting: it has a relayer"
    );
    // The relayer is free again: batch 2 goes out and the alert closes.
    let out = fx.broadcast_result(&b1, BroadcastOutcome::Accepted);
    assert_eq!(sweep(&only(&out, is_broadcast)).batch, BatchId(2));
    assert_eq!(fx.p.alert(AlertKind::PendingTooLong, waiting), None);
}

#[test]
fn the_waiting_bound_is_a_setting() {
    let (mut fx, _) = one_waits();
    fx.setting(SettingScope::Global, SettingKey::PendingAlertMinutes, Some(5));
    assert_eq!(fx.p.settings().pending_alert_minutes, 5);
    fx.tick_at(START_US + HOUR_US + 4 * MINUTE_US);
    assert_eq!(open_kinds(&fx.p), vec![]);
    fx.tick_at(START_US + HOUR_US + 5 * MINUTE_US);
    assert_eq!(open_kinds(&fx.p), vec![AlertKind::PendingTooLong]);
    // Out of range and per partner: refused.
    fx.setting(SettingScope::Global, SettingKey::PendingAlertMinutes, Some(0));
    fx.setting(SettingScope::Partner(PARTNER), SettingKey::PendingAlertMinutes, Some(9));
    assert_eq!(fx.p.settings().pending_alert_minutes, 5);
}

#[test]
fn no_relayer_for_a_chain_is_an_alert_until_one_registers() {
    let mut fx = Fx::new();
    fx.deposit(1, wallet(1), 2 * USDT, 5);
    let read = only(&fx.run_schedule(), is_read);
    fx.read(read.id, 10, vec![bal(wallet(1), 2 * USDT)]);
    assert_eq!(fx.batch(1).fail_reason, Some(FailReason::NoRelayer));
    assert!(fx.p.alert(AlertKind::NoRelayer, AlertSubject::Chain(CHAIN)).is_some());
    // Conditions do not expire.
    fx.tick_at(START_US + 30 * HOUR_US);
    assert_eq!(open_kinds(&fx.p), vec![AlertKind::NoRelayer]);
    fx.relayer(RELAYER, 0);
    assert_eq!(open_kinds(&fx.p), vec![]);
}

// ----- alerts derived from state -----

#[test]
fn a_stuck_transaction_is_an_open_alert_in_the_replicated_state_until_it_resolves() {
    let mut fx = Fx::new();
    fx.tick();
    let b = fx.up_to_broadcasting(&[(1, 2 * USDT, 5)], 10, 2 * USDT);
    let lookup = only(&fx.tick_at(START_US + 2 * HOUR_US), is_lookup);
    let out = fx.receipts(&lookup, 0, &[ReceiptStatus::Pending]);
    assert!(out.is_empty(), "an alert is state, not an effect: {out:?}");
    let stuck = AlertSubject::Batch(BatchId(1));
    let open = *fx.p.alert(AlertKind::StuckTx, stuck).expect("stuck_tx open");
    assert_eq!((open.id, open.since_us, open.relayer), (1, START_US + 2 * HOUR_US, Some(RELAYER)));
    assert_eq!(open.tx_hash, Some(hash_of(&sweep(&b))));
    // Every center holds it: it is in the checkpoint (so in the state hash), and a new owner
    // decoding that checkpoint has it open — nothing was to be sent, nothing can be lost.
    let mut buf = Vec::new();
    fx.p.encode(&mut buf);
    let back = CollectionPlugin::decode(&buf).expect("decodes");
    assert_eq!(back.alert(AlertKind::StuckTx, stuck), Some(&open));
    let mut listed = Vec::new();
    Plugin::alerts_open(&back, &mut listed);
    assert_eq!(listed.len(), 1);
    assert_eq!((listed[0].kind, listed[0].subject.as_str(), listed[0].id), ("stuck_tx", "batch:1", 1));
    let mut pending = Vec::new();
    back.pending_effects(&mut pending);
    assert!(pending.is_empty(), "{pending:?}");
    // It stays open across ticks (a condition does not expire) ...
    fx.tick_at(START_US + 20 * HOUR_US);
    assert_eq!(fx.p.alert(AlertKind::StuckTx, stuck), Some(&open));
    // ... and closes when the batch is confirmed after all.
    fx.webhook(hash_of(&sweep(&b)), true, 40);
    assert_eq!(fx.batch(1).status, BatchStatus::Confirmed);
    assert_eq!(open_kinds(&fx.p), vec![]);
    assert_eq!(fx.p.counters().alerts_raised.get(&AlertKind::StuckTx), Some(&1));
}

#[test]
fn an_event_alert_stays_open_for_the_hold_time_then_closes() {
    let mut fx = Fx::new();
    let b = fx.up_to_broadcasting(&[(1, 2 * USDT, 5)], 10, 2 * USDT);
    let t = START_US + HOUR_US + 10 * MINUTE_US;
    fx.at(t).webhook(hash_of(&sweep(&b)), false, 12);
    let open = *fx.p.alert(AlertKind::Reverted, AlertSubject::Batch(BatchId(1))).expect("reverted open");
    assert_eq!(open.closes_at_us, Some(t + HOUR_US));
    fx.tick_at(t + HOUR_US - 1);
    assert_eq!(open_kinds(&fx.p), vec![AlertKind::Reverted]);
    fx.tick_at(t + HOUR_US);
    assert_eq!(open_kinds(&fx.p), vec![]);
}

// ----- whatever the order -----

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// Three sweeps of one wallet, read at heights 10, 20 and 30, each confirmed; deposits at
    /// random heights have their confirmations journaled at random points of that (before a
    /// batch exists, while it is in flight, after it is confirmed, after all of them). Each is
    /// credited exactly once, to the batch whose read first held it, and every batch's rows add
    /// up to the balance it swept; deposits above the last read stay QUEUED.
    #[test]
    fn every_deposit_is_credited_once_to_the_batch_that_swept_it_whatever_the_order(
        deposits in proptest::collection::vec((1u64..36, 0usize..7, 1u128..5), 0..12)
    ) {
        const READS: [u64; 3] = [10, 20, 30];
        let mut fx = Fx::new();
        fx.relayer(RELAYER, 0);
        let amount = |a: u128| a * USDT;
        // The balance each read sees: every deposit mined above the previous read, at or below it.
        let anchors: Vec<(u64, u64, u128)> = READS.iter().enumerate().map(|(k, r)| (1_000 + k as u64, r - 1, 2)).collect();
        let all: Vec<(u64, u64, u128)> = anchors.iter().copied()
            .chain(deposits.iter().enumerate().map(|(i, (h, _, a))| (1 + i as u64, *h, *a)))
            .collect();
        let balance = |k: usize| -> u128 {
            let low = if k == 0 { 0 } else { READS[k - 1] };
            all.iter().filter(|(_, h, _)| *h > low && *h <= READS[k]).map(|(_, _, a)| amount(*a)).sum()
        };
        let arrive = |fx: &mut Fx, slot: usize| {
            for (i, (h, s, a)) in deposits.iter().enumerate() {
                if *s == slot {
                    fx.deposit(1 + i as u64, wallet(1), amount(*a), *h);
                }
            }
        };
        for (k, read_height) in READS.iter().enumerate() {
            arrive(&mut fx, 2 * k);
            let (id, h, a) = anchors[k];
            fx.deposit(id, wallet(1), amount(a), h);
            let read = only(&fx.run_schedule(), is_read);
            let b = only(&fx.read(read.id, *read_height, vec![bal(wallet(1), balance(k))]), is_broadcast);
            fx.broadcast_result(&b, BroadcastOutcome::Accepted);
            arrive(&mut fx, 2 * k + 1);
            fx.webhook(hash_of(&sweep(&b)), true, read_height + 1);
        }
        arrive(&mut fx, 6);
        for (id, h, _) in &all {
            let expected = READS.iter().position(|r| h <= r).map(|k| RowStatus::Collected(BatchId(k as u64 + 1)));
            let status = fx.row(*id).status;
            proptest::prop_assert_eq!(Some(status).filter(|s| *s != RowStatus::Queued), expected, "deposit {} at {}", id, h);
        }
        for k in 0..READS.len() {
            let b = fx.batch(k as u64 + 1);
            proptest::prop_assert_eq!(b.status, BatchStatus::Confirmed);
            let rows: u128 = fx.p.batch_deposits(b.id).unwrap_or_default().iter().map(|r| r.amount_minor).sum();
            proptest::prop_assert_eq!(rows, b.amount_minor, "batch {}", k + 1);
        }
    }
}
