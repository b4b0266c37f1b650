//! One center's thread: a thin driver of the core's [`Center`]. It moves bytes and time in and
//! out and decides nothing: journal batches from the writer (and, at start, from the journal
//! files) go in, as do the ack batches of the other centers; the center's outputs go out — its
//! acks to its peers and back to itself, notices to the client, effects and owner proposals to
//! the adapter thread, pulls read back from the journal files, checkpoints to the checkpointer.
//!
//! **The journal is the commit** ([`CenterConfig::commit_on_apply`]): the writer fsyncs a group
//! of batches before any center sees it and a center's state is a function of that journal, so
//! what a center applied is acked at once; its checkpoint (written every
//! `checkpoint_interval_entries`) only shortens the replay after a restart.
//!
//! **The ack stream as this center reads it** is the sequence of ack batches it received (its
//! own included, fed back as it sends them), numbered from 0 at start; the batches from the
//! center's resume position on are kept, so that a rewind the center asks for
//! ([`Outputs::ack_rewind`]) reads them again. **Own acks** are kept while any finalizer may still
//! need them (at or above the lowest *durable* `seq_unfinal_first` of all finalizers): they are
//! in the checkpoint, re-sent after a restart, and re-sent when the center asks
//! ([`Outputs::reack_from`]).

use crate::checkpoint::{self, CenterCheckpoint, PluginRef};
use crate::cluster::{AckBatch, CheckpointJob, Clock, JournalBatch, Shared, ToAdapter};
use crate::journal::JournalReader;
use crossbeam_channel::{Receiver, Select, Sender, TryRecvError, TrySendError};
use rtgs_core::center::{Center, CenterConfig, Outputs, Restore};
use rtgs_core::client::ClientEvent;
use rtgs_core::entry::{CenterId, Entry, Seq};
use rtgs_core::finalizer::Finalizer;
use rtgs_core::ledger::Ledger;
use rtgs_core::plugin_host::PluginHost;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a center thread starts from.
pub(crate) struct CenterSetup {
    pub config: CenterConfig,
    pub host: PluginHost,
    pub checkpoint: Option<CenterCheckpoint>,
    pub journal_dir: PathBuf,
    pub checkpoint_path: PathBuf,
    /// The journal's last durable seq at start: the center replays up to it from the files.
    pub replay_until: Seq,
    pub links: CenterLinks,
}

/// A center's queues and shared handles.
pub(crate) struct CenterLinks {
    pub journal_rx: Receiver<Arc<JournalBatch>>,
    pub ack_rx: Receiver<Arc<AckBatch>>,
    /// Ack queues of the other centers; cleared once this center has nothing more to send.
    pub peers: Vec<Sender<Arc<AckBatch>>>,
    pub events_tx: Sender<ClientEvent>,
    pub checkpoint_tx: Sender<CheckpointJob>,
    /// To the adapter thread (`None` without plugins).
    pub adapter_tx: Option<Sender<ToAdapter>>,
    pub shared: Arc<Shared>,
    pub clock: Arc<Clock>,
}

/// One center's state when the cluster stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CenterReport {
    pub id: CenterId,
    pub seq_applied: Seq,
    pub state_hash: u64,
    pub balance_total_minor: u128,
    pub held_total_minor: u128,
    pub funded_total_minor: u128,
    pub conserved: bool,
    /// Every seq up to this one is final in this center's finalizer.
    pub seq_final_through: Seq,
    pub finalized_total: u64,
    pub divergences_total: u64,
    pub gap_pulls: u64,
    pub checkpoints_written: u64,
    /// Seq the center resumed from at start (its durable watermark).
    pub seq_resumed_from: Seq,
    /// Full hash of the plugin host's state (0 without plugins).
    pub plugin_state_hash: u64,
    pub plugin_figures: crate::cluster::Figures,
}

/// How often a center republishes its plugins' figures while plugin entries flow.
const FIGURES_INTERVAL: Duration = Duration::from_millis(100);
/// How long the thread waits for input before it passes time to the center.
const IDLE_WAIT: Duration = Duration::from_millis(50);

