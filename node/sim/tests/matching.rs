//! The simulator with the matching plugin in every center: crashes (the owner's included, and an
//! owner lost for the run, taken over by the centers' own failure detector), sequencer
//! failovers, reordered/duplicated/dropped/corrupted deliveries, a faulty LP (BUSY, NO_POOL,
//! transport failures, lost and late answers, rejections after the commit, COMMITTED on
//! reserve), sellers leaving, buyers not paying, users deciding or not — and at the end all
//! centers hold identical matching state, no order is matched twice and every escrow the LP
//! committed is known (`MatchingSim::check_end`). `RTGS_SIM_SEEDS` sets the seed count.

use rtgs_sim::matching::MatchingSim;
use rtgs_sim::{run_with_plugins, SimConfig, SimReport};

fn seeds() -> u64 {
    std::env::var("RTGS_SIM_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(32)
}

fn run(seed: u64) -> SimReport {
    let config = SimConfig { fault_level: 3, ..SimConfig::small(seed) };
    run_with_plugins(&config, Box::new(MatchingSim::new(seed, 24, 4))).unwrap_or_else(|f| panic!("{f}"))
}

#[test]
fn matching_seeds_converge_with_identical_state_and_no_double_match() {
    let (mut owner_changes, mut lost) = (0, 0);
    for seed in 0..seeds() {
        let r = run(seed);
        assert_ne!(r.plugin_state_hash, 0, "seed {seed}: the plugin ran");
        assert!(r.effects_executed > 0, "seed {seed}: {r:?}");
        assert_eq!(r.finalized, r.sequenced, "seed {seed}: {r:?}");
        owner_changes += r.owner_changes;
        lost += r.plugin_results_lost;
    }
    assert!(owner_changes > 0, "some seeds moved ownership after the owner went silent");
    assert!(lost > 0, "some seeds lost answers with a crashed owner (and recovered them)");
}

#[test]
fn a_matching_seed_replays_exactly() {
    assert_eq!(run(3), run(3));
}
