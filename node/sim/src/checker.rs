//! The invariants. Each check returns `Err(message)` on the first violation; the world turns it
//! into a [`crate::SimFailure`] carrying the seed and the step.

use crate::client::Clients;
use rtgs_core::client::Notice;
use rtgs_core::entry::{CenterId, Entry, Outcome, Payload, Seq};
use rtgs_core::ledger::Ledger;
use std::collections::{BTreeMap, BTreeSet};

pub struct Checker {
    quorum: usize,
    /// Per seq (index `seq - 1`): the `(outcome, state hash)` of its first apply anywhere.
    applied: Vec<(Outcome, u64)>,
    /// Per seq: the outcome the first finalizer declared final.
    finals: BTreeMap<Seq, Outcome>,
    /// How much of the journal the incremental check has covered.
    journal_checked: usize,
    journal_bmis: BTreeMap<Vec<u8>, Seq>,
    /// Every `bmi` an origin center announced final.
    announced: BTreeSet<Vec<u8>>,
}

impl Checker {
    pub fn new(center_count: usize) -> Self {
        Checker {
            quorum: center_count / 2 + 1,
            applied: Vec::new(),
            finals: BTreeMap::new(),
            journal_checked: 0,
            journal_bmis: BTreeMap::new(),
            announced: BTreeSet::new(),
        }
    }

    pub fn finalized_count(&self) -> u64 {
        self.finals.len() as u64
    }

    pub fn applied_outcome(&self, seq: Seq) -> Option<Outcome> {
        let i = usize::try_from(seq.checked_sub(1)?).ok()?;
        self.applied.get(i).map(|&(o, _)| o)
    }

    pub fn journal_seq_of(&self, bmi: &[u8]) -> Option<Seq> {
        self.journal_bmis.get(bmi).copied()
    }

    /// Agreement: every center applies a seq with the same outcome and state hash.
    pub fn on_apply(
        &mut self,
        center: CenterId,
        seq: Seq,
        outcome: Outcome,
        state_hash: u64,
    ) -> Result<(), String> {
        let i = seq
            .checked_sub(1)
            .and_then(|i| usize::try_from(i).ok())
            .ok_or_else(|| format!("{center} applied seq {seq}"))?;
        match self.applied.get(i) {
            Some(&first) if first != (outcome, state_hash) => Err(format!(
                "centers differ at seq {seq}: first applied as {:?} (state hash {:#018x}), \
                 {center} applied {outcome:?} (state hash {state_hash:#018x})",
                first.0, first.1
            )),
            Some(_) => Ok(()),
            None if i == self.applied.len() => {
                self.applied.push((outcome, state_hash));
                Ok(())
            }
            None => Err(format!(
                "{center} applied seq {seq} before any center applied seq {}",
                self.applied.len() + 1
            )),
        }
    }

    /// A seq the finalizer of `finalizer` declared final (as `outcome`, when its tally still
    /// tells): it matches what was applied, a quorum of centers has durably applied the seq,
    /// and every finalizer agrees. `durable_seq_applied[c]` is center `c`'s committed watermark.
    pub fn on_final(
        &mut self,
        finalizer: CenterId,
        seq: Seq,
        outcome: Option<Outcome>,
        durable_seq_applied: &[Seq],
    ) -> Result<(), String> {
        let outcome = match (self.applied_outcome(seq), outcome) {
            (Some(applied), None) => applied,
            (Some(applied), Some(outcome)) if applied == outcome => outcome,
            (applied, outcome) => {
                return Err(format!(
                    "finalizer of {finalizer} declared seq {seq} final as {outcome:?}, \
                     but it was applied as {applied:?}"
                ))
            }
        };
        let durable = durable_seq_applied.iter().filter(|&&s| s >= seq).count();
        if durable < self.quorum {
            return Err(format!(
                "finalizer of {finalizer} declared seq {seq} final without a quorum: \
                 {durable} center(s) durably applied it, quorum is {}",
                self.quorum
            ));
        }
        match self.finals.insert(seq, outcome) {
            Some(before) if before != outcome => {
                Err(format!("finalizers disagree on seq {seq}: {before:?}, then {outcome:?} at {finalizer}"))
            }
            _ => Ok(()),
        }
    }

