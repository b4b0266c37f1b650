//! The simulator's own tests: seeds pass, runs replay, every planted bug is caught, the faults
//! happen and the guards against them act. `RTGS_SIM_SEEDS` sets the number of seeds of
//! `seeds_pass`.

use rtgs_core::limits::CENTER_COUNT_MAX;
use rtgs_sim::{run, InjectedBug, SimConfig, SimFailure, SimReport, SIM_COMMANDS_MAX};

/// Seeds `seeds_pass` runs: `RTGS_SIM_SEEDS` or a count that takes a few seconds in debug.
fn seed_count() -> u64 {
    std::env::var("RTGS_SIM_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(128)
}

fn run_ok(config: &SimConfig) -> SimReport {
    run(config).unwrap_or_else(|failure| panic!("{failure}"))
}

#[test]
fn seeds_pass() {
    for seed in 0..seed_count() {
        let report = run_ok(&SimConfig::small(seed));
        assert_eq!(report.submitted, 166, "seed {seed}: 8 opens, 8 fundings, 150 commands");
        assert!(report.sequenced >= report.submitted, "seed {seed}: {report:?}");
        assert_eq!(report.finalized, report.sequenced, "seed {seed}: {report:?}");
    }
}

#[test]
fn same_seed_same_report_other_seed_other_report() {
    let a = run_ok(&SimConfig::small(7));
    let b = run_ok(&SimConfig::small(7));
    let c = run_ok(&SimConfig::small(8));
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert_ne!(a.state_hash, c.state_hash);
}

/// Which check must catch each planted bug: a word of its message.
fn expected_words(bug: InjectedBug) -> &'static [&'static str] {
    match bug {
        InjectedBug::CenterFlipsOutcome => &["centers differ", "DIVERGENCE"],
        InjectedBug::FinalizerQuorumOne => &["without a quorum"],
        InjectedBug::SequencerForgetsDedupe => &["twice", "answered", "conflicting"],
        InjectedBug::AckBeforeCommit => &["without a quorum"],
        InjectedBug::SequencerReusesEpoch => &["panic: epoch must rise"],
    }
}

#[test]
fn every_injected_bug_is_caught_and_replays() {
    for bug in InjectedBug::ALL {
        let failure = (0..20)
            .find_map(|seed| {
                let config = SimConfig { inject_bug: Some(bug), fault_level: 3, ..SimConfig::small(seed) };
                run(&config).err().map(|f| (config, f))
            })
            .unwrap_or_else(|| panic!("{bug:?} was not caught in 20 seeds"));
        let (config, failure) = failure;
        assert!(
            expected_words(bug).iter().any(|w| failure.message.contains(w)),
            "{bug:?} caught by an unexpected check: {failure}"
        );
        let text = failure.to_string();
        assert!(text.contains(&format!("seed {}", config.seed)), "{text}");
        assert!(text.ends_with(&format!("replay with: rtgs sim --seed {}", config.seed)), "{text}");
        assert_eq!(run(&config).err(), Some(failure), "a failure replays exactly");
    }
}

/// Fault level 0 is reordering only.
#[test]
fn no_faults_finalizes_everything_without_crashes() {
    let mut reorders = 0;
    for seed in 0..5 {
        let report = run_ok(&SimConfig { fault_level: 0, ..SimConfig::small(seed) });
        assert_eq!(report.finalized, report.sequenced, "{report:?}");
        reorders += report.faults.journal_reorders;
        assert_eq!(report.faults.total(), report.faults.journal_reorders, "{report:?}");
        assert_eq!(report.recoveries.frames_refused + report.recoveries.checkpoints_refused, 0);
    }
    assert!(reorders > 0, "the network reorders at every level");
}

/// Heavy faults: every kind of fault is injected over a few seeds, and the guards act on them.
#[test]
fn heavy_faults_inject_every_kind_and_still_converge() {
    let mut faults = rtgs_sim::Faults::default();
    let mut recoveries = rtgs_sim::Recoveries::default();
    for seed in 0..12 {
        let report = run_ok(&SimConfig { fault_level: 3, ..SimConfig::small(seed) });
        assert_eq!(report.finalized, report.sequenced, "{report:?}");
        faults.add(&report.faults);
        recoveries.add(&report.recoveries);
    }
    for (n, what) in faults.kinds() {
        assert!(n > 0, "no {what} in 12 heavy seeds: {faults}");
    }
    let acted = ["gap pulls", "re-acks", "ack rewinds", "acks dropped beyond the window", "frames refused"];
    let acted = acted.iter().chain(&["checkpoints refused", "replays from the start", "notices"]);
    for what in acted {
        let n = recoveries.kinds().iter().find(|(_, w)| w == what).map_or(0, |(n, _)| *n);
        assert!(n > 0, "no {what} in 12 heavy seeds: {recoveries}");
    }
}

#[test]
fn other_cluster_sizes() {
    for centers in [1, 2, 4, 5] {
        let report =
            run_ok(&SimConfig { centers, commands: 60, ..SimConfig::small(u64::from(centers as u8)) });
        assert_eq!(report.finalized, report.sequenced, "{centers} centers");
    }
}

#[test]
fn invalid_config_is_a_failure_not_a_panic() {
    for centers in [0, CENTER_COUNT_MAX + 1] {
        let failure = run(&SimConfig { centers, ..SimConfig::small(1) });
        assert!(matches!(failure, Err(SimFailure { step: 0, .. })));
    }
    let failure = run(&SimConfig { commands: SIM_COMMANDS_MAX, ..SimConfig::small(1) });
    assert!(matches!(failure, Err(SimFailure { step: 0, .. })));
}
