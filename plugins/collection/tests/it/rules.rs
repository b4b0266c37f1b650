//! One test per rule, driving the plugin directly with hand-made results.

use rtgs_collection::alert::AlertKind;
use rtgs_collection::command::*;
use rtgs_collection::effect::*;
use rtgs_collection::settings::{SettingKey, SettingScope, HOUR_US, MINUTE_US};
use rtgs_collection::state::*;
use rtgs_collection::types::*;
use rtgs_core::entry::{AccountId, Currency, Payload, PluginCommand, PluginKind, Transfer};
use rtgs_core::plugin::Plugin;

use crate::support::*;

// ----- deposits → collection_queue -----

#[test]
fn confirmed_deposit_becomes_a_queued_row_and_nothing_is_sent() {
    let mut fx = Fx::new();
    let out = fx.deposit(7, wallet(1), 300_000, 42);
    assert!(out.is_empty(), "no immediate collection (seed 4-1)");
    let row = fx.row(7).clone();
    assert_eq!(row.status, RowStatus::Queued);
    assert_eq!(
        (row.partner, row.key, row.amount_minor, row.block_height),
        (PARTNER, key(wallet(1)), 300_000, 42)
    );
    assert_eq!(row.queued_at_us, START_US);
    assert_eq!(fx.p.queued_count(), 1);
}

#[test]
fn bad_deposits_are_recorded_rejections_and_duplicates_are_idempotent() {
    let mut fx = Fx::new();
    fx.deposit(1, wallet(1), 100, 5);
    let before = fx.p.state_hash();
    // Same deposit again, same content: counted, nothing else changes but seq/time.
    fx.deposit(1, wallet(1), 100, 5);
    assert_eq!(fx.p.counters().deposits_duplicate, 1);
    assert_ne!(fx.p.state_hash(), before, "seq is part of the state");
    // Same id, other content.
    fx.deposit(1, wallet(1), 101, 5);
    // Zero amount.
    fx.deposit(2, wallet(1), 0, 5);
    // The wallet belongs to partner 1.
    fx.deposit_for(PartnerId(2), 3, wallet(1), 100, 5);
    // Garbage body and unknown op: rejections, not panics.
    fx.apply(Payload::Plugin(PluginCommand { plugin: PluginKind::Collection, op: 1, body: vec![1, 2, 3] }));
    fx.apply(Payload::Plugin(PluginCommand { plugin: PluginKind::Collection, op: 999, body: vec![] }));
    let kinds: Vec<RejectKind> = fx.p.rejections_recent().iter().map(|r| r.kind).collect();
    assert_eq!(
        kinds,
        vec![
            RejectKind::DepositConflict,
            RejectKind::ZeroAmount,
            RejectKind::WalletPartnerMismatch,
            RejectKind::Malformed,
            RejectKind::Malformed
        ]
    );
    assert_eq!(fx.p.counters().rejected.get(&RejectKind::Malformed), Some(&2));
    assert_eq!(fx.p.queued_count(), 1);
    assert_eq!(fx.row(1).amount_minor, 100);
}

#[test]
fn other_entries_are_ignored_and_seqs_apply_once() {
    let mut fx = Fx::new();
    fx.deposit(1, wallet(1), 100, 5);
    let cur = Currency::new(b"EUR").expect("valid");
    let t = Transfer { debtor: AccountId(1), creditor: AccountId(2), amount_minor: 5, currency: cur };
    assert!(fx.apply(Payload::Transfer(t)).is_empty());
    assert!(fx
        .apply(Payload::Plugin(PluginCommand { plugin: PluginKind::Matching, op: 1, body: vec![] }))
        .is_empty());
    assert!(fx.p.rejections_recent().is_empty());
    // Re-delivering an applied seq is a no-op (at-least-once publish).
    let hash = fx.p.state_hash();
    let entry = rtgs_core::entry::Entry {
        seq: 1,
        epoch: 1,
        timestamp_us: START_US,
        origin: rtgs_core::entry::CenterId(1),
        bmi: rtgs_core::entry::Bmi::NONE,
        payload: Payload::Tick,
    };
    let mut effects = Vec::new();
    fx.p.apply_entry(&entry, &mut effects);
    assert_eq!(fx.p.state_hash(), hash);
}

// ----- scheduled runs -----

#[test]
fn a_due_tick_reads_every_queued_wallet_and_token_once() {
    let mut fx = Fx::new();
    fx.deposit(1, wallet(2), 100, 5);
    fx.deposit(2, wallet(1), 100, 5);
    fx.deposit(3, wallet(1), 100, 6); // same group as deposit 2
    fx.cmd(CollectionCommand::DepositConfirmed(DepositConfirmed {
        deposit: DepositId(4),
        partner: PARTNER,
        wallet: wallet(1),
        chain: CHAIN,
        token: TokenId(2),
        amount_minor: 100,
        block_height: 5,
    }));
    fx.cmd(CollectionCommand::DepositConfirmed(DepositConfirmed {
        deposit: DepositId(5),
        partner: PARTNER,
        wallet: wallet(3),
        chain: ChainId(2),
        token: TOKEN,
        amount_minor: 100,
        block_height: 5,
    }));
    // Not due before the hour boundary.
    assert!(fx.tick_at(START_US + 59 * MINUTE_US).is_empty());
    let reads = fx.tick_at(START_US + HOUR_US);
    let groups: Vec<(ChainId, Vec<(WalletId, TokenId)>)> = reads
        .iter()
        .map(|e| match &e.effect {
            CollectionEffect::ReadBalances(r) => (r.chain, r.groups.clone()),
            other => panic!("{other:?}"),
        })
        .collect();
    // One read per chain, groups in key order, each wallet+token once.
    assert_eq!(
        groups,
        vec![
            (CHAIN, vec![(wallet(1), TOKEN), (wallet(1), TokenId(2)), (wallet(2), TOKEN)]),
            (ChainId(2), vec![(wallet(3), TOKEN)])
        ]
    );
    // Same hour again: nothing. Next hour: read again (the reads were not answered).
    assert!(fx.tick_at(START_US + HOUR_US + 1).is_empty());
    assert_eq!(count(&fx.tick_at(START_US + 2 * HOUR_US), is_read), 2);
}

