//! One center's durable state (database `rtgs_dc1..3`): one transaction per commit of the
//! core's [`Center`](rtgs_core::center::Center) ([`Commit`]: the entries applied since the last
//! one, the ledger rows they changed, and the finality progress).
//!
//! The transaction locks the watermark row and refuses a commit that does not start right after
//! it ([`StoreError::OutOfOrder`]): a seq is never applied twice, whatever the journal consumer
//! re-delivers after a restart. It then writes the applied entries as one `applied_batch` row
//! of arrays (read one seq by [`CenterStore::final_outcome`]'s index probe; the view
//! `applied_entry` unnests them for ad-hoc queries), their statement lines, the changed accounts
//! as one `account_change` row (folded into `account` every [`FOLD_COMMITS`] commits: read
//! balances through the `account_now` view), the holds that changed and the funded totals,
//! records finality ranges and moves the watermark — all or nothing, sent as one pipeline; only
//! the statement lines of a commit of more than [`PIPELINED_COMMIT_ENTRIES_MAX`] entries are
//! COPYed in binary first. Stream positions are stored as the last offset done (`-1`: none),
//! the core's as the next one to read: the conversion is here and nowhere else.
//!
//! The `finalizer_tally` table (migration 0001) is kept in the schema but never written: pending
//! tallies are rebuilt by reading the ack stream again from `ack_offset + 1` (the center's docs).

use crate::StoreError;
use deadpool_postgres::Pool;
use futures_util::{pin_mut, TryStreamExt};
use rtgs_core::center::Commit;
use rtgs_core::entry::{AccountId, Bmi, CenterId, Currency, Outcome, Payload, PluginKind, Seq};
use rtgs_core::ledger::{Account, Applied, Hold, HoldKey, Ledger};
use rtgs_core::statement::{Line, LineKind};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::types::{ToSql, Type};

/// What a batch commit does with the plugin host's stored state (`plugin_state`, see
/// [`crate::plugin_store`]): written in the batch's own transaction, so that plugin state and the
/// ledger watermark always move together and a restart never sees one without the other.
#[derive(Clone, Copy, Debug)]
pub enum PluginSave<'a> {
    /// No plugins: the transaction does not touch `plugin_state` (the plain path's cost).
    None,
    /// No plugin took an entry of this batch: the stored rows move to the batch's last seq.
    Advance,
    /// The plugin state changed: these checkpoints, taken after the batch's last entry.
    Snapshot(&'a [rtgs_core::plugin_host::PluginCheckpoint]),
}

/// What a restarting center resumes from.
pub struct Stored {
    pub ledger: Ledger,
    pub journal_offset: i64,
    pub seq_unfinal_first: Seq,
    pub ack_offset: i64,
    pub seq_notice_from: Seq,
    /// Every seq up to here has this center's ack in the applied-acks topic (the broker confirmed
    /// it); `None`: not known (a database from before migration 0008).
    pub acks_published_through: Option<Seq>,
}

impl Stored {
    /// The journal position to read next (the core's `Restore::journal_next`).
    pub fn journal_next(&self) -> u64 {
        (self.journal_offset + 1).max(0) as u64
    }
    /// The ack stream position to read next (the core's `Restore::ack_next`).
    pub fn ack_next(&self) -> u64 {
        (self.ack_offset + 1).max(0) as u64
    }
}

#[derive(Clone)]
pub struct CenterStore {
    pool: Pool,
    /// What `account_change` holds (as this process last committed or read it): when to fold.
    pending: Arc<Pending>,
}

/// The changed-balance rows not folded into `account` yet (center migration 0009). Only the
/// moment of the next fold depends on it: a count that is off (a commit whose outcome was not
/// seen) folds early or late, never wrongly — the fold reads the rows themselves.
struct Pending {
    commits: AtomicUsize,
    rows: AtomicUsize,
}

impl Pending {
    /// Whether a commit changing `changed` accounts folds (its own row included).
    fn fold_due(&self, changed: usize) -> bool {
        changed > 0
            && (self.commits.load(Relaxed) + 1 >= FOLD_COMMITS
                || self.rows.load(Relaxed) + changed >= FOLD_ROWS)
    }

    /// What is pending now: after a load, a fold, or a commit that added its row.
    fn set(&self, commits: usize, rows: usize) {
        self.commits.store(commits, Relaxed);
        self.rows.store(rows, Relaxed);
    }

    fn added(&self, changed: usize) {
        if changed > 0 {
            self.commits.fetch_add(1, Relaxed);
            self.rows.fetch_add(changed, Relaxed);
        }
    }
}

/// A commit folds the pending balance rows into `account` once this many commits' rows are
/// pending (with its own), or this many account rows: each account's latest values are then
/// written once for all of them. Measured in psql (migration 0009): with 8,700 of 10,000
/// accounts changed per commit, 16 commits fold in ≈ 170 ms — 10.5 ms a commit against 33 ms
/// for upserting every changed balance with every commit. A ledger of many accounts rarely
/// changed folds by rows, at about the cost of the upserts it replaces (plus one sort).
pub const FOLD_COMMITS: usize = 16;
pub const FOLD_ROWS: usize = 160_000;

