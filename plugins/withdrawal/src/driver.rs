//! A single-threaded journal driver for tests and benchmarks: it plays the sequencer (stamps
//! seq and timestamp, appends `Tick`s, dedupes `bmi`s as the sequencer does), applies each entry
//! to a ledger and then to a [`WithdrawalPlugin`] through the core's `Step` (so the plugin's
//! ledger intents reach a real ledger, conservation included), hands every effect to an
//! `EffectAdapter` and journals what the adapter answers — the loop the node runs, without
//! threads, a broker or a clock.
//!
//! It keeps the journal and every effect, so a test can replay the journal into fresh replicas
//! ([`replay`]) or execute effects a second time, as a new owner does after a failover
//! ([`Driver::reexecute`]).

use std::collections::HashSet;

use rtgs_core::entry::{AccountId, Bmi, CenterId, Currency, Entry, InputError, Payload, PluginKind, Seq};
use rtgs_core::ledger::Ledger;
use rtgs_core::plugin::{Effect, EffectAdapter, Plugin, Step};

use crate::command::WithdrawalCommand;
use crate::plugin::WithdrawalPlugin;

/// The plugin, its ledger, its outside world, and the journal between them.
pub struct Driver<A: EffectAdapter> {
    pub plugin: WithdrawalPlugin,
    pub ledger: Ledger,
    pub adapter: A,
    journal: Vec<Entry>,
    effects: Vec<Effect>,
    bmis: HashSet<Bmi>,
    now_us: u64,
    scratch: Vec<Effect>,
    results: Vec<(Bmi, rtgs_core::entry::PluginCommand)>,
    /// Whether effects go to the adapter (off: a test feeds results by hand).
    pub execute: bool,
    /// Results the adapter produced that the sequencer's dedupe dropped.
    pub duplicates_dropped: u64,
}

impl<A: EffectAdapter> Driver<A> {
    pub fn new(adapter: A, start_us: u64) -> Self {
        Driver {
            plugin: WithdrawalPlugin::new(),
            ledger: Ledger::new(),
            adapter,
            journal: Vec::new(),
            effects: Vec::new(),
            bmis: HashSet::new(),
            now_us: start_us,
            scratch: Vec::new(),
            results: Vec::new(),
            execute: true,
            duplicates_dropped: 0,
        }
    }

    pub fn now_us(&self) -> u64 {
        self.now_us
    }

    /// Moves time forward (never back) without journaling anything.
    pub fn set_now(&mut self, t_us: u64) {
        self.now_us = self.now_us.max(t_us);
    }

    pub fn journal(&self) -> &[Entry] {
        &self.journal
    }

    /// Every effect emitted so far, in order.
    pub fn effects(&self) -> &[Effect] {
        &self.effects
    }

    /// Opens a ledger account and funds it.
    pub fn open_account(
        &mut self,
        account: u64,
        currency: &[u8; 3],
        fund_minor: u64,
    ) -> Result<(), InputError> {
        let currency = Currency::new(currency)?;
        let open = Payload::AccountOpen { account: AccountId(account), currency };
        self.submit_payload(Bmi::numbered("OPEN", account)?, open);
        if fund_minor > 0 {
            let fund = Payload::AccountFund { account: AccountId(account), amount_minor: fund_minor };
            self.submit_payload(Bmi::numbered("FUND", account)?, fund);
        }
        Ok(())
    }

    /// Journals one command at the current time, applies it and executes its effects; `None`
    /// if the sequencer would have refused its `bmi` as a duplicate.
    pub fn submit_as(&mut self, bmi: Bmi, cmd: &WithdrawalCommand) -> Result<Option<Seq>, InputError> {
        let payload = Payload::Plugin(cmd.to_plugin_command()?);
        Ok(self.submit_payload(bmi, payload))
    }

    /// Journals one command with a fresh `bmi`.
    pub fn submit(&mut self, cmd: &WithdrawalCommand) -> Result<Seq, InputError> {
        let bmi = Bmi::numbered("WD", self.journal.len() as u64 + 1)?;
        let payload = Payload::Plugin(cmd.to_plugin_command()?);
        Ok(self.append(bmi, payload))
    }

    /// Journals any payload (a malformed plugin command, another plugin's entry ...), unless
    /// its `bmi` was journaled before.
    pub fn submit_payload(&mut self, bmi: Bmi, payload: Payload) -> Option<Seq> {
        if !self.bmis.insert(bmi) {
            self.duplicates_dropped += 1;
            return None;
        }
        Some(self.append(bmi, payload))
    }

    pub fn tick(&mut self) -> Seq {
        self.append(Bmi::NONE, Payload::Tick)
    }

    fn append(&mut self, bmi: Bmi, payload: Payload) -> Seq {
        let seq = self.journal.len() as Seq + 1;
        let entry = Entry { seq, epoch: 1, timestamp_us: self.now_us, origin: CenterId(1), bmi, payload };
        self.ledger.apply(&entry);
        self.scratch.clear();
        let mut log = Vec::new();
        {
            let mut step =
                Step::new(seq, PluginKind::Withdrawal, &mut self.scratch, &mut self.ledger, &mut log);
            Plugin::apply(&mut self.plugin, &entry, &mut step);
        }
        self.journal.push(entry);
        let emitted = std::mem::take(&mut self.scratch);
        if self.execute {
            for e in &emitted {
                self.adapter.execute(e, self.now_us);
            }
        }
        self.effects.extend_from_slice(&emitted);
        self.scratch = emitted;
        seq
    }

    /// Executes effects again (a new owner re-running what it has not seen answered).
    pub fn reexecute(&mut self, effects: &[Effect]) {
        for e in effects {
            self.adapter.execute(e, self.now_us);
        }
    }

    /// Shows the adapter the plugin's open alerts (the operators' console), then journals
    /// whatever results it has ready now (the sequencer's dedupe applies).
    pub fn pump(&mut self) {
        let mut alerts = Vec::new();
        Plugin::alerts_open(&self.plugin, &mut alerts);
        self.adapter.alerts_seen(&alerts, self.now_us);
        let mut results = std::mem::take(&mut self.results);
        results.clear();
        self.adapter.poll(self.now_us, &mut results);
        for (bmi, pc) in results.drain(..) {
            self.submit_payload(bmi, Payload::Plugin(pc));
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
}

/// Applies a journal to a fresh ledger and plugin (a replica, or another center); effects are
/// discarded: replay never talks to the world.
pub fn replay(journal: &[Entry]) -> (WithdrawalPlugin, Ledger) {
    let mut plugin = WithdrawalPlugin::new();
    let mut ledger = Ledger::new();
    let mut sink = Vec::new();
    let mut log = Vec::new();
    for e in journal {
        ledger.apply(e);
        sink.clear();
        log.clear();
        let mut step = Step::new(e.seq, PluginKind::Withdrawal, &mut sink, &mut ledger, &mut log);
        Plugin::apply(&mut plugin, e, &mut step);
    }
    (plugin, ledger)
}

/// An outside world that answers nothing (tests that feed results by hand).
#[derive(Default)]
pub struct NoWorld;

impl EffectAdapter for NoWorld {
    fn execute(&mut self, _effect: &Effect, _now_us: u64) {}
    fn poll(&mut self, _now_us: u64, _out: &mut Vec<(Bmi, rtgs_core::entry::PluginCommand)>) {}
}
