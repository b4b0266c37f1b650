//! # rtgs-sim: the deterministic simulator (TigerBeetle's VOPR style)
//!
//! A whole cluster on one thread from one seed. Every data center is the core's
//! [`rtgs_core::center::Center`] — the very state machine the engines run — next to the real
//! [`Sequencer`](rtgs_core::sequencer::Sequencer) and the real plugins. The simulator only moves
//! bytes and time: it models storage, the journal's deliveries and the ack stream, injects
//! faults, and checks invariants after every step. It holds no rule of a center (no gap pull,
//! ack window, re-ack, notice or owner failure detection of its own): what it proves, it proves
//! of the code that runs.
//!
//! # Layout
//! One seeded run is [`run`] or [`run_with_plugins`]: [`SimConfig`] in, [`SimReport`] (with the
//! [`Faults`] injected and the [`Recoveries`] they caused) or [`SimFailure`] out.
//! * `world` — the simulated cluster: the step loop, its phases and faults (`world::faults`), the
//!   sequencer process (`world::sequencer`), the driving of each center (`world::centers`) and of
//!   the plugins' outside world (`world::plugins`).
//! * `center` — one simulated center: the live `Center` and its reader positions, and the durable
//!   store that survives a crash (checkpoints, its own committed acks, finality progress).
//! * `storage` — storage as real bytes: the journal as codec frames in two copies, checkpoints in
//!   a CRC'd encoding; torn writes and flipped bits, detected when read, never applied.
//! * `acks` — the ack stream: one durable ordered log every center reads at its own position.
//! * `network` — journal messages in flight (latency, reordering, delays, duplicates, drops).
//! * `client` — the seeded workload and the clients that submit it.
//! * `checker` — the invariants checked after every step and at the end.
//! * [`collection`] — the collection plugin's outside world ([`SimPlugins`]).
//! * [`withdrawal`] — the withdrawal plugin's outside world ([`SimPlugins`]).
//!
//! Everything random comes from [`rtgs_core::prng::Prng`] streams seeded by the config's seed;
//! time is a virtual clock; every collection whose order matters is a `Vec`, `VecDeque` or
//! `BTreeMap`; nothing reads a clock or starts a thread. One seed is one run, bit for bit, so a
//! failure replays from its seed: `rtgs sim --seed S`.

use rtgs_core::entry::PluginCommand;
use rtgs_core::limits::CENTER_COUNT_MAX;
use rtgs_core::plugin::{EffectAdapter, HostedPlugin};
use rtgs_core::plugin_host::PluginHost;
use std::fmt;

mod acks;
mod center;
mod checker;
mod client;
pub mod collection;
mod network;
mod storage;
pub mod withdrawal;
mod world;

/// What to simulate. The same config always gives the same [`SimReport`] (or [`SimFailure`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct SimConfig {
    pub seed: u64,
    /// Data centers (1 to [`CENTER_COUNT_MAX`]); the mission's cluster has 3.
    pub centers: usize,
    /// Accounts opened and funded before the transfers.
    pub accounts: usize,
    /// Transfers and closes after the accounts are set up.
    pub commands: usize,
    /// 0 = no faults (reordering only), 1 light, 2 medium, 3 heavy; above 3 counts as 3.
    pub fault_level: u8,
    /// A deliberate bug, to prove the checks can fail.
    pub inject_bug: Option<InjectedBug>,
    /// A guard switched off, to prove the fault class it guards against is caught without it.
    pub guard_off: Option<Guard>,
}

impl SimConfig {
    /// A fast run: 3 centers, 8 accounts, 150 commands, medium faults.
    pub fn small(seed: u64) -> Self {
        SimConfig {
            seed,
            centers: 3,
            accounts: 8,
            commands: 150,
            fault_level: 2,
            inject_bug: None,
            guard_off: None,
        }
    }
}

/// Deliberate bugs the simulator can plant; each must make [`run`] fail.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum InjectedBug {
    /// One center reports one accepted transfer as rejected (AM04).
    CenterFlipsOutcome,
    /// DC1's finalizer is built for a cluster of one (quorum 1) and fed only DC1's own acks.
    FinalizerQuorumOne,
    /// A new sequencer leader skips ahead instead of replaying the journal, so it forgets which
    /// `bmi`s were already sequenced.
    SequencerForgetsDedupe,
    /// The drivers tell their centers a commit is durable when they receive it and write it only
    /// now and then, so acks vouch for state that is not durable yet.
    AckBeforeCommit,
    /// A new sequencer leader keeps its predecessor's epoch instead of fencing it with a higher
    /// one (the core's own assertion stops it; the simulator reports the panic as a failure).
    SequencerReusesEpoch,
}

