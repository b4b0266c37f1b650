//! The simulated cluster and its step loop.
//!
//! One step: advance the virtual clock, restart what is due, maybe crash something, let the
//! sequencer tick and the centers report gap timeouts, then do one random action (deliver a
//! message, apply a batch, sequence a batch, publish, let clients submit), then check every
//! invariant. The run has a fault phase and an end phase (no faults, everything restarted,
//! until the cluster converges or a step budget runs out).

use super::center::{Center, GAP_SLOTS};
use super::checker::Checker;
use super::client::{Clients, Submission};
use super::network::{Message, Network, Take};
use super::{config_note, InjectedBug, SimConfig, SimFailure, SimPlugins, SimReport};
use crate::entry::{Bmi, CenterId, Command, Entry, Outcome, Payload, RejectReason, Seq};
use crate::finalizer::{AckResult, Finality, SeqStatus};
use crate::gap_buffer::Insert;
use crate::ledger::Applied;
use crate::plugin_host::{PluginHost, SetOwner};
use crate::prng::Prng;
use crate::sequencer::{MemoryIndex, Sequencer};
use std::collections::{BTreeMap, VecDeque};

type Check = Result<(), String>;

/// Probabilities per 10,000, indexed by fault level.
const DUPLICATE: [u64; 4] = [0, 200, 500, 1_000];
const DELAY: [u64; 4] = [0, 200, 500, 1_000];
/// Journal deliveries only: acks travel over a durable topic.
const DROP: [u64; 4] = [0, 100, 300, 600];
/// Per step.
const CENTER_CRASH: [u64; 4] = [0, 5, 15, 30];
/// Per step.
const SEQUENCER_CRASH: [u64; 4] = [0, 5, 10, 20];
/// At each point where a crash splits a durable write from what follows it.
const CRASH_POINT: [u64; 4] = [0, 5, 15, 30];

/// Virtual time, in µs: a step takes `1..=STEP_US_MAX`; a message normally arrives within
/// `LATENCY_US` (the jitter reorders), a delayed one within `DELAY_US`.
const STEP_US_MAX: u64 = 100;
/// A delivery step hands over `1..=DELIVERIES_PER_STEP_MAX` messages.
const DELIVERIES_PER_STEP_MAX: u64 = 4;
const LATENCY_US: (u64, u64) = (20, 1_000);
const DELAY_US: (u64, u64) = (2_000, 40_000);
/// How far the clock jumps when nothing is in flight.
const IDLE_US: (u64, u64) = (200, 5_000);
/// About once in `LULL_STEPS` steps, the clock jumps by `LULL_US` (not a fault: a quiet spell).
const LULL_STEPS: u64 = 2_000;
const LULL_US: (u64, u64) = (200_000, 1_500_000);
/// How long a crashed process stays down.
const CENTER_DOWN_US: (u64, u64) = (2_000, 50_000);
const SEQUENCER_DOWN_US: (u64, u64) = (1_000, 30_000);

/// Entries one gap pull reads from the journal, from the first missing one on (the rest of the
/// hole is pulled on the next timeout).
const GAP_PULL_ENTRIES_MAX: u64 = 16;

/// A plugin result not yet journaled is sent to the sequencer again after this long.
const PLUGIN_RESEND_US: u64 = 20_000;
/// The failure detector proposes a new owner at most this often per plugin.
const OWNER_PROPOSAL_US: u64 = 50_000;

/// Fault-phase steps per workload command.
const FAULT_STEPS_PER_COMMAND: u64 = 20;
/// End-phase budget for 3 centers: this many steps plus this many per workload command.
const END_STEPS_BASE: u64 = 20_000;
const END_STEPS_PER_COMMAND: u64 = 200;

struct Faults {
    enabled: bool,
    level: usize,
}

impl Faults {
    fn hit(&self, prng: &mut Prng, per_10k: &[u64; 4]) -> bool {
        let p = if self.enabled { per_10k[self.level] } else { 0 };
        p > 0 && prng.chance(p, 10_000)
    }
}

#[derive(Default)]
struct Stats {
    effects_executed: u64,
    plugin_results_lost: u64,
    center_crashes: u64,
    sequencer_crashes: u64,
    gap_pulls: u64,
    duplicates_delivered: u64,
}

/// The sequencer process: a durable journal (the outbox) and `published_through` survive a
/// crash; the leader and its inbound queue do not.
struct SequencerNode {
    journal: Vec<Entry>,
    published_through: Seq,
    /// The last leader's epoch (durable: the fenced sequencer row).
    epoch: u32,
    /// `None` while crashed.
    leader: Option<Sequencer>,
    /// Every bmi sequenced (the driver's index): rebuilt from the journal by a new leader.
    index: MemoryIndex,
    inbound: VecDeque<Inbound>,
    down_until_us: u64,
}

/// A command on its way to the sequencer: a client's, or a plugin result / host command.
enum Inbound {
    Client(Submission),
    Plugin(Command),
}

/// A plugin command submitted until it is journaled.
struct PluginResult {
    command: Command,
    /// The center that executed the effect this answers: the answer dies with it.
    executed_by: Option<usize>,
    next_send_us: u64,
}

