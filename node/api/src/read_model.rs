//! Balances and statements for the API: a [`Replica`] of the centers' state, fed the journal.
//!
//! An engine exposes no query, so the API runs its own replica — ledger and plugin host applied
//! together, the same apply path as every center (`rtgs_core::replica`), hence the same balances,
//! holds and plugin state as every center at the same seq. It applies only up to the highest seq
//! known final (everything at or below a final seq is durable), so it never shows a balance a
//! crash could take back. Its entries come from the engine through an [`EntryFeed`] (the
//! embedded engine tails its journal files from seq 1; the production engine forwards what its
//! center applied, after the ledger it stored at start).
//!
//! It also keeps each account's statement: the last [`STATEMENT_LINES_MAX`] lines that moved or
//! changed it (seq, `bmi`, kind, counterparty, balance after), from the same final entries —
//! transfers and account administration, and the plugins' ledger intents (holds, releases,
//! settlements, postings, reversals) — so a statement and a balance read at the same
//! `as_of_seq` always agree.
//!
//! The plugin host of the replica is no center (`CenterId(0)`): never owner, never live, it
//! executes nothing; the plugins' audit queries read it.

use crate::limits::{READ_MODEL_POLL, STATEMENT_LINES_MAX};
use rtgs_core::client::{EntryFeed, Fed};
use rtgs_core::entry::{AccountId, Entry, Outcome, Seq};
use rtgs_core::ledger::{Account, Ledger};
use rtgs_core::plugin_host::PluginHost;
use rtgs_core::replica::Replica;
use rtgs_core::statement::AccountLine;
use std::collections::HashMap;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};

pub use rtgs_core::statement::{Line, LineKind};

/// The replica and the statements, moved together under one lock.
struct Books {
    replica: Replica,
    statements: HashMap<AccountId, VecDeque<Line>>,
    /// Every entry this model applied that was rejected, in seq order, with its reason (every
    /// other one it applied settled): a retry of any age is answered with its outcome. 16 bytes
    /// per rejected entry ever applied (the embedded engine's model replays the whole journal).
    rejected: Vec<(Seq, u16)>,
}

impl Books {
    fn apply(&mut self, entry: &Entry) {
        let (applied, plugin) = self.replica.apply(entry);
        if let Outcome::Rejected(_) = applied.outcome {
            self.rejected.push((entry.seq, applied.outcome.code()));
        }
        let mut lines = Vec::new();
        rtgs_core::statement::lines_of(entry, &applied, plugin, &self.replica, &mut lines);
        for AccountLine { account, line } in lines {
            let kept = self.statements.entry(account).or_default();
            if kept.len() >= STATEMENT_LINES_MAX {
                kept.pop_front();
            }
            kept.push_back(line);
        }
    }
}

/// Where the outcomes of entries final before a read model's start are read (the production
/// engine: the center's database); `None` when not known (not final, or not found).
pub type OutcomeHistory = std::sync::Arc<
    dyn Fn(Seq) -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<Outcome>> + Send>> + Send + Sync,
>;

