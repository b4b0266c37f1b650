//! The plugins' outside world ([`SimPlugins`](crate::SimPlugins), e.g. a chain simulator): it
//! executes the effects a live owner's center hands out, and its results come back as plugin
//! commands through the sequencer, submitted again until journaled — but not while a copy
//! still waits in the sequencer's inbound queue (the inbound topic is durable; only a crash of
//! the sequencer loses what it had not sequenced), or resubmissions outgrow what the sequencer
//! takes and the queue grows for ever — except answers to effects executed by a center that has
//! crashed since: those die with it. Owner proposals, which the centers' own failure detectors make, travel the same way.
//! At the end every center's whole plugin state must be identical, and
//! [`SimPlugins::check_end`](crate::SimPlugins::check_end) checks the outside world (collection:
//! every deposit swept exactly once, no sweep broadcast twice).

use super::sequencer::Inbound;
use super::{Check, World};
use rtgs_core::entry::{Bmi, CenterId, Command, Payload};
use rtgs_core::plugin::Effect;

/// A plugin result not yet journaled is sent to the sequencer again after this long.
const PLUGIN_RESEND_US: u64 = 20_000;

/// A plugin command submitted until it is journaled.
pub struct PluginResult {
    pub command: Command,
    /// The center that executed the effect this answers (or proposed it): it dies with it.
    pub executed_by: Option<usize>,
    next_send_us: u64,
    /// A copy waits in the sequencer's inbound queue.
    pub queued: bool,
}

impl World {
    /// Center `i` is the live owner: its effects go to the outside world.
    pub(super) fn execute_effects(&mut self, i: usize, effects: Vec<Effect>) {
        let Some(p) = self.plugins.as_mut() else { return };
        for e in &effects {
            p.execute(e, self.now_us);
            self.effect_center.insert(e.effect_id, i);
            self.effects_executed += 1;
        }
    }

    /// The world's setup commands, first of all.
    pub(super) fn push_setup(&mut self) {
        let Some(p) = self.plugins.as_ref() else { return };
        for (bmi, payload) in p.setup() {
            self.push_plugin(bmi, payload, None);
        }
    }

    /// A command center `i` asked to submit (an owner proposal).
    pub(super) fn push_command(&mut self, command: Command, executed_by: Option<usize>) {
        self.push_plugin(command.bmi, command.payload, executed_by);
    }

    /// Results of the outside world, and resubmissions. First the world reads the open alerts
    /// off an up center (an operator's console: any center shows the same replicated set, as of
    /// what it applied).
    pub(super) fn poll_plugins(&mut self) -> Check {
        let mut alerts = Vec::new();
        if let (Some(_), Some(h)) = (&self.plugins, self.first_host()) {
            h.alerts_open(&mut alerts);
        }
        let Some(p) = self.plugins.as_mut() else { return Ok(()) };
        p.alerts_seen(&alerts, self.now_us);
        let mut payloads = Vec::new();
        p.poll_payloads(self.now_us, &mut payloads);
        let mut out = Vec::new();
        p.poll(self.now_us, &mut out);
        let answers: Vec<Option<u64>> = out.iter().map(|(_, c)| p.answers(c)).collect();
        for (bmi, payload) in payloads {
            self.push_plugin(bmi, payload, None);
        }
        for ((bmi, command), answers) in out.into_iter().zip(answers) {
            let executed_by = answers.and_then(|id| self.effect_center.get(&id).copied());
            if executed_by.is_some_and(|c| !self.centers[c].is_up()) {
                self.plugin_results_lost += 1;
                continue;
            }
            self.push_plugin(bmi, Payload::Plugin(command), executed_by);
        }
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
        self.plugin_pending.push(PluginResult {
            command,
            executed_by,
            next_send_us: self.now_us,
            queued: false,
        });
    }

    fn send_plugin_pending(&mut self) {
        if self.sequencer.leader.is_none() {
            return;
        }
        for r in &mut self.plugin_pending {
            if !r.queued && r.next_send_us <= self.now_us {
                r.next_send_us = self.now_us + PLUGIN_RESEND_US;
                r.queued = true;
                self.sequencer.inbound.push_back(Inbound::Plugin(r.command.clone()));
            }
        }
    }

    pub(super) fn plugins_quiescent(&self) -> bool {
        match (&self.plugins, self.first_host()) {
            (None, _) => true,
            (Some(p), Some(h)) => p.quiescent(h),
            (Some(_), None) => false,
        }
    }

    /// The outside world agrees with the (identical, see `check_end`) plugin state.
    pub(super) fn check_plugins_end(&self) -> Check {
        let Some(p) = &self.plugins else { return Ok(()) };
        match self.first_host() {
            Some(h) => p.check_end(h),
            None => Err("no center is up at the end".into()),
        }
    }
}
