//! One simulated data center: volatile state made of the real core types, and a durable
//! checkpoint that survives crashes.
//!
//! The checkpoint is written the way the node writes it: the ledger and the finalizer through
//! their own `encode`, read back through their `decode` on restart (which checks them again).
//! The ledger checkpoint and the center's own acks are one atomic commit; the finalizer
//! checkpoint and the finality events it produced are another.

use crate::entry::{CenterId, Entry, Outcome, Seq};
use crate::finalizer::Finalizer;
use crate::gap_buffer::{gap_buffer_with_timeout, GapConsumer, GapProducer};
use crate::ledger::{Applied, Ledger};
use crate::plugin_host::PluginHost;
use std::collections::{BTreeMap, VecDeque};

/// Gap buffer slots: small, so back-pressure (`Insert::Full`) happens in the simulation.
pub(super) const GAP_SLOTS: usize = 64;
/// Short (a few network delays), so gap pulls happen often.
const GAP_TIMEOUT_US: u64 = 10_000;
/// Finalizer tally window: small, so deferred acks and slot reuse happen.
const FINALIZER_WINDOW_SEQS: usize = 64;

pub(super) struct Durable {
    ledger: Vec<u8>,
    /// The ledger checkpoint's watermark: this center has durably applied every seq up to here.
    pub seq_applied: Seq,
    finalizer: Vec<u8>,
    pub seq_unfinal_first: Seq,
    /// This center's own applied-acks, oldest first, kept while some finalizer may need them.
    pub ack_log: VecDeque<Applied>,
    /// Every finality event this center's finalizer committed.
    pub finals: BTreeMap<Seq, Outcome>,
    /// The plugin host's checkpoint, committed with the ledger (empty without plugins).
    host: Vec<u8>,
}

pub(super) struct Volatile {
    pub producer: GapProducer<Entry>,
    pub consumer: GapConsumer<Entry>,
    pub ledger: Ledger,
    pub finalizer: Finalizer,
    /// After a restart: the next seq its catch-up reader reads and the last one it reads.
    pub catch_up: Option<(Seq, Seq)>,
    /// Journal entries the gap buffer had no room for (`Insert::Full`), held by the reader.
    pub held_entries: BTreeMap<Seq, Entry>,
    /// Acks the finalizer deferred (too far ahead of its window), held back by the driver.
    pub deferred_acks: Vec<(CenterId, Applied)>,
    /// `InjectedBug::AckBeforeCommit` only: acks sent but not yet in a checkpoint.
    pub uncommitted_acks: Vec<Applied>,
    pub host: PluginHost,
    /// The host goes live (executes effects) once the ledger has applied this seq: what was
    /// published when the center (re)started.
    pub live_at: Seq,
}

pub(super) struct Center {
    pub id: CenterId,
    pub durable: Durable,
    /// `None` while crashed.
    pub volatile: Option<Volatile>,
    pub down_until_us: u64,
}

impl Center {
    pub fn new(id: CenterId, center_count: usize, host: PluginHost) -> Result<Self, String> {
        let mut host_bytes = Vec::new();
        if !host.is_empty() {
            host.encode(&mut host_bytes);
        }
        let mut ledger = Vec::new();
        Ledger::new().encode(&mut ledger);
        let mut finalizer = Vec::new();
        Finalizer::with_window(center_count, FINALIZER_WINDOW_SEQS, 1).encode(&mut finalizer);
        let mut center = Center {
            id,
            durable: Durable {
                ledger,
                seq_applied: 0,
                finalizer,
                seq_unfinal_first: 1,
                ack_log: VecDeque::new(),
                finals: BTreeMap::new(),
                host: host_bytes,
            },
            volatile: None,
            down_until_us: 0,
        };
        center.volatile = Some(center.recover(host)?);
        Ok(center)
    }

    pub fn is_up(&self) -> bool {
        self.volatile.is_some()
    }