/// Where an account's whole statement is read (the production engine: the center's
/// `statement_line`): at most `max` lines of the account with `from ≤ seq ≤ through`, oldest first.
pub type StatementSource = std::sync::Arc<
    dyn Fn(
            AccountId,
            Seq,
            Seq,
            usize,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Vec<Line>, String>> + Send>>
        + Send
        + Sync,
>;

/// How far the engine's journal reaches *now* — a seq at or beyond every entry sequenced before
/// the call (the production engine: the sequencer's durable `last_seq`). An engine whose
/// [`FinalThrough`] is one node's own view (a node that lags does not know it lags) gives one,
/// so that "not found" is concluded only from a model that holds everything sequenced before the
/// question: the embedded engine's `final_through` is the whole cluster's, and needs none.
pub type JournalEnd = std::sync::Arc<
    dyn Fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Seq, String>> + Send>>
        + Send
        + Sync,
>;

/// Where the engine keeps every `bmi` it ever sequenced (the production engine: the sequencer's
/// `sequenced_bmi`): the seq of the entry under a (scoped) `bmi`, `None` if it never was. A status
/// query then knows a transfer submitted through another center, or before this node started.
pub type SequencedBmis = std::sync::Arc<
    dyn Fn(
            rtgs_core::entry::Bmi,
        )
            -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Option<Seq>, String>> + Send>>
        + Send
        + Sync,
>;

/// [`SequencedBmis`] over an engine that answers on a channel (the embedded engine's sequencer
/// thread): `ask` sends the question (`Err`: not asked — a full queue, a stopped engine), the
/// answer is awaited off the async threads, at most [`crate::limits::READ_MODEL_WAIT`].
pub fn sequenced_bmis_asked(
    ask: impl Fn(rtgs_core::entry::Bmi) -> Result<crossbeam_channel::Receiver<Result<Option<Seq>, String>>, String>
        + Send
        + Sync
        + 'static,
) -> SequencedBmis {
    let wait = crate::limits::READ_MODEL_WAIT;
    std::sync::Arc::new(move |bmi| {
        let asked = ask(bmi);
        Box::pin(async move {
            let answer = asked?;
            let waited = tokio::task::spawn_blocking(move || answer.recv_timeout(wait)).await;
            match waited {
                Ok(Ok(answer)) => answer,
                Ok(Err(_)) => Err(format!("the engine did not answer within {} ms", wait.as_millis())),
                Err(e) => Err(format!("the question was lost: {e}")),
            }
        })
    })
}

pub struct ReadModel {
    books: RwLock<Books>,
    statements: Option<StatementSource>,
    journal_end: Option<JournalEnd>,
    sequenced_bmis: Option<SequencedBmis>,
    /// The seq of the ledger it started from: outcomes at or below it are the history's.
    seq_start: Seq,
    history: Option<OutcomeHistory>,
    /// Apply up to here: the highest seq known final.
    seq_target: AtomicU64,
    failure: Mutex<Option<String>>,
}

impl Default for ReadModel {
    fn default() -> Self {
        Self::new(Ledger::new(), PluginHost::empty(rtgs_core::entry::CenterId(0)))
    }
}

impl ReadModel {
    /// A read model starting from `ledger` (fresh, or the engine's as stored at start: already
    /// final) with the plugins of `host` (a replica host: `CenterId(0)`, as the centers start or
    /// restored like them); entries after the ledger's seq come through [`ReadModel::run`].
    pub fn new(ledger: Ledger, host: PluginHost) -> Self {
        let seq = ledger.seq_applied();
        let books =
            Books { replica: Replica::new(ledger, host), statements: HashMap::new(), rejected: Vec::new() };
        let model = ReadModel {
            books: RwLock::new(books),
            seq_start: seq,
            history: None,
            statements: None,
            journal_end: None,
            sequenced_bmis: None,
            seq_target: AtomicU64::new(0),
            failure: Mutex::new(None),
        };
        model.advance_to(seq);
        model
    }

    /// Where outcomes before the start are read (the production engine's stored entries).
    pub fn with_history(mut self, history: OutcomeHistory) -> Self {
        self.history = Some(history);
        self
    }

    /// The final outcome of the entry at `seq`, if known: from what this model applied (every
    /// entry since its start is final once applied), else from the history.
    pub async fn outcome(&self, seq: Seq) -> Option<Outcome> {
        if seq > self.seq_start {
            return self.outcome_applied(seq);
        }
        match &self.history {
            Some(history) if seq >= 1 => history(seq).await,
            _ => None,
        }
    }

    fn outcome_applied(&self, seq: Seq) -> Option<Outcome> {
        let books = self.read();
        if seq > books.replica.ledger().seq_applied() {
            return None;
        }
        Some(match books.rejected.binary_search_by_key(&seq, |(s, _)| *s) {
            Ok(i) => Outcome::from_code(books.rejected[i].1).unwrap_or(Outcome::Accepted),
            Err(_) => Outcome::Accepted,
        })
    }

    /// Where the journal's end is asked before a look-up concludes that something does not
    /// exist ([`JournalEnd`]).
    pub fn with_journal_end(mut self, journal_end: JournalEnd) -> Self {
        self.journal_end = Some(journal_end);
        self
    }

    /// The journal's end as the engine tells it now (`None`: the engine gives none; its
    /// final-through view is the cluster's).
    pub async fn journal_end(&self) -> Option<Result<Seq, String>> {
        match &self.journal_end {
            Some(end) => Some(end().await),
            None => None,
        }
    }

    /// Where the `bmi`s of every entry ever sequenced are looked up ([`SequencedBmis`]).
    pub fn with_sequenced_bmis(mut self, sequenced: SequencedBmis) -> Self {
        self.sequenced_bmis = Some(sequenced);
        self
    }

    /// The seq of the entry sequenced under `bmi`, from the engine's index (`None`: the engine
    /// gives none; `Some(Ok(None))`: never sequenced).
    pub async fn sequenced(&self, bmi: rtgs_core::entry::Bmi) -> Option<Result<Option<Seq>, String>> {
        match &self.sequenced_bmis {
            Some(look_up) => Some(look_up(bmi).await),
            None => None,
        }
    }

    /// Where statements are read instead of the lines kept in memory (every line ever made).
    pub fn with_statements(mut self, statements: StatementSource) -> Self {
        self.statements = Some(statements);
        self
    }

    /// A page of `id`'s whole statement from the statement source (`None`: there is none, the
    /// page is the memory's), with the lines through `through` (the seq the answer is as of);
    /// the same paging as [`page_of`].
    pub async fn stored_page(
        &self,
        id: AccountId,
        from: Seq,
        through: Seq,
        limit: usize,
    ) -> Option<Result<Page, String>> {
        let source = self.statements.as_ref()?;
        Some(
            async {
                // One line past the page says whether more follow and where the page may end.
                let lines = source(id, from, through, limit + 1).await?;
                let page = page_of(lines.iter(), limit);
                let one_seq =
                    page.lines.first().map(|l| l.seq).filter(|s| page.lines.iter().all(|l| l.seq == *s));
                match one_seq {
                    // The page is one entry's lines and took every line read: read all of that
                    // entry's lines, and whether any follow.
                    Some(seq) if page.lines.len() == lines.len() && lines.len() > limit => {
                        let lines = source(id, seq, seq, usize::MAX).await?;
                        let more = !source(id, seq + 1, through, 1).await?.is_empty();
                        Ok(Page { lines, next_from_seq: more.then_some(seq + 1), truncated: false })
                    }
                    _ => Ok(page),
                }
            }
            .await,
        )
    }

    fn check(&self) -> Result<(), String> {
        match self.failure.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            Some(reason) => Err(reason.clone()),
            None => Ok(()),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Books> {
        self.books.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` over the replica's plugin host and the seq it is at (every plugin's state as of
    /// everything final the read model applied).
    pub fn plugins<R>(&self, f: impl FnOnce(&PluginHost, Seq) -> R) -> Result<R, String> {
        self.check()?;
        let books = self.read();
        Ok(f(books.replica.host(), books.replica.ledger().seq_applied()))
    }

    /// An account as of the returned seq.
    pub fn account(&self, id: AccountId) -> Result<(Option<Account>, Seq), String> {
        self.check()?;
        let books = self.read();
        let ledger = books.replica.ledger();
        Ok((ledger.account(id).cloned(), ledger.seq_applied()))
    }

    /// For each id, under one lock: `None` if there is no such account, else whether it is
    /// closed — as of everything the read model applied.
    pub fn standing(&self, ids: impl Iterator<Item = AccountId>) -> Result<Vec<Option<bool>>, String> {
        self.check()?;
        let books = self.read();
        Ok(ids.map(|id| books.replica.ledger().account(id).map(|a| a.closed)).collect())
    }

    /// One page of an account's statement: its lines with seq ≥ `from_seq`, oldest first, as
    /// of the returned seq; `None` if the account does not exist. See [`Page`].
    pub fn statement(
        &self,
        id: AccountId,
        from_seq: Seq,
        limit: usize,
    ) -> Result<(Option<(Account, Page)>, Seq), String> {
        self.check()?;
        let books = self.read();
        let seq = books.replica.ledger().seq_applied();
        let Some(account) = books.replica.ledger().account(id).cloned() else { return Ok((None, seq)) };
        let lines = books.statements.get(&id);
        // True when older lines than the first kept one were dropped (bounded memory), or —
        // a model that started from a stored ledger (the production engine after a restart) —
        // lines before its start are asked for and the account's opening is not among its lines.
        let dropped = lines.and_then(|l| l.front()).is_some_and(|first| first.seq > from_seq)
            && lines.is_some_and(|l| l.len() >= STATEMENT_LINES_MAX);
        let opened_here = lines.and_then(|l| l.front()).is_some_and(|first| first.kind == LineKind::Open);
        let before_start = self.seq_start > 0 && from_seq <= self.seq_start && !opened_here;
        let truncated = dropped || before_start;
        let mut page =
            lines.map(|l| page_of(l.iter().filter(|x| x.seq >= from_seq), limit)).unwrap_or_default();
        page.truncated = truncated;
        Ok((Some((account, page)), seq))
    }

    pub fn advance_to(&self, seq: Seq) {
        self.seq_target.fetch_max(seq, Ordering::AcqRel);
    }

    pub fn seq_target(&self) -> Seq {
        self.seq_target.load(Ordering::Acquire)
    }

    pub fn seq_applied(&self) -> Seq {
        self.read().replica.ledger().seq_applied()
    }

    /// The read model's loop, on its own thread until `stop` (or the feed closes): applies the
    /// fed entries, in seq order, up to the highest seq known final. A failure (an entry out of
    /// order: the source is broken) is kept and answers every later read.
    pub fn run(&self, mut feed: Box<dyn EntryFeed>, final_through: FinalThrough, stop: &AtomicBool) {
        let result = (|| {
            let mut pending: VecDeque<Entry> = VecDeque::new();
            let mut fed = Vec::new();
            while !stop.load(Ordering::Acquire) {
                // Read ahead of finality by a bounded amount only: the feed holds the rest.
                let mut waited = false;
                if pending.len() < crate::limits::READ_MODEL_AHEAD_MAX {
                    fed.clear();
                    match feed.next_batch(&mut fed, READ_MODEL_POLL)? {
                        Fed::Entries => pending.extend(fed.drain(..)),
                        Fed::Idle => waited = true,
                        Fed::Closed if pending.is_empty() => return Ok(()),
                        Fed::Closed => {}
                    }
                }
                self.advance_to(final_through());
                let target = self.seq_target.load(Ordering::Acquire);
                if pending.front().is_none_or(|e| e.seq > target) {
                    if !waited {
                        std::thread::sleep(READ_MODEL_POLL);
                    }
                    continue;
                }
                self.apply_up_to(&mut pending, target)?;
            }
            Ok(())
        })();
        if let Err(e) = result {
            *self.failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
        }
    }

    /// Applies the pending entries at or below `target` under one write lock; an entry already
    /// applied is skipped (a feed that starts before the stored ledger), one out of seq order is
    /// an error.
    fn apply_up_to(&self, pending: &mut VecDeque<Entry>, target: Seq) -> Result<(), String> {
        let mut books = self.books.write().unwrap_or_else(|e| e.into_inner());
        while let Some(entry) = pending.pop_front() {
            if entry.seq > target {
                pending.push_front(entry);
                break;
            }
            let expected = books.replica.ledger().seq_applied() + 1;
            if entry.seq < expected {
                continue;
            }
            if entry.seq != expected {
                return Err(format!(
                    "the read model got seq {} where seq {expected} was due: it stops",
                    entry.seq
                ));
            }
            books.apply(&entry);
        }
        Ok(())
    }
}

/// One page of a statement (the paging contract of both engines).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Page {
    pub lines: Vec<Line>,
    /// Where the next page starts (`from_seq`), when there are lines after this page.
    pub next_from_seq: Option<Seq>,
    /// Lines before `from_seq`'s first kept line were dropped (the embedded engine keeps the
    /// last [`STATEMENT_LINES_MAX`] of an account in memory).
    pub truncated: bool,
}

/// The first `limit` of `lines` (in seq order) as a page whose cursor is a seq: a page never
/// ends inside one seq's lines (one entry may move an account more than once — a plugin's hold
/// and its settlement), so that the next page, from the next seq, misses nothing. If the first
/// seq alone has more than `limit` lines, the page holds all of them (a few at most: the lines
/// one entry makes).
pub fn page_of<'a>(lines: impl Iterator<Item = &'a Line>, limit: usize) -> Page {
    let mut out: Vec<Line> = Vec::with_capacity(limit.min(STATEMENT_LINES_MAX));
    let mut lines = lines.peekable();
    while let Some(line) = lines.next() {
        out.push(line.clone());
        let same_seq_follows = lines.peek().is_some_and(|next| next.seq == line.seq);
        if out.len() >= limit && !same_seq_follows {
            break;
        }
        if out.len() >= limit && out.first().is_some_and(|f| f.seq != line.seq) {
            // Cut before this seq's lines: they start the next page.
            let seq = line.seq;
            out.retain(|l| l.seq != seq);
            return Page { next_from_seq: Some(seq), lines: out, truncated: false };
        }
    }
    let next_from_seq = match (lines.peek(), out.last()) {
        (Some(_), Some(last)) => Some(last.seq + 1),
        _ => None,
    };
    Page { lines: out, next_from_seq, truncated: false }
}

/// Reads the engine's highest final seq.
pub type FinalThrough = std::sync::Arc<dyn Fn() -> Seq + Send + Sync>;

#[cfg(test)]
mod tests {
    use super::*;
    use rtgs_core::entry::{Bmi, CenterId, Currency, Payload, PluginCommand, PluginKind};
    use rtgs_core::ledger::LedgerIntent;
    use rtgs_core::plugin::{Effect, Plugin, PluginDecodeError, Step};
    use std::sync::Arc;

    /// Moves money through intents: op 1 holds 30 of account 1 (hold id = seq), op 2 settles
    /// hold body[0] to account 2, op 3 releases hold body[0], op 4 posts 5 from 2 to 1 and
    /// op 5 reverses that posting.
    #[derive(Default)]
    struct Mover;

    impl Plugin for Mover {
        const KIND: PluginKind = PluginKind::Withdrawal;
        fn apply(&mut self, entry: &Entry, step: &mut Step<'_>) {
            let Payload::Plugin(c) = &entry.payload else { return };
            let id = c.body.first().map_or(0, |b| u64::from(*b));
            let intent = match c.op {
                1 => LedgerIntent::Hold { id: entry.seq, account: AccountId(1), amount_minor: 30 },
                2 => LedgerIntent::Settle { id, to: AccountId(2) },
                3 => LedgerIntent::Release { id },
                4 => LedgerIntent::Post { from: AccountId(2), to: AccountId(1), amount_minor: 5 },
                _ => LedgerIntent::Reverse { from: AccountId(2), to: AccountId(1), amount_minor: 5 },
            };
            let _ = step.apply_intents(&[intent]);
        }
        fn state_hash(&self) -> u64 {
            0
        }
        fn digest(&self) -> u64 {
            0
        }
        fn pending_effects(&self, _: &mut Vec<Effect>) {}
        fn encode(&self, _: &mut Vec<u8>) {}
        fn decode(_: &[u8]) -> Result<Self, PluginDecodeError> {
            Ok(Mover)
        }
    }

    struct VecFeed(Option<Vec<Entry>>);

    impl EntryFeed for VecFeed {
        fn next_batch(&mut self, out: &mut Vec<Entry>, _: std::time::Duration) -> Result<Fed, String> {
            Ok(match self.0.take() {
                Some(entries) => {
                    out.extend(entries);
                    Fed::Entries
                }
                None => Fed::Closed,
            })
        }
    }

    #[test]
    fn statements_show_the_plugins_holds_settlements_postings_and_reversals() {
        let eur = Currency::new(b"EUR").unwrap_or_else(|e| panic!("{e}"));
        let op = |op: u16, body: Vec<u8>| {
            Payload::Plugin(PluginCommand { plugin: PluginKind::Withdrawal, op, body })
        };
        let payloads = [
            Payload::AccountOpen { account: AccountId(1), currency: eur },
            Payload::AccountOpen { account: AccountId(2), currency: eur },
            Payload::AccountFund { account: AccountId(1), amount_minor: 100 },
            op(1, vec![]),  // seq 4: hold 30 (id 4)
            op(1, vec![]),  // seq 5: hold 30 (id 5)
            op(2, vec![4]), // seq 6: settle hold 4 to account 2
            op(3, vec![5]), // seq 7: release hold 5
            op(4, vec![]),  // seq 8: post 5 from 2 to 1
            op(5, vec![]),  // seq 9: reverse it
        ];
        let entries: Vec<Entry> = payloads
            .into_iter()
            .enumerate()
            .map(|(i, payload)| {
                let seq = i as u64 + 1;
                let bmi = Bmi::numbered("M", seq).unwrap_or_else(|e| panic!("{e}"));
                Entry { seq, epoch: 1, timestamp_us: seq, origin: CenterId(1), bmi, payload }
            })
            .collect();
        let host = PluginHost::new(CenterId(0), vec![Box::new(Mover)]).unwrap_or_else(|e| panic!("{e}"));
        let model = ReadModel::new(Ledger::new(), host);
        model.run(Box::new(VecFeed(Some(entries))), Arc::new(|| 9), &AtomicBool::new(false));
        let lines = |a: u64| -> Vec<(Seq, &'static str, u64, u64)> {
            let (found, _) = model.statement(AccountId(a), 0, 100).unwrap_or_else(|e| panic!("{e}"));
            let (_, page) = found.unwrap_or_else(|| panic!("account {a}"));
            page.lines.iter().map(|l| (l.seq, l.kind.name(), l.amount_minor, l.balance_after_minor)).collect()
        };
        assert_eq!(
            lines(1),
            vec![
                (1, "OPEN", 0, 0),
                (3, "FUND", 100, 100),
                (4, "HOLD", 30, 70),
                (5, "HOLD", 30, 40),
                (6, "SETTLE", 30, 40),
                (7, "RELEASE", 30, 70),
                (8, "CREDIT", 5, 75),
                (9, "REVERSAL_DEBIT", 5, 70),
            ]
        );
        assert_eq!(
            lines(2),
            vec![
                (2, "OPEN", 0, 0),
                (6, "CREDIT", 30, 30),
                (8, "DEBIT", 5, 25),
                (9, "REVERSAL_CREDIT", 5, 30)
            ]
        );
        let (a1, seq) = model.account(AccountId(1)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((a1.map(|a| (a.balance_minor, a.held_minor)), seq), (Some((70, 0)), 9));
    }

    fn line(seq: Seq, amount_minor: u64) -> Line {
        let bmi = Bmi::numbered("P", seq).unwrap_or(Bmi::NONE);
        Line { seq, bmi, kind: LineKind::Credit, counterparty: None, amount_minor, balance_after_minor: 0 }
    }

    /// Pages never end inside one seq's lines, and following `next_from_seq` from 0 yields every
    /// line exactly once, whatever the limit.
    #[test]
    fn pages_follow_seqs_and_together_hold_every_line_once() {
        // Seq 3 moves the account three times (a plugin's hold, settle, credit), seq 5 twice.
        let seqs = [1, 2, 3, 3, 3, 4, 5, 5, 6, 7];
        let all: Vec<Line> = seqs.iter().enumerate().map(|(i, s)| line(*s, i as u64)).collect();
        for limit in 1..=all.len() + 1 {
            let (mut got, mut from, mut pages) = (Vec::new(), 0, 0);
            loop {
                let page = page_of(all.iter().filter(|l| l.seq >= from), limit);
                pages += 1;
                assert!(pages <= all.len() + 1, "limit {limit}: paging ends");
                assert!(!page.lines.is_empty(), "limit {limit}: no empty page before the end");
                let last = page.lines.last().map_or(0, |l| l.seq);
                let after: Vec<&Line> = all.iter().filter(|l| l.seq > last).collect();
                // Never cut inside a seq; more than `limit` only for one seq's lines.
                assert!(
                    all.iter().filter(|l| l.seq == last).count()
                        <= page.lines.iter().filter(|l| l.seq == last).count()
                );
                if page.lines.len() > limit {
                    assert!(page.lines.iter().all(|l| l.seq == page.lines[0].seq), "limit {limit}");
                }
                got.extend(page.lines.iter().map(|l| l.amount_minor));
                match page.next_from_seq {
                    Some(next) => {
                        assert!(!after.is_empty() && next > last, "limit {limit}");
                        from = next;
                    }
                    None => {
                        assert!(after.is_empty(), "limit {limit}: next_from_seq exactly when more follow");
                        break;
                    }
                }
            }
            assert_eq!(
                got,
                (0..all.len() as u64).collect::<Vec<_>>(),
                "limit {limit}: every line once, in order"
            );
        }
        assert_eq!(page_of([].iter(), 5), Page::default());
    }
}