#[test]
fn reads_are_chunked_by_the_effect_limit() {
    let mut fx = Fx::new();
    let n = rtgs_collection::limits::READ_GROUPS_PER_EFFECT_MAX as u64 * 2 + 1;
    for i in 0..n {
        fx.deposit(i + 1, wallet(i), 100, 1);
    }
    let reads = fx.run_schedule();
    let sizes: Vec<usize> = reads
        .iter()
        .map(|e| match &e.effect {
            CollectionEffect::ReadBalances(r) => r.groups.len(),
            _ => 0,
        })
        .collect();
    assert_eq!(sizes, vec![256, 256, 1]);
    // Ids are deterministic: (seq << 16) | index.
    assert_eq!(reads[2].id, (fx.seq << 16) | 2);
}

#[test]
fn schedule_interval_is_global_or_per_partner() {
    let mut fx = Fx::new();
    let p2 = PartnerId(2);
    fx.setting(SettingScope::Partner(p2), SettingKey::ScheduleIntervalHours, Some(6));
    fx.deposit(1, wallet(1), 100, 1);
    fx.deposit_for(p2, 2, wallet(2), 100, 1);
    assert_eq!(fx.p.effective_settings(p2).schedule_interval_hours, 6);
    // START_US is 1000 h, a multiple of 6 h: partner 2's first run is at +6 h.
    for h in 1..=5 {
        let reads = fx.tick_at(START_US + h * HOUR_US);
        let CollectionEffect::ReadBalances(r) = &only(&reads, is_read).effect else { unreachable!() };
        assert_eq!(r.groups, vec![(wallet(1), TOKEN)], "hour {h}: only partner 1");
    }
    let reads = fx.tick_at(START_US + 6 * HOUR_US);
    let CollectionEffect::ReadBalances(r) = &only(&reads, is_read).effect else { unreachable!() };
    assert_eq!(r.groups, vec![(wallet(1), TOKEN), (wallet(2), TOKEN)]);
    // A global change moves partners without an override only.
    fx.setting(SettingScope::Global, SettingKey::ScheduleIntervalHours, Some(24));
    assert_eq!(fx.p.effective_settings(PARTNER).schedule_interval_hours, 24);
    assert_eq!(fx.p.partner(PARTNER).map(|p| p.next_run_us), Some(START_US + 24 * HOUR_US));
    assert_eq!(fx.p.partner(p2).map(|p| p.next_run_us), Some(START_US + 12 * HOUR_US));
    // Clearing the override falls back to the global value.
    fx.setting(SettingScope::Partner(p2), SettingKey::ScheduleIntervalHours, None);
    assert_eq!(fx.p.effective_settings(p2).schedule_interval_hours, 24);
}

#[test]
fn settings_are_validated() {
    let mut fx = Fx::new();
    let g = SettingScope::Global;
    fx.setting(g, SettingKey::ScheduleIntervalHours, Some(0));
    fx.setting(g, SettingKey::GasThresholdRatioPpm, Some(1_000_001));
    fx.setting(g, SettingKey::StaleThresholdMinutes, None);
    fx.setting(SettingScope::Partner(PARTNER), SettingKey::StaleCheckIntervalMinutes, Some(5));
    assert_eq!(fx.p.counters().rejected.get(&RejectKind::InvalidSetting), Some(&4));
    assert_eq!(*fx.p.settings(), rtgs_collection::settings::Settings::default());
    fx.setting(g, SettingKey::GasThresholdRatioPpm, Some(50_000));
    fx.setting(g, SettingKey::MinAmountUsdMicros, Some(5_000_000));
    fx.setting(g, SettingKey::StaleThresholdMinutes, Some(30));
    fx.setting(g, SettingKey::StaleCheckIntervalMinutes, Some(10));
    let s = fx.p.settings();
    assert_eq!(
        (
            s.gas_threshold_ratio_ppm,
            s.min_amount_usd_micros,
            s.stale_threshold_minutes,
            s.stale_check_interval_minutes
        ),
        (50_000, 5_000_000, 30, 10)
    );
}

// ----- balance results and skip rules -----

#[test]
fn the_sweep_amount_is_the_onchain_balance_not_the_queued_sum() {
    let mut fx = Fx::new();
    // Queued 1.8, but the wallet holds 2.0 (an outside transfer landed too).
    let b = fx.up_to_broadcast(&[(1, USDT, 5), (2, USDT / 2, 5), (3, 3 * USDT / 10, 5)], 10, 2 * USDT);
    let tx = sweep(&b);
    assert_eq!(tx.amount_minor, 2 * USDT);
    assert_eq!((tx.wallet, tx.token, tx.relayer, tx.nonce), (wallet(1), TOKEN, RELAYER, 0));
    assert_eq!(tx.gas_price_wei, GAS_PRICE_WEI);
    let batch = fx.batch(1);
    assert_eq!(batch.status, BatchStatus::Pending);
    assert_eq!(
        (batch.amount_minor, batch.read_height, batch.estimated_gas_usd_micros),
        (2 * USDT, 10, GAS_USD_MICROS)
    );
}

fn skip_case(balance: u128, allowance: u128, gas: u64) -> (Fx, Vec<Fx1>) {
    let mut fx = Fx::new();
    fx.relayer(RELAYER, 0);
    fx.deposit(1, wallet(1), balance.max(1), 5);
    let read = only(&fx.run_schedule(), is_read);
    let row = BalanceRow { allowance_minor: allowance, ..bal(wallet(1), balance) };
    let out = fx.read_with_gas(read.id, 10, gas, vec![row]);
    (fx, out)
}