    /// Volatile state rebuilt from the durable checkpoint (what a restart does).
    pub fn recover(&self, mut host: PluginHost) -> Result<Volatile, String> {
        let id = self.id;
        let (ledger, used) =
            Ledger::decode(&self.durable.ledger).map_err(|e| format!("{id} restart: {e}"))?;
        if used != self.durable.ledger.len() || ledger.seq_applied() != self.durable.seq_applied {
            return Err(format!("{id} restart: ledger checkpoint does not read back"));
        }
        let (finalizer, used) = Finalizer::decode(&self.durable.finalizer)
            .ok_or_else(|| format!("{id} restart: finalizer checkpoint is malformed"))?;
        if used != self.durable.finalizer.len()
            || finalizer.seq_unfinal_first() != self.durable.seq_unfinal_first
        {
            return Err(format!("{id} restart: finalizer checkpoint does not read back"));
        }
        if !self.durable.host.is_empty() {
            let used = host.restore(&self.durable.host).map_err(|e| format!("{id} restart: {e}"))?;
            if used != self.durable.host.len() {
                return Err(format!("{id} restart: plugin host checkpoint does not read back"));
            }
        }
        let (producer, consumer) =
            gap_buffer_with_timeout(GAP_SLOTS, ledger.seq_applied() + 1, GAP_TIMEOUT_US);
        Ok(Volatile {
            producer,
            consumer,
            ledger,
            finalizer,
            catch_up: None,
            held_entries: BTreeMap::new(),
            deferred_acks: Vec::new(),
            uncommitted_acks: Vec::new(),
            host,
            live_at: 0,
        })
    }

    pub fn crash(&mut self, down_until_us: u64) {
        self.volatile = None;
        self.down_until_us = down_until_us;
    }

    /// Commits the ledger and appends `applied` to the ack log, in one durable step.
    pub fn commit_ledger(&mut self, applied: &[Applied]) -> Result<(), String> {
        let Some(v) = &self.volatile else {
            return Err(format!("{} committed its ledger while crashed", self.id));
        };
        let seq_applied = v.ledger.seq_applied();
        if seq_applied < self.durable.seq_applied {
            return Err(format!(
                "{} would commit seq {seq_applied} over its durable seq {}",
                self.id, self.durable.seq_applied
            ));
        }
        let mut buf = Vec::with_capacity(self.durable.ledger.len());
        v.ledger.encode(&mut buf);
        self.durable.ledger = buf;
        if !v.host.is_empty() {
            let mut host = Vec::with_capacity(self.durable.host.len());
            v.host.encode(&mut host);
            self.durable.host = host;
        }
        self.durable.seq_applied = seq_applied;
        self.durable.ack_log.extend(applied.iter().copied());
        Ok(())
    }

    /// Commits the finalizer together with the finality events it produced since the last
    /// commit; an event for a seq this center already finalized is a violation.
    pub fn commit_finalizer(&mut self, finals: &[(Seq, Outcome)]) -> Result<(), String> {
        let Some(v) = &self.volatile else {
            return Err(format!("{} committed its finalizer while crashed", self.id));
        };
        let mut buf = Vec::with_capacity(self.durable.finalizer.len());
        v.finalizer.encode(&mut buf);
        for &(seq, outcome) in finals {
            if let Some(before) = self.durable.finals.insert(seq, outcome) {
                return Err(format!(
                    "finalizer of {} finalized seq {seq} twice ({before:?}, then {outcome:?})",
                    self.id
                ));
            }
        }
        self.durable.finalizer = buf;
        self.durable.seq_unfinal_first = v.finalizer.seq_unfinal_first();
        Ok(())
    }

    /// Forgets acks for seqs every finalizer has durably finalized.
    pub fn trim_ack_log(&mut self, seq_keep_from: Seq) {
        while self.durable.ack_log.front().is_some_and(|a| a.seq < seq_keep_from) {
            self.durable.ack_log.pop_front();
        }
    }
}
