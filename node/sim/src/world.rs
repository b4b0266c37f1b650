//! The simulated cluster and its step loop.
//!
//! **The model.** The sequencer stamps a batch and appends it to the durable journal (two copies
//! of codec frames) before anyone sees it; a later step publishes the frames to every center,
//! each delivery on its own (dropped, delayed, duplicated, corrupted, in any order). Each center
//! is a [`Center`](rtgs_core::center::Center) and its driver does what the engines' drivers do,
//! nothing more: it hands in what arrives (journal frames it checked, ack messages at their
//! stream positions, the answers to its commits, the passing of time) and carries out what the
//! center asks (write a commit, then let its acks go; publish acks, again from a seq when asked;
//! read the ack stream again from a position; pull seqs from the durable journal; announce
//! notices; execute effects; submit owner proposals; take a checkpoint). Its commits queue up and
//! are written (merged) at a later step, so acks wait for durability as in production.
//!
//! **One step**: advance the virtual clock, restart what is due, inject faults, let the
//! sequencer tick, feed catch-up reads, fire the centers' timeouts, poll the plugins' world, let
//! every center read the ack stream, then one random action (deliver journal messages, write a
//! center's commits, sequence a batch, publish, let clients submit), then check every invariant.
//!
//! **Phases**: faults for a number of steps proportional to the workload; then the faults stop
//! and everything restarts except a center lost for the run, and the others must converge
//! without it (finality by a quorum of the rest, the owner's work taken over by the detector);
//! then the lost center restarts, far behind, and all must converge; then the end checks.
//!
//! A panic in the core (a broken assertion) is reported as a failure of its step too, as long as
//! panics unwind (tests always do; a `panic = "abort"` build stops with the panic message).

use crate::acks::AckStream;
use crate::center::{SimCenter, Wake};
use crate::checker::Checker;
use crate::client::Clients;
use crate::network::Network;
use crate::storage::Verify;
use crate::{
    config_note, Faults, Guard, InjectedBug, Recoveries, SimConfig, SimFailure, SimPlugins, SimReport,
};
use rtgs_core::entry::{CenterId, Payload, Seq};
use rtgs_core::plugin_host::PluginHost;
use rtgs_core::prng::Prng;
use std::collections::BTreeMap;

mod centers;
mod faults;
mod plugins;
mod sequencer;

use faults::{FaultSwitch, Plan};
use plugins::PluginResult;
use sequencer::SequencerNode;

type Check = Result<(), String>;

/// Virtual time, in µs: a step takes `1..=STEP_US_MAX`; a message normally arrives within
/// `LATENCY_US` (the jitter reorders), a delayed one within `DELAY_US`.
const STEP_US_MAX: u64 = 100;
/// A delivery step hands over `1..=DELIVERIES_PER_STEP_MAX` messages.
const DELIVERIES_PER_STEP_MAX: u64 = 4;
/// Every step, each center's ack reader reads up to this many messages (a consumer keeping up,
/// barring its stalls).
const ACK_READS_PER_STEP_MAX: usize = 8;
const LATENCY_US: (u64, u64) = (20, 1_000);
const DELAY_US: (u64, u64) = (2_000, 40_000);
/// How far the clock jumps when nothing is in flight.
const IDLE_US: (u64, u64) = (200, 5_000);
/// About once in `LULL_STEPS` steps, the clock jumps by `LULL_US` (not a fault: a quiet spell, in
/// which the sequencer's `Tick` comes and every timer fires).
const LULL_STEPS: u64 = 2_000;
const LULL_US: (u64, u64) = (200_000, 1_500_000);

/// Fault-phase steps per workload command.
const FAULT_STEPS_PER_COMMAND: u64 = 20;
/// End-phase budget (per convergence) for 3 centers: this many steps plus this many per
/// workload command.
const END_STEPS_BASE: u64 = 20_000;
const END_STEPS_PER_COMMAND: u64 = 200;