#[test]
fn each_skip_is_recorded_with_its_reason_and_rows_stay_queued() {
    let cases = [
        (0, u128::MAX, GAS_USD_MICROS, SkipReason::ZeroBalance),
        (USDT / 2, u128::MAX, 0, SkipReason::BelowMinimum),
        // 0.15 USD of gas on 1.2 USD is 12.5 % > 10 %.
        (12 * USDT / 10, u128::MAX, GAS_USD_MICROS, SkipReason::GasTooHigh),
        (5 * USDT, USDT, GAS_USD_MICROS, SkipReason::ApprovalNotReady),
    ];
    for (balance, allowance, gas, reason) in cases {
        let (fx, out) = skip_case(balance, allowance, gas);
        assert!(out.is_empty(), "{reason:?}: nothing sent");
        assert_eq!(fx.p.batches().count(), 0);
        assert_eq!(fx.row(1).status, RowStatus::Queued);
        let g = fx.p.group(&key(wallet(1))).expect("group");
        let skip = g.last_skip.expect("skip recorded");
        assert_eq!((skip.reason, skip.balance_minor, skip.block_height), (reason, balance, 10));
        assert_eq!(fx.p.counters().skipped.get(&reason), Some(&1));
        assert_eq!(
            fx.p.trace_deposit(DepositId(1)).and_then(|t| t.last_skip).map(|s| s.reason),
            Some(reason)
        );
    }
}

#[test]
fn a_skipped_group_is_reevaluated_next_run() {
    let (mut fx, _) = skip_case(USDT / 2, u128::MAX, 0);
    fx.deposit(2, wallet(1), 2 * USDT, 20);
    let read = only(&fx.run_schedule(), is_read);
    let out = fx.read(read.id, 30, vec![bal(wallet(1), 25 * USDT / 10)]);
    assert_eq!(sweep(&only(&out, is_broadcast)).amount_minor, 25 * USDT / 10);
    assert_eq!(fx.p.group(&key(wallet(1))).map(|g| g.skips_total), Some(1));
}

#[test]
fn partner_thresholds_override_global_ones() {
    let mut fx = Fx::new();
    fx.setting(SettingScope::Partner(PARTNER), SettingKey::MinAmountUsdMicros, Some(10 * USDT as u64));
    fx.relayer(RELAYER, 0);
    fx.deposit(1, wallet(1), 5 * USDT, 5);
    let read = only(&fx.run_schedule(), is_read);
    // 5 USD passes the global 1 USD minimum but not the partner's 10 USD.
    assert!(fx.read(read.id, 10, vec![bal(wallet(1), 5 * USDT)]).is_empty());
    assert_eq!(
        fx.p.group(&key(wallet(1))).and_then(|g| g.last_skip).map(|s| s.reason),
        Some(SkipReason::BelowMinimum)
    );
}

#[test]
fn stale_or_foreign_read_answers_are_ignored_and_failed_reads_recorded() {
    let mut fx = Fx::new();
    fx.relayer(RELAYER, 0);
    fx.deposit(1, wallet(1), 2 * USDT, 5);
    let first = only(&fx.run_schedule(), is_read);
    // The next run supersedes the unanswered read.
    let second = only(&fx.run_schedule(), is_read);
    assert!(fx.read(first.id, 10, vec![bal(wallet(1), 2 * USDT)]).is_empty());
    assert_eq!(fx.p.counters().results_ignored, 1);
    // A failure of the current read is a recorded skip.
    fx.cmd(CollectionCommand::BalancesReadFailed(BalancesReadFailed { effect_id: second.id }));
    let skip = fx.p.group(&key(wallet(1))).and_then(|g| g.last_skip).expect("skip");
    assert_eq!(skip.reason, SkipReason::ReadFailed);
    assert!(fx.p.group(&key(wallet(1))).is_some_and(|g| g.read.is_none()));
    // Out-of-range decimals: a recorded rejection.
    let third = only(&fx.run_schedule(), is_read);
    let row = BalanceRow { decimals: 39, ..bal(wallet(1), 2 * USDT) };
    fx.read(third.id, 10, vec![row]);
    assert_eq!(fx.p.counters().rejected.get(&RejectKind::InvalidResult), Some(&1));
}

// ----- batch lifecycle -----

#[test]
fn pending_broadcasting_confirmed_with_gas_cost_and_rows_collected() {
    let mut fx = Fx::new();
    let b = fx.up_to_broadcast(&[(1, USDT, 5), (2, USDT / 2, 6), (3, 3 * USDT / 10, 7)], 10, 18 * USDT / 10);
    assert!(!fx.p.relayer_available(RELAYER), "nonce LOCKED during the broadcast");
    assert_eq!(fx.p.relayer(RELAYER).and_then(|r| r.lock).map(|l| l.nonce), Some(0));
    fx.broadcast_result(&b, BroadcastOutcome::Accepted);
    let batch = fx.batch(1).clone();
    assert_eq!(batch.status, BatchStatus::Broadcasting);
    assert_eq!(batch.broadcast_at_us, Some(fx.now_us));
    // The nonce is confirmed: used, not locked.
    let r = fx.p.relayer(RELAYER).expect("relayer").clone();
    assert_eq!((r.next_nonce, r.lock), (1, None));
    // Rows are still QUEUED: confirmation is the webhook's.
    assert_eq!(fx.row(1).status, RowStatus::Queued);
    let hash = batch.tx_hashes[0];
    fx.webhook(hash, true, 12);
    let batch = fx.batch(1);
    assert_eq!(batch.status, BatchStatus::Confirmed);
    assert_eq!(batch.receipt.map(|r| r.gas_cost_usd_micros), Some(GAS_USD_MICROS));
    for id in 1..=3 {
        assert_eq!(fx.row(id).status, RowStatus::Collected(BatchId(1)));
    }
    assert_eq!(batch.deposits, vec![DepositId(1), DepositId(2), DepositId(3)]);
    // A duplicate webhook changes nothing.
    fx.webhook(hash, true, 12);
    assert_eq!(fx.batch(1).status, BatchStatus::Confirmed);
    assert_eq!(fx.p.counters().results_ignored, 1);
}

