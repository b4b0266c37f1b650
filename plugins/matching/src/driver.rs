//! A single-threaded journal driver for tests and measurements: it plays the sequencer (stamps
//! seq and timestamp, appends `Tick`s), applies each entry through a real [`Replica`] — the
//! ledger with the intents, the plugin host folding step digests — hands the effects of the
//! owner (this replica) to an adapter and journals the adapter's results as new entries: the
//! loop the node runs, without threads, a broker or a clock.
//!
//! It keeps the journal and every effect, so a test can replay the journal into a fresh replica
//! ([`Driver::replay`]), execute effects a second time as a new owner does
//! ([`Driver::reexecute`]), or answer effects by hand (an adapter that does nothing).

use rtgs_core::entry::{Bmi, CenterId, Entry, InputError, Payload, PluginCommand, Seq};
use rtgs_core::ledger::Ledger;
use rtgs_core::plugin::{Effect, EffectAdapter};
use rtgs_core::plugin_host::PluginHost;
use rtgs_core::replica::Replica;

use crate::command::MatchingCommand;
use crate::plugin::MatchingPlugin;

/// An outside world that does nothing (tests answer the effects themselves).
#[derive(Default)]
pub struct Silent;

impl EffectAdapter for Silent {
    fn execute(&mut self, _effect: &Effect, _now_us: u64) {}
    fn poll(&mut self, _now_us: u64, _out: &mut Vec<(Bmi, PluginCommand)>) {}
}

/// The replica, its adapter, and the journal between them.
pub struct Driver<A: EffectAdapter> {
    pub replica: Replica,
    pub adapter: A,
    journal: Vec<Entry>,
    effects: Vec<Effect>,
    now_us: u64,
    scratch: Vec<Effect>,
    results: Vec<(Bmi, PluginCommand)>,
    /// Effects are handed to the adapter (off: lost, as with an owner that died).
    pub execute: bool,
}

/// A replica (center DC1, the owner, live) holding `plugin`.
pub fn replica_with(plugin: MatchingPlugin) -> Replica {
    let mut host = PluginHost::new(CenterId(1), vec![Box::new(plugin)])
        .unwrap_or_else(|_| PluginHost::empty(CenterId(1)));
    host.set_live();
    Replica::new(Ledger::new(), host)
}

impl<A: EffectAdapter> Driver<A> {
    pub fn new(plugin: MatchingPlugin, adapter: A, start_us: u64) -> Self {
        Driver {
            replica: replica_with(plugin),
            adapter,
            journal: Vec::new(),
            effects: Vec::new(),
            now_us: start_us,
            scratch: Vec::new(),
            results: Vec::new(),
            execute: true,
        }
    }

    pub fn plugin(&self) -> &MatchingPlugin {
        plugin_of(&self.replica)
    }

    pub fn ledger(&self) -> &Ledger {
        self.replica.ledger()
    }

    pub fn now_us(&self) -> u64 {
        self.now_us
    }

    /// Sets the clock (never backwards).
    pub fn set_now(&mut self, now_us: u64) {
        self.now_us = self.now_us.max(now_us);
    }

    pub fn journal(&self) -> &[Entry] {
        &self.journal
    }

    /// Every effect emitted so far, in order.
    pub fn effects(&self) -> &[Effect] {
        &self.effects
    }

    /// Journals one command at the current time and applies it.
    pub fn submit(&mut self, cmd: &MatchingCommand) -> Result<Seq, InputError> {
        let bmi = Bmi::numbered("MC", self.journal.len() as u64 + 1)?;
        Ok(self.append(bmi, Payload::Plugin(cmd.to_plugin_command()?)))
    }

    /// Journals any payload (accounts, another plugin's entry, a malformed command).
    pub fn submit_payload(&mut self, bmi: Bmi, payload: Payload) -> Seq {
        self.append(bmi, payload)
    }

    pub fn tick(&mut self) -> Seq {
        self.append(Bmi::NONE, Payload::Tick)
    }

    fn append(&mut self, bmi: Bmi, payload: Payload) -> Seq {
        let seq = self.journal.len() as Seq + 1;
        let entry = Entry { seq, epoch: 1, timestamp_us: self.now_us, origin: CenterId(1), bmi, payload };
        self.replica.apply(&entry);
        self.journal.push(entry);
        let mut emitted = std::mem::take(&mut self.scratch);
        emitted.clear();
        self.replica.host_mut().take_effects(&mut emitted);
        if self.execute {
            for e in &emitted {
                self.adapter.execute(e, self.now_us);
            }
        }
        self.effects.extend_from_slice(&emitted);
        self.scratch = emitted;
        seq
    }

    /// Executes effects again (a new owner re-running what it has no answer for).
    pub fn reexecute(&mut self, effects: &[Effect]) {
        for e in effects {
            self.adapter.execute(e, self.now_us);
        }
    }

    /// Journals whatever results the adapter has ready now.
    pub fn pump(&mut self) {
        let mut results = std::mem::take(&mut self.results);
        results.clear();
        self.adapter.poll(self.now_us, &mut results);
        for (bmi, cmd) in results.drain(..) {
            self.append(bmi, Payload::Plugin(cmd));
        }
        self.results = results;
    }

    /// Advances time in steps of `step_us` until `until_us`; each step journals due results,
    /// then a `Tick`.
    pub fn run_until(&mut self, until_us: u64, step_us: u64) {
        let step_us = step_us.max(1);
        while self.now_us < until_us {
            self.now_us = (self.now_us + step_us).min(until_us);
            self.pump();
            self.tick();
        }
    }

    pub fn run_for(&mut self, duration_us: u64, step_us: u64) {
        self.run_until(self.now_us + duration_us, step_us);
    }

    /// A fresh replica of the same plugin set, fed this journal (replay never talks to the world).
    pub fn replay(&self, plugin: MatchingPlugin) -> Replica {
        let mut r = replica_with(plugin);
        r.host_mut().set_replaying();
        for e in &self.journal {
            r.apply(e);
        }
        r
    }
}

/// The matching plugin of a replica built by this driver.
pub fn plugin_of(r: &Replica) -> &MatchingPlugin {
    r.host()
        .plugin(rtgs_core::entry::PluginKind::Matching)
        .and_then(|p| p.as_any().downcast_ref())
        .unwrap_or_else(|| unreachable!("the driver's replica holds the matching plugin"))
}
