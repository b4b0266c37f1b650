//! A single-threaded journal driver for tests and demos: it plays the sequencer (stamps seq and
//! timestamp, appends `Tick`s), applies each entry to a [`CollectionPlugin`], hands every effect
//! to a [`ChainAdapter`] and journals the adapter's results as new entries — the loop the node
//! runs, without threads, Kafka or a clock.
//!
//! It keeps the journal and every effect, so a test can replay the journal into a fresh plugin
//! ([`replay`]) or execute effects a second time, as a new owner does after a failover
//! ([`Driver::reexecute`]).

use rtgs_core::entry::{Bmi, CenterId, Entry, InputError, Payload, Seq};
use rtgs_core::plugin::Effect;

use crate::chain_sim::ChainAdapter;
use crate::command::CollectionCommand;
use crate::effect::CollectionEffect;
use crate::plugin::CollectionPlugin;

/// The plugin, its adapter, and the journal between them.
pub struct Driver<A: ChainAdapter> {
    pub plugin: CollectionPlugin,
    pub adapter: A,
    journal: Vec<Entry>,
    effects: Vec<Effect>,
    now_us: u64,
    scratch: Vec<Effect>,
    results: Vec<CollectionCommand>,
}

impl<A: ChainAdapter> Driver<A> {
    pub fn new(plugin: CollectionPlugin, adapter: A, start_us: u64) -> Self {
        Driver {
            plugin,
            adapter,
            journal: Vec::new(),
            effects: Vec::new(),
            now_us: start_us,
            scratch: Vec::new(),
            results: Vec::new(),
        }
    }

    pub fn now_us(&self) -> u64 {
        self.now_us
    }

    pub fn journal(&self) -> &[Entry] {
        &self.journal
    }

    /// Every effect emitted so far, in order.
    pub fn effects(&self) -> &[Effect] {
        &self.effects
    }

    /// Journals one command at the current time, applies it and executes its effects.
    pub fn submit(&mut self, cmd: &CollectionCommand) -> Result<Seq, InputError> {
        let seq = self.journal.len() as Seq + 1;
        let bmi = Bmi::numbered("COL", seq)?;
        Ok(self.append(bmi, Payload::Plugin(cmd.to_plugin_command()?)))
    }

    /// Journals any payload (a malformed plugin command, another plugin's entry ...).
    pub fn submit_payload(&mut self, payload: Payload) -> Seq {
        let seq = self.journal.len() as Seq + 1;
        let bmi = Bmi::numbered("RAW", seq).unwrap_or(Bmi::NONE);
        self.append(bmi, payload)
    }

    pub fn tick(&mut self) -> Seq {
        self.append(Bmi::NONE, Payload::Tick)
    }

    fn append(&mut self, bmi: Bmi, payload: Payload) -> Seq {
        let seq = self.journal.len() as Seq + 1;
        let entry = Entry { seq, epoch: 1, timestamp_us: self.now_us, origin: CenterId(1), bmi, payload };
        self.scratch.clear();
        self.plugin.apply_entry(&entry, &mut self.scratch);
        self.journal.push(entry);
        let emitted = std::mem::take(&mut self.scratch);
        self.execute_all(&emitted);
        self.effects.extend_from_slice(&emitted);
        self.scratch = emitted;
        seq
    }

    fn execute_all(&mut self, effects: &[Effect]) {
        for e in effects {
            // Our own effects always decode; anything else is not ours to run.
            if let Ok(ce) = CollectionEffect::from_effect(e) {
                self.adapter.execute(e.effect_id, &ce, self.now_us);
            }
        }
    }

    /// Executes effects again (a new owner re-running effects whose results it has not seen);
    /// their results are journaled like any other.
    pub fn reexecute(&mut self, effects: &[Effect]) {
        self.execute_all(effects);
    }

    /// Journals whatever results the adapter has ready now.
    pub fn pump(&mut self) {
        let mut results = std::mem::take(&mut self.results);
        results.clear();
        self.adapter.poll(self.now_us, &mut results);
        for cmd in &results {
            // Results are built by the adapter from bounded effects; a body over the core's
            // limit would be an adapter bug, and is skipped rather than journaled.
            let _ = self.submit(cmd);
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

    /// Advances in steps of `step_us`, calling `each` every `every_us` (an operator, an
    /// invariant check).
    pub fn run_with(
        &mut self,
        duration_us: u64,
        step_us: u64,
        every_us: u64,
        mut each: impl FnMut(&mut Self),
    ) {
        let until_us = self.now_us + duration_us;
        while self.now_us < until_us {
            let next = (self.now_us + every_us.max(1)).min(until_us);
            self.run_until(next, step_us);
            each(self);
        }
    }
}

/// Applies a journal to a plugin (a fresh one, or a checkpoint); effects are discarded: replay
/// never talks to the world.
pub fn replay(mut plugin: CollectionPlugin, journal: &[Entry]) -> CollectionPlugin {
    let mut sink = Vec::new();
    for e in journal {
        sink.clear();
        plugin.apply_entry(e, &mut sink);
    }
    plugin
}
