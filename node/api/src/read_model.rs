//! Balances for `GET /v1/accounts/{id}`: a ledger replayed from the journal files.
//!
//! The embedded engine keeps its ledgers inside the center threads and exposes no query, so the
//! API runs its own [`Ledger`] over the same journal — the same deterministic apply, hence the
//! same balances as every center at the same seq. It applies only up to the highest seq it has
//! seen final (everything at or below a final seq is durable), so it never shows a balance a
//! crash could take back. It replays the whole journal at start.
//!
//! With plugins, it also runs a replica of the centers' plugin host over the same entries (never
//! live, so it executes nothing): the collection audit queries read it.

use crate::limits::READ_MODEL_POLL;
use rtgs_core::entry::{Entry, Seq};
use rtgs_core::ledger::{Account, Ledger};
use rtgs_core::plugin_host::PluginHost;
use rtgs_embedded::journal::JournalReader;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};

#[derive(Default)]
pub struct ReadModel {
    ledger: RwLock<Ledger>,
    /// Apply up to here: the highest seq seen final.
    seq_target: AtomicU64,
    failure: Mutex<Option<String>>,
    /// The plugin replica and the seq it has applied (moved with the ledger, under its lock).
    plugins: Option<Mutex<(PluginHost, Seq)>>,
}

impl ReadModel {
    /// A read model that also replays the plugins of `host` (a fresh host, as the centers start).
    pub fn with_plugins(host: PluginHost) -> Self {
        ReadModel { plugins: Some(Mutex::new((host, 0))), ..ReadModel::default() }
    }

    pub fn has_plugins(&self) -> bool {
        self.plugins.is_some()
    }

    /// Runs `f` over the plugin replica and the seq it is at; `None` without plugins.
    pub fn plugins<R>(&self, f: impl FnOnce(&PluginHost, Seq) -> R) -> Result<Option<R>, String> {
        if let Some(reason) = self.failure.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            return Err(reason.clone());
        }
        Ok(self.plugins.as_ref().map(|p| {
            let g = p.lock().unwrap_or_else(|e| e.into_inner());
            f(&g.0, g.1)
        }))
    }

    /// An account as of the returned seq.
    pub fn account(&self, id: rtgs_core::entry::AccountId) -> Result<(Option<Account>, Seq), String> {
        if let Some(reason) = self.failure.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            return Err(reason.clone());
        }
        let ledger = self.ledger.read().unwrap_or_else(|e| e.into_inner());
        Ok((ledger.account(id).cloned(), ledger.seq_applied()))
    }

    pub fn advance_to(&self, seq: Seq) {
        self.seq_target.fetch_max(seq, Ordering::AcqRel);
    }

    pub fn seq_target(&self) -> Seq {
        self.seq_target.load(Ordering::Acquire)
    }

    pub fn seq_applied(&self) -> Seq {
        self.ledger.read().unwrap_or_else(|e| e.into_inner()).seq_applied()
    }

    /// The replay loop, on its own thread until `stop`.
    pub fn run(&self, journal_dir: PathBuf, stop: &AtomicBool) {
        if let Err(e) = self.replay(&journal_dir, stop) {
            *self.failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
        }
    }

    fn replay(&self, journal_dir: &std::path::Path, stop: &AtomicBool) -> Result<(), String> {
        let mut reader: Option<JournalReader> = None;
        let mut pending: VecDeque<Entry> = VecDeque::new();
        let mut read = Vec::new();
        while !stop.load(Ordering::Acquire) {
            let target = self.seq_target.load(Ordering::Acquire);
            let applied = self.seq_applied();
            if applied >= target {
                std::thread::sleep(READ_MODEL_POLL);
                continue;
            }
            if pending.is_empty() {
                let r = match reader.as_mut() {
                    Some(r) => r,
                    None => reader
                        .insert(JournalReader::open(journal_dir, applied + 1).map_err(|e| e.to_string())?),
                };
                read.clear();
                // End of the segments the reader knew when it was opened: reopen (a new segment).
                if !r.next_batch(&mut read).map_err(|e| e.to_string())? {
                    reader = None;
                    std::thread::sleep(READ_MODEL_POLL);
                    continue;
                }
                pending.extend(read.drain(..));
            }
            let mut ledger = self.ledger.write().unwrap_or_else(|e| e.into_inner());
            let mut plugins = self.plugins.as_ref().map(|p| p.lock().unwrap_or_else(|e| e.into_inner()));
            while pending.front().is_some_and(|e| e.seq <= target) {
                if let Some(entry) = pending.pop_front() {
                    ledger.apply(&entry);
                    if let Some(p) = plugins.as_mut() {
                        p.0.apply(&entry);
                        p.1 = entry.seq;
                    }
                }
            }
        }
        Ok(())
    }
}