impl InjectedBug {
    pub const ALL: [InjectedBug; 5] = [
        InjectedBug::CenterFlipsOutcome,
        InjectedBug::FinalizerQuorumOne,
        InjectedBug::SequencerForgetsDedupe,
        InjectedBug::AckBeforeCommit,
        InjectedBug::SequencerReusesEpoch,
    ];
}

/// The guard of each new fault class, to switch off in a self-test: without it the fault class
/// must make the run fail (see `tests/guards.rs`). Each is a setting, not a code path of its own.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Guard {
    /// Lost ack messages: centers never ask for their acks again when finality stands still
    /// (`CenterConfig::reack_after_us` = ∞).
    Reacks,
    /// Acks beyond the tally window: the drivers hold them — a reader stops at a message with
    /// an ack beyond its center's window until the window moves, the production engine's policy
    /// before 2026-12-01 — instead of letting the center drop them and read them again. (Only
    /// ignoring the center's rewinds is not enough to fail: finality standing still publishes
    /// the missing acks again, a quarter window per stall period.)
    AckWindow,
    /// Storage faults: journal frames and checkpoints are read without comparing checksums.
    Checksums,
    /// A dead owner: no owner failure detector (`CenterConfig::owner_silence_us` = ∞).
    OwnerDetector,
}

impl Guard {
    pub const ALL: [Guard; 4] = [Guard::Reacks, Guard::AckWindow, Guard::Checksums, Guard::OwnerDetector];
}

/// A struct of `u64` counters with `add` (sums over runs), `kinds` (each with its name) and
/// `Display` (the summary line's "n name, ...").
macro_rules! counters {
    ($(#[$doc:meta])* $name:ident { $($(#[$fdoc:meta])* $field:ident: $label:literal,)* }) => {
        $(#[$doc])*
        #[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
        pub struct $name {
            $($(#[$fdoc])* pub $field: u64,)*
        }

        impl $name {
            pub fn add(&mut self, other: &$name) {
                $(self.$field += other.$field;)*
            }

            /// Every counter with its name, in order.
            pub fn kinds(&self) -> Vec<(u64, &'static str)> {
                vec![$((self.$field, $label),)*]
            }

            pub fn total(&self) -> u64 {
                self.kinds().iter().map(|(n, _)| n).sum()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let parts: Vec<String> = self.kinds().iter().map(|(n, what)| format!("{n} {what}")).collect();
                f.write_str(&parts.join(", "))
            }
        }
    };
}

counters! {
    /// Faults injected in a run, one counter per kind.
    Faults {
        /// Centers crashed (at a random step or between a durable write and what follows it).
        center_crashes: "center crashes",
        sequencer_crashes: "sequencer crashes",
        /// Centers down from early in the run until the others converged (the owner, often).
        centers_lost: "centers lost",
        /// Centers restarted more than a tally window behind the others.
        far_behind: "far-behind restarts",
        /// Journal messages delivered after a later frame reached the same center (the network
        /// delivers any due message: reordering is constant, this counts what it did).
        journal_reorders: "journal reorders",
        journal_drops: "journal drops",
        /// Copies made by duplication faults, delivered.
        journal_duplicates: "journal duplicates",
        journal_delays: "journal delays",
        /// Ack messages published that never reached the stream.
        ack_losses: "ack messages lost",
        /// Times a center's ack reader stalled for a while.
        ack_read_delays: "ack reader stalls",
        /// Bits flipped in journal frames: at rest in one copy, or in a message in flight.
        journal_bit_flips: "journal bit flips",
        /// Journal appends cut short by a sequencer crash.
        journal_torn_writes: "journal torn writes",
        checkpoint_bit_flips: "checkpoint bit flips",
        /// Checkpoint writes cut short by a center crash.
        checkpoint_torn_writes: "checkpoint torn writes",
    }
}

counters! {
    /// What the guards did about the faults: the centers' own counters (summed over every life
    /// of every center) and the storage's detections. Observed, never used for a decision.
    Recoveries {
        /// Holes, overflows and lost tails pulled from the durable journal.
        gap_pulls: "gap pulls",
        entries_dropped_for_room: "entries dropped for room",
        /// Finality stood still: acks published again (and the stream read again).
        reacks: "re-acks",
        /// The ack stream read again (window rewinds and stall rewinds).
        ack_rewinds: "ack rewinds",
        acks_dropped_beyond_window: "acks dropped beyond the window",
        /// `SetOwner` proposals of the owner failure detectors.
        owner_proposals: "owner proposals",
        /// Journal frames refused for a bad checksum (and read again from a good copy).
        frames_refused: "frames refused",
        /// Checkpoints refused at a restart (torn or a bad checksum): an older one was used.
        checkpoints_refused: "checkpoints refused",
        /// Restarts with no readable checkpoint: the whole journal replayed.
        replays_from_start: "replays from the start",
        /// Final statuses announced by origin centers (repeats after restarts included).
        notices: "notices",
    }
}

/// What a successful run did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimReport {
    pub seed: u64,
    /// Steps taken, the end phases included.
    pub steps: u64,
    /// Distinct workload commands (distinct `bmi`s) the clients submitted.
    pub submitted: u64,
    /// Journal entries at the end (workload commands, plugin commands and `Tick`s).
    pub sequenced: u64,
    /// Seqs declared final (each exactly once per finalizer life, never again after it was
    /// durably final).
    pub finalized: u64,
    /// The state hash every center ended with.
    pub state_hash: u64,
    /// With plugins: the whole plugin state's hash every center ended with (0 without).
    pub plugin_state_hash: u64,
    /// `SetOwner` terms accepted (ownership moved after the detector suspected the owner).
    pub owner_changes: u64,
    /// Effects executed by live owners (first executions and re-executions).
    pub effects_executed: u64,
    /// Answers lost because the center that executed their effect crashed.
    pub plugin_results_lost: u64,
    pub faults: Faults,
    pub recoveries: Recoveries,
}

/// The plugins of a simulated cluster and their outside world (see `world::plugins`).
pub trait SimPlugins: EffectAdapter {
    /// One center's plugins (the same set for every center).
    fn make(&self) -> Vec<Box<dyn HostedPlugin>>;
    /// The effect id a result command answers, if it answers one (its answer is lost when the
    /// center that executed the effect crashes before journaling it).
    fn answers(&self, command: &PluginCommand) -> Option<u64>;
    /// Entries other than plugin commands the world submits, before its commands of the same
    /// poll (the ledger accounts its plugin's requests draw on).
    fn poll_payloads(
        &mut self,
        now_us: u64,
        out: &mut Vec<(rtgs_core::entry::Bmi, rtgs_core::entry::Payload)>,
    ) {
        let _ = (now_us, out);
    }
    /// The faults stopped: stop starting new work (the run must converge).
    fn heal(&mut self) {}
    /// Whether there is nothing more to do, seen from a converged center's host.
    fn quiescent(&self, host: &PluginHost) -> bool;
    /// End-of-run checks of the outside world against a converged center's host.
    fn check_end(&self, host: &PluginHost) -> Result<(), String>;
}

/// The first invariant violation of a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimFailure {
    pub seed: u64,
    pub step: u64,
    pub message: String,
}

impl fmt::Display for SimFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "simulation failed (seed {}, step {}): {}; replay with: rtgs sim --seed {}",
            self.seed, self.step, self.message, self.seed
        )
    }
}

