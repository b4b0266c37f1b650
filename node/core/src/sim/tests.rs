use super::*;

/// Seeds `seeds_pass` runs: `RTGS_SIM_SEEDS` or a count that takes a few seconds in debug.
fn seed_count() -> u64 {
    std::env::var("RTGS_SIM_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(256)
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
        InjectedBug::CenterFlipsOutcome => &["centers differ", "divergence"],
        InjectedBug::FinalizerQuorumOne => &["without a quorum", "twice"],
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

#[test]
fn no_faults_finalizes_everything_without_crashes() {
    for seed in 0..5 {
        let report = run_ok(&SimConfig { fault_level: 0, ..SimConfig::small(seed) });
        assert_eq!(report.finalized, report.sequenced, "{report:?}");
        assert_eq!(report.center_crashes, 0);
        assert_eq!(report.sequencer_crashes, 0);
        assert_eq!(report.duplicates_delivered, 0);
    }
}

#[test]
fn heavy_faults_still_converge() {
    let mut crashes = 0;
    let mut gap_pulls = 0;
    for seed in 0..8 {
        let report = run_ok(&SimConfig { fault_level: 3, ..SimConfig::small(seed) });
        assert_eq!(report.finalized, report.sequenced, "{report:?}");
        crashes += report.center_crashes + report.sequencer_crashes;
        gap_pulls += report.gap_pulls;
    }
    assert!(crashes > 0, "heavy faults crashed nothing");
    assert!(gap_pulls > 0, "heavy faults caused no gap pull");
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
