//! The sequencer process and the clients' way to it: the real [`Sequencer`] as the volatile
//! leader, the durable journal ([`JournalStore`]) and the published watermark that survive a
//! crash, and the inbound queue that does not.

use super::faults::{JOURNAL_TORN, SEQUENCER_DOWN_US};
use super::{Check, World};
use crate::client::Submission;
use crate::network::Message;
use crate::storage::JournalStore;
use crate::InjectedBug;
use rtgs_core::entry::{CenterId, Command, Entry};
use rtgs_core::sequencer::{MemoryIndex, Sequencer};
use std::collections::VecDeque;

/// A command on its way to the sequencer: a client's, or a plugin result / owner proposal.
pub enum Inbound {
    Client(Submission),
    Plugin(Command),
}

pub struct SequencerNode {
    pub store: JournalStore,
    /// What was made durable, as it was sequenced: the checker's record of the journal (no
    /// process reads it; they read the store's bytes).
    pub truth: Vec<Entry>,
    /// Frames published to every center (durable: recorded after publishing).
    pub published_frames: usize,
    /// The last leader's epoch (durable: the fenced sequencer row).
    pub epoch: u32,
    /// `None` while crashed.
    pub leader: Option<Sequencer>,
    /// Every `bmi` sequenced (the driver's index, as the engines keep one): rebuilt from the
    /// durable journal by a new leader.
    index: MemoryIndex,
    pub inbound: VecDeque<Inbound>,
    pub down_until_us: u64,
}

impl SequencerNode {
    pub fn new() -> Self {
        SequencerNode {
            store: JournalStore::default(),
            truth: Vec::new(),
            published_frames: 0,
            epoch: 1,
            leader: Some(Sequencer::new(CenterId(1), 1)),
            index: MemoryIndex::default(),
            inbound: VecDeque::new(),
            down_until_us: 0,
        }
    }

    /// The last published seq: where a restarting center's plugins go live.
    pub fn published_seq(&self) -> u64 {
        self.published_frames.checked_sub(1).map_or(0, |k| self.store.seqs(k).1)
    }
}

impl World {
    pub(super) fn crash_sequencer(&mut self) {
        let s = &mut self.sequencer;
        s.leader = None;
        // Commands not yet durable are lost; their clients retry after a timeout, plugin results
        // are sent again.
        s.inbound.clear();
        for r in &mut self.plugin_pending {
            r.queued = false;
        }
        s.down_until_us = self.now_us + self.prng.range(SEQUENCER_DOWN_US.0, SEQUENCER_DOWN_US.1);
        self.faults.counts.sequencer_crashes += 1;
    }

    /// A new leader: reads the durable journal back (cutting a torn tail), takes the next epoch
    /// and republishes whatever was durable but not recorded as published.
    pub(super) fn restart_sequencer(&mut self) -> Check {
        let entries = self.sequencer.store.recover(self.verify, &mut self.recoveries.frames_refused)?;
        if entries != self.sequencer.truth {
            let at = entries.iter().zip(&self.sequencer.truth).position(|(a, b)| a != b);
            return Err(format!(
                "the journal read back differs from what was made durable (at entry {at:?}: {} entries \
                 read, {} durable)",
                entries.len(),
                self.sequencer.truth.len()
            ));
        }
        let s = &mut self.sequencer;
        let epoch = s.epoch + 1;
        let host = CenterId::from_index(epoch as usize % self.centers.len());
        let mut leader = Sequencer::new(host, 0);
        for entry in &entries {
            leader.recover(entry);
        }
        s.index = MemoryIndex::default();
        if self.config.inject_bug != Some(InjectedBug::SequencerForgetsDedupe) {
            s.index.record(&entries);
        }
        let epoch = match self.config.inject_bug {
            Some(InjectedBug::SequencerReusesEpoch) => epoch - 1,
            _ => epoch,
        };
        leader.begin_epoch(epoch);
        s.epoch = epoch;
        s.leader = Some(leader);
        self.send_frames(self.sequencer.published_frames)?;
        self.sequencer.published_frames = self.sequencer.store.frames();
        Ok(())
    }

    /// Appends a batch to the durable journal; false if the sequencer crashed in the middle of
    /// the write (a torn frame, nothing durable).
    fn write_batch(&mut self, entries: Vec<Entry>) -> bool {
        if self.faults.hit(&mut self.prng, &JOURNAL_TORN) {
            self.sequencer.store.append_torn(&entries, &mut self.prng);
            self.faults.counts.journal_torn_writes += 1;
            self.crash_sequencer();
            return false;
        }
        self.sequencer.store.append(&entries);
        self.sequencer.truth.extend(entries);
        true
    }

    /// The sequencer's `Tick`, at least every tick interval: durable at once, published with the
    /// next batch.
    pub(super) fn poll_tick(&mut self) -> Check {
        let tick = self.sequencer.leader.as_mut().and_then(|l| l.poll_tick(self.now_us));
        if let Some(tick) = tick {
            self.write_batch(vec![tick]);
        }
        Ok(())
    }

    /// Stamps a batch of inbound commands, makes it durable, then answers the clients.
    pub(super) fn sequence(&mut self) -> Check {
        let s = &mut self.sequencer;
        let Some(leader) = s.leader.as_mut() else { return Ok(()) };
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
        // The driver's part: the batch looked up in its index first, what was sequenced recorded
        // (a crash before the write loses both: the new leader rebuilds the index from the
        // durable journal).
        let mut lookups = Vec::with_capacity(commands.len());
        s.index.lookup(&commands, &mut lookups);
        leader.handle_commands(self.now_us, commands, &lookups, &mut entries, &mut admissions);
        s.index.record(&entries);
        if admissions.len() != batch.len() {
            return Err(format!("sequencer answered {} of {} commands", admissions.len(), batch.len()));
        }
        if !entries.is_empty() && !self.write_batch(entries) {
            return Ok(());
        }
        if self.crash_point() {
            // Durable but unanswered: the clients retry and must get `Duplicate`.
            self.crash_sequencer();
            return Ok(());
        }
        for (item, admission) in batch.iter().zip(admissions) {
            match item {
                Inbound::Client(sub) => self.clients.on_admission(sub, admission, &self.sequencer.truth)?,
                // Sequenced, a retry of something sequenced, or a conflicting duplicate (a second
                // answer to a re-executed effect): done either way.
                Inbound::Plugin(c) => self.plugin_pending.retain(|r| r.command.bmi != c.bmi),
            }
        }
        Ok(())
    }

    pub(super) fn publish(&mut self) -> Check {
        if self.sequencer.leader.is_none() {
            return Ok(());
        }
        self.send_frames(self.sequencer.published_frames)?;
        if self.crash_point() {
            // Published but not recorded: the next leader publishes it again.
            self.crash_sequencer();
            return Ok(());
        }
        self.sequencer.published_frames = self.sequencer.store.frames();
        Ok(())
    }

    /// Durable frames from index `from` on, read back from the store, to every center.
    fn send_frames(&mut self, from: usize) -> Check {
        for k in from..self.sequencer.store.frames() {
            let (bytes, _) =
                self.sequencer.store.read(k, self.verify, &mut self.recoveries.frames_refused)?;
            for to in 0..self.centers.len() {
                let due = self.arrival();
                self.network.send(due, Message { to, frame: k, bytes: bytes.clone() });
            }
        }
        Ok(())
    }

    /// Clients send through a random center that is up; with no leader, commands are lost.
    pub(super) fn submit(&mut self) {
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
}