#[test]
fn a_reverted_sweep_fails_and_its_rows_stay_queued_for_the_next_run() {
    let mut fx = Fx::new();
    let b = fx.up_to_broadcasting(&[(1, 2 * USDT, 5)], 10, 2 * USDT);
    let _ = fx.webhook(hash_of(&sweep(&b)), false, 12);
    assert_eq!(open_kinds(&fx.p), vec![AlertKind::Reverted]);
    let batch = fx.batch(1);
    assert_eq!((batch.status, batch.fail_reason), (BatchStatus::Failed, Some(FailReason::Reverted)));
    assert_eq!(fx.row(1).status, RowStatus::Queued);
    // A revert consumes the nonce (seed 9-1).
    assert_eq!(fx.p.relayer(RELAYER).map(|r| r.next_nonce), Some(1));
    // The next run retries.
    let read = only(&fx.run_schedule(), is_read);
    let out = fx.read(read.id, 20, vec![bal(wallet(1), 2 * USDT)]);
    assert_eq!(sweep(&only(&out, is_broadcast)).nonce, 1);
}

#[test]
fn a_group_has_one_open_batch_and_is_not_read_while_it_is_open() {
    let mut fx = Fx::new();
    fx.up_to_broadcasting(&[(1, 2 * USDT, 5)], 10, 2 * USDT);
    fx.deposit(2, wallet(1), 2 * USDT, 15);
    assert_eq!(count(&fx.run_schedule(), is_read), 0);
}

// ----- the race fix -----

#[test]
fn a_batch_collects_exactly_the_deposits_in_the_balance_it_read() {
    let mut fx = Fx::new();
    // Deposits at heights 5 and 12; the balance is read at height 10: only the first is in it.
    fx.deposit(2, wallet(1), 3 * USDT, 12);
    let b = fx.up_to_broadcasting(&[(1, 2 * USDT, 5)], 10, 2 * USDT);
    // While the sweep is in flight: a deposit included at 9 (in the swept balance, its
    // confirmation just reached the journal late) and one at 11 (not in it).
    fx.deposit(3, wallet(1), USDT, 9);
    fx.deposit(4, wallet(1), USDT, 11);
    fx.webhook(hash_of(&sweep(&b)), true, 14);
    // The seed would mark all four COLLECTED. Here: those at or below the read height.
    assert_eq!(fx.row(1).status, RowStatus::Collected(BatchId(1)));
    assert_eq!(fx.row(3).status, RowStatus::Collected(BatchId(1)));
    assert_eq!(fx.row(2).status, RowStatus::Queued);
    assert_eq!(fx.row(4).status, RowStatus::Queued);
    assert_eq!(fx.batch(1).deposits, vec![DepositId(1), DepositId(3)], "by inclusion height");
    // The next read must see the sweep (mined at 14): a read at 13 is not trusted.
    let read = only(&fx.run_schedule(), is_read);
    assert!(fx.read(read.id, 13, vec![bal(wallet(1), 4 * USDT)]).is_empty());
    let skip = fx.p.group(&key(wallet(1))).and_then(|g| g.last_skip).expect("skip");
    assert_eq!(skip.reason, SkipReason::ReadBelowLastSweep);
    // At 14 or above, the rest is swept and nothing stays QUEUED.
    let read = only(&fx.run_schedule(), is_read);
    let b2 = only(&fx.read(read.id, 14, vec![bal(wallet(1), 4 * USDT)]), is_broadcast);
    fx.broadcast_result(&b2, BroadcastOutcome::Accepted);
    fx.webhook(hash_of(&sweep(&b2)), true, 16);
    assert_eq!(fx.row(2).status, RowStatus::Collected(BatchId(2)));
    assert_eq!(fx.row(4).status, RowStatus::Collected(BatchId(2)));
    assert_eq!(fx.p.queued_count(), 0);
}

// ----- relayer nonce manager -----

#[test]
fn one_nonce_is_locked_per_relayer_and_waiting_batches_get_the_next() {
    let mut fx = Fx::new();
    fx.relayer(RELAYER, 7);
    fx.deposit(1, wallet(1), 2 * USDT, 5);
    fx.deposit(2, wallet(2), 2 * USDT, 5);
    let read = only(&fx.run_schedule(), is_read);
    let out = fx.read(read.id, 10, vec![bal(wallet(1), 2 * USDT), bal(wallet(2), 2 * USDT)]);
    // Two batches, one relayer: one broadcast, the other waits PENDING without a nonce.
    let b1 = only(&out, is_broadcast);
    assert_eq!(sweep(&b1).nonce, 7);
    assert_eq!((fx.batch(2).status, fx.batch(2).nonce), (BatchStatus::Pending, None));
    // Confirm → the waiting batch gets nonce 8 in the same entry.
    let out = fx.broadcast_result(&b1, BroadcastOutcome::Accepted);
    let b2 = only(&out, is_broadcast);
    assert_eq!((sweep(&b2).batch, sweep(&b2).nonce), (BatchId(2), 8));
}

#[test]
fn a_certain_rejection_releases_the_nonce() {
    let mut fx = Fx::new();
    fx.relayer(RELAYER, 7);
    fx.deposit(1, wallet(1), 2 * USDT, 5);
    fx.deposit(2, wallet(2), 2 * USDT, 5);
    let read = only(&fx.run_schedule(), is_read);
    let out = fx.read(read.id, 10, vec![bal(wallet(1), 2 * USDT), bal(wallet(2), 2 * USDT)]);
    let b1 = only(&out, is_broadcast);
    let out = fx.broadcast_result(&b1, BroadcastOutcome::Rejected(RejectCode::InsufficientFunds));
    let batch = fx.batch(1);
    assert_eq!(batch.status, BatchStatus::Failed);
    assert_eq!(batch.fail_reason, Some(FailReason::BroadcastRejected(RejectCode::InsufficientFunds)));
    assert!(batch.tx_hashes.is_empty(), "never on chain");
    assert_eq!(fx.row(1).status, RowStatus::Queued);
    // Released: the waiting batch reuses nonce 7.
    assert_eq!(sweep(&only(&out, is_broadcast)).nonce, 7);
}

