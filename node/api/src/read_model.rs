//! Balances for `GET /v1/accounts/{id}`: a ledger replayed from the journal files.
//!
//! The embedded engine keeps its ledgers inside the center threads and exposes no query, so the
//! API runs its own [`Ledger`] over the same journal — the same deterministic apply, hence the
//! same balances as every center at the same seq. It applies only up to the highest seq it has
//! seen final (everything at or below a final seq is durable), so it never shows a balance a
//! crash could take back. It replays the whole journal at start.
//!
//! It also keeps each account's statement: the last [`STATEMENT_LINES_MAX`] entries that moved
//! or changed it (seq, `bmi`, debit or credit, counterparty, balance after), from the same final
//! entries, so a statement and a balance read at the same `as_of_seq` always agree.
//!
//! With plugins, it also runs a replica of the centers' plugin host over the same entries (never
//! live, so it executes nothing): the collection audit queries read it.

use crate::limits::{READ_MODEL_POLL, STATEMENT_LINES_MAX};
use rtgs_core::entry::{AccountId, Bmi, Entry, Outcome, Payload, Seq};
use rtgs_core::ledger::{Account, Ledger};
use rtgs_core::plugin_host::PluginHost;
use rtgs_embedded::journal::JournalReader;
use std::collections::HashMap;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};

/// One line of an account's statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    pub seq: Seq,
    pub bmi: Bmi,
    pub kind: LineKind,
    /// The other account of a transfer.
    pub counterparty: Option<AccountId>,
    pub amount_minor: u64,
    pub balance_after_minor: u64,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum LineKind {
    Open,
    Debit,
    Credit,
    Fund,
    Close,
}

impl LineKind {
    pub fn name(self) -> &'static str {
        match self {
            LineKind::Open => "OPEN",
            LineKind::Debit => "DEBIT",
            LineKind::Credit => "CREDIT",
            LineKind::Fund => "FUND",
            LineKind::Close => "CLOSE",
        }
    }
}

/// The ledger replica and the statements, moved together under one lock.
#[derive(Default)]
struct Books {
    ledger: Ledger,
    statements: HashMap<AccountId, VecDeque<Line>>,
}

impl Books {
    fn apply(&mut self, entry: &Entry) {
        let applied = self.ledger.apply(entry);
        if applied.outcome != Outcome::Accepted {
            return; // a rejection moves nothing: not on any statement
        }
        let balance = |l: &Ledger, a: AccountId| l.account(a).map_or(0, |x| x.balance_minor);
        let mut line = |account: AccountId, kind: LineKind, counterparty: Option<AccountId>, amount: u64| {
            let lines = self.statements.entry(account).or_default();
            if lines.len() >= STATEMENT_LINES_MAX {
                lines.pop_front();
            }
            let balance_after_minor = balance(&self.ledger, account);
            lines.push_back(Line {
                seq: entry.seq,
                bmi: entry.bmi,
                kind,
                counterparty,
                amount_minor: amount,
                balance_after_minor,
            });
        };
        match &entry.payload {
            Payload::Transfer(t) => {
                line(t.debtor, LineKind::Debit, Some(t.creditor), t.amount_minor);
                line(t.creditor, LineKind::Credit, Some(t.debtor), t.amount_minor);
            }
            Payload::AccountOpen { account, .. } => line(*account, LineKind::Open, None, 0),
            Payload::AccountFund { account, amount_minor } => {
                line(*account, LineKind::Fund, None, *amount_minor)
            }
            Payload::AccountClose { account } => line(*account, LineKind::Close, None, 0),
            _ => {}
        }
    }
}