fn i64_of(v: u64) -> Result<i64, StoreError> {
    i64::try_from(v).map_err(|_| StoreError::Corrupt(format!("{v} does not fit a bigint")))
}

/// The stored "last offset done" for a "next offset to read" (`-1`: nothing done yet).
fn offset_before(next: u64) -> Result<i64, StoreError> {
    Ok(i64_of(next)? - 1)
}

/// `(kind, debtor, creditor, amount, currency)` columns of an entry.
fn columns(p: &Payload) -> (i16, Option<u64>, Option<u64>, Option<u64>, Option<Currency>) {
    match p {
        Payload::Transfer(t) => {
            (1, Some(t.debtor.0), Some(t.creditor.0), Some(t.amount_minor), Some(t.currency))
        }
        Payload::AccountOpen { account, currency } => (2, Some(account.0), None, None, Some(*currency)),
        Payload::AccountFund { account, amount_minor } => {
            (3, Some(account.0), None, Some(*amount_minor), None)
        }
        Payload::AccountClose { account } => (4, Some(account.0), None, None, None),
        Payload::Tick => (5, None, None, None, None),
        Payload::Plugin(_) => (6, None, None, None, None),
    }
}

impl CenterStore {
    pub fn new(pool: Pool) -> Self {
        // Unknown until `load`: the first commit folds whatever is pending.
        let pending = Pending { commits: FOLD_COMMITS.into(), rows: 0.into() };
        CenterStore { pool, pending: Arc::new(pending) }
    }

    /// Commits one [`Commit`] atomically (an empty one moves the finality progress only);
    /// refuses one that does not follow the watermark. `plugins` says what happens to the stored
    /// plugin state, in the same transaction, at the commit's last seq.
    pub async fn commit(&self, c: &Commit, plugins: PluginSave<'_>) -> Result<(), StoreError> {
        self.commit_noting(c, plugins, None).await
    }

    /// [`Self::commit`], noting in the same transaction how far the broker confirmed this
    /// center's own acks (`None`: as stored). Only the publisher knows; the value is monotone.
    pub async fn commit_noting(
        &self,
        c: &Commit,
        plugins: PluginSave<'_>,
        acks_published_through: Option<Seq>,
    ) -> Result<(), StoreError> {
        if c.entries.len() != c.applied.len() {
            return Err(StoreError::Corrupt("entries and acks differ in length".into()));
        }
        for ((e, a), want) in c.entries.iter().zip(&c.applied).zip(c.applied.first().map_or(0, |a| a.seq)..) {
            if e.seq != a.seq {
                return Err(StoreError::Corrupt(format!("entry {} paired with ack {}", e.seq, a.seq)));
            }
            if a.seq != want {
                return Err(StoreError::Corrupt(format!(
                    "a commit's seqs must follow each other: {} after {}",
                    a.seq,
                    want - 1
                )));
            }
        }
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        // Prepared once per connection (the cache answers at once after that), before anything is
        // sent: the statements below go out in the order they are written.
        let (check, wm, final_ranges) = tokio::try_join!(
            tx.prepare_cached("SELECT seq_applied FROM watermark WHERE id = 1 FOR UPDATE"),
            tx.prepare_cached(WATERMARK),
            tx.prepare_cached(FINALITY),
        )?;
        let (Some(first), Some(last)) = (c.applied.first(), c.applied.last()) else {
            // Progress only: lock, record finality, move the positions — one round trip.
            let progress = Positions::of(c, acks_published_through, None)?;
            let wm_params = progress.params();
            let (locked, ranges, moved) = tokio::join!(
                tx.query_one(&check, &[]),
                record_finality(&tx, &final_ranges, c),
                tx.execute(&wm, &wm_params),
            );
            locked?;
            ranges?;
            moved?;
            tx.commit().await?;
            return Ok(());
        };
        let lines_by_copy = c.applied.len() > PIPELINED_COMMIT_ENTRIES_MAX && !c.lines.is_empty();
        let rows = Rows::of(c, !lines_by_copy)?;
        let positions = Positions::of(c, acks_published_through, Some((last.seq, last.state_hash)))?;
        let (wm_params, account_params) = (positions.params(), rows.account_params());
        let changed = c.changed.accounts.len();
        let fold = self.pending.fold_due(changed);
        let (accounts, advance) = tokio::try_join!(tx.prepare_cached(INSERT_CHANGES), async {
            match plugins {
                PluginSave::Advance => tx.prepare_cached(crate::plugin_store::ADVANCE).await.map(Some),
                _ => Ok(None),
            }
        })?;
        // Every write after the entries and lines, pipelined; its answers looked at once all came.
        let rest = async {
            let (r_accounts, r_holds, r_funded, r_ranges, r_wm, r_advance) = tokio::join!(
                tx.execute(&accounts, &account_params),
                write_holds(&tx, &c.changed.holds),
                write_funded(&tx, c),
                record_finality(&tx, &final_ranges, c),
                tx.execute(&wm, &wm_params),
                async {
                    match &advance {
                        Some(st) => tx.execute(st, &[&positions.applied]).await.map(Some),
                        None => Ok(None),
                    }
                },
            );
            for r in [r_accounts, r_funded, r_ranges, r_wm] {
                r?;
            }
            r_holds?;
            match r_advance? {
                Some(0) => Err(no_plugin_state()),
                _ => Ok(()),
            }
        };
        let (entries, lines) =
            tokio::try_join!(tx.prepare_cached(INSERT_ENTRIES), tx.prepare_cached(INSERT_LINES))?;
        if lines_by_copy {
            // Many statement lines: binary COPY first (the lock and its check before it).
            in_order(tx.query_one(&check, &[]).await?.get::<_, i64>(0) as u64, first.seq)?;
            copy_lines(&tx, c).await?;
        }
        // Everything else in one pipeline: the lock and its check first (the server runs the
        // statements in order, so it reads the watermark before this commit moves it), the
        // entries and lines, then the rest; the check's answer is looked at first (an
        // out-of-order commit is refused as such, whatever the writes then ran into).
        let (entry_params, line_params) = (rows.entry_params(), rows.line_params());
        let (locked, r_entries, r_lines, r_rest) = tokio::join!(
            async {
                if lines_by_copy {
                    Ok(None)
                } else {
                    tx.query_one(&check, &[]).await.map(Some)
                }
            },
            tx.execute(&entries, &entry_params),
            async {
                if lines_by_copy || c.lines.is_empty() {
                    Ok(0)
                } else {
                    tx.execute(&lines, &line_params).await
                }
            },
            rest,
        );
        if let Some(locked) = locked? {
            in_order(locked.get::<_, i64>(0) as u64, first.seq)?;
        }
        r_entries?;
        r_lines?;
        r_rest?;
        if let PluginSave::Snapshot(cps) = plugins {
            crate::plugin_store::save_checkpoints_in(&tx, last.seq, cps).await?
        }
        if fold {
            tx.batch_execute(FOLD).await?;
        }
        tx.commit().await?;
        if fold {
            self.pending.set(0, 0);
        } else {
            self.pending.added(changed);
        }
        Ok(())
    }

