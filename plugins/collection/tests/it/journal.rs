//! Through the journal: the seed's end-to-end case, determinism across instances, replay from
//! the journal and from a checkpoint, and an owner failover that re-executes effects.

use rtgs_collection::chain_sim::Faults;
use rtgs_collection::driver::replay;
use rtgs_collection::settings::{HOUR_US, MINUTE_US};
use rtgs_collection::state::*;
use rtgs_collection::types::*;
use rtgs_collection::CollectionPlugin;
use rtgs_core::plugin::Plugin;

use crate::support::*;

#[test]
fn seed_case_three_deposits_one_sweep_traceable_both_ways() {
    // Seed 000 §2-1 and §7: deposits 1.0 + 0.5 + 0.3 USDT to HOT-A → one batch of 1.8.
    let mut w = World::new(42);
    w.deposit(5, wallet(1), USDT);
    w.deposit(6, wallet(1), USDT / 2);
    w.deposit(7, wallet(1), 3 * USDT / 10);
    w.run(HOUR_US + 5 * MINUTE_US);

    let batches: Vec<Batch> = w.p().batches().cloned().collect();
    assert_eq!(batches.len(), 1, "one physical transaction");
    let b = &batches[0];
    assert_eq!(b.status, BatchStatus::Confirmed);
    assert_eq!(b.amount_minor, 18 * USDT / 10, "collected_amount = on-chain balance");
    assert_eq!(b.receipt.map(|r| r.gas_cost_usd_micros), Some(GAS_USD_MICROS));
    assert_eq!(w.d.adapter.treasury_balance(TOKEN), 18 * USDT / 10);

    // "Which transaction collected deposit 7?" deposit → queue row → batch → tx hash.
    let t = w.p().trace_deposit(DepositId(7)).expect("trace");
    assert_eq!(t.row.status, RowStatus::Collected(b.id));
    assert_eq!(t.batch.map(|x| x.id), Some(b.id));
    assert_eq!(t.tx_hashes(), b.tx_hashes.as_slice());
    let mined = w.d.adapter.mined_sweeps();
    assert_eq!(mined.len(), 1);
    assert_eq!(t.tx_hashes(), &[mined[0].1]);

    // "Which deposits did this transaction collect?" tx hash → batch → rows; they add up.
    let id = w.p().batch_of_tx(&mined[0].1).expect("ours");
    let rows = w.p().batch_deposits(id).expect("batch");
    let listed: Vec<(u64, u128)> = rows.iter().map(|r| (r.deposit.0, r.amount_minor)).collect();
    assert_eq!(listed, vec![(5, USDT), (6, USDT / 2), (7, 3 * USDT / 10)]);
    w.check_money();
    w.check_all_collected();
}

/// A busy day: deposits every few minutes to a handful of wallets, with faults.
fn busy_world(seed: u64, faults: Faults) -> World {
    let mut w = World::new(seed);
    w.d.adapter.faults = faults;
    let mut id = 0;
    for step in 0..30u64 {
        for k in 0..3u64 {
            id += 1;
            w.deposit(id, wallet((step + k) % 5), (u128::from(id % 4) + 2) * USDT);
        }
        w.run_with_operator(7 * MINUTE_US);
    }
    w
}

fn some_faults() -> Faults {
    Faults {
        drop_tx: 60,
        stuck_tx: 60,
        revert_tx: 60,
        timeout_before_accept: 60,
        timeout_after_accept: 60,
        reject_tx: 40,
        read_failure: 60,
        webhook_missing: 100,
        webhook_delay: 100,
        webhook_delay_us_max: 2 * HOUR_US,
        reorg: 50,
    }
}

#[test]
fn two_instances_fed_the_same_journal_end_in_the_same_state() {
    let w = busy_world(7, some_faults());
    let a = replay(CollectionPlugin::new(), w.d.journal());
    let b = replay(CollectionPlugin::new(), w.d.journal());
    assert_eq!(a.state_hash(), b.state_hash());
    // And both equal the live instance that produced the journal.
    assert_eq!(a.state_hash(), w.p().state_hash());
    let (mut ea, mut eb) = (Vec::new(), Vec::new());
    a.encode(&mut ea);
    w.p().encode(&mut eb);
    assert_eq!(ea, eb);
    assert!(w.p().batches().count() > 5, "the journal exercised something");
}