#[derive(Default)]
pub struct ReadModel {
    ledger: RwLock<Books>,
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
        let books = self.ledger.read().unwrap_or_else(|e| e.into_inner());
        Ok((books.ledger.account(id).cloned(), books.ledger.seq_applied()))
    }

    /// For each id, under one lock: `None` if there is no such account, else whether it is
    /// closed — as of everything the read model applied.
    pub fn standing(&self, ids: impl Iterator<Item = AccountId>) -> Result<Vec<Option<bool>>, String> {
        if let Some(reason) = self.failure.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            return Err(reason.clone());
        }
        let books = self.ledger.read().unwrap_or_else(|e| e.into_inner());
        Ok(ids.map(|id| books.ledger.account(id).map(|a| a.closed)).collect())
    }

    /// An account's statement lines with seq ≥ `from_seq`, at most `limit`, oldest first, and
    /// the seq the read model is at; `None` if the account does not exist.
    #[allow(clippy::type_complexity)]
    pub fn statement(
        &self,
        id: AccountId,
        from_seq: Seq,
        limit: usize,
    ) -> Result<(Option<(rtgs_core::ledger::Account, Vec<Line>, bool)>, Seq), String> {
        if let Some(reason) = self.failure.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            return Err(reason.clone());
        }
        let books = self.ledger.read().unwrap_or_else(|e| e.into_inner());
        let seq = books.ledger.seq_applied();
        let Some(account) = books.ledger.account(id).cloned() else { return Ok((None, seq)) };
        let lines = books.statements.get(&id);
        // True when older lines than the first kept one were dropped (bounded memory).
        let truncated = lines.and_then(|l| l.front()).is_some_and(|first| first.seq > from_seq)
            && lines.is_some_and(|l| l.len() >= STATEMENT_LINES_MAX);
        let out = lines
            .map(|l| l.iter().filter(|x| x.seq >= from_seq).take(limit).cloned().collect())
            .unwrap_or_default();
        Ok((Some((account, out, truncated)), seq))
    }

    pub fn advance_to(&self, seq: Seq) {
        self.seq_target.fetch_max(seq, Ordering::AcqRel);
    }

    pub fn seq_target(&self) -> Seq {
        self.seq_target.load(Ordering::Acquire)
    }

    pub fn seq_applied(&self) -> Seq {
        self.ledger.read().unwrap_or_else(|e| e.into_inner()).ledger.seq_applied()
    }

    /// A read model starting from `ledger` (the engine's at start, already final); entries
    /// after it come through [`ReadModel::run_fed`].
    pub fn with_ledger(ledger: Ledger) -> Self {
        let seq = ledger.seq_applied();
        let model = ReadModel {
            ledger: RwLock::new(Books { ledger, statements: HashMap::new() }),
            ..ReadModel::default()
        };
        model.advance_to(seq);
        model
    }

    /// The loop of a read model fed by the engine, on its own thread until `stop`: applies the
    /// pushed entries (in seq order) up to the highest final seq.
    pub fn run_fed(
        &self,
        rx: tokio::sync::mpsc::Receiver<Vec<Entry>>,
        final_through: crate::server::FinalThrough,
        stop: &AtomicBool,
    ) {
        self.record_failure(self.fed(rx, final_through, stop));
    }

    /// The replay loop, on its own thread until `stop`.
    pub fn run(&self, journal_dir: PathBuf, stop: &AtomicBool) {
        self.record_failure(self.replay(&journal_dir, stop));
    }

    /// A loop that stopped on an error leaves it for every later read to answer with.
    fn record_failure(&self, result: Result<(), String>) {
        if let Err(e) = result {
            *self.failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
        }
    }

    fn fed(
        &self,
        mut rx: tokio::sync::mpsc::Receiver<Vec<Entry>>,
        final_through: crate::server::FinalThrough,
        stop: &AtomicBool,
    ) -> Result<(), String> {
        let mut pending: VecDeque<Entry> = VecDeque::new();
        while !stop.load(Ordering::Acquire) {
            loop {
                match rx.try_recv() {
                    Ok(batch) => pending.extend(batch),
                    Err(tokio::sync::mpsc::error::TryRecvError::Empty) => break,
                    Err(tokio::sync::mpsc::error::TryRecvError::Disconnected) => return Ok(()),
                }
            }
            self.advance_to(final_through());
            let target = self.seq_target.load(Ordering::Acquire);
            if pending.front().is_none_or(|e| e.seq > target) {
                std::thread::sleep(READ_MODEL_POLL);
                continue;
            }
            self.apply_up_to(&mut pending, target)?;
        }
        Ok(())
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
            self.apply_up_to(&mut pending, target)?;
        }
        Ok(())
    }

    /// Applies the pending entries at or below `target` to the books and the plugin replica,
    /// under one write lock; an entry out of seq order is an error (the source is broken).
    fn apply_up_to(&self, pending: &mut VecDeque<Entry>, target: Seq) -> Result<(), String> {
        let mut books = self.ledger.write().unwrap_or_else(|e| e.into_inner());
        let mut plugins = self.plugins.as_ref().map(|p| p.lock().unwrap_or_else(|e| e.into_inner()));
        while let Some(entry) = pending.pop_front() {
            if entry.seq > target {
                pending.push_front(entry);
                break;
            }
            let expected = books.ledger.seq_applied() + 1;
            if entry.seq != expected {
                return Err(format!(
                    "the read model got seq {} where seq {expected} was due: it stops",
                    entry.seq
                ));
            }
            books.apply(&entry);
            if let Some(p) = plugins.as_mut() {
                p.0.apply(&entry, &mut books.ledger);
                p.1 = entry.seq;
            }
        }
        Ok(())
    }
}