    /// Restores `host` from the stored `plugin_state` rows ([`crate::plugin_store::load`]): the
    /// seq they were saved at, `None` if none are stored. An empty host with rows stored is an
    /// error (the stored plugin set differs).
    pub async fn load_plugins(
        &self,
        host: &mut rtgs_core::plugin_host::PluginHost,
    ) -> Result<Option<Seq>, StoreError> {
        let client = self.pool.get().await?;
        crate::plugin_store::load(&client, host).await
    }

    /// The stored plugin rows as checkpoints and their seq ([`crate::plugin_store::checkpoints`]);
    /// restore a host from them with [`crate::plugin_store::restore`].
    pub async fn plugin_checkpoints(
        &self,
    ) -> Result<Option<(Seq, Vec<rtgs_core::plugin_host::PluginCheckpoint>)>, StoreError> {
        let client = self.pool.get().await?;
        crate::plugin_store::checkpoints(&client).await
    }

    /// The seq this center has durably applied (to settle a commit whose outcome was not seen).
    pub async fn seq_applied(&self) -> Result<Seq, StoreError> {
        let client = self.pool.get().await?;
        let row = client.query_one("SELECT seq_applied FROM watermark WHERE id = 1", &[]).await?;
        Ok(row.get::<_, i64>(0) as u64)
    }

    /// The outcome of the entry at `seq` if this center applied it and it is final here (below
    /// the watermark's first unfinal seq): the answer to a retry of any age. One look-up by
    /// primary key.
    pub async fn final_outcome(&self, seq: Seq) -> Result<Option<Outcome>, StoreError> {
        let client = self.pool.get().await?;
        let row = client
            .query_opt(
                format!(
                    "SELECT {} FROM watermark w WHERE w.id = 1 AND $1 < w.seq_unfinal_first",
                    applied_at("outcomes", "$1")
                )
                .as_str(),
                &[&i64_of(seq)?],
            )
            .await?;
        row.and_then(|r| r.get::<_, Option<i16>>(0))
            .map(|code| {
                Outcome::from_code(code as u16)
                    .ok_or_else(|| StoreError::Corrupt(format!("applied entry {seq}: outcome")))
            })
            .transpose()
    }