pub(super) struct World {
    plugins: Option<Box<dyn SimPlugins>>,
    plugin_pending: Vec<PluginResult>,
    /// Every content submitted per plugin `bmi` (what the journal may hold for it).
    plugin_sent: BTreeMap<Vec<u8>, Vec<Payload>>,
    /// Which center executed each effect (last execution wins).
    effect_center: BTreeMap<u64, usize>,
    owner_proposed_us: BTreeMap<(u8, u32), u64>,
    config: SimConfig,
    prng: Prng,
    now_us: u64,
    step: u64,
    faults: Faults,
    clients: Clients,
    sequencer: SequencerNode,
    centers: Vec<Center>,
    network: Network,
    checker: Checker,
    stats: Stats,
    /// `InjectedBug::CenterFlipsOutcome` fires once.
    flipped: bool,
}

impl World {
    pub fn new(config: &SimConfig, plugins: Option<Box<dyn SimPlugins>>) -> Result<Self, SimFailure> {
        let failure = |message: String| SimFailure {
            seed: config.seed,
            step: 0,
            message: message + &config_note(config),
        };
        let clients = Clients::generate(config.seed, config.accounts, config.commands).map_err(failure)?;
        let mut centers = (0..config.centers)
            .map(|i| {
                let id = CenterId::from_index(i);
                Center::new(id, config.centers, make_host(&plugins, id)?)
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(failure)?;
        for c in &mut centers {
            // A fresh center has nothing to replay.
            if let Some(v) = c.volatile.as_mut() {
                v.host.set_live();
            }
        }
        Ok(World {
            plugins,
            plugin_pending: Vec::new(),
            plugin_sent: BTreeMap::new(),
            effect_center: BTreeMap::new(),
            owner_proposed_us: BTreeMap::new(),
            config: *config,
            prng: Prng::new(config.seed),
            now_us: 0,
            step: 0,
            faults: Faults { enabled: true, level: usize::from(config.fault_level.min(3)) },
            clients,
            sequencer: SequencerNode {
                journal: Vec::new(),
                published_through: 0,
                epoch: 1,
                leader: Some(Sequencer::new(CenterId(1), 1)),
                index: MemoryIndex::default(),
                inbound: VecDeque::new(),
                down_until_us: 0,
            },
            checker: Checker::new(config.centers),
            centers,
            network: Network::default(),
            stats: Stats::default(),
            flipped: false,
        })
    }

    pub fn run(mut self) -> Result<SimReport, SimFailure> {
        self.run_phases().map_err(|message| SimFailure {
            seed: self.config.seed,
            step: self.step,
            message: message + &config_note(&self.config) + &bug_note(self.config.inject_bug),
        })?;
        Ok(self.report())
    }

    fn run_phases(&mut self) -> Check {
        let commands = self.clients.len() as u64;
        let fault_steps = FAULT_STEPS_PER_COMMAND * commands + 1_000;
        while self.step < fault_steps {
            self.guarded(Self::step_once)?;
        }
        self.guarded(Self::heal)?;
        // Acks grow with the square of the cluster size.
        let n = self.centers.len() as u64;
        let ack_scale = (n * n).div_ceil(9).max(1);
        let end_steps = (END_STEPS_BASE + END_STEPS_PER_COMMAND * commands) * ack_scale;
        let end_step_max = self.step + end_steps;
        while !self.converged() {
            if self.step >= end_step_max {
                return Err(self.not_converged());
            }
            self.guarded(Self::step_once)?;
        }
        self.check_end()
    }

    /// Runs `f`, turning a panic (a core assertion, e.g. a ledger handed a seq out of order)
    /// into a failure of this step, so that it too names the seed. Needs `panic = "unwind"`;
    /// with `panic = "abort"` the process stops with the panic message instead.
    fn guarded(&mut self, f: fn(&mut Self) -> Check) -> Check {
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
            // A quiet spell: every timer fires at once and the sequencer ticks.
            self.now_us += self.prng.range(LULL_US.0, LULL_US.1);
        }
        self.restart_due()?;
        self.inject_crash();
        self.poll_tick();
        self.poll_gaps();
        self.poll_plugins()?;
        match self.prng.below(100) {
            0..=59 => {
                // The network carries several messages at once.
                for _ in 0..self.prng.range(1, DELIVERIES_PER_STEP_MAX) {
                    if !self.deliver()? {
                        break;
                    }
                }
            }
            60..=74 => self.apply()?,
            75..=82 => self.sequence()?,
            83..=89 => self.publish(),
            _ => self.submit(),
        }
        self.check_step()
    }

    // ---- faults and restarts ----

    fn crash_point(&mut self) -> bool {
        self.faults.hit(&mut self.prng, &CRASH_POINT)
    }

    /// Crashes center `i` unless that would leave no center up; true if it crashed.
    fn try_crash_center(&mut self, i: usize) -> bool {
        let up = self.centers.iter().filter(|c| c.is_up()).count();
        let Some(center) = self.centers.get_mut(i) else {
            return false;
        };
        if !center.is_up() || up <= 1 {
            return false;
        }
        let (lo, hi) = CENTER_DOWN_US;
        center.crash(self.now_us + self.prng.range(lo, hi));
        self.stats.center_crashes += 1;
        // Answers its adapter had not journaled die with it.
        let before = self.plugin_pending.len();
        self.plugin_pending.retain(|r| r.executed_by != Some(i));
        self.stats.plugin_results_lost += (before - self.plugin_pending.len()) as u64;
        true
    }

    fn crash_sequencer(&mut self) {
        let s = &mut self.sequencer;
        s.leader = None;
        // Commands not yet durable are lost; their clients retry after a timeout.
        s.inbound.clear();
        let (lo, hi) = SEQUENCER_DOWN_US;
        s.down_until_us = self.now_us + self.prng.range(lo, hi);
        self.stats.sequencer_crashes += 1;
    }

    fn inject_crash(&mut self) {
        if self.faults.hit(&mut self.prng, &CENTER_CRASH) {
            let i = self.prng.below(self.centers.len() as u64) as usize;
            self.try_crash_center(i);
        }
        if self.faults.hit(&mut self.prng, &SEQUENCER_CRASH) && self.sequencer.leader.is_some() {
            self.crash_sequencer();
        }
    }

    fn restart_due(&mut self) -> Check {
        for i in 0..self.centers.len() {
            if !self.centers[i].is_up() && self.centers[i].down_until_us <= self.now_us {
                self.restart_center(i)?;
            }
        }
        if self.sequencer.leader.is_none() && self.sequencer.down_until_us <= self.now_us {
            self.restart_sequencer();
        }
        Ok(())
    }

    /// Stops the faults and restarts everything that is down.
    fn heal(&mut self) -> Check {
        self.faults.enabled = false;
        if let Some(p) = self.plugins.as_mut() {
            p.heal();
        }
        // Resubmissions stamp the sequencer's clock and would keep the heartbeat `Tick`s away.
        self.clients.stop_probing();
        for i in 0..self.centers.len() {
            if !self.centers[i].is_up() {
                self.restart_center(i)?;
            }
        }
        if self.sequencer.leader.is_none() {
            self.restart_sequencer();
        }
        Ok(())
    }

    /// Volatile state from the checkpoint; then the acks and journal entries it may have missed.
    fn restart_center(&mut self, i: usize) -> Check {
        let host = make_host(&self.plugins, self.centers[i].id)?;
        let mut volatile = self.centers[i].recover(host)?;
        // It executes effects again once it has caught up with what is published now.
        volatile.live_at = self.sequencer.published_through;
        let seq_applied = volatile.ledger.seq_applied();
        self.centers[i].volatile = Some(volatile);
        // Its own retained acks, to every finalizer (they may have been lost in a crash), and
        // the retained acks of the centers that are up, to its own finalizer (a center that is
        // down re-sends its own when it restarts). Like a consumer resuming from its committed
        // offset, a finalizer gets only what it has not finalized.
        for to in 0..self.centers.len() {
            if to == i {
                for from in 0..self.centers.len() {
                    if self.centers[from].is_up() {
                        self.resend_acks(from, to);
                    }
                }
            } else {
                self.resend_acks(i, to);
            }
        }
        // It catches up by reading the published journal above its watermark by offset, as
        // far as its gap buffer has room. (It may already be past `published_through`: a
        // leader that crashed after publishing but before recording it.)
        if let Some(v) = self.centers[i].volatile.as_mut() {
            v.catch_up = Some((seq_applied + 1, self.sequencer.published_through));
        }
        self.feed_catch_up(i);
        self.plugins_after_apply(i);
        Ok(())
    }

    /// The catch-up reader of center `i`: sends the next journal entries it has room for.
    fn feed_catch_up(&mut self, i: usize) {
        let Some(v) = self.centers.get_mut(i).and_then(|c| c.volatile.as_mut()) else {
            return;
        };
        let Some((next, end)) = v.catch_up else {
            return;
        };
        let seq_next = v.consumer.seq_next();
        let first = next.max(seq_next);
        let last = end.min(seq_next + GAP_SLOTS as u64 - 1);
        v.catch_up = (last < end).then_some((last.max(first) + 1, end));
        let journal = &self.sequencer.journal;
        let span = journal.iter().take(last as usize).skip((first - 1) as usize);
        for entry in span {
            let (entry, due) = (entry.clone(), arrival(&mut self.prng, self.now_us));
            self.network.send(due, Message::Journal { to: i, entry });
        }
    }

    /// Center `from`'s retained acks that the finalizer of `to` still needs.
    fn resend_acks(&mut self, from: usize, to: usize) {
        let needed_from = self.centers[to].durable.seq_unfinal_first;
        let sender = &self.centers[from];
        for ack in sender.durable.ack_log.iter().filter(|a| a.seq >= needed_from) {
            let (from, ack) = (sender.id, *ack);
            let due = arrival(&mut self.prng, self.now_us);
            self.network.send(due, Message::Ack { from, to, ack });
        }
    }

    /// A new leader: replays the durable journal, takes the next epoch and republishes whatever
    /// was durable but not recorded as published.
    fn restart_sequencer(&mut self) {
        let s = &mut self.sequencer;
        let epoch = s.epoch + 1;
        let host = CenterId::from_index(epoch as usize % self.centers.len());
        let mut leader = Sequencer::new(host, 0);
        for entry in &s.journal {
            leader.recover(entry);
        }
        s.index = MemoryIndex::default();
        if self.config.inject_bug != Some(InjectedBug::SequencerForgetsDedupe) {
            s.index.record(&s.journal);
        }
        let epoch = match self.config.inject_bug {
            Some(InjectedBug::SequencerReusesEpoch) => epoch - 1,
            _ => epoch,
        };
        leader.begin_epoch(epoch);
        s.epoch = epoch;
        s.leader = Some(leader);
        self.publish_unpublished();
    }

    // ---- the sequencer ----

    fn poll_tick(&mut self) {
        let s = &mut self.sequencer;
        if let Some(tick) = s.leader.as_mut().and_then(|l| l.poll_tick(self.now_us)) {
            // Durable at once; published with the next batch.
            s.journal.push(tick);
        }
    }

    /// Stamps a batch of inbound commands, makes it durable, then answers the clients.
    fn sequence(&mut self) -> Check {
        let s = &mut self.sequencer;
        let Some(leader) = s.leader.as_mut() else {
            return Ok(());
        };
        if s.inbound.is_empty() {
            return Ok(());
        }
        let n = (self.prng.range(1, 8) as usize).min(s.inbound.len());
        let batch: Vec<Inbound> = s.inbound.drain(..n).collect();
        let (mut entries, mut admissions) = (Vec::new(), Vec::new());
        let commands: Vec<Command> = batch
            .iter()
            .map(|b| match b {
                Inbound::Client(s) => s.command.clone(),
                Inbound::Plugin(c) => c.clone(),
            })
            .collect();
        let mut lookups = Vec::with_capacity(commands.len());
        s.index.lookup(&commands, &mut lookups);
        leader.handle_commands(self.now_us, commands, &lookups, &mut entries, &mut admissions);
        s.index.record(&entries);
        s.journal.extend(entries);
        if admissions.len() != batch.len() {
            return Err(format!("sequencer answered {} of {} commands", admissions.len(), batch.len()));
        }
        if self.crash_point() {
            // Durable but unanswered: the clients retry and must get `Duplicate`.
            self.crash_sequencer();
            return Ok(());
        }
        for (item, admission) in batch.iter().zip(admissions) {
            match item {
                Inbound::Client(sub) => self.clients.on_admission(sub, admission, &self.sequencer.journal)?,
                // Sequenced, a retry of something sequenced, or a conflicting duplicate (a second
                // answer to a re-executed effect): done either way.
                Inbound::Plugin(c) => self.plugin_pending.retain(|r| r.command.bmi != c.bmi),
            }
        }
        Ok(())
    }

    fn publish(&mut self) {
        if self.sequencer.leader.is_none() {
            return;
        }
        let from = self.sequencer.published_through as usize;
        self.send_journal(from);
        if self.crash_point() {
            // Published but not recorded: the next leader publishes it again.
            self.crash_sequencer();
            return;
        }
        self.sequencer.published_through = self.sequencer.journal.len() as u64;
    }

    fn publish_unpublished(&mut self) {
        let from = self.sequencer.published_through as usize;
        self.send_journal(from);
        self.sequencer.published_through = self.sequencer.journal.len() as u64;
    }

    /// Journal entries from index `from` on, to every center.
    fn send_journal(&mut self, from: usize) {
        let journal = &self.sequencer.journal;
        for entry in journal.iter().skip(from) {
            for to in 0..self.centers.len() {
                let entry = entry.clone();
                let due = arrival(&mut self.prng, self.now_us);
                self.network.send(due, Message::Journal { to, entry });
            }
        }
    }

    // ---- clients ----

    /// Clients send through a random center that is up; with no leader, commands are lost.
    fn submit(&mut self) {
        let mut subs = Vec::new();
        self.clients.poll(&mut self.prng, self.now_us, &mut subs);
        let up: Vec<usize> = (0..self.centers.len()).filter(|&i| self.centers[i].is_up()).collect();
        if self.sequencer.leader.is_none() || up.is_empty() {
            return;
        }
        for mut sub in subs {
            let origin = up[self.prng.below(up.len() as u64) as usize];
            sub.command.origin = CenterId::from_index(origin);
            self.sequencer.inbound.push_back(Inbound::Client(sub));
        }
    }

    // ---- the network ----

    /// Takes one due message and delivers, drops, delays or duplicates it; false when nothing
    /// was due (then the clock moves on).
    fn deliver(&mut self) -> Result<bool, String> {
        let (message, duplicate) = match self.network.take(&mut self.prng, self.now_us) {
            Take::Empty => {
                // Idle: let time pass (retries, restarts, the next tick).
                self.now_us += self.prng.range(IDLE_US.0, IDLE_US.1);
                return Ok(false);
            }
            Take::NotDue { due_us } => {
                self.now_us = self.now_us.max(due_us);
                return Ok(false);
            }
            Take::Message { message, duplicate } => (message, duplicate),
        };
        let is_journal = matches!(message, Message::Journal { .. });
        if is_journal && self.faults.hit(&mut self.prng, &DROP) {
            return Ok(true);
        }
        if self.faults.hit(&mut self.prng, &DELAY) {
            let due = self.now_us + self.prng.range(DELAY_US.0, DELAY_US.1);
            self.network.send(due, message);
            return Ok(true);
        }
        if self.faults.hit(&mut self.prng, &DUPLICATE) {
            let due = arrival(&mut self.prng, self.now_us);
            self.network.send_duplicate(due, message.clone());
        }
        if duplicate {
            self.stats.duplicates_delivered += 1;
        }
        match message {
            Message::Journal { to, entry } => self.deliver_entry(to, entry)?,
            Message::Ack { from, to, ack } => self.deliver_ack(from, to, ack)?,
        }
        Ok(true)
    }

    /// Into the center's gap buffer; dropped if the center is down.
    fn deliver_entry(&mut self, to: usize, entry: Entry) -> Check {
        let Some(v) = self.centers.get_mut(to).and_then(|c| c.volatile.as_mut()) else {
            return Ok(());
        };
        let seq = entry.seq;
        match v.producer.insert(seq, entry) {
            Insert::Stored | Insert::Duplicate | Insert::Applied => Ok(()),
            Insert::Full(entry) => {
                // Back-pressure: the reader holds it until the applier makes room.
                v.held_entries.insert(seq, entry);
                Ok(())
            }
            Insert::OutOfRange => Err(format!("gap buffer of DC{} refused seq {seq}", to + 1)),
        }
    }

    /// Offers held entries again, lowest seq first, until the gap buffer is full.
    fn reoffer_held(&mut self, i: usize) -> Check {
        let Some(v) = self.centers.get_mut(i).and_then(|c| c.volatile.as_mut()) else {
            return Ok(());
        };
        while let Some((seq, entry)) = v.held_entries.pop_first() {
            match v.producer.insert(seq, entry) {
                Insert::Stored | Insert::Duplicate | Insert::Applied => {}
                Insert::Full(entry) => {
                    v.held_entries.insert(seq, entry);
                    break;
                }
                Insert::OutOfRange => return Err(format!("gap buffer of DC{} refused seq {seq}", i + 1)),
            }
        }
        Ok(())
    }

    /// Into the finalizer of center `to`; its checkpoint and finality events commit together.
    fn deliver_ack(&mut self, from: CenterId, to: usize, ack: Applied) -> Check {
        let durable: Vec<Seq> = self.centers.iter().map(|c| c.durable.seq_applied).collect();
        let quorum_one = self.config.inject_bug == Some(InjectedBug::FinalizerQuorumOne) && to == 0;
        let Some(center) = self.centers.get_mut(to) else {
            return Err(format!("ack for center index {to}"));
        };
        let id = center.id;
        let Some(v) = center.volatile.as_mut() else {
            return Ok(());
        };
        let mut events = Vec::new();
        let window_end = v.finalizer.seq_window_end();
        match v.finalizer.handle_ack(from, ack, &mut events) {
            AckResult::Counted => {}
            AckResult::Duplicate | AckResult::Late => return Ok(()),
            AckResult::Deferred => {
                // Held back until the window moves (lost in a crash: the restart re-reads it).
                v.deferred_acks.push((from, ack));
                return Ok(());
            }
            AckResult::Invalid => {
                return Err(format!("finalizer of {id} refused {from}'s ack {ack:?}"));
            }
        }
        if quorum_one && events.is_empty() && v.finalizer.status(ack.seq) == (SeqStatus::Pending { acks: 1 })
        {
            events.push(Finality::Final { seq: ack.seq, outcome: ack.outcome, state_hash: ack.state_hash });
        }
        let finals = self.check_finality(id, &events, &durable)?;
        if self.crash_point() && self.try_crash_center(to) {
            // Neither the tallies nor the events were committed.
            return Ok(());
        }
        self.centers[to].commit_finalizer(&finals)?;
        self.trim_ack_logs();
        self.reoffer_deferred(to, window_end);
        Ok(())
    }

    /// Offers the held-back acks again once the finalizer's window has moved.
    fn reoffer_deferred(&mut self, to: usize, window_end_before: Seq) {
        let Some(v) = self.centers.get_mut(to).and_then(|c| c.volatile.as_mut()) else {
            return;
        };
        let window_end = v.finalizer.seq_window_end();
        if window_end == window_end_before {
            return;
        }
        let (ready, held): (Vec<_>, Vec<_>) =
            v.deferred_acks.drain(..).partition(|(_, ack)| ack.seq < window_end);
        v.deferred_acks = held;
        for (from, ack) in ready {
            let due = arrival(&mut self.prng, self.now_us);
            self.network.send(due, Message::Ack { from, to, ack });
        }
    }

    fn check_finality(
        &mut self,
        finalizer: CenterId,
        events: &[Finality],
        durable_seq_applied: &[Seq],
    ) -> Result<Vec<(Seq, Outcome)>, String> {
        let mut finals = Vec::new();
        for event in events {
            match *event {
                Finality::Final { seq, outcome, .. } => {
                    self.checker.on_final(finalizer, seq, outcome, durable_seq_applied)?;
                    finals.push((seq, outcome));
                }
                Finality::Divergence { seq, center, first, reported } => {
                    return Err(format!(
                        "finalizer of {finalizer} saw divergence at seq {seq}: {center} \
                         reported {reported:?}, first report was {first:?}"
                    ))
                }
            }
        }
        Ok(finals)
    }

    /// Acks below every finalizer's durable `seq_unfinal_first` are needed by nobody.
    fn trim_ack_logs(&mut self) {
        let keep_from = self.centers.iter().map(|c| c.durable.seq_unfinal_first).min().unwrap_or(1);
        for c in &mut self.centers {
            c.trim_ack_log(keep_from);
        }
    }

    // ---- the centers ----

    /// Reports gap timeouts and pulls the missing entries from the durable journal.
    fn poll_gaps(&mut self) {
        let journal = &self.sequencer.journal;
        for (to, center) in self.centers.iter_mut().enumerate() {
            let Some(v) = center.volatile.as_mut() else {
                continue;
            };
            let Some(gap) = v.consumer.poll_gap(self.now_us) else {
                continue;
            };
            self.stats.gap_pulls += 1;
            let last = gap
                .seq_seen_max
                .min(gap.seq_missing_first + GAP_PULL_ENTRIES_MAX - 1)
                .min(journal.len() as u64);
            let pulled = journal.iter().take(last as usize).skip((gap.seq_missing_first - 1) as usize);
            for entry in pulled {
                let entry = entry.clone();
                let due = arrival(&mut self.prng, self.now_us);
                self.network.send(due, Message::Journal { to, entry });
            }
        }
    }

    /// Drains a random center's gap buffer into its ledger, commits, then acks.
    fn apply(&mut self) -> Check {
        let i = self.prng.below(self.centers.len() as u64) as usize;
        let max = self.prng.range(1, 32) as usize;
        let id = self.centers[i].id;
        let Some(v) = self.centers[i].volatile.as_mut() else {
            return Ok(());
        };
        let mut batch = Vec::new();
        let (ledger, host) = (&mut v.ledger, &mut v.host);
        v.consumer.drain(max, self.now_us, |_, entry| {
            let is_transfer = matches!(entry.payload, Payload::Transfer(_));
            let mut applied = ledger.apply(&entry);
            if let Some(digest) = host.apply(&entry) {
                applied.state_hash = ledger.fold(digest);
            }
            batch.push((applied, is_transfer));
        });
        if batch.is_empty() {
            return Ok(());
        }
        self.reoffer_held(i)?;
        self.feed_catch_up(i);
        let applied = self.maybe_flip(i, batch);
        for a in &applied {
            self.checker.on_apply(id, a.seq, a.outcome, a.state_hash)?;
        }
        if self.config.inject_bug == Some(InjectedBug::AckBeforeCommit) {
            return self.ack_then_commit_lazily(i, applied);
        }
        self.centers[i].commit_ledger(&applied)?;
        if self.crash_point() && self.try_crash_center(i) {
            // Committed, acks lost: the restart re-sends the ack log (and, if it owns a plugin,
            // re-executes what is pending once caught up).
            return Ok(());
        }
        self.plugins_after_apply(i);
        self.send_acks(i, &applied);
        Ok(())
    }

    /// `InjectedBug::AckBeforeCommit`: acks as it applies, commits only every few batches.
    fn ack_then_commit_lazily(&mut self, i: usize, applied: Vec<Applied>) -> Check {
        self.send_acks(i, &applied);
        let commit = self.prng.chance(1, 4);
        let Some(v) = self.centers[i].volatile.as_mut() else {
            return Ok(());
        };
        v.uncommitted_acks.extend(applied);
        if !commit {
            return Ok(());
        }
        let acks = std::mem::take(&mut v.uncommitted_acks);
        self.centers[i].commit_ledger(&acks)
    }

    /// `InjectedBug::CenterFlipsOutcome`: the second center reports its first accepted transfer
    /// as rejected.
    fn maybe_flip(&mut self, i: usize, batch: Vec<(Applied, bool)>) -> Vec<Applied> {
        let armed =
            self.config.inject_bug == Some(InjectedBug::CenterFlipsOutcome) && i == 1 % self.centers.len();
        let mut applied = Vec::with_capacity(batch.len());
        for (mut a, is_transfer) in batch {
            if armed && !self.flipped && is_transfer && a.outcome == Outcome::Accepted {
                a.outcome = Outcome::Rejected(RejectReason::InsufficientFunds);
                self.flipped = true;
            }
            applied.push(a);
        }
        applied
    }

    fn send_acks(&mut self, i: usize, applied: &[Applied]) {
        let from = self.centers[i].id;
        for &ack in applied {
            for to in 0..self.centers.len() {
                let due = arrival(&mut self.prng, self.now_us);
                self.network.send(due, Message::Ack { from, to, ack });
            }
        }
    }

    // ---- checks ----

    /// The per-step checks not already made where the event happened.
    fn check_step(&mut self) -> Check {
        let journal = &self.sequencer.journal;
        self.checker.check_journal(journal, &self.clients, &self.plugin_sent)?;
        for c in &self.centers {
            let Some(v) = &c.volatile else {
                continue;
            };
            Checker::check_ledger(c.id, &v.ledger)?;
            let seq = v.ledger.seq_applied();
            if seq > journal.len() as u64 || seq < c.durable.seq_applied {
                return Err(format!(
                    "{} is at seq {seq}: journal has {}, its checkpoint {}",
                    c.id,
                    journal.len(),
                    c.durable.seq_applied
                ));
            }
        }
        Ok(())
    }

    /// Everything admitted, published, applied and final everywhere.
    fn converged(&self) -> bool {
        let s = &self.sequencer;
        let len = s.journal.len() as u64;
        self.clients.all_admitted()
            && self.plugin_pending.is_empty()
            && self.plugins_quiescent()
            && s.leader.is_some()
            && s.inbound.is_empty()
            && s.published_through == len
            && self.centers.iter().all(|c| {
                c.volatile.as_ref().is_some_and(|v| {
                    v.ledger.seq_applied() == len
                        && v.finalizer.seq_unfinal_first() == len + 1
                        && c.durable.seq_unfinal_first == len + 1
                })
            })
    }

    fn not_converged(&self) -> String {
        let s = &self.sequencer;
        let centers: Vec<String> = self
            .centers
            .iter()
            .map(|c| match &c.volatile {
                Some(v) => format!(
                    "{} applied {} unfinal-first {}",
                    c.id,
                    v.ledger.seq_applied(),
                    v.finalizer.seq_unfinal_first()
                ),
                None => format!("{} down", c.id),
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
            "did not converge after the faults stopped: journal {}, published {}, leader {}, \
             inbound {}, unadmitted commands {}, in flight {}; {}{plugins}",
            s.journal.len(),
            s.published_through,
            if s.leader.is_some() { "up" } else { "down" },
            s.inbound.len(),
            self.clients.unadmitted_count(),
            self.network.len(),
            centers.join(", ")
        )
    }

    /// After convergence: identical ledgers, every `bmi` journaled once where its client was
    /// told, every seq final exactly once in every finalizer with the applied outcome.
    fn check_end(&self) -> Check {
        let len = self.sequencer.journal.len() as u64;
        let (mut first_ledger, mut first_host) = (None, None);
        for c in &self.centers {
            let Some(v) = &c.volatile else {
                return Err(format!("{} is down at the end", c.id));
            };
            let mut buf = Vec::new();
            v.ledger.encode(&mut buf);
            if !same_as_first(&mut first_ledger, buf) {
                return Err(format!("{} ends with a ledger unlike DC1's", c.id));
            }
            let mut buf = Vec::new();
            v.host.encode(&mut buf);
            if !same_as_first(&mut first_host, buf) {
                return Err(format!("{} ends with plugin state unlike DC1's", c.id));
            }
            self.check_finals(c, len)?;
        }
        self.check_plugins_end()?;
        for (bmi, seq) in self.clients.admitted() {
            let journaled = self.checker.journal_seq_of(bmi.as_bytes());
            if seq.is_none() || journaled != seq {
                return Err(format!("bmi {bmi}: client told {seq:?}, journal has it at {journaled:?}"));
            }
        }
        if self.checker.finalized_count() != len {
            return Err(format!("{} of {len} seqs final", self.checker.finalized_count()));
        }
        Ok(())
    }

    fn check_finals(&self, c: &Center, len: u64) -> Check {
        let finals = &c.durable.finals;
        let complete = finals.len() as u64 == len
            && finals.keys().next().is_none_or(|&s| s == 1)
            && finals.keys().next_back().is_none_or(|&s| s == len);
        if !complete {
            return Err(format!("finalizer of {} finalized {} seqs, journal has {len}", c.id, finals.len()));
        }
        for (&seq, &outcome) in finals {
            if self.checker.applied_outcome(seq) != Some(outcome) {
                return Err(format!("finalizer of {} holds seq {seq} final as {outcome:?}", c.id));
            }
        }
        Ok(())
    }

    fn report(&self) -> SimReport {
        let state_hash =
            self.centers.first().and_then(|c| c.volatile.as_ref()).map_or(0, |v| v.ledger.state_hash());
        SimReport {
            seed: self.config.seed,
            steps: self.step,
            submitted: self.clients.len() as u64,
            sequenced: self.sequencer.journal.len() as u64,
            finalized: self.checker.finalized_count(),
            center_crashes: self.stats.center_crashes,
            sequencer_crashes: self.stats.sequencer_crashes,
            gap_pulls: self.stats.gap_pulls,
            duplicates_delivered: self.stats.duplicates_delivered,
            state_hash,
            plugin_state_hash: self.first_host().filter(|h| !h.is_empty()).map_or(0, |h| h.state_hash()),
            owner_changes: self
                .first_host()
                .map_or(0, |h| h.kinds().filter_map(|k| h.owner(k)).map(|(_, term)| u64::from(term)).sum()),
            effects_executed: self.stats.effects_executed,
            plugin_results_lost: self.stats.plugin_results_lost,
        }
    }

    // ---- plugins ----

    fn first_host(&self) -> Option<&PluginHost> {
        self.centers.iter().find_map(|c| c.volatile.as_ref()).map(|v| &v.host)
    }

    /// After center `i` applied (or restarted): live once caught up; the owner executes.
    fn plugins_after_apply(&mut self, i: usize) {
        let Some(p) = self.plugins.as_mut() else { return };
        let Some(v) = self.centers.get_mut(i).and_then(|c| c.volatile.as_mut()) else { return };
        if !v.host.is_live() && v.ledger.seq_applied() >= v.live_at {
            v.host.set_live();
        }
        let mut effects = Vec::new();
        v.host.take_effects(&mut effects);
        for e in &effects {
            p.execute(e, self.now_us);
            self.effect_center.insert(e.effect_id, i);
            self.stats.effects_executed += 1;
        }
    }

    /// Results of the outside world, the failure detector, and resubmissions.
    fn poll_plugins(&mut self) -> Check {
        let Some(p) = self.plugins.as_mut() else { return Ok(()) };
        let mut out = Vec::new();
        p.poll(self.now_us, &mut out);
        let answers: Vec<Option<u64>> = out.iter().map(|(_, c)| p.answers(c)).collect();
        for ((bmi, command), answers) in out.into_iter().zip(answers) {
            let executed_by = answers.and_then(|id| self.effect_center.get(&id).copied());
            if executed_by.is_some_and(|c| !self.centers[c].is_up()) {
                self.stats.plugin_results_lost += 1;
                continue;
            }
            self.push_plugin(bmi, Payload::Plugin(command), executed_by);
        }
        self.propose_owner()?;
        self.send_plugin_pending();
        Ok(())
    }

    fn push_plugin(&mut self, bmi: Bmi, payload: Payload, executed_by: Option<usize>) {
        let sent = self.plugin_sent.entry(bmi.as_bytes().to_vec()).or_default();
        if !sent.contains(&payload) {
            sent.push(payload.clone());
        }
        let up = (0..self.centers.len()).find(|&c| self.centers[c].is_up()).unwrap_or(0);
        let origin = CenterId::from_index(executed_by.unwrap_or(up));
        let command = Command { origin, bmi, payload };
        self.plugin_pending.push(PluginResult { command, executed_by, next_send_us: self.now_us });
    }

    /// The failure detector: a plugin whose owner is down gets the lowest center that is up,
    /// at the next term (as seen by the first center that is up; a stale view only proposes a
    /// term that is refused).
    fn propose_owner(&mut self) -> Check {
        let Some(host) = self.first_host() else { return Ok(()) };
        let owners: Vec<_> = host.kinds().filter_map(|k| host.owner(k).map(|o| (k, o))).collect();
        for (kind, (owner, term)) in owners {
            if self.centers.get(owner.index()).is_some_and(|c| c.is_up()) {
                continue;
            }
            let Some(next) = (0..self.centers.len()).find(|&c| self.centers[c].is_up()) else { continue };
            let key = (kind as u8, term.wrapping_add(1));
            if self.owner_proposed_us.get(&key).is_some_and(|t| self.now_us < t + OWNER_PROPOSAL_US) {
                continue;
            }
            self.owner_proposed_us.insert(key, self.now_us);
            let set = SetOwner { term: key.1, owner: CenterId::from_index(next) };
            let bmi = SetOwner::bmi(kind, key.1).map_err(|e| e.to_string())?;
            let command = set.to_command(kind).map_err(|e| e.to_string())?;
            self.push_plugin(bmi, Payload::Plugin(command), None);
        }
        Ok(())
    }

    fn send_plugin_pending(&mut self) {
        if self.sequencer.leader.is_none() {
            return;
        }
        for r in &mut self.plugin_pending {
            if r.next_send_us <= self.now_us {
                r.next_send_us = self.now_us + PLUGIN_RESEND_US;
                self.sequencer.inbound.push_back(Inbound::Plugin(r.command.clone()));
            }
        }
    }

    fn plugins_quiescent(&self) -> bool {
        match (&self.plugins, self.first_host()) {
            (None, _) => true,
            (Some(p), Some(h)) => p.quiescent(h),
            (Some(_), None) => false,
        }
    }

    /// The outside world agrees with the (identical, see `check_end`) plugin state.
    fn check_plugins_end(&self) -> Check {
        let Some(p) = &self.plugins else { return Ok(()) };
        match self.first_host() {
            Some(h) => p.check_end(h),
            None => Err("no center is up at the end".into()),
        }
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

fn make_host(plugins: &Option<Box<dyn SimPlugins>>, id: CenterId) -> Result<PluginHost, String> {
    match plugins {
        Some(p) => PluginHost::new(id, p.make()).map_err(|e| e.to_string()),
        None => Ok(PluginHost::empty(id)),
    }
}

/// When a message sent at `now_us` arrives, barring faults.
fn arrival(prng: &mut Prng, now_us: u64) -> u64 {
    now_us + prng.range(LATENCY_US.0, LATENCY_US.1)
}

fn bug_note(bug: Option<InjectedBug>) -> String {
    bug.map_or(String::new(), |b| format!(" [injected bug {b:?}]"))
}