    /// The journal is gap-free from 1, its epochs and timestamps never go back, every `bmi` in
    /// it is unique and carries its original content (a conflicting reuse is never journaled).
    /// Incremental: only entries appended since the last call are read.
    pub fn check_journal(
        &mut self,
        journal: &[Entry],
        clients: &Clients,
        plugin_sent: &BTreeMap<Vec<u8>, Vec<Payload>>,
    ) -> Result<(), String> {
        if journal.len() < self.journal_checked {
            return Err(format!(
                "the durable journal shrank from {} to {} entries",
                self.journal_checked,
                journal.len()
            ));
        }
        for i in self.journal_checked..journal.len() {
            let entry = &journal[i];
            if entry.seq != i as u64 + 1 {
                return Err(format!("journal is not gap-free: entry {} has seq {}", i + 1, entry.seq));
            }
            if let Some(prev) = i.checked_sub(1).map(|p| &journal[p]) {
                if entry.epoch < prev.epoch || entry.timestamp_us < prev.timestamp_us {
                    return Err(format!(
                        "journal goes back at seq {}: epoch {} -> {}, time {} -> {}",
                        entry.seq, prev.epoch, entry.epoch, prev.timestamp_us, entry.timestamp_us
                    ));
                }
            }
            self.check_entry(entry, clients, plugin_sent)?;
        }
        self.journal_checked = journal.len();
        Ok(())
    }

    fn check_entry(
        &mut self,
        entry: &Entry,
        clients: &Clients,
        plugin_sent: &BTreeMap<Vec<u8>, Vec<Payload>>,
    ) -> Result<(), String> {
        if entry.bmi.is_none() {
            return match entry.payload {
                Payload::Tick => Ok(()),
                _ => Err(format!("seq {} has no bmi and is not a tick", entry.seq)),
            };
        }
        let key = entry.bmi.as_bytes().to_vec();
        if let Some(first) = self.journal_bmis.insert(key, entry.seq) {
            return Err(format!(
                "bmi {} is in the journal twice: seq {first} and seq {}",
                entry.bmi, entry.seq
            ));
        }
        match clients.original(&entry.bmi) {
            Some(original) if *original == entry.payload => Ok(()),
            Some(_) => Err(format!(
                "bmi {} journaled at seq {} with content other than the original \
                 (a conflicting reuse was journaled)",
                entry.bmi, entry.seq
            )),
            None => match plugin_sent.get(entry.bmi.as_bytes()) {
                Some(sent) if sent.contains(&entry.payload) => Ok(()),
                Some(_) => Err(format!("plugin bmi {} journaled with content never sent", entry.bmi)),
                None => Err(format!("seq {} carries bmi {} that no client sent", entry.seq, entry.bmi)),
            },
        }
    }

    /// Conservation: Σ balances + Σ holds = Σ funded, per currency and in total.
    pub fn check_ledger(center: CenterId, ledger: &Ledger) -> Result<(), String> {
        ledger.check_conservation().map_err(|e| format!("{center} at seq {}: {e}", ledger.seq_applied()))?;
        if ledger.balance_total_minor() + ledger.held_total_minor() != ledger.funded_total_minor() {
            return Err(format!(
                "{center} at seq {}: balances {} + holds {} != funded {}",
                ledger.seq_applied(),
                ledger.balance_total_minor(),
                ledger.held_total_minor(),
                ledger.funded_total_minor()
            ));
        }
        Ok(())
    }

    /// What a center applied is what was sequenced (nothing corrupt got in on the way).
    pub fn check_entry_applied(center: CenterId, applied: &Entry, journal: &[Entry]) -> Result<(), String> {
        let sequenced = applied.seq.checked_sub(1).and_then(|i| journal.get(usize::try_from(i).ok()?));
        match sequenced {
            Some(s) if s == applied => Ok(()),
            s => Err(format!("{center} applied seq {} as {applied:?}, the journal holds {s:?}", applied.seq)),
        }
    }

    /// A final status announced: by the entry's origin, for its `bmi`, with the outcome it was
    /// applied with, once it is final.
    pub fn on_notice(&mut self, n: &Notice, journal: &[Entry]) -> Result<(), String> {
        let entry = n.seq.checked_sub(1).and_then(|i| journal.get(usize::try_from(i).ok()?));
        let Some(entry) = entry else {
            return Err(format!("{} announced seq {}, beyond the journal", n.center, n.seq));
        };
        if entry.origin != n.center || entry.bmi != n.bmi {
            return Err(format!(
                "{} announced seq {} as bmi {}: its origin is {}, its bmi {}",
                n.center, n.seq, n.bmi, entry.origin, entry.bmi
            ));
        }
        if self.applied_outcome(n.seq) != Some(n.outcome) || !self.finals.contains_key(&n.seq) {
            return Err(format!(
                "{} announced seq {} as {:?}: applied as {:?}, final: {}",
                n.center,
                n.seq,
                n.outcome,
                self.applied_outcome(n.seq),
                self.finals.contains_key(&n.seq)
            ));
        }
        self.announced.insert(n.bmi.as_bytes().to_vec());
        Ok(())
    }

    pub fn announced(&self, bmi: &[u8]) -> bool {
        self.announced.contains(bmi)
    }
}