#[test]
fn an_ambiguous_broadcast_keeps_the_nonce_locked_until_the_chain_is_checked() {
    // Timeout, then the check finds the transaction pending: it was out after all.
    let mut fx = Fx::new();
    let b = fx.up_to_broadcast(&[(1, 2 * USDT, 5)], 10, 2 * USDT);
    let out = fx.broadcast_result(&b, BroadcastOutcome::Ambiguous(AmbiguousCode::Timeout));
    let check = only(&out, is_lookup);
    let CollectionEffect::LookupReceipts(lr) = &check.effect else { unreachable!() };
    assert_eq!((lr.relayer, lr.nonce, lr.hashes.clone()), (RELAYER, 0, vec![hash_of(&sweep(&b))]));
    assert_eq!(fx.batch(1).status, BatchStatus::Pending);
    assert!(fx.p.relayer(RELAYER).is_some_and(|r| r.lock.is_some()), "not released");
    fx.receipts(&check, 0, &[ReceiptStatus::Pending]);
    assert_eq!(fx.batch(1).status, BatchStatus::Broadcasting);
    assert_eq!(fx.p.relayer(RELAYER).map(|r| (r.next_nonce, r.lock)), Some((1, None)));
}

#[test]
fn an_ambiguous_broadcast_never_sent_is_sent_again_identically() {
    let mut fx = Fx::new();
    let b = fx.up_to_broadcast(&[(1, 2 * USDT, 5)], 10, 2 * USDT);
    let check =
        only(&fx.broadcast_result(&b, BroadcastOutcome::Ambiguous(AmbiguousCode::Timeout)), is_lookup);
    // Not on chain, nonce unused: re-send the same signed transaction.
    let again = only(&fx.receipts(&check, 0, &[ReceiptStatus::Unknown]), is_broadcast);
    assert_eq!(sweep(&again), sweep(&b));
    assert_ne!(again.id, b.id);
    fx.broadcast_result(&again, BroadcastOutcome::Accepted);
    assert_eq!(fx.batch(1).status, BatchStatus::Broadcasting);
    assert_eq!(fx.batch(1).tx_hashes.len(), 1);
}

#[test]
fn an_ambiguous_broadcast_resolved_by_the_chain() {
    // Mined already ("nonce too low" for our own transaction): CONFIRMED, nonce used.
    let mut fx = Fx::new();
    let b = fx.up_to_broadcast(&[(1, 2 * USDT, 5)], 10, 2 * USDT);
    let check =
        only(&fx.broadcast_result(&b, BroadcastOutcome::Ambiguous(AmbiguousCode::NonceTooLow)), is_lookup);
    fx.receipts(&check, 1, &[ReceiptStatus::Mined(receipt(true, 11))]);
    assert_eq!(fx.batch(1).status, BatchStatus::Confirmed);
    assert_eq!(fx.row(1).status, RowStatus::Collected(BatchId(1)));
    assert_eq!(fx.p.relayer(RELAYER).map(|r| (r.next_nonce, r.lock)), Some((1, None)));

    // The nonce went to another transaction: FAILED, and the relayer skips past it.
    let mut fx = Fx::new();
    let b = fx.up_to_broadcast(&[(1, 2 * USDT, 5)], 10, 2 * USDT);
    let check =
        only(&fx.broadcast_result(&b, BroadcastOutcome::Ambiguous(AmbiguousCode::NonceTooLow)), is_lookup);
    let _ = fx.receipts(&check, 3, &[ReceiptStatus::Unknown]);
    assert_eq!(open_kinds(&fx.p), vec![AlertKind::NonceConsumedElsewhere]);
    assert_eq!(fx.batch(1).fail_reason, Some(FailReason::NonceConsumedElsewhere));
    assert_eq!(fx.row(1).status, RowStatus::Queued);
    assert_eq!(fx.p.relayer(RELAYER).map(|r| (r.next_nonce, r.lock)), Some((3, None)));
}

#[test]
fn a_webhook_during_the_chain_check_confirms() {
    let mut fx = Fx::new();
    let b = fx.up_to_broadcast(&[(1, 2 * USDT, 5)], 10, 2 * USDT);
    let check =
        only(&fx.broadcast_result(&b, BroadcastOutcome::Ambiguous(AmbiguousCode::Timeout)), is_lookup);
    fx.webhook(hash_of(&sweep(&b)), true, 12);
    assert_eq!(fx.batch(1).status, BatchStatus::Confirmed);
    assert_eq!(fx.p.relayer(RELAYER).map(|r| (r.next_nonce, r.lock)), Some((1, None)));
    // The check's late answer is ignored.
    fx.receipts(&check, 1, &[ReceiptStatus::Mined(receipt(true, 12))]);
    assert_eq!(fx.p.counters().results_ignored, 1);
}

#[test]
fn no_relayer_for_the_chain_fails_the_batch_and_keeps_rows_queued() {
    let mut fx = Fx::new();
    fx.deposit(1, wallet(1), 2 * USDT, 5);
    let read = only(&fx.run_schedule(), is_read);
    assert!(fx.read(read.id, 10, vec![bal(wallet(1), 2 * USDT)]).is_empty());
    assert_eq!(fx.batch(1).fail_reason, Some(FailReason::NoRelayer));
    assert_eq!(fx.row(1).status, RowStatus::Queued);
}

// ----- stale monitor -----

