//! Properties over random deposit and fault schedules. A failing case prints its inputs
//! (including the simulator seed): it replays exactly.

use proptest::prelude::*;
use rtgs_collection::chain_sim::{ChainConfig, Faults};
use rtgs_collection::driver::replay;
use rtgs_collection::settings::{HOUR_US, MINUTE_US};
use rtgs_collection::types::*;
use rtgs_collection::CollectionPlugin;
use rtgs_core::plugin::Plugin;

use crate::support::*;

fn faults() -> impl Strategy<Value = Faults> {
    let p = || 0u32..250;
    (p(), p(), p(), p(), p(), p(), p(), p(), p(), 0u32..80, 0u64..3 * HOUR_US).prop_map(
        |(drop_tx, stuck_tx, revert_tx, tb, ta, reject_tx, read_failure, wm, wd, reorg, delay)| Faults {
            drop_tx,
            stuck_tx,
            revert_tx,
            timeout_before_accept: tb,
            timeout_after_accept: ta,
            reject_tx,
            read_failure,
            webhook_missing: wm,
            webhook_delay: wd,
            webhook_delay_us_max: delay,
            reorg,
        },
    )
}

/// Minutes during which deposits arrive and faults happen (several hourly runs).
const FAULT_PHASE_MINUTES: u64 = 8 * 60;

/// (minute of arrival, wallet, amount in half-USDT units ≥ 2 USDT, so none is below the minimum).
fn deposits() -> impl Strategy<Value = Vec<(u64, u64, u128)>> {
    proptest::collection::vec((0u64..FAULT_PHASE_MINUTES, 0u64..5, 4u128..40), 1..40)
}

fn run_case(
    seed: u64,
    deposits: &[(u64, u64, u128)],
    faults: Faults,
    relayer_count: u64,
    bumps: bool,
) -> World {
    let relayers: Vec<RelayerId> = (0..relayer_count).map(|i| RelayerId(RELAYER.0 + i)).collect();
    let mut w = World::with(seed, ChainConfig::default(), &relayers);
    w.d.adapter.faults = faults;
    w.operator_bumps = bumps;
    let mut sorted = deposits.to_vec();
    sorted.sort_by_key(|d| d.0);
    let mut next = sorted.iter().enumerate().peekable();
    for minute in 0..FAULT_PHASE_MINUTES {
        while let Some((i, (_, wallet_n, half_usdt))) = next.next_if(|(_, d)| d.0 <= minute) {
            w.deposit(i as u64 + 1, wallet(*wallet_n), half_usdt * USDT / 2);
        }
        w.run_with_operator(MINUTE_US);
        if minute % 10 == 0 {
            w.check_money_so_far();
        }
    }
    // The chain settles: faults stop, the operator and the schedule finish the job.
    w.d.adapter.faults = Faults::NONE;
    w.run_with_operator(10 * HOUR_US);
    w
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn swept_money_equals_collected_deposits_and_nothing_stays_queued(
        seed in any::<u64>(),
        deposits in deposits(),
        faults in faults(),
        relayer_count in 1u64..3,
        operator_bumps in any::<bool>(),
    ) {
        let w = run_case(seed, &deposits, faults, relayer_count, operator_bumps);
        // Money swept on chain = Σ COLLECTED deposits, batch by batch; no batch swept twice.
        w.check_money();
        // Every deposit COLLECTED, every wallet empty.
        w.check_all_collected();
        prop_assert_eq!(w.p().queued_count(), 0);
        // The journal alone rebuilds the same state.
        prop_assert_eq!(replay(CollectionPlugin::new(), w.d.journal()).state_hash(), w.p().state_hash());
        let mut buf = Vec::new();
        w.p().encode(&mut buf);
        let back = CollectionPlugin::decode(&buf);
        prop_assert!(back.is_ok());
        prop_assert_eq!(back.map(|p| p.state_hash()).unwrap_or(0), w.p().state_hash());
    }
}