    /// At most `max` statement lines of `account` with `from ≤ seq ≤ through`, oldest first, each
    /// with its entry's `bmi` (one index range scan; each line's batch by one index probe).
    pub async fn statement_lines(
        &self,
        account: AccountId,
        from: Seq,
        through: Seq,
        max: usize,
    ) -> Result<Vec<Line>, StoreError> {
        let client = self.pool.get().await?;
        let limit = i64::try_from(max).unwrap_or(i64::MAX);
        let rows = client
            .query(
                format!(
                    "SELECT l.seq, l.kind, l.counterparty, l.amount_minor, l.balance_after_minor, {}
                       FROM statement_line l
                      WHERE l.account = $1 AND l.seq >= $2 AND l.seq <= $3
                      ORDER BY l.seq, l.k LIMIT $4",
                    applied_at("bmis", "l.seq")
                )
                .as_str(),
                &[&i64_of(account.0)?, &i64_of(from)?, &i64_of(through)?, &limit],
            )
            .await?;
        rows.iter()
            .map(|r| {
                let seq = r.get::<_, i64>(0) as u64;
                let corrupt = |what: &str| StoreError::Corrupt(format!("statement_line {seq}: {what}"));
                let kind = LineKind::from_code(r.get(1)).ok_or_else(|| corrupt("kind"))?;
                let counterparty = r.get::<_, Option<i64>>(2).map(|a| AccountId(a as u64));
                let bmi_text: Option<&str> = r.get(5);
                let bmi = Bmi::new(bmi_text.ok_or_else(|| corrupt("no applied entry"))?.as_bytes())
                    .map_err(|_| corrupt("bmi"))?;
                let (amount_minor, balance_after_minor) =
                    (r.get::<_, i64>(3) as u64, r.get::<_, i64>(4) as u64);
                Ok(Line { seq, bmi, kind, counterparty, amount_minor, balance_after_minor })
            })
            .collect()
    }

    /// What this center applied from `from` on, in seq order: its acks (re-sent after a restart,
    /// so that no ack is lost) with each entry's origin and `bmi` (for the origin's notices).
    pub async fn applied_since(&self, from: Seq) -> Result<Vec<(Applied, CenterId, Bmi)>, StoreError> {
        self.applied_from(from, usize::MAX).await
    }

    /// At most `max` applied entries from `from` on, in seq order (the acks a stalled finality
    /// asks for again: the oldest are the ones it waits for).
    pub async fn applied_from(
        &self,
        from: Seq,
        max: usize,
    ) -> Result<Vec<(Applied, CenterId, Bmi)>, StoreError> {
        let client = self.pool.get().await?;
        // Every batch holds at least one seq: `max + 1` batches (the first may start before
        // `from`) hold `max` entries from `from` on, if so many were applied.
        let batches = i64::try_from(max).unwrap_or(i64::MAX).saturating_add(1);
        let from_i = i64_of(from)?;
        let rows = client
            .query_raw(
                "SELECT seq_first, outcomes, state_hashes, origins, bmis FROM applied_batch
                  WHERE seq_first >= COALESCE((SELECT max(seq_first) FROM applied_batch WHERE seq_first <= $1), 0)
                  ORDER BY seq_first LIMIT $2",
                [&from_i as &(dyn ToSql + Sync), &batches],
            )
            .await?;
        pin_mut!(rows);
        let mut out = Vec::new();
        while out.len() < max {
            let Some(r) = rows.try_next().await? else { break };
            let seq_first = r.get::<_, i64>(0) as u64;
            let corrupt = |what: &str| StoreError::Corrupt(format!("applied batch {seq_first}: {what}"));
            let (outcomes, hashes): (Vec<i16>, Vec<i64>) = (r.get(1), r.get(2));
            let (origins, bmis): (Vec<i16>, Vec<&str>) = (r.get(3), r.get(4));
            if [hashes.len(), origins.len(), bmis.len()].iter().any(|n| *n != outcomes.len()) {
                return Err(corrupt("columns of different lengths"));
            }
            for (i, (((code, hash), origin), bmi_text)) in
                outcomes.iter().zip(&hashes).zip(&origins).zip(&bmis).enumerate()
            {
                let seq = seq_first + i as u64;
                if seq < from {
                    continue;
                }
                if out.len() == max {
                    break;
                }
                let outcome = Outcome::from_code(*code as u16).ok_or_else(|| corrupt("outcome"))?;
                let bmi = if bmi_text.is_empty() {
                    Bmi::NONE
                } else {
                    Bmi::new(bmi_text.as_bytes()).map_err(|_| corrupt("bmi"))?
                };
                let origin = u8::try_from(*origin).map_err(|_| corrupt("origin"))?;
                out.push((Applied { seq, outcome, state_hash: *hash as u64 }, CenterId(origin), bmi));
            }
        }
        Ok(out)
    }

    /// The broker generation this center's topic offsets refer to, and the offsets (journal,
    /// acks).
    pub async fn broker_position(&self) -> Result<(i64, i64, i64), StoreError> {
        let client = self.pool.get().await?;
        let r = client
            .query_one(
                "SELECT broker_generation, journal_offset, ack_offset FROM watermark WHERE id = 1",
                &[],
            )
            .await?;
        Ok((r.get(0), r.get(1), r.get(2)))
    }