pub struct World {
    config: SimConfig,
    prng: Prng,
    now_us: u64,
    step: u64,
    faults: FaultSwitch,
    plan: Plan,
    verify: Verify,
    clients: Clients,
    sequencer: SequencerNode,
    centers: Vec<SimCenter>,
    network: Network,
    acks: AckStream,
    checker: Checker,
    recoveries: Recoveries,
    plugins: Option<Box<dyn SimPlugins>>,
    plugin_pending: Vec<PluginResult>,
    /// Every content submitted per plugin `bmi` (what the journal may hold for it).
    plugin_sent: BTreeMap<Vec<u8>, Vec<Payload>>,
    /// Which center executed each effect (last execution wins).
    effect_center: BTreeMap<u64, usize>,
    effects_executed: u64,
    plugin_results_lost: u64,
    /// `InjectedBug::CenterFlipsOutcome`: the seq whose outcome was flipped (once).
    flipped: Option<Seq>,
}

impl World {
    pub fn new(config: &SimConfig, plugins: Option<Box<dyn SimPlugins>>) -> Result<Self, SimFailure> {
        let failure = |message: String| SimFailure {
            seed: config.seed,
            step: 0,
            message: message + &config_note(config),
        };
        let clients = Clients::generate(config.seed, config.accounts, config.commands).map_err(failure)?;
        let mut prng = Prng::new(config.seed);
        let level = usize::from(config.fault_level.min(3));
        let fault_steps = FAULT_STEPS_PER_COMMAND * clients.len() as u64 + 1_000;
        let plan = Plan::new(&mut prng, level, config.centers, fault_steps);
        let mut world = World {
            config: *config,
            prng,
            now_us: 0,
            step: 0,
            faults: FaultSwitch { enabled: true, paused: false, level, counts: Faults::default() },
            plan,
            verify: if config.guard_off == Some(Guard::Checksums) {
                Verify::LengthOnly
            } else {
                Verify::Checksums
            },
            clients,
            sequencer: SequencerNode::new(),
            centers: (0..config.centers).map(|i| SimCenter::new(CenterId::from_index(i))).collect(),
            network: Network::default(),
            acks: AckStream::default(),
            checker: Checker::new(config.centers),
            recoveries: Recoveries::default(),
            plugins,
            plugin_pending: Vec::new(),
            plugin_sent: BTreeMap::new(),
            effect_center: BTreeMap::new(),
            effects_executed: 0,
            plugin_results_lost: 0,
            flipped: None,
        };
        for i in 0..config.centers {
            world.start_center(i).map_err(failure)?;
        }
        world.push_setup();
        Ok(world)
    }

    pub fn run(mut self) -> Result<SimReport, SimFailure> {
        self.run_phases().map_err(|message| SimFailure {
            seed: self.config.seed,
            step: self.step,
            message: message + &config_note(&self.config),
        })?;
        Ok(self.report())
    }

    fn run_phases(&mut self) -> Check {
        while self.step < self.plan.fault_steps {
            self.guarded(Self::step_once)?;
        }
        self.guarded(Self::heal)?;
        let lost: Vec<usize> =
            (0..self.centers.len()).filter(|&i| self.centers[i].wake == Wake::Lost).collect();
        let others: Vec<usize> = (0..self.centers.len()).filter(|i| !lost.contains(i)).collect();
        self.converge(&others)?;
        if !lost.is_empty() {
            for &i in &lost {
                self.guarded_with(|w| w.start_center(i))?;
            }
            let all: Vec<usize> = (0..self.centers.len()).collect();
            self.converge(&all)?;
        }
        self.check_end()
    }

    /// Steps until `centers` converged, within a budget.
    fn converge(&mut self, centers: &[usize]) -> Check {
        // Acks grow with the square of the cluster size.
        let n = self.centers.len() as u64;
        let ack_scale = (n * n).div_ceil(9).max(1);
        let commands = self.clients.len() as u64;
        let end_step_max = self.step + (END_STEPS_BASE + END_STEPS_PER_COMMAND * commands) * ack_scale;
        while !self.converged(centers) {
            if self.step >= end_step_max {
                return Err(self.not_converged(centers));
            }
            self.guarded(Self::step_once)?;
        }
        Ok(())
    }

    /// Runs `f`, turning a panic (a core assertion, e.g. a ledger handed a seq out of order)
    /// into a failure of this step, so that it too names the seed. Needs `panic = "unwind"`;
    /// with `panic = "abort"` the process stops with the panic message instead.
    fn guarded(&mut self, f: fn(&mut Self) -> Check) -> Check {
        self.guarded_with(f)
    }