pub(crate) struct CenterThread {
    center: Center,
    out: Outputs,
    links: CenterLinks,
    /// Ack batches received (own ones included), from position `received_base` on.
    received: VecDeque<Arc<AckBatch>>,
    received_base: u64,
    /// Own ack batches some finalizer may still need.
    ack_log: VecDeque<Arc<AckBatch>>,
    /// Ack batches to send: (peer index, batch).
    outbox: VecDeque<(usize, Arc<AckBatch>)>,
    /// Messages for the adapter that did not fit its queue yet.
    adapter_outbox: VecDeque<ToAdapter>,
    replay: Option<JournalReader>,
    replay_until: Seq,
    journal_dir: PathBuf,
    checkpoint_path: PathBuf,
    /// The plugin state file the last checkpoint job references.
    plugins_written: Option<PluginRef>,
    /// When the plugins' figures were last published, and the plugin entries counted then.
    figures_published: Option<(Instant, u64)>,
    seq_resumed_from: Seq,
    checkpoints_written: u64,
}

impl CenterThread {
    pub fn new(s: CenterSetup) -> Result<Self, crate::journal::JournalError> {
        let id = s.config.center;
        let now = s.links.clock.now_us();
        let (restore, ack_log, plugins_written) = match s.checkpoint {
            Some(c) => {
                let log = c
                    .ack_log
                    .chunks(crate::limits::BATCH_ENTRIES_MAX)
                    .map(|items| Arc::new(AckBatch { center: id, items: items.to_vec() }))
                    .collect();
                let written = c.plugins.as_ref().map(|(at, _)| *at);
                let restore = Restore {
                    ledger: c.ledger,
                    host: s.host,
                    finalizer: c.finalizer,
                    awaiting: c.awaiting,
                    journal_next: None,
                    ack_next: 0,
                    catch_up_seq: Some(s.replay_until),
                    // The journal is the commit: acks go out as applied, no stream to miss.
                    acks_published_through: None,
                };
                (restore, log, written)
            }
            None => {
                let finalizer =
                    Finalizer::with_window(s.config.center_count, s.config.finalizer_window_seqs, 1);
                let restore = Restore {
                    ledger: Ledger::new(),
                    host: s.host,
                    finalizer,
                    awaiting: Vec::new(),
                    journal_next: None,
                    ack_next: 0,
                    catch_up_seq: Some(s.replay_until),
                    // The journal is the commit: acks go out as applied, no stream to miss.
                    acks_published_through: None,
                };
                (restore, VecDeque::new(), None)
            }
        };
        let seq_resumed_from = restore.ledger.seq_applied();
        let replay = if s.replay_until > seq_resumed_from {
            Some(JournalReader::open(&s.journal_dir, seq_resumed_from + 1)?)
        } else {
            None
        };
        let mut thread = CenterThread {
            center: Center::new(s.config, restore, now),
            out: Outputs::default(),
            links: s.links,
            received: VecDeque::new(),
            received_base: 0,
            ack_log: VecDeque::new(),
            outbox: VecDeque::new(),
            adapter_outbox: VecDeque::new(),
            replay,
            replay_until: s.replay_until,
            journal_dir: s.journal_dir,
            checkpoint_path: s.checkpoint_path,
            plugins_written,
            figures_published: None,
            seq_resumed_from,
            checkpoints_written: 0,
        };
        // After a restart, the finalizers may lack acks sent before the crash: send them again
        // (to every peer and to this center's own finalizer; duplicates count once).
        for batch in ack_log {
            thread.send_own(batch);
        }
        Ok(thread)
    }