/// A batch broadcast at START + 1 h; the stale monitor checks hourly, threshold 60 min.
fn stale_setup() -> (Fx, Fx1) {
    let mut fx = Fx::new();
    fx.tick(); // arms the stale monitor: first check at START + 1 h
    let b = fx.up_to_broadcasting(&[(1, 2 * USDT, 5)], 10, 2 * USDT);
    (fx, b)
}

#[test]
fn the_stale_monitor_waits_for_the_threshold_and_the_check_interval() {
    let (mut fx, _) = stale_setup();
    // Broadcast at START + 1 h; the check at START + 2 h sees it exactly 60 min old.
    assert!(fx.tick_at(START_US + HOUR_US + 30 * MINUTE_US).is_empty());
    let out = fx.tick_at(START_US + 2 * HOUR_US);
    assert_eq!(count(&out, is_lookup), 1);
    // Not again until the next interval.
    assert_eq!(count(&fx.tick_at(START_US + 2 * HOUR_US + 30 * MINUTE_US), is_lookup), 0);
}

#[test]
fn stale_check_success_confirms_and_alerts_a_missed_webhook() {
    let (mut fx, b) = stale_setup();
    let lookup = only(&fx.tick_at(START_US + 2 * HOUR_US), is_lookup);
    let _ = fx.receipts(&lookup, 1, &[ReceiptStatus::Mined(receipt(true, 11))]);
    assert_eq!(open_kinds(&fx.p), vec![AlertKind::MissedWebhook]);
    assert_eq!(fx.batch(1).status, BatchStatus::Confirmed);
    assert_eq!(fx.row(1).status, RowStatus::Collected(BatchId(1)));
    // The webhook, when it finally comes, is a duplicate.
    fx.webhook(hash_of(&sweep(&b)), true, 11);
    assert_eq!(fx.batch(1).status, BatchStatus::Confirmed);
}

#[test]
fn stale_check_revert_fails_and_rows_stay_queued() {
    let (mut fx, _) = stale_setup();
    let lookup = only(&fx.tick_at(START_US + 2 * HOUR_US), is_lookup);
    fx.receipts(&lookup, 1, &[ReceiptStatus::Mined(receipt(false, 11))]);
    assert_eq!(fx.batch(1).fail_reason, Some(FailReason::Reverted));
    assert_eq!(fx.row(1).status, RowStatus::Queued);
}

#[test]
fn no_receipt_marks_stale_pauses_the_relayer_and_a_later_receipt_confirms() {
    let (mut fx, b) = stale_setup();
    let lookup = only(&fx.tick_at(START_US + 2 * HOUR_US), is_lookup);
    let _ = fx.receipts(&lookup, 0, &[ReceiptStatus::Pending]);
    assert_eq!(open_kinds(&fx.p), vec![AlertKind::StuckTx]);
    assert_eq!(fx.batch(1).status, BatchStatus::Stale);
    assert!(!fx.p.relayer_available(RELAYER));
    // A new batch for another wallet waits: no transaction for the paused relayer.
    fx.deposit(2, wallet(2), 2 * USDT, 20);
    let out = fx.run_schedule(); // START + 3 h: the scheduled run and the next stale check
    let read = only(&out, is_read);
    let lookup = only(&out, is_lookup);
    assert_eq!(count(&fx.read(read.id, 30, vec![bal(wallet(2), 2 * USDT)]), is_broadcast), 0);
    assert_eq!(fx.batch(2).status, BatchStatus::Pending);
    // The STALE batch is looked at again; its receipt appeared → CONFIRMED, relayer free,
    // the waiting batch goes out.
    let CollectionEffect::LookupReceipts(lr) = &lookup.effect else { unreachable!() };
    assert_eq!(lr.hashes, vec![hash_of(&sweep(&b))]);
    let out = fx.receipts(&lookup, 1, &[ReceiptStatus::Mined(receipt(true, 40))]);
    assert_eq!(fx.batch(1).status, BatchStatus::Confirmed);
    assert!(open_kinds(&fx.p).contains(&AlertKind::MissedWebhook));
    assert_eq!(sweep(&only(&out, is_broadcast)).batch, BatchId(2));
}

#[test]
fn an_operator_fails_a_stale_batch_and_its_nonce_is_cancelled_before_anything_reuses_it() {
    let (mut fx, _) = stale_setup();
    let lookup = only(&fx.tick_at(START_US + 2 * HOUR_US), is_lookup);
    fx.receipts(&lookup, 0, &[ReceiptStatus::Unknown]);
    assert_eq!(fx.batch(1).status, BatchStatus::Stale);
    // Only STALE batches can be failed by an operator.
    fx.cmd(CollectionCommand::FailStale(FailStale { batch: BatchId(9) }));
    let out = fx.cmd(CollectionCommand::FailStale(FailStale { batch: BatchId(1) }));
    fx.cmd(CollectionCommand::FailStale(FailStale { batch: BatchId(1) }));
    assert_eq!(
        fx.p.rejections_recent().iter().map(|r| r.kind).collect::<Vec<_>>(),
        vec![RejectKind::UnknownBatch, RejectKind::BatchNotStale]
    );
    let batch = fx.batch(1).clone();
    assert_eq!(
        (batch.status, batch.fail_reason, batch.nonce_unsettled),
        (BatchStatus::Failed, Some(FailReason::Operator), true)
    );
    assert_eq!(fx.row(1).status, RowStatus::Queued);
    // The nonce is killed with a zero-value self-transfer, priced above every hash sent.
    let cancel = only(&out, is_cancel);
    let CollectionEffect::Cancel(c) = &cancel.effect else { unreachable!() };
    assert_eq!((c.relayer, c.nonce), (RELAYER, 0));
    assert!(u128::from(c.gas_price_wei) * 100 >= u128::from(GAS_PRICE_WEI) * 110);
    // Until the chain uses the nonce: the relayer is paused, the group gets no new batch.
    assert!(!fx.p.relayer_available(RELAYER));
    let out = fx.run_schedule(); // START + 3 h: the run skips the group; the stale pass asks
    assert_eq!(count(&out, is_read), 0);
    let lookup = only(&out, is_lookup);
    // Not used yet: cancel again, higher.
    let out = fx.receipts(&lookup, 0, &[ReceiptStatus::Unknown]);
    let CollectionEffect::Cancel(c2) = &only(&out, is_cancel).effect else { unreachable!() };
    assert!(c2.gas_price_wei > c.gas_price_wei);
    // Used by the cancellation (none of ours mined): settled.
    let lookup = only(&fx.tick_at(START_US + 4 * HOUR_US), is_lookup);
    fx.receipts(&lookup, 1, &[ReceiptStatus::Unknown]);
    assert!(!fx.batch(1).nonce_unsettled);
    assert!(fx.p.relayer_available(RELAYER));
    // The rows are swept by a new batch with the next nonce.
    let read = only(&fx.run_schedule(), is_read);
    let b = only(&fx.read(read.id, 30, vec![bal(wallet(1), 2 * USDT)]), is_broadcast);
    assert_eq!(sweep(&b).nonce, 1);
}