    fn guarded_with(&mut self, f: impl FnOnce(&mut Self) -> Check) -> Check {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(self))) {
            Ok(result) => result,
            Err(payload) => {
                let what = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".to_string());
                Err(format!("panic: {what}"))
            }
        }
    }

    fn step_once(&mut self) -> Check {
        self.step += 1;
        self.now_us += self.prng.range(1, STEP_US_MAX);
        if self.prng.chance(1, LULL_STEPS) {
            self.now_us += self.prng.range(LULL_US.0, LULL_US.1);
        }
        self.restart_due()?;
        self.inject_faults()?;
        self.poll_tick()?;
        self.feed_catch_up()?;
        self.poll_timeouts()?;
        self.poll_plugins()?;
        self.read_acks()?;
        match self.prng.below(100) {
            0..=49 => {
                // The network carries several messages at once.
                for _ in 0..self.prng.range(1, DELIVERIES_PER_STEP_MAX) {
                    if !self.deliver()? {
                        break;
                    }
                }
            }
            50..=64 => self.commit_some()?,
            65..=74 => self.sequence()?,
            75..=82 => self.publish()?,
            _ => self.submit(),
        }
        self.check_step()
    }

    /// Stops the faults and restarts everything that is down, except a center lost for the run.
    fn heal(&mut self) -> Check {
        self.faults.enabled = false;
        if let Some(p) = self.plugins.as_mut() {
            p.heal();
        }
        // Resubmissions stamp the sequencer's clock and would keep the heartbeat `Tick`s away.
        self.clients.stop_probing();
        for i in 0..self.centers.len() {
            if !self.centers[i].is_up() && self.centers[i].wake != Wake::Lost {
                self.start_after_down(i)?;
            }
        }
        if self.sequencer.leader.is_none() {
            self.restart_sequencer()?;
        }
        Ok(())
    }

    // ---- checks ----

    /// The per-step checks not already made where the event happened.
    fn check_step(&mut self) -> Check {
        let journal = &self.sequencer.truth;
        self.checker.check_journal(journal, &self.clients, &self.plugin_sent)?;
        for c in &self.centers {
            let Some(center) = c.center() else { continue };
            Checker::check_ledger(c.id, center.ledger())?;
            let seq = center.seq_applied();
            if seq > journal.len() as u64 {
                return Err(format!("{} is at seq {seq}: the journal has {}", c.id, journal.len()));
            }
        }
        Ok(())
    }

    /// Everything admitted, published, applied, committed, final and announced in `centers`.
    fn converged(&self, centers: &[usize]) -> bool {
        let s = &self.sequencer;
        let len = s.truth.len() as u64;
        self.clients.all_admitted()
            && self.plugin_pending.is_empty()
            && self.plugins_quiescent()
            && s.leader.is_some()
            && s.inbound.is_empty()
            && s.published_frames == s.store.frames()
            && centers.iter().all(|&i| {
                let c = &self.centers[i];
                c.live.as_ref().is_some_and(|l| {
                    l.center.seq_applied() == len
                        && l.center.seq_unfinal_first() == len + 1
                        && l.commits.is_empty()
                        && l.center.awaiting().next().is_none()
                        && c.store.progress.seq_unfinal_first == len + 1
                })
            })
    }

    fn not_converged(&self, centers: &[usize]) -> String {
        let s = &self.sequencer;
        let shown: Vec<String> = centers
            .iter()
            .map(|&i| {
                let c = &self.centers[i];
                match &c.live {
                    Some(l) => format!(
                        "{} applied {} committed {} unfinal-first {} (durable {}) awaiting {} acks read {}/{}",
                        c.id,
                        l.center.seq_applied(),
                        c.store.committed_through(),
                        l.center.seq_unfinal_first(),
                        c.store.progress.seq_unfinal_first,
                        l.center.awaiting().count(),
                        l.ack_next,
                        self.acks.len()
                    ),
                    None => format!("{} down", c.id),
                }
            })
            .collect();
        let mut plugins = String::new();
        if let (Some(_), Some(h)) = (&self.plugins, self.first_host()) {
            let mut figures = Vec::new();
            h.figures(&mut figures);
            plugins = format!(
                "; plugin results pending {}, quiescent {}, figures {figures:?}",
                self.plugin_pending.len(),
                self.plugins_quiescent()
            );
        }
        format!(
            "did not converge after the faults stopped: journal {}, published frames {}/{}, leader {}, \
             inbound {}, unadmitted commands {}, in flight {}; {}{plugins}",
            s.truth.len(),
            s.published_frames,
            s.store.frames(),
            if s.leader.is_some() { "up" } else { "down" },
            s.inbound.len(),
            self.clients.unadmitted_count(),
            self.network.len(),
            shown.join(", ")
        )
    }

    /// After convergence: identical ledgers and plugin states, every seq durably final in every
    /// center, every `bmi` journaled once where its client was told and announced by its origin.
    fn check_end(&self) -> Check {
        let len = self.sequencer.truth.len() as u64;
        let (mut first_ledger, mut first_host) = (None, None);
        for c in &self.centers {
            let Some(center) = c.center() else {
                return Err(format!("{} is down at the end", c.id));
            };
            let mut buf = Vec::new();
            center.ledger().encode(&mut buf);
            if !same_as_first(&mut first_ledger, buf) {
                return Err(format!("{} ends with a ledger unlike DC1's", c.id));
            }
            let mut buf = Vec::new();
            center.host().encode(&mut buf);
            if !same_as_first(&mut first_host, buf) {
                return Err(format!("{} ends with plugin state unlike DC1's", c.id));
            }
            let finals = c.store.finals.iter().filter(|f| **f).count() as u64;
            if finals != len {
                return Err(format!("{} committed {finals} seqs as final, the journal has {len}", c.id));
            }
        }
        self.check_plugins_end()?;
        for (bmi, seq) in self.clients.admitted() {
            let journaled = self.checker.journal_seq_of(bmi.as_bytes());
            if seq.is_none() || journaled != seq {
                return Err(format!("bmi {bmi}: client told {seq:?}, journal has it at {journaled:?}"));
            }
            if !self.checker.announced(bmi.as_bytes()) {
                return Err(format!("bmi {bmi} (seq {seq:?}) was never announced by its origin"));
            }
        }
        if self.checker.finalized_count() != len {
            return Err(format!("{} of {len} seqs final", self.checker.finalized_count()));
        }
        Ok(())
    }

    fn report(&mut self) -> SimReport {
        for i in 0..self.centers.len() {
            self.add_center_stats(i);
        }
        let host = self.first_host();
        SimReport {
            seed: self.config.seed,
            steps: self.step,
            submitted: self.clients.len() as u64,
            sequenced: self.sequencer.truth.len() as u64,
            finalized: self.checker.finalized_count(),
            state_hash: self.centers.iter().find_map(|c| c.center()).map_or(0, |c| c.ledger().state_hash()),
            plugin_state_hash: host.filter(|h| !h.is_empty()).map_or(0, |h| h.state_hash()),
            owner_changes: host
                .map_or(0, |h| h.kinds().filter_map(|k| h.owner(k)).map(|(_, term)| u64::from(term)).sum()),
            effects_executed: self.effects_executed,
            plugin_results_lost: self.plugin_results_lost,
            faults: self.faults.counts,
            recoveries: self.recoveries,
        }
    }

    fn first_host(&self) -> Option<&PluginHost> {
        self.centers.iter().find_map(|c| c.center()).map(|c| c.host())
    }

    fn bug(&self, bug: InjectedBug) -> bool {
        self.config.inject_bug == Some(bug)
    }

    fn guard_off(&self, guard: Guard) -> bool {
        self.config.guard_off == Some(guard)
    }

    /// When a message sent now arrives, barring faults.
    fn arrival(&mut self) -> u64 {
        self.now_us + self.prng.range(LATENCY_US.0, LATENCY_US.1)
    }
}

/// Keeps the first value; true if `next` equals it.
fn same_as_first(first: &mut Option<Vec<u8>>, next: Vec<u8>) -> bool {
    match first {
        Some(f) => *f == next,
        None => {
            *first = Some(next);
            true
        }
    }
}