    pub fn run(mut self) -> Result<CenterReport, String> {
        let journal_rx = self.links.journal_rx.clone();
        let ack_rx = self.links.ack_rx.clone();
        let mut journal_open = true;
        let mut acks_open = true;
        loop {
            self.center.handle_timeout(self.links.clock.now_us());
            self.drain()?;
            loop {
                match ack_rx.try_recv() {
                    Ok(b) => self.receive(b),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        acks_open = false;
                        break;
                    }
                }
            }
            self.drain()?;
            self.flush_outbox();
            if self.outbox.is_empty() && self.replay.is_some() {
                self.replay_step()?;
                continue;
            }
            if !journal_open && self.outbox.is_empty() && !self.links.peers.is_empty() {
                // Done sending: dropping our senders lets the peers' ack queues close.
                self.links.peers.clear();
            }
            if !journal_open && self.links.peers.is_empty() && !acks_open {
                break;
            }
            let mut sel = Select::new();
            let i_ack = acks_open.then(|| sel.recv(&ack_rx));
            let i_journal = (journal_open && self.outbox.is_empty()).then(|| sel.recv(&journal_rx));
            let send_to = self.outbox.front().map(|(p, _)| self.links.peers[*p].clone());
            let i_send = send_to.as_ref().map(|s| sel.send(s));
            let Ok(op) = sel.select_timeout(IDLE_WAIT) else {
                continue;
            };
            let i = Some(op.index());
            if i == i_ack {
                match op.recv(&ack_rx) {
                    Ok(b) => self.receive(b),
                    Err(_) => acks_open = false,
                }
            } else if i == i_journal {
                match op.recv(&journal_rx) {
                    Ok(batch) => self.journal(&batch),
                    Err(_) => journal_open = false,
                }
            } else if let (true, Some(to)) = (i == i_send, &send_to) {
                if let Some((_, b)) = self.outbox.pop_front() {
                    // A peer that is gone no longer needs our acks.
                    let _ = op.send(to, b);
                }
            }
        }
        self.drain()?;
        self.checkpoint(true)?;
        self.publish_figures(true);
        Ok(self.report())
    }

    fn journal(&mut self, batch: &JournalBatch) {
        let now = self.links.clock.now_us();
        // The batch is shared by every center: applied from the slice, not copied.
        self.center.handle_entries_ref(&batch.entries, &batch.submitted_at_us, None, now);
    }

    /// An ack batch of any center, as the next message of this center's ack stream.
    fn receive(&mut self, batch: Arc<AckBatch>) {
        let position = self.received_base + self.received.len() as u64;
        self.center.handle_acks(batch.center, &batch.items, position, self.links.clock.now_us());
        self.received.push_back(batch);
    }

    /// Moves the center's outputs into the world until it asks for nothing more (a checkpoint
    /// the checkpointer has no room for is asked again with the next batch).
    fn drain(&mut self) -> Result<(), String> {
        let mut checkpoint_due = false;
        loop {
            self.center.poll_output(&mut self.out);
            let mut out = std::mem::take(&mut self.out);
            checkpoint_due |= std::mem::take(&mut out.checkpoint_due);
            if out.is_empty() {
                self.out = out;
                break;
            }
            self.act(out)?;
        }
        if checkpoint_due {
            self.checkpoint(false)?;
        }
        self.publish_figures(false);
        let final_through = self.center.seq_unfinal_first() - 1;
        self.links.shared.final_through.fetch_max(final_through, Ordering::AcqRel);
        Ok(())
    }

    fn act(&mut self, mut out: Outputs) -> Result<(), String> {
        let me = self.center.id();
        if !out.acks.is_empty() {
            let batch = Arc::new(AckBatch { center: me, items: std::mem::take(&mut out.acks) });
            self.ack_log.push_back(Arc::clone(&batch));
            self.send_own(batch);
        }
        // (A restart's republish does not come with the journal as the commit; it would be the
        // same: every logged batch from there.)
        if let Some(from) = out.reack_from.or(out.republish.map(|(from, _)| from)) {
            let again: Vec<Arc<AckBatch>> = self
                .ack_log
                .iter()
                .filter(|b| b.items.last().is_some_and(|a| a.seq >= from))
                .cloned()
                .collect();
            for batch in again {
                self.send_own(batch);
            }
        }
        if let Some(position) = out.ack_rewind {
            self.reread(position);
        }
        for pull in &out.pulls {
            self.pull(pull.from, pull.to)?;
        }
        if let Some(last) = out.notices.last().map(|n| n.seq) {
            // The client going away is not this center's failure.
            let _ = self.links.events_tx.send(ClientEvent::Final(std::mem::take(&mut out.notices)));
            self.center.handle_announced(last);
        }
        for alarm in &out.alarms {
            let msg = format!("finalizer {me}: {alarm}");
            eprintln!("{msg}");
            if let rtgs_core::center::Alarm::Divergence { .. } = alarm {
                self.links.shared.diverged.store(true, Ordering::Release);
                let _ = self.links.events_tx.send(ClientEvent::Divergence(msg));
            }
        }
        if !out.effects.is_empty() {
            self.send_to_adapter(ToAdapter::Effects(me, std::mem::take(&mut out.effects)));
            // With the owner's effects, its open alerts (the operators' console: an adapter
            // that plays operators answers them).
            let mut alerts = Vec::new();
            self.center.host().alerts_open(&mut alerts);
            if !alerts.is_empty() {
                self.send_to_adapter(ToAdapter::Alerts(alerts));
            }
        }
        if !out.commands.is_empty() {
            self.send_to_adapter(ToAdapter::Submit(std::mem::take(&mut out.commands)));
        }
        self.trim();
        Ok(())
    }

    /// This center's own ack batch: to every peer, and to its own finalizer.
    fn send_own(&mut self, batch: Arc<AckBatch>) {
        for p in 0..self.links.peers.len() {
            self.outbox.push_back((p, Arc::clone(&batch)));
        }
        self.receive(batch);
    }

    /// Feeds the ack stream again from `position`.
    fn reread(&mut self, position: u64) {
        let from = position.saturating_sub(self.received_base) as usize;
        let again: Vec<Arc<AckBatch>> = self.received.iter().skip(from).cloned().collect();
        let now = self.links.clock.now_us();
        for (k, batch) in again.iter().enumerate() {
            let at = self.received_base + (from + k) as u64;
            self.center.handle_acks(batch.center, &batch.items, at, now);
        }
    }

    /// Drops what nobody needs any more: received batches before the center's resume position,
    /// own batches below every finalizer's durable `seq_unfinal_first`.
    fn trim(&mut self) {
        let resume = self.center.progress().ack_next;
        while self.received_base < resume && !self.received.is_empty() {
            self.received.pop_front();
            self.received_base += 1;
        }
        let floor = self.links.shared.ack_floor();
        while self.ack_log.front().is_some_and(|b| b.items.last().is_none_or(|a| a.seq < floor)) {
            self.ack_log.pop_front();
        }
    }

    fn flush_outbox(&mut self) {
        while let Some((p, b)) = self.outbox.front() {
            match self.links.peers[*p].try_send(Arc::clone(b)) {
                Ok(()) | Err(TrySendError::Disconnected(_)) => {
                    self.outbox.pop_front();
                }
                Err(TrySendError::Full(_)) => break,
            }
        }
        self.flush_adapter();
    }

    fn send_to_adapter(&mut self, message: ToAdapter) {
        if self.links.adapter_tx.is_some() {
            self.adapter_outbox.push_back(message);
            self.flush_adapter();
        }
    }

    /// Hands queued messages to the adapter without blocking: a slow adapter never stalls the
    /// journal (what does not fit waits here; the effects also stay pending in the plugins).
    fn flush_adapter(&mut self) {
        let Some(tx) = &self.links.adapter_tx else { return };
        while let Some(message) = self.adapter_outbox.pop_front() {
            match tx.try_send(message) {
                Ok(()) => {}
                // The adapter stopped (shutdown): the effects stay pending in the plugins.
                Err(TrySendError::Disconnected(_)) => self.adapter_outbox.clear(),
                Err(TrySendError::Full(message)) => {
                    self.adapter_outbox.push_front(message);
                    break;
                }
            }
        }
    }

    fn replay_step(&mut self) -> Result<(), String> {
        let mut entries = Vec::new();
        let more = match self.replay.as_mut() {
            Some(r) => r.next_batch(&mut entries).map_err(|e| e.to_string())?,
            None => false,
        };
        let until = self.replay_until;
        let now = self.links.clock.now_us();
        self.center.handle_entries(
            entries.into_iter().take_while(|e| e.seq <= until).map(|e| (e, 0)),
            None,
            now,
        );
        if !more || self.center.seq_applied() >= until {
            self.replay = None;
        }
        self.drain()
    }

    /// Reads seqs `from..=to` back from the durable journal into the center.
    fn pull(&mut self, from: Seq, to: Seq) -> Result<(), String> {
        let mut reader = JournalReader::open(&self.journal_dir, from).map_err(|e| e.to_string())?;
        let mut entries: Vec<Entry> = Vec::new();
        let mut batch = Vec::new();
        while reader.next_batch(&mut batch).map_err(|e| e.to_string())? {
            let done = batch.last().is_some_and(|e| e.seq >= to);
            entries.extend(batch.drain(..).filter(|e| e.seq >= from && e.seq <= to));
            if done {
                break;
            }
        }
        if entries.first().map(|e| e.seq) != Some(from) {
            return Err(format!("seq {from} is missing from the durable journal"));
        }
        let now = self.links.clock.now_us();
        self.center.handle_entries(entries.into_iter().map(|e| (e, 0)), None, now);
        Ok(())
    }

    fn checkpoint(&mut self, last: bool) -> Result<(), String> {
        if !last && self.links.checkpoint_tx.is_full() {
            // The checkpointer is busy: the center asks again after its next batch.
            return Ok(());
        }
        let plugins = self.plugins_job();
        let plugins_at = plugins.as_ref().map(|(at, _)| *at);
        let ledger = self.center.ledger();
        let job = CheckpointJob {
            center_index: self.center.id().index(),
            path: self.checkpoint_path.clone(),
            state: checkpoint::encode_state(ledger, self.center.finalizer()),
            ack_log: self.ack_log.iter().cloned().collect(),
            awaiting: self.center.awaiting().copied().collect(),
            plugins,
            seq_unfinal_first: self.center.seq_unfinal_first(),
        };
        if last {
            // The last one: wait for room rather than skip it.
            self.links.checkpoint_tx.send(job).map_err(|_| "checkpointer stopped".to_string())?;
        } else if self.links.checkpoint_tx.try_send(job).is_err() {
            return Ok(());
        }
        self.center.checkpoint_taken();
        self.checkpoints_written += 1;
        if let Some(at) = plugins_at {
            self.plugins_written = Some(at);
        }
        Ok(())
    }

    /// The plugin part of a checkpoint job: a new plugin state file if a plugin entry changed
    /// the state since the last one (O(state): encode and hash), else a reference to that one.
    fn plugins_job(&self) -> Option<(PluginRef, Option<Vec<u8>>)> {
        let host = self.center.host();
        if host.is_empty() {
            return None;
        }
        match self.plugins_written {
            Some(at) if !self.center.plugins_changed_since_checkpoint() => Some((at, None)),
            _ => {
                let mut bytes = Vec::new();
                let state_hash = host.encode_with_hash(&mut bytes);
                let at = PluginRef { seq: self.center.seq_applied(), state_hash };
                Some((at, Some(bytes)))
            }
        }
    }

    /// Publishes the plugins' figures when plugin entries came in, at most every
    /// `FIGURES_INTERVAL` (`now`: at once).
    fn publish_figures(&mut self, now: bool) {
        let host = self.center.host();
        if host.is_empty() {
            return;
        }
        let entries = self.center.stats().plugin_entries;
        let fresh = self
            .figures_published
            .is_some_and(|(at, seen)| seen == entries || at.elapsed() < FIGURES_INTERVAL);
        if !now && fresh {
            return;
        }
        self.figures_published = Some((Instant::now(), entries));
        let mut figures = Vec::new();
        host.figures(&mut figures);
        if let Some(slot) = self.links.shared.plugin_figures.get(self.center.id().index()) {
            crate::cluster::publish(slot, figures);
        }
    }

    fn report(&self) -> CenterReport {
        let host = self.center.host();
        let ledger = self.center.ledger();
        let mut plugin_figures = Vec::new();
        host.figures(&mut plugin_figures);
        let finalizer = self.center.finalizer();
        CenterReport {
            plugin_state_hash: if host.is_empty() { 0 } else { host.state_hash() },
            plugin_figures,
            id: self.center.id(),
            seq_applied: ledger.seq_applied(),
            state_hash: ledger.state_hash(),
            balance_total_minor: ledger.balance_total_minor(),
            held_total_minor: ledger.held_total_minor(),
            funded_total_minor: ledger.funded_total_minor(),
            conserved: ledger.check_conservation().is_ok(),
            seq_final_through: finalizer.seq_unfinal_first() - 1,
            finalized_total: finalizer.finalized_total(),
            divergences_total: finalizer.divergences_total(),
            gap_pulls: self.center.stats().gap_pulls,
            checkpoints_written: self.checkpoints_written,
            seq_resumed_from: self.seq_resumed_from,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::encode_frames;
    use crate::journal::Journal;
    use crossbeam_channel::bounded;

    fn tick(seq: Seq) -> Entry {
        Entry::tick(seq, 1, seq, CenterId(1))
    }

    /// A delivery with a hole: the center applies up to the hole, and once the gap timeout has
    /// passed it asks for the missing entries, which this driver reads back from the durable
    /// journal files — never skipped.
    #[test]
    fn a_timed_out_gap_is_pulled_from_the_journal_files() {
        let dir = std::env::temp_dir().join(format!("rtgs-gap-pull-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let journal_dir = dir.join("journal");
        let (mut journal, _) =
            Journal::open(&journal_dir, crate::limits::SEGMENT_BYTES_MAX).unwrap_or_else(|e| panic!("{e}"));
        let all: Vec<Entry> = (1..=10).map(tick).collect();
        journal.append(&encode_frames(&all), 1, 10).unwrap_or_else(|e| panic!("{e}"));
        journal.sync().unwrap_or_else(|e| panic!("{e}"));

        let (_journal_tx, journal_rx) = bounded(1);
        let (_ack_tx, ack_rx) = bounded(1);
        let (events_tx, _events_rx) = bounded(16);
        let (checkpoint_tx, _checkpoint_rx) = bounded(4);
        let clock = Arc::new(Clock::new());
        let config = CenterConfig { commit_on_apply: true, ..CenterConfig::new(CenterId(1), 1) };
        let mut center = CenterThread::new(CenterSetup {
            config,
            host: PluginHost::empty(CenterId(1)),
            checkpoint: None,
            journal_dir,
            checkpoint_path: dir.join("center-DC1.checkpoint"),
            replay_until: 0,
            links: CenterLinks {
                journal_rx,
                ack_rx,
                peers: Vec::new(),
                events_tx,
                checkpoint_tx,
                adapter_tx: None,
                shared: Arc::new(Shared::for_tests(1)),
                clock: Arc::clone(&clock),
            },
        })
        .unwrap_or_else(|e| panic!("{e}"));

        let delivered: Vec<Entry> = all.iter().filter(|e| e.seq != 4 && e.seq != 5).cloned().collect();
        let batch = JournalBatch { submitted_at_us: vec![0; delivered.len()], entries: delivered };
        center.journal(&batch);
        center.drain().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(center.center.seq_applied(), 3, "applied up to the hole, not past it");
        assert_eq!(center.center.stats().gap_pulls, 0, "a fresh hole is only timed");
        std::thread::sleep(Duration::from_micros(rtgs_core::limits::GAP_TIMEOUT_US + 50_000));
        center.center.handle_timeout(clock.now_us());
        center.drain().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(center.center.stats().gap_pulls, 1);
        assert_eq!(center.center.seq_applied(), 10, "the pulled entries filled the hole and the run went on");
        assert_eq!(center.center.seq_unfinal_first(), 11, "one center is its own quorum here");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