#[test]
fn a_given_up_nonce_mined_by_its_own_sweep_confirms_the_batch() {
    let (mut fx, _) = stale_setup();
    let lookup = only(&fx.tick_at(START_US + 2 * HOUR_US), is_lookup);
    fx.receipts(&lookup, 0, &[ReceiptStatus::Pending]);
    fx.cmd(CollectionCommand::FailStale(FailStale { batch: BatchId(1) }));
    let out = fx.run_schedule();
    let _ = fx.receipts(&only(&out, is_lookup), 1, &[ReceiptStatus::Mined(receipt(true, 70))]);
    assert_eq!(open_kinds(&fx.p), vec![AlertKind::LateSuccess]);
    let batch = fx.batch(1);
    assert_eq!((batch.status, batch.nonce_unsettled), (BatchStatus::Confirmed, false));
    assert_eq!(fx.row(1).status, RowStatus::Collected(BatchId(1)));
    assert!(fx.p.relayer_available(RELAYER));
}

#[test]
fn a_gas_bump_adds_a_hash_and_lookups_cover_every_hash() {
    let (mut fx, b) = stale_setup();
    let lookup = only(&fx.tick_at(START_US + 2 * HOUR_US), is_lookup);
    fx.receipts(&lookup, 0, &[ReceiptStatus::Pending]);
    let bump = |gas| CollectionCommand::BumpGas(BumpGas { batch: BatchId(1), gas_price_wei: gas });
    // Below +10 %: refused.
    fx.cmd(bump(GAS_PRICE_WEI / 100 * 109));
    let out = fx.cmd(bump(GAS_PRICE_WEI / 100 * 110));
    let replacement = only(&out, is_broadcast);
    assert_eq!(sweep(&replacement).nonce, sweep(&b).nonce);
    fx.broadcast_result(&replacement, BroadcastOutcome::Accepted);
    let batch = fx.batch(1);
    assert_eq!(batch.tx_hashes, vec![hash_of(&sweep(&b)), hash_of(&sweep(&replacement))]);
    assert_eq!(batch.status, BatchStatus::Stale);
    // The next check asks for both; the replacement is the one mined.
    let lookup = only(&fx.tick_at(START_US + 3 * HOUR_US), is_lookup);
    let _ = fx.receipts(&lookup, 1, &[ReceiptStatus::Unknown, ReceiptStatus::Mined(receipt(true, 50))]);
    assert!(open_kinds(&fx.p).contains(&AlertKind::MissedWebhook));
    assert_eq!(fx.batch(1).status, BatchStatus::Confirmed);
    assert_eq!(fx.p.batch_of_tx(&hash_of(&sweep(&replacement))), Some(BatchId(1)));
    // Bumps only for batches in flight.
    fx.cmd(bump(GAS_PRICE_WEI * 2));
    assert_eq!(
        fx.p.rejections_recent().iter().map(|r| r.kind).collect::<Vec<_>>(),
        vec![RejectKind::BumpTooSmall, RejectKind::BatchNotInFlight]
    );
}

#[test]
fn lost_answers_are_asked_again_after_the_threshold() {
    let mut fx = Fx::new();
    fx.tick();
    let b = fx.up_to_broadcast(&[(1, 2 * USDT, 5)], 10, 2 * USDT);
    // The broadcast's answer never comes: the stale pass re-sends the same transaction.
    let out = fx.tick_at(START_US + 2 * HOUR_US);
    let again = only(&out, is_broadcast);
    assert_eq!(sweep(&again), sweep(&b));
    // The old answer, if it shows up now, is ignored; the new one counts.
    fx.broadcast_result(&b, BroadcastOutcome::Accepted);
    assert_eq!(fx.batch(1).status, BatchStatus::Pending);
    fx.broadcast_result(&again, BroadcastOutcome::Accepted);
    assert_eq!(fx.batch(1).status, BatchStatus::Broadcasting);
}

#[test]
fn a_late_webhook_of_a_given_up_batch_confirms_it_with_an_alert() {
    let (mut fx, b) = stale_setup();
    let lookup = only(&fx.tick_at(START_US + 2 * HOUR_US), is_lookup);
    fx.receipts(&lookup, 0, &[ReceiptStatus::Unknown]);
    fx.cmd(CollectionCommand::FailStale(FailStale { batch: BatchId(1) }));
    // The operator was wrong: it was mined after all. Its funds left the wallet, so its
    // rows must not stay QUEUED forever.
    let _ = fx.webhook(hash_of(&sweep(&b)), true, 60);
    assert_eq!(open_kinds(&fx.p), vec![AlertKind::LateSuccess]);
    assert_eq!(fx.batch(1).status, BatchStatus::Confirmed);
    assert_eq!(fx.row(1).status, RowStatus::Collected(BatchId(1)));
    assert!(fx.p.relayer_available(RELAYER));
}

// ----- audit -----

