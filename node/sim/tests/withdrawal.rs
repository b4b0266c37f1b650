//! The simulator with the withdrawal plugin in every center: crashes (the owner's included),
//! sequencer failovers, reordered/duplicated/dropped/corrupted deliveries, answers lost with a
//! crashed owner and effects executed again by the next — and at the end all centers hold
//! identical withdrawal state (the cluster's check), every withdrawal ended with nothing open,
//! none was paid twice and nothing reached a chain that the plugin did not record
//! (`WithdrawalSim::check_end`). `RTGS_SIM_SEEDS` sets the seed count.

use rtgs_sim::withdrawal::WithdrawalSim;
use rtgs_sim::{run_with_plugins, SimConfig, SimReport};

fn seeds() -> u64 {
    std::env::var("RTGS_SIM_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(24)
}

fn run(seed: u64, world_faults: bool) -> SimReport {
    let config = SimConfig { fault_level: 3, ..SimConfig::small(seed) };
    let world = WithdrawalSim::new(seed, 18, 4, 2, world_faults);
    run_with_plugins(&config, Box::new(world)).unwrap_or_else(|f| panic!("{f}"))
}

#[test]
fn withdrawal_seeds_converge_with_identical_state_and_no_double_payment() {
    let (mut owner_changes, mut lost, mut executed) = (0, 0, 0);
    for seed in 0..seeds() {
        let r = run(seed, false);
        assert_ne!(r.plugin_state_hash, 0, "seed {seed}: the plugin ran");
        assert_eq!(r.finalized, r.sequenced, "seed {seed}: {r:?}");
        owner_changes += r.owner_changes;
        lost += r.plugin_results_lost;
        executed += r.effects_executed;
    }
    assert!(executed > 0, "the owners executed effects");
    assert!(owner_changes > 0, "some seeds moved ownership");
    assert!(lost > 0, "some seeds lost answers with a crashed owner (and recovered them)");
}

#[test]
fn withdrawal_seeds_converge_with_the_worlds_faults_too() {
    for seed in 0..seeds().div_ceil(3) {
        let r = run(1_000 + seed, true);
        assert_eq!(r.finalized, r.sequenced, "seed {seed}: {r:?}");
    }
}

#[test]
fn a_withdrawal_seed_replays_exactly() {
    assert_eq!(run(5, true), run(5, true));
}