    /// Adopts a rebuilt broker's `generation`: the journal and the acks are read again from the
    /// start of the new topics (what was applied is dropped by seq; finality re-counts acks). The
    /// lost topic took this center's acks with it: none is in the new one, so the published mark
    /// goes back to 0 and the start publishes every ack again (a center behind the others needs
    /// them: the others finalized those seqs and will not ack them again on their own).
    pub async fn adopt_broker_generation(&self, generation: i64) -> Result<(), StoreError> {
        let client = self.pool.get().await?;
        client
            .execute(
                "UPDATE watermark SET broker_generation = $1, journal_offset = -1, ack_offset = -1,
                        acks_published_through = 0, updated_at = now() WHERE id = 1 AND broker_generation < $1",
                &[&generation],
            )
            .await?;
        Ok(())
    }

    /// Reads the center back: ledger (checked for conservation) and its positions.
    pub async fn load(&self) -> Result<Stored, StoreError> {
        let client = self.pool.get().await?;
        let w = client
            .query_one(
                format!(
                    "SELECT w.seq_applied, w.state_hash, w.journal_offset, w.seq_unfinal_first, w.ack_offset,
                            COALESCE({}, 0), w.seq_notice_from, w.acks_published_through
                       FROM watermark w WHERE id = 1",
                    applied_at("timestamps_us", "w.seq_applied")
                )
                .as_str(),
                &[],
            )
            .await?;
        let pending = client
            .query_one("SELECT count(*), COALESCE(sum(cardinality(ids)), 0)::bigint FROM account_change", &[])
            .await?;
        let accounts = client
            .query("SELECT id, currency, balance_minor, closed FROM account_now ORDER BY id", &[])
            .await?
            .iter()
            .map(|r| {
                let currency = Currency::new(r.get::<_, &str>(1).as_bytes())
                    .map_err(|_| StoreError::Corrupt("account currency".into()))?;
                Ok(Account {
                    id: AccountId(r.get::<_, i64>(0) as u64),
                    currency,
                    balance_minor: r.get::<_, i64>(2) as u64,
                    held_minor: 0, // derived from the holds by `Ledger::restore`
                    closed: r.get(3),
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        let funded = client
            .query("SELECT currency, funded_minor FROM funded ORDER BY currency", &[])
            .await?
            .iter()
            .map(|r| {
                let c = Currency::new(r.get::<_, &str>(0).as_bytes())
                    .map_err(|_| StoreError::Corrupt("funded currency".into()))?;
                Ok((c, r.get::<_, i64>(1) as u64))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        let holds = client
            .query("SELECT plugin, id, account, amount_minor FROM hold ORDER BY plugin, id", &[])
            .await?
            .iter()
            .map(|r| {
                let plugin = u8::try_from(r.get::<_, i16>(0))
                    .ok()
                    .and_then(PluginKind::from_u8)
                    .ok_or_else(|| StoreError::Corrupt("hold plugin".into()))?;
                let key = HoldKey { plugin, id: r.get::<_, i64>(1) as u64 };
                Ok((key, AccountId(r.get::<_, i64>(2) as u64), r.get::<_, i64>(3) as u64))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        let ledger = Ledger::restore(
            accounts,
            funded,
            holds,
            w.get::<_, i64>(0) as u64,
            w.get::<_, i64>(1) as u64,
            w.get::<_, i64>(5) as u64,
        )
        .map_err(|_| StoreError::Corrupt("stored balances do not add up to the funded totals".into()))?;
        self.pending.set(pending.get::<_, i64>(0) as usize, pending.get::<_, i64>(1) as usize);
        Ok(Stored {
            ledger,
            journal_offset: w.get(2),
            seq_unfinal_first: w.get::<_, i64>(3) as u64,
            ack_offset: w.get(4),
            seq_notice_from: w.get::<_, i64>(6) as u64,
            acks_published_through: w.get::<_, Option<i64>>(7).map(|s| s as u64),
        })
    }
}

const LINE_TYPES: [Type; 7] =
    [Type::INT8, Type::INT8, Type::INT2, Type::INT2, Type::INT8, Type::INT8, Type::INT8];

/// The commit's statement lines (`k`: the line's place among its entry's lines).
async fn copy_lines(tx: &deadpool_postgres::Transaction<'_>, c: &Commit) -> Result<(), StoreError> {
    let sink = tx
        .copy_in(
            "COPY statement_line (account, seq, k, kind, counterparty, amount_minor, balance_after_minor)
             FROM STDIN BINARY",
        )
        .await?;
    let writer = BinaryCopyInWriter::new(sink, &LINE_TYPES);
    pin_mut!(writer);
    let (mut seq, mut k) = (0, 0i16);
    for l in &c.lines {
        (seq, k) = if l.line.seq == seq { (seq, k + 1) } else { (l.line.seq, 0) };
        let row: [&(dyn ToSql + Sync); 7] = [
            &i64_of(l.account.0)?,
            &i64_of(l.line.seq)?,
            &k,
            &l.line.kind.code(),
            &l.line.counterparty.map(|a| i64_of(a.0)).transpose()?,
            &i64_of(l.line.amount_minor)?,
            &i64_of(l.line.balance_after_minor)?,
        ];
        writer.as_mut().write(&row).await?;
    }
    writer.finish().await?;
    Ok(())
}

/// A commit goes to the server as one pipeline (every statement sent before any answer is
/// awaited: three round trips for the whole transaction, where one statement after the other
/// took thirteen — most of an idle cluster's commit time). The statement lines of a commit of at
/// most this many entries go in it as `INSERT … UNNEST`; a larger one (a merged commit, a
/// catch-up, a busy cluster) COPYs its lines in binary first, which costs two round trips but
/// less per row. Measured when the entries were rows too (`bench/cluster.sh 1000000 0`,
/// bench/README.md): at 1,024 the cluster's phase 1 fell to 26,064 · 39,658/s against 46,289 ·
/// 45,945/s before (`UNNEST` of a dozen arrays costs the server more per row than binary COPY);
/// at 64 it did not fall. The entries are one row of arrays whatever the size (migration 0010).
pub const PIPELINED_COMMIT_ENTRIES_MAX: usize = 64;

/// The element `column` of `applied_batch` (center migration 0010) for the seq `seq` (an SQL
/// expression), as a scalar subquery: the batch with the greatest `seq_first` at or below it (one
/// index probe), its element `seq - seq_first + 1` — NULL past that batch's end, or with no batch.
/// The one place that knows how a batch lays out its seqs.
pub(crate) fn applied_at(column: &str, seq: &str) -> String {
    format!(
        "(SELECT b.{column}[{seq} - b.seq_first + 1] FROM applied_batch b
           WHERE b.seq_first <= {seq} ORDER BY b.seq_first DESC LIMIT 1)"
    )
}

/// The commit's entries as one `applied_batch` row (center migration 0010).
const INSERT_ENTRIES: &str = "INSERT INTO applied_batch (seq_first, seq_last, epochs, timestamps_us,
        origins, bmis, kinds, debtors, creditors, amounts_minor, currencies, outcomes, state_hashes)
    VALUES ($1, $2, $3::bigint[], $4::bigint[], $5::smallint[], $6::text[], $7::smallint[], $8::bigint[],
        $9::bigint[], $10::bigint[], $11::text[], $12::smallint[], $13::bigint[])";
const INSERT_LINES: &str = "INSERT INTO statement_line (account, seq, k, kind, counterparty, amount_minor,
        balance_after_minor)
    SELECT * FROM UNNEST($1::bigint[], $2::bigint[], $3::smallint[], $4::smallint[], $5::bigint[],
        $6::bigint[], $7::bigint[])";
/// The commit's changed accounts as one `account_change` row at its last seq ($5); nothing when
/// none changed.
const INSERT_CHANGES: &str = "INSERT INTO account_change (seq, ids, currencies, balances, closed)
    SELECT $5, $1::bigint[], $2::text[], $3::bigint[], $4::bool[] WHERE cardinality($1::bigint[]) > 0";
/// Folds every pending `account_change` row into `account` (the view `account_pending`: each
/// account's values of the latest row holding it, as `account_now` reads them) and deletes them;
/// in the commit's transaction, after its own row.
const FOLD: &str = "SET LOCAL work_mem = '64MB';
    INSERT INTO account (id, currency, balance_minor, closed)
    SELECT id, currency, balance_minor, closed FROM account_pending
    ON CONFLICT (id) DO UPDATE SET balance_minor = EXCLUDED.balance_minor, closed = EXCLUDED.closed;
    DELETE FROM account_change;";
/// One statement moves the whole watermark: the applied seq and state hash when entries were
/// applied ($6, $7; NULL: progress only), and the positions and finality progress always.
const WATERMARK: &str = "UPDATE watermark SET seq_applied = COALESCE($6, seq_applied),
        state_hash = COALESCE($7, state_hash), seq_unfinal_first = $1, ack_offset = $2,
        seq_notice_from = $3, journal_offset = COALESCE($4, journal_offset),
        acks_published_through = GREATEST(acks_published_through, $5), updated_at = now()
    WHERE id = 1";
/// A range re-derived from replayed acks after a restart may already be recorded — or start
/// where a shorter one recorded before the restart started (the same batch boundaries): the row
/// keeps the longer end. (`DO NOTHING` here dropped the rest of such a range for good: drill c
/// once found 49,000 transfers final in a restarted center's status and not in its `finality`.)
/// (Grouped by first seq, so that no statement touches a row twice.)
const FINALITY: &str = "INSERT INTO finality (seq_first, seq_last)
    SELECT f, max(l) FROM UNNEST($1::bigint[], $2::bigint[]) AS r(f, l) GROUP BY f
    ON CONFLICT (seq_first) DO UPDATE SET seq_last = GREATEST(finality.seq_last, EXCLUDED.seq_last)";

/// The commit's first seq must follow the stored watermark: a seq is never applied twice.
fn in_order(seq_applied: Seq, seq_first: Seq) -> Result<(), StoreError> {
    if seq_first == seq_applied + 1 {
        Ok(())
    } else {
        Err(StoreError::OutOfOrder { seq_first, seq_applied })
    }
}

fn no_plugin_state() -> StoreError {
    StoreError::Corrupt("plugins are enabled but no plugin state is stored to advance".into())
}

/// The watermark statement's parameters ([`WATERMARK`]). Positions: the core's "next to read"
/// is stored as "last done"; no journal position (a journal read by seq) leaves the stored one.
struct Positions {
    unfinal_first: i64,
    ack_offset: i64,
    notice_from: i64,
    journal_offset: Option<i64>,
    acks_published: Option<i64>,
    applied: Option<i64>,
    state_hash: Option<i64>,
}

impl Positions {
    fn of(
        c: &Commit,
        acks_published_through: Option<Seq>,
        applied: Option<(Seq, u64)>,
    ) -> Result<Self, StoreError> {
        let p = &c.progress;
        Ok(Positions {
            unfinal_first: i64_of(p.seq_unfinal_first)?,
            ack_offset: offset_before(p.ack_next)?,
            notice_from: i64_of(p.seq_notice_from)?,
            journal_offset: c.journal_next.map(offset_before).transpose()?,
            acks_published: acks_published_through.map(i64_of).transpose()?,
            applied: applied.map(|(s, _)| i64_of(s)).transpose()?,
            // The hash is a u64 stored bit for bit in a bigint.
            state_hash: applied.map(|(_, h)| h as i64),
        })
    }

    fn params(&self) -> [&(dyn ToSql + Sync); 7] {
        [
            &self.unfinal_first,
            &self.ack_offset,
            &self.notice_from,
            &self.journal_offset,
            &self.acks_published,
            &self.applied,
            &self.state_hash,
        ]
    }
}

/// The commit's rows as columns (arrays): the entries (one `applied_batch` row) and the changed
/// accounts (one `account_change` row) always, the statement lines for `UNNEST` only in a
/// pipelined commit (a large one COPYs them).
#[derive(Default)]
struct Rows {
    /// The commit's first and last seq (0 for none): the batch's key and the `account_change`
    /// row's.
    e_first: i64,
    e_last: i64,
    e_epoch: Vec<i64>,
    e_ts: Vec<i64>,
    e_origin: Vec<i16>,
    e_bmi: Vec<String>,
    e_kind: Vec<i16>,
    e_debtor: Vec<Option<i64>>,
    e_creditor: Vec<Option<i64>>,
    e_amount: Vec<Option<i64>>,
    e_currency: Vec<Option<String>>,
    e_outcome: Vec<i16>,
    e_hash: Vec<i64>,
    l_account: Vec<i64>,
    l_seq: Vec<i64>,
    l_k: Vec<i16>,
    l_kind: Vec<i16>,
    l_counterparty: Vec<Option<i64>>,
    l_amount: Vec<i64>,
    l_balance: Vec<i64>,
    a_id: Vec<i64>,
    a_currency: Vec<String>,
    a_balance: Vec<i64>,
    a_closed: Vec<bool>,
}

impl Rows {
    fn of(c: &Commit, lines: bool) -> Result<Rows, StoreError> {
        let mut r = Rows::default();
        for (e, a) in c.entries.iter().zip(&c.applied) {
            let (kind, debtor, creditor, amount, currency) = columns(&e.payload);
            r.e_epoch.push(i64::from(e.epoch));
            r.e_ts.push(i64_of(e.timestamp_us)?);
            r.e_origin.push(i16::from(e.origin.0));
            r.e_bmi.push(e.bmi.as_str().to_string());
            r.e_kind.push(kind);
            r.e_debtor.push(debtor.map(i64_of).transpose()?);
            r.e_creditor.push(creditor.map(i64_of).transpose()?);
            r.e_amount.push(amount.map(i64_of).transpose()?);
            r.e_currency.push(currency.map(|c| c.as_str().to_string()));
            r.e_outcome.push(a.outcome.code() as i16);
            r.e_hash.push(a.state_hash as i64);
        }
        r.e_first = c.applied.first().map(|a| i64_of(a.seq)).transpose()?.unwrap_or(0);
        r.e_last = c.applied.last().map(|a| i64_of(a.seq)).transpose()?.unwrap_or(0);
        if lines {
            let (mut seq, mut k) = (0, 0i16);
            for l in &c.lines {
                (seq, k) = if l.line.seq == seq { (seq, k + 1) } else { (l.line.seq, 0) };
                r.l_account.push(i64_of(l.account.0)?);
                r.l_seq.push(i64_of(l.line.seq)?);
                r.l_k.push(k);
                r.l_kind.push(l.line.kind.code());
                r.l_counterparty.push(l.line.counterparty.map(|a| i64_of(a.0)).transpose()?);
                r.l_amount.push(i64_of(l.line.amount_minor)?);
                r.l_balance.push(i64_of(l.line.balance_after_minor)?);
            }
        }
        for a in &c.changed.accounts {
            r.a_id.push(i64_of(a.id.0)?);
            r.a_currency.push(a.currency.as_str().to_string());
            r.a_balance.push(i64_of(a.balance_minor)?);
            r.a_closed.push(a.closed);
        }
        Ok(r)
    }

    fn entry_params(&self) -> [&(dyn ToSql + Sync); 13] {
        [
            &self.e_first,
            &self.e_last,
            &self.e_epoch,
            &self.e_ts,
            &self.e_origin,
            &self.e_bmi,
            &self.e_kind,
            &self.e_debtor,
            &self.e_creditor,
            &self.e_amount,
            &self.e_currency,
            &self.e_outcome,
            &self.e_hash,
        ]
    }

    fn line_params(&self) -> [&(dyn ToSql + Sync); 7] {
        [
            &self.l_account,
            &self.l_seq,
            &self.l_k,
            &self.l_kind,
            &self.l_counterparty,
            &self.l_amount,
            &self.l_balance,
        ]
    }

    fn account_params(&self) -> [&(dyn ToSql + Sync); 5] {
        [&self.a_id, &self.a_currency, &self.a_balance, &self.a_closed, &self.e_last]
    }
}

async fn write_funded(
    tx: &deadpool_postgres::Transaction<'_>,
    c: &Commit,
) -> Result<u64, tokio_postgres::Error> {
    let (cur, minor): (Vec<String>, Vec<i64>) =
        c.funded.iter().map(|(c, m)| (c.as_str().to_string(), *m as i64)).unzip();
    tx.execute(
        &tx.prepare_cached(
            "INSERT INTO funded (currency, funded_minor) SELECT * FROM UNNEST($1::text[], $2::bigint[])
             ON CONFLICT (currency) DO UPDATE SET funded_minor = EXCLUDED.funded_minor",
        )
        .await?,
        &[&cur, &minor],
    )
    .await
}

async fn record_finality(
    tx: &deadpool_postgres::Transaction<'_>,
    st: &tokio_postgres::Statement,
    c: &Commit,
) -> Result<u64, tokio_postgres::Error> {
    let ranges = &c.progress.final_ranges;
    if ranges.is_empty() {
        return Ok(0);
    }
    let (lo, hi): (Vec<i64>, Vec<i64>) = ranges.iter().map(|(a, z)| (*a as i64, *z as i64)).unzip();
    tx.execute(st, &[&lo, &hi]).await
}

/// Deletes the holds that are gone and upserts the others (ids are `u64` stored as their bits).
async fn write_holds(
    tx: &deadpool_postgres::Transaction<'_>,
    holds: &[(HoldKey, Option<Hold>)],
) -> Result<(), StoreError> {
    if holds.is_empty() {
        return Ok(());
    }
    let (gone, live): (Vec<_>, Vec<_>) = holds.iter().partition(|(_, h)| h.is_none());
    if !gone.is_empty() {
        let plugin: Vec<i16> = gone.iter().map(|(k, _)| i16::from(k.plugin as u8)).collect();
        let id: Vec<i64> = gone.iter().map(|(k, _)| k.id as i64).collect();
        tx.execute(
            &tx.prepare_cached(
                "DELETE FROM hold h USING UNNEST($1::smallint[], $2::bigint[]) AS g(plugin, id)
              WHERE h.plugin = g.plugin AND h.id = g.id",
            )
            .await?,
            &[&plugin, &id],
        )
        .await?;
    }
    let live: Vec<(HoldKey, Hold)> = live.iter().filter_map(|(k, h)| h.map(|h| (*k, h))).collect();
    if !live.is_empty() {
        let plugin: Vec<i16> = live.iter().map(|(k, _)| i16::from(k.plugin as u8)).collect();
        let id: Vec<i64> = live.iter().map(|(k, _)| k.id as i64).collect();
        let account: Vec<i64> = live.iter().map(|(_, h)| h.account.0 as i64).collect();
        let amount: Vec<i64> = live.iter().map(|(_, h)| i64_of(h.amount_minor)).collect::<Result<_, _>>()?;
        tx.execute(&tx.prepare_cached("INSERT INTO hold (plugin, id, account, amount_minor)
             SELECT * FROM UNNEST($1::smallint[], $2::bigint[], $3::bigint[], $4::bigint[])
             ON CONFLICT (plugin, id) DO UPDATE SET account = EXCLUDED.account, amount_minor = EXCLUDED.amount_minor").await?,
            &[&plugin, &id, &account, &amount],
        )
        .await?;
    }
    Ok(())
}