#[test]
fn replay_from_a_checkpoint_plus_the_rest_of_the_journal_reproduces_the_state() {
    let w = busy_world(8, some_faults());
    let journal = w.d.journal();
    for cut in [1, journal.len() / 3, journal.len() / 2, journal.len() - 1] {
        let prefix = replay(CollectionPlugin::new(), &journal[..cut]);
        let mut buf = Vec::new();
        prefix.encode(&mut buf);
        let restored = CollectionPlugin::decode(&buf).expect("checkpoint decodes");
        assert_eq!(restored.state_hash(), prefix.state_hash());
        let finished = replay(restored, &journal[cut..]);
        assert_eq!(finished.state_hash(), w.p().state_hash(), "cut at {cut}");
        // Re-delivering entries already covered by the checkpoint changes nothing.
        let again = replay(finished.clone(), &journal[..cut]);
        assert_eq!(again.state_hash(), finished.state_hash());
    }
}

/// Deposits for 8 hours with faults; every hour the owner "fails over": the new owner re-runs
/// every effect of the last 20 minutes, as it cannot know which of them the old owner executed.
fn failover_run(seed: u64, operator_bumps: bool) -> (World, usize) {
    let mut w = World::new(seed);
    w.d.adapter.faults = some_faults();
    w.operator_bumps = operator_bumps;
    let mut id = 0;
    let mut reexecuted = 0;
    for round in 0..24u64 {
        for k in 0..2u64 {
            id += 1;
            w.deposit(id, wallet((round + k) % 4), (u128::from(id % 3) + 2) * USDT);
        }
        let mark = w.d.effects().len();
        w.run_with_operator(20 * MINUTE_US);
        if round % 3 == 2 {
            let suffix: Vec<_> = w.d.effects()[mark..].to_vec();
            reexecuted += suffix.len();
            w.d.reexecute(&suffix);
            w.run_with_operator(MINUTE_US);
            w.check_money_so_far();
        }
    }
    w.d.adapter.faults = Faults::NONE;
    w.run_with_operator(10 * HOUR_US);
    (w, reexecuted)
}

#[test]
fn an_owner_failover_reexecuting_effects_sends_no_sweep_twice_and_loses_no_deposit() {
    for seed in [9, 10, 11] {
        for operator_bumps in [true, false] {
            let (w, reexecuted) = failover_run(seed, operator_bumps);
            assert!(reexecuted > 20, "the failover re-ran effects: {reexecuted}");
            assert!(w.p().counters().results_ignored > 0, "duplicate answers were ignored");
            // No batch swept twice; Σ swept = Σ COLLECTED; every deposit collected.
            w.check_money();
            w.check_all_collected();
            // And the journal alone still rebuilds it.
            assert_eq!(replay(CollectionPlugin::new(), w.d.journal()).state_hash(), w.p().state_hash());
        }
    }
}

#[test]
fn a_long_random_run_checkpoints_and_continues_identically() {
    let mut w = busy_world(10, some_faults());
    let mut buf = Vec::new();
    w.p().encode(&mut buf);
    let restored = CollectionPlugin::decode(&buf).expect("decodes");
    let mut again = Vec::new();
    restored.encode(&mut again);
    assert_eq!(again, buf);
    restored.check_invariants().expect("consistent");
    // Continue the live run, then feed the same new entries to the restored copy.
    let cut = w.d.journal().len();
    w.d.adapter.faults = Faults::NONE;
    w.run_with_operator(8 * HOUR_US);
    let continued = replay(restored, &w.d.journal()[cut..]);
    assert_eq!(continued.state_hash(), w.p().state_hash());
    w.check_money();
    w.check_all_collected();
}