#[test]
fn audit_trail_runs_both_ways() {
    let mut fx = Fx::new();
    let b =
        fx.up_to_broadcasting(&[(5, USDT, 5), (6, USDT / 2, 6), (7, 3 * USDT / 10, 7)], 10, 18 * USDT / 10);
    // While in flight, a queued deposit points at the batch that may collect it.
    let t = fx.p.trace_deposit(DepositId(7)).expect("trace");
    assert_eq!(t.open_batch.map(|b| b.id), Some(BatchId(1)));
    assert!(t.batch.is_none());
    let hash = hash_of(&sweep(&b));
    fx.webhook(hash, true, 12);
    // deposit → queue row → batch → tx hash
    let t = fx.p.trace_deposit(DepositId(7)).expect("trace");
    assert_eq!(t.row.status, RowStatus::Collected(BatchId(1)));
    assert_eq!(t.batch.map(|b| (b.id, b.amount_minor)), Some((BatchId(1), 18 * USDT / 10)));
    assert_eq!(t.tx_hashes(), &[hash]);
    // tx hash → batch → its deposits, whose amounts add up to the swept balance.
    let batch = fx.p.batch_of_tx(&hash).expect("ours");
    let rows = fx.p.batch_deposits(batch).expect("batch");
    assert_eq!(rows.iter().map(|r| r.deposit.0).collect::<Vec<_>>(), vec![5, 6, 7]);
    assert_eq!(rows.iter().map(|r| r.amount_minor).sum::<u128>(), 18 * USDT / 10);
    assert!(fx.p.trace_deposit(DepositId(99)).is_none());
}

// ----- checkpoints -----

#[test]
fn checkpoints_round_trip_and_bad_ones_are_refused() {
    let (mut fx, _) = stale_setup();
    let lookup = only(&fx.tick_at(START_US + 2 * HOUR_US), is_lookup);
    fx.receipts(&lookup, 0, &[ReceiptStatus::Pending]);
    fx.deposit(2, wallet(2), USDT, 30);
    let mut buf = Vec::new();
    fx.p.encode(&mut buf);
    let back = rtgs_collection::CollectionPlugin::decode(&buf).expect("decodes");
    assert_eq!(back.state_hash(), fx.p.state_hash());
    let mut again = Vec::new();
    back.encode(&mut again);
    assert_eq!(again, buf);
    back.check_invariants().expect("consistent");
    // Truncated, trailing, wrong version: refused.
    assert!(rtgs_collection::CollectionPlugin::decode(&buf[..buf.len() - 1]).is_err());
    let mut longer = buf.clone();
    longer.push(0);
    assert!(rtgs_collection::CollectionPlugin::decode(&longer).is_err());
    let mut other = buf.clone();
    other[0] = rtgs_collection::checkpoint::CHECKPOINT_VERSION + 1;
    assert!(rtgs_collection::CollectionPlugin::decode(&other).is_err());
    other[0] = rtgs_collection::checkpoint::CHECKPOINT_VERSION - 1;
    assert!(rtgs_collection::CollectionPlugin::decode(&other).is_err());
    // Every single-byte corruption is refused or decodes to a different, consistent state.
    for i in (1..buf.len()).step_by(7) {
        let mut bad = buf.clone();
        bad[i] ^= 0x5A;
        if let Ok(p) = rtgs_collection::CollectionPlugin::decode(&bad) {
            assert_ne!(p.state_hash(), fx.p.state_hash(), "byte {i}");
            p.check_invariants().expect("decoded states are consistent");
        }
    }
}

#[test]
fn the_state_hash_covers_every_change() {
    let mut fx = Fx::new();
    let mut seen = std::collections::BTreeSet::new();
    seen.insert(fx.p.state_hash());
    fx.relayer(RELAYER, 0);
    assert!(seen.insert(fx.p.state_hash()));
    fx.deposit(1, wallet(1), 2 * USDT, 5);
    assert!(seen.insert(fx.p.state_hash()));
    let read = only(&fx.run_schedule(), is_read);
    assert!(seen.insert(fx.p.state_hash()));
    let b = only(&fx.read(read.id, 10, vec![bal(wallet(1), 2 * USDT)]), is_broadcast);
    assert!(seen.insert(fx.p.state_hash()));
    fx.broadcast_result(&b, BroadcastOutcome::Accepted);
    assert!(seen.insert(fx.p.state_hash()));
}

#[test]
fn tick_budget_is_respected_for_the_stale_pass() {
    // Many batches in flight: the stale pass spreads its lookups over ticks.
    let mut fx = Fx::new();
    fx.check = false;
    fx.tick();
    let n = rtgs_collection::limits::STALE_LOOKUPS_PER_TICK_MAX as u64 + 10;
    let relayers: Vec<RelayerId> = (0..n).map(|i| RelayerId(1_000 + i)).collect();
    for r in &relayers {
        fx.relayer(*r, 0);
    }
    for i in 0..n {
        fx.deposit(i + 1, wallet(i), 2 * USDT, 5);
    }
    let reads = fx.run_schedule();
    let mut broadcasts = Vec::new();
    for r in reads {
        let CollectionEffect::ReadBalances(rb) = &r.effect else { continue };
        let rows = rb.groups.iter().map(|(w, _)| bal(*w, 2 * USDT)).collect();
        broadcasts.extend(fx.read(r.id, 10, rows).into_iter().filter(is_broadcast));
    }
    assert_eq!(broadcasts.len() as u64, n);
    for b in &broadcasts {
        fx.broadcast_result(b, BroadcastOutcome::Accepted);
    }
    let first = fx.tick_at(START_US + 2 * HOUR_US + HOUR_US);
    assert_eq!(count(&first, is_lookup), rtgs_collection::limits::STALE_LOOKUPS_PER_TICK_MAX);
    let second = fx.tick_at(START_US + 3 * HOUR_US + 1);
    assert_eq!(count(&second, is_lookup), 10);
    fx.p.check_invariants().expect("consistent");
}
