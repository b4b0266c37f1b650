//! The deterministic simulator (TigerBeetle's VOPR style): a whole cluster in one thread.
//!
//! # Layout
//! [`run`] builds a `world` from a [`SimConfig`] and steps it. Everything random — the
//! workload, which message the network delivers next, latencies, delays, duplicates, drops,
//! crashes — comes from [`crate::prng::Prng`] streams seeded by `SimConfig::seed`; time is a
//! virtual clock; every collection whose order matters is a `Vec`, `VecDeque` or `BTreeMap`. One
//! seed is one run, bit for bit, so a failure replays from its seed.
//!
//! * `client` — the seeded workload (open and fund accounts, one maybe in USD; transfers, some
//!   meant to be rejected with AM04, AC01, AM03, AG01, AM01; a few closes) and the clients that
//!   submit it through a random center, resubmit it when no answer came in time, and probe the
//!   sequencer with duplicates (same `bmi`, same content) and conflicts (same `bmi`, new
//!   content).
//! * `network` — messages in flight (journal deliveries, applied-acks) with random latencies,
//!   delivered in random order.
//! * `center` — one data center: the real [`GapProducer`]/[`GapConsumer`], [`Ledger`] and
//!   [`Finalizer`] as volatile state, and a durable checkpoint (encoded ledger, encoded
//!   finalizer, its ack log, the finality events it committed) that survives crashes.
//! * `checker` — the invariants: agreement per seq, quorum behind every finality, one finality
//!   per seq and finalizer, conservation of money, a gap-free journal with unique `bmi`s.
//! * `world` — the real [`Sequencer`] with its durable journal, the step loop, the faults and the
//!   end-of-run checks.
//!
//! **Plugins** ([`run_with_plugins`]): every center also runs a [`PluginHost`] with the plugins
//! a [`SimPlugins`] makes; its state is committed with the ledger and its step digests are folded
//! into the state hash, so the per-seq agreement check covers plugin state too. The live owner's
//! effects go to the `SimPlugins` world (a chain simulator for collection); results come back
//! as plugin commands through the sequencer, resubmitted until journaled — except answers to
//! effects executed by a center that has crashed since: those are lost with it. The world acts
//! as the failure detector: when the owner is down, it submits a `SetOwner` for the next term
//! naming the lowest center that is up. At the end every center's whole plugin state must be
//! identical, and [`SimPlugins::check_end`] checks the outside world (for collection: every
//! deposit swept exactly once, no sweep broadcast twice).
//!
//! [`PluginHost`]: crate::plugin_host::PluginHost
//!
//! The model: the sequencer stamps a batch and appends it to the durable journal (durable before
//! publish); a later step publishes it to every center and records `published_through`. A center
//! drains its gap buffer into its ledger, commits its checkpoint and only then sends its
//! applied-acks to every center's finalizer (acks after commit). A finalizer commits its tallies
//! together with the finality events they produced, so across restarts it never finalizes a seq
//! twice; acks it defers are held back until its window moves. A restarted center resumes from
//! its checkpoint, reads the published journal above its watermark as fast as its gap buffer
//! has room, re-sends its retained acks, and its finalizer re-reads the retained acks of the
//! centers that are up (a Kafka consumer resuming from its committed offset). A hole in a
//! center's deliveries is pulled from the durable journal after a short gap timeout; a lost tail
//! is revealed by the next `Tick`, the sequencer's idle heartbeat. Crashes hit at random steps and
//! between every durable write and what follows it; at most all centers but one are down at a
//! time, so finality halts (two of three down) but service goes on. At the end the faults stop,
//! everything restarts, and the run must converge: the same ledger everywhere, every `bmi`
//! journaled once where its client was told, every seq final exactly once in every finalizer.
//!
//! A panic in the core (a broken assertion) is reported as a failure of its step too, as long as
//! panics unwind (tests always do; a `panic = "abort"` build stops with the panic message).
//!
//! [`GapProducer`]: crate::gap_buffer::GapProducer
//! [`GapConsumer`]: crate::gap_buffer::GapConsumer
//! [`Ledger`]: crate::ledger::Ledger
//! [`Finalizer`]: crate::finalizer::Finalizer
//! [`Sequencer`]: crate::sequencer::Sequencer