impl std::error::Error for SimFailure {}

/// Runs one simulation to the end: `Ok` if every check held after every step and the cluster
/// converged once the faults stopped.
pub fn run(config: &SimConfig) -> Result<SimReport, SimFailure> {
    run_inner(config, None)
}

/// [`run`] with plugins in every center.
pub fn run_with_plugins(config: &SimConfig, plugins: Box<dyn SimPlugins>) -> Result<SimReport, SimFailure> {
    run_inner(config, Some(plugins))
}

fn run_inner(config: &SimConfig, plugins: Option<Box<dyn SimPlugins>>) -> Result<SimReport, SimFailure> {
    let invalid = |message: String| SimFailure { seed: config.seed, step: 0, message };
    if !(1..=CENTER_COUNT_MAX).contains(&config.centers) {
        return Err(invalid(format!("invalid config: {} centers (1 to {CENTER_COUNT_MAX})", config.centers)));
    }
    let items = config.accounts.saturating_mul(2).saturating_add(config.commands);
    if items > SIM_COMMANDS_MAX {
        return Err(invalid(format!(
            "invalid config: {items} workload commands (at most {SIM_COMMANDS_MAX})"
        )));
    }
    world::World::new(config, plugins)?.run()
}

/// Most workload commands (two per account plus `commands`) one run may have: the whole run
/// lives in memory.
pub const SIM_COMMANDS_MAX: usize = 1_000_000;

/// The config's shape when it is not [`SimConfig::small`], so a failure names all of it.
fn config_note(config: &SimConfig) -> String {
    let small = SimConfig {
        inject_bug: config.inject_bug,
        guard_off: config.guard_off,
        ..SimConfig::small(config.seed)
    };
    let mut note = String::new();
    if *config != small {
        note = format!(
            " [centers {}, accounts {}, commands {}, fault level {}]",
            config.centers, config.accounts, config.commands, config.fault_level
        );
    }
    if let Some(bug) = config.inject_bug {
        note += &format!(" [injected bug {bug:?}]");
    }
    if let Some(guard) = config.guard_off {
        note += &format!(" [guard off: {guard:?}]");
    }
    note
}
