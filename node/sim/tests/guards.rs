//! Each new fault class is caught when its guard is switched off ([`Guard`]): the same seed
//! passes with the guard and fails without it, by the check that should catch it, and the
//! failure replays.
//!
//! * [`Guard::Reacks`] — lost ack messages stall finality (a center lost for the run makes every
//!   ack of the others needed) and the run does not converge.
//! * [`Guard::AckWindow`] — acks beyond the tally window held instead of dropped and read again:
//!   a center far behind (or one whose finality stood while it applied on) stops reading, and
//!   the run does not converge (the production deadlock of 2026-12-01).
//! * [`Guard::Checksums`] — a flipped bit in a journal frame or a checkpoint is applied, and
//!   the checker sees a center apply what was not sequenced, centers differ, or the journal
//!   read back differ from what was written.
//! * [`Guard::OwnerDetector`] — with the collection plugin and its owner lost for the run, the
//!   owner's effects never run again: the sweeps never finish and the run does not converge.

use rtgs_sim::collection::CollectionSim;
use rtgs_sim::{run, run_with_plugins, Guard, SimConfig, SimFailure, SimReport};

fn run_with(guard: Guard, config: &SimConfig) -> Result<SimReport, SimFailure> {
    match guard {
        Guard::OwnerDetector => run_with_plugins(config, Box::new(CollectionSim::new(config.seed, 12, 3))),
        _ => run(config),
    }
}

/// The words of the checks that must catch each guard's absence.
fn expected_words(guard: Guard) -> &'static [&'static str] {
    match guard {
        Guard::Reacks | Guard::AckWindow | Guard::OwnerDetector => &["did not converge"],
        Guard::Checksums => &[
            "the journal holds",
            "centers differ",
            "the journal read back differs",
            "DIVERGENCE",
            "panic: journal is not gap-free",
        ],
    }
}

#[test]
fn every_new_fault_class_is_caught_without_its_guard() {
    for guard in Guard::ALL {
        let found = (0..40).find_map(|seed| {
            let config = SimConfig { fault_level: 3, guard_off: Some(guard), ..SimConfig::small(seed) };
            run_with(guard, &config).err().map(|f| (config, f))
        });
        let Some((config, failure)) = found else { panic!("{guard:?} off was not caught in 40 seeds") };
        assert!(
            expected_words(guard).iter().any(|w| failure.message.contains(w)),
            "{guard:?} off caught by an unexpected check: {failure}"
        );
        assert!(failure.message.contains(&format!("[guard off: {guard:?}]")), "{failure}");
        assert_eq!(run_with(guard, &config).err(), Some(failure), "a failure replays exactly");
        let guarded = SimConfig { guard_off: None, ..config };
        if let Err(f) = run_with(guard, &guarded) {
            panic!("seed {} fails even with {guard:?}: {f}", config.seed);
        }
    }
}