use crate::entry::PluginCommand;
use crate::limits::CENTER_COUNT_MAX;
use crate::plugin::{EffectAdapter, HostedPlugin};
use crate::plugin_host::PluginHost;
use std::fmt;

mod center;
mod checker;
mod client;
mod network;
mod world;

#[cfg(test)]
mod tests;

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
}

impl SimConfig {
    /// A fast run: 3 centers, 8 accounts, 150 commands, medium faults.
    pub fn small(seed: u64) -> Self {
        SimConfig { seed, centers: 3, accounts: 8, commands: 150, fault_level: 2, inject_bug: None }
    }
}

/// Deliberate bugs the simulator can plant; each must make [`run`] fail.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum InjectedBug {
    /// One center reports one accepted transfer as rejected (AM04).
    CenterFlipsOutcome,
    /// DC1's finalizer declares a seq final on the first ack it counts.
    FinalizerQuorumOne,
    /// A new sequencer leader skips ahead instead of replaying the journal, so it forgets which
    /// `bmi`s were already sequenced.
    SequencerForgetsDedupe,
    /// Centers send applied-acks as they apply and commit only every few batches, so acks
    /// vouch for state that is not durable yet.
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

/// What a successful run did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimReport {
    pub seed: u64,
    /// Steps taken, the end phase included.
    pub steps: u64,
    /// Distinct workload commands (distinct `bmi`s) the clients submitted.
    pub submitted: u64,
    /// Journal entries at the end (workload commands plus `Tick`s).
    pub sequenced: u64,
    /// Seqs declared final (each exactly once in every finalizer).
    pub finalized: u64,
    pub center_crashes: u64,
    pub sequencer_crashes: u64,
    /// Gap timeouts that made a center pull missing entries from the durable journal.
    pub gap_pulls: u64,
    /// Duplicated messages (journal deliveries and acks) that were delivered.
    pub duplicates_delivered: u64,
    /// The state hash every center ended with.
    pub state_hash: u64,
    /// With plugins: the whole plugin state's hash every center ended with (0 without).
    pub plugin_state_hash: u64,
    /// `SetOwner` entries accepted (ownership moved after the owner crashed).
    pub owner_changes: u64,
    /// Effects executed by live owners (first executions and re-executions).
    pub effects_executed: u64,
    /// Answers lost because the center that executed their effect crashed.
    pub plugin_results_lost: u64,
}

/// The plugins of a simulated cluster and their outside world (see the module docs).
pub trait SimPlugins: EffectAdapter {
    /// One center's plugins (the same set for every center).
    fn make(&self) -> Vec<Box<dyn HostedPlugin>>;
    /// The effect id a result command answers, if it answers one (its answer is lost when the
    /// center that executed the effect crashes before journaling it).
    fn answers(&self, command: &PluginCommand) -> Option<u64>;
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

/// [`run`] with plugins in every center (see the module docs).
pub fn run_with_plugins(config: &SimConfig, plugins: Box<dyn SimPlugins>) -> Result<SimReport, SimFailure> {
    run_inner(config, Some(plugins))
}

fn run_inner(config: &SimConfig, plugins: Option<Box<dyn SimPlugins>>) -> Result<SimReport, SimFailure> {
    if !(1..=CENTER_COUNT_MAX).contains(&config.centers) {
        return Err(SimFailure {
            seed: config.seed,
            step: 0,
            message: format!("invalid config: {} centers (1 to {CENTER_COUNT_MAX})", config.centers),
        });
    }
    let items = config.accounts.saturating_mul(2).saturating_add(config.commands);
    if items > SIM_COMMANDS_MAX {
        return Err(SimFailure {
            seed: config.seed,
            step: 0,
            message: format!("invalid config: {items} workload commands (at most {SIM_COMMANDS_MAX})"),
        });
    }
    world::World::new(config, plugins)?.run()
}

/// Most workload commands (two per account plus `commands`) one run may have: the whole run
/// lives in memory.
pub const SIM_COMMANDS_MAX: usize = 1_000_000;

/// The config's shape when it is not [`SimConfig::small`], so a failure names all of it.
fn config_note(config: &SimConfig) -> String {
    let small = SimConfig { inject_bug: config.inject_bug, ..SimConfig::small(config.seed) };
    if *config == small {
        return String::new();
    }
    format!(
        " [centers {}, accounts {}, commands {}, fault level {}]",
        config.centers, config.accounts, config.commands, config.fault_level
    )
}
