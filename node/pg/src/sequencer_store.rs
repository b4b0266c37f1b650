//! The sequencer's durable state (database `rtgs_seq`): durable before publish, fenced by epoch.
//!
//! Per batch, one transaction advances the single `sequencer` row with a conditional update —
//! `WHERE epoch = $epoch AND last_seq = $seq_first - 1` — inserts the batch's frames into
//! `journal_outbox` and the batch's `bmi`s into `sequenced_bmi` (unique: a `bmi` is sequenced at
//! most once, ever; migration `0003`). Zero rows updated means another leader took over (or a
//! batch is missing): the caller gets [`StoreError::Fenced`] and must step down. Seqs are never
//! burnt: a failed transaction leaves `last_seq` where it was. Leadership is this row's lease:
//! the leader renews `updated_at` (every recorded batch, [`SequencerStore::heartbeat`] when
//! idle) and a survivor claims it once it is silent ([`SequencerStore::take_over_if_free`]),
//! which bumps the epoch (fencing the old leader) and returns what was recorded but not
//! published; [`SequencerStore::backfill_bmis`] indexes batches recorded
//! before `sequenced_bmi` existed. Before sequencing a batch the leader asks
//! [`SequencerStore::known_bmis`] which of its `bmi`s were sequenced before.

use crate::StoreError;
use deadpool_postgres::Pool;
use rtgs_core::codec;
use rtgs_core::entry::{Bmi, Entry, Seq};
use rtgs_core::sequencer::{sha256_of, Content, Known};
use std::collections::HashMap;

/// One recorded batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutboxBatch {
    pub seq_first: Seq,
    pub seq_last: Seq,
    pub epoch: u32,
    pub frames: Vec<u8>,
}

/// What a new leader starts from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Takeover {
    /// The new (strictly higher) epoch.
    pub epoch: u32,
    pub last_seq: Seq,
    /// Last inbound-topic offset whose commands are recorded (-1: none).
    pub inbound_offset: i64,
    /// Recorded but not yet marked published, in seq order: publish these first.
    pub unpublished: Vec<OutboxBatch>,
    /// Batches up to this seq have their `bmi`s in `sequenced_bmi` (below `last_seq` only in a
    /// database that recorded batches before migration 0003: see [`SequencerStore::backfill_bmis`]).
    pub bmi_through: Seq,
    /// Who held the lease before (`None`: nobody ever led), and how long before this claim it
    /// was last renewed (milliseconds, by the database's clock): the leader's silence a
    /// takeover waited out (the operator console shows it).
    pub previous_leader: Option<String>,
    pub previous_renewal_age_ms: Option<u64>,
}

#[derive(Clone)]
pub struct SequencerStore {
    pool: Pool,
}

/// The push path's channel for recorded journal batches (`LISTEN rtgs_journal`): a batch
/// `record_batch` commits is announced there if it is small — at most [`JOURNAL_NOTICES_MAX`]
/// notices, each a frame of at most [`JOURNAL_NOTICE_INLINE_BYTES_MAX`] bytes in base64. A large
/// batch is the broker's alone (under a load that makes batches large, the broker's hop is not
/// what a payment waits for, and pushing it would cost the CPU the load needs). The broker's
/// journal topic carries every batch: a listener that misses a notice loses only time.
pub const JOURNAL_CHANNEL: &str = "rtgs_journal";
/// At most this many notices per batch (≈ 600 transfers). Four (≈ 300) left most of the
/// leader's rounds at 7,000 single transfers a second to the broker's hop, which is 50–100 ms
/// (bench/README.md "Pushes of several notices").
pub const JOURNAL_NOTICES_MAX: usize = 8;
/// The push path's channel for inbound messages (`rtgs-engine`'s API sends what it submits
/// there too, as it hands it to the broker: the leader sequences it at once and drops the
/// topic's copies of those commands).
pub const INBOUND_CHANNEL: &str = "rtgs_inbound";
/// The push path's channel for acks (`rtgs-engine`'s publisher sends each ack message there too).
pub const ACKS_CHANNEL: &str = "rtgs_acks";
/// A notice's frame is at most this large (base64 within PostgreSQL's 8,000-byte payload).
pub const JOURNAL_NOTICE_INLINE_BYTES_MAX: usize = 5_600;

/// What [`JOURNAL_CHANNEL`] says of a batch (its `entries`): frames in base64, or nothing when
/// it does not fit [`JOURNAL_NOTICES_MAX`] notices.
pub fn journal_notices(frames_len: usize, entries: &[Entry]) -> Vec<String> {
    use base64::Engine;
    let mut frames = Vec::new();
    if frames_len > JOURNAL_NOTICES_MAX * JOURNAL_NOTICE_INLINE_BYTES_MAX || !cut_frames(entries, &mut frames)
    {
        return Vec::new();
    }
    frames.iter().map(|f| base64::engine::general_purpose::STANDARD.encode(f)).collect()
}

/// `entries` as frames of at most [`JOURNAL_NOTICE_INLINE_BYTES_MAX`] bytes, at most
/// [`JOURNAL_NOTICES_MAX`] of them; false if they do not fit.
fn cut_frames(entries: &[Entry], out: &mut Vec<Vec<u8>>) -> bool {
    let mut frame = Vec::new();
    codec::encode_frame(entries, &mut frame);
    if frame.len() <= JOURNAL_NOTICE_INLINE_BYTES_MAX {
        out.push(frame);
        return out.len() <= JOURNAL_NOTICES_MAX;
    }
    if entries.len() < 2 {
        return false;
    }
    let (a, b) = entries.split_at(entries.len() / 2);
    cut_frames(a, out) && cut_frames(b, out)
}

fn to_i64(v: u64) -> Result<i64, StoreError> {
    i64::try_from(v).map_err(|_| StoreError::Corrupt(format!("{v} does not fit a bigint")))
}

fn row_to_batch(r: &tokio_postgres::Row) -> Result<OutboxBatch, StoreError> {
    let b = OutboxBatch {
        seq_first: r.get::<_, i64>(0) as u64,
        seq_last: r.get::<_, i64>(1) as u64,
        epoch: u32::try_from(r.get::<_, i64>(2)).map_err(|_| StoreError::Corrupt("epoch".into()))?,
        frames: r.get(3),
    };
    check_frames(&b)?;
    Ok(b)
}

/// Checked again after reading back: the frames decode and hold exactly `seq_first..=seq_last`.
fn check_frames(b: &OutboxBatch) -> Result<(), StoreError> {
    decode_batch(b).map(|_| ())
}

/// The batch's entries, checked as [`check_frames`] says.
fn decode_batch(b: &OutboxBatch) -> Result<Vec<Entry>, StoreError> {
    let mut entries = Vec::new();
    codec::decode_frames(&b.frames, &mut entries)
        .map_err(|e| StoreError::Corrupt(format!("outbox batch {}: {e}", b.seq_first)))?;
    let contiguous = entries.iter().enumerate().all(|(i, e)| e.seq == b.seq_first + i as u64);
    if !contiguous || entries.last().map(|e| e.seq) != Some(b.seq_last) {
        return Err(StoreError::Corrupt(format!(
            "outbox batch {} does not hold {}..={}",
            b.seq_first, b.seq_first, b.seq_last
        )));
    }
    Ok(entries)
}

/// The `sequenced_bmi` rows of some entries: `bmi`, seq, SHA-256 of the payload.
struct BmiRows {
    bmis: Vec<Vec<u8>>,
    seqs: Vec<i64>,
    contents: Vec<Vec<u8>>,
}

impl BmiRows {
    fn of(entries: &[Entry]) -> Result<BmiRows, StoreError> {
        let mut rows = BmiRows { bmis: Vec::new(), seqs: Vec::new(), contents: Vec::new() };
        for e in entries.iter().filter(|e| !e.bmi.is_none()) {
            rows.bmis.push(e.bmi.as_bytes().to_vec());
            rows.seqs.push(to_i64(e.seq)?);
            rows.contents.push(sha256_of(&e.payload).to_vec());
        }
        Ok(rows)
    }
}

/// A batch with at most this many `bmi`s inserts them in the recording pipeline (`INSERT …
/// UNNEST`, no round trip of its own); a larger one COPYs them in binary after it (cheaper per
/// row: see `center_store::PIPELINED_COMMIT_ENTRIES_MAX` for what a larger bound cost).
pub const PIPELINED_BMIS_MAX: usize = 64;

/// Inserts `sequenced_bmi` rows; `on_conflict` is the statement's conflict clause.
const INSERT_BMIS: &str = "INSERT INTO sequenced_bmi (bmi, seq, content)
      SELECT * FROM unnest($1::bytea[], $2::bigint[], $3::bytea[])";

async fn copy_bmis(tx: &deadpool_postgres::Transaction<'_>, rows: &BmiRows) -> Result<(), StoreError> {
    use tokio_postgres::binary_copy::BinaryCopyInWriter;
    use tokio_postgres::types::{ToSql, Type};
    let sink = tx
        .copy_in(&tx.prepare_cached("COPY sequenced_bmi (bmi, seq, content) FROM STDIN BINARY").await?)
        .await?;
    let writer = BinaryCopyInWriter::new(sink, &[Type::BYTEA, Type::INT8, Type::BYTEA]);
    futures_util::pin_mut!(writer);
    for ((bmi, seq), content) in rows.bmis.iter().zip(&rows.seqs).zip(&rows.contents) {
        let row: [&(dyn ToSql + Sync); 3] = [bmi, seq, content];
        writer.as_mut().write(&row).await?;
    }
    writer.finish().await?;
    Ok(())
}

fn is_unique_violation(e: &tokio_postgres::Error) -> bool {
    e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION)
}

impl SequencerStore {
    pub fn new(pool: Pool) -> Self {
        SequencerStore { pool }
    }

    /// Becomes the leader unconditionally: bumps the epoch (fencing whoever led before) and
    /// returns the state to resume from and the batches to republish.
    pub async fn take_over(&self, leader: &str) -> Result<Takeover, StoreError> {
        match self.claim(leader, None).await? {
            Some(t) => Ok(t),
            None => Err(StoreError::Corrupt("the sequencer row is missing".into())),
        }
    }

    /// Becomes the leader only if the lease is free: nobody ever led, or the leader's lease
    /// (`updated_at`, renewed by every recorded batch and by [`Self::heartbeat`]) is at least
    /// `silence_s` old, or `restarting` and the row names `leader` itself (this process is that
    /// leader's next life: nobody else can be leading under its name). `None`: the lease is held.
    /// Two survivors claiming at once are serialised by the row lock and the second one's
    /// condition is checked again against the first one's fresh lease, so exactly one wins.
    pub async fn take_over_if_free(
        &self,
        leader: &str,
        silence_s: f64,
        restarting: bool,
    ) -> Result<Option<Takeover>, StoreError> {
        self.claim(leader, Some((silence_s, restarting))).await
    }

    async fn claim(
        &self,
        leader: &str,
        condition: Option<(f64, bool)>,
    ) -> Result<Option<Takeover>, StoreError> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        let (silence_s, restarting) = condition.unwrap_or((0.0, true));
        let unconditional = condition.is_none();
        // What the lease was before this claim (figures only: the UPDATE below decides). A
        // claim that races another one reads the other's fresh lease here or loses the UPDATE.
        let before = tx
            .query_opt(
                "SELECT leader, (extract(epoch FROM clock_timestamp() - updated_at) * 1000)::bigint
                   FROM sequencer WHERE id = 1",
                &[],
            )
            .await?;
        let (previous_leader, previous_renewal_age_ms) =
            before.map_or((None, None), |r| (r.get::<_, Option<String>>(0), r.get::<_, Option<i64>>(1)));
        let Some(row) = tx
            .query_opt(
                &tx.prepare_cached(
                    "UPDATE sequencer SET epoch = epoch + 1, leader = $1, updated_at = clock_timestamp()
                  WHERE id = 1 AND ($4 OR leader IS NULL OR ($3 AND leader = $1)
                        OR clock_timestamp() - updated_at >= $2 * interval '1 second')
                  RETURNING epoch, last_seq, inbound_offset, bmi_through",
                )
                .await?,
                &[&leader, &silence_s, &restarting, &unconditional],
            )
            .await?
        else {
            return Ok(None);
        };
        let rows = tx
            .query(
                &tx.prepare_cached(
                    "SELECT seq_first, seq_last, epoch, frames FROM journal_outbox
                  WHERE NOT published ORDER BY seq_first",
                )
                .await?,
                &[],
            )
            .await?;
        tx.commit().await?;
        let epoch = u32::try_from(row.get::<_, i64>(0)).map_err(|_| StoreError::Corrupt("epoch".into()))?;
        let unpublished = rows.iter().map(row_to_batch).collect::<Result<Vec<_>, _>>()?;
        Ok(Some(Takeover {
            epoch,
            last_seq: row.get::<_, i64>(1) as u64,
            inbound_offset: row.get(2),
            unpublished,
            bmi_through: row.get::<_, i64>(3) as u64,
            previous_renewal_age_ms: previous_leader
                .as_ref()
                .and(previous_renewal_age_ms)
                .map(|ms| ms.max(0) as u64),
            previous_leader,
        }))
    }

    /// Indexes the `bmi`s of recorded batches after `bmi_through` (a database that recorded
    /// batches before `sequenced_bmi` existed), a few batches per transaction, fenced by
    /// `epoch`; returns the rows added. The first entry of a `bmi` is the one kept.
    pub async fn backfill_bmis(
        &self,
        epoch: u32,
        bmi_through: Seq,
        last_seq: Seq,
    ) -> Result<u64, StoreError> {
        const BATCHES_PER_TRANSACTION: i64 = 16;
        let mut through = bmi_through;
        let mut added = 0;
        while through < last_seq {
            let mut client = self.pool.get().await?;
            let tx = client.transaction().await?;
            let rows = tx
                .query(
                    &tx.prepare_cached(
                        "SELECT seq_first, seq_last, epoch, frames FROM journal_outbox
                      WHERE seq_last > $1 ORDER BY seq_first LIMIT $2",
                    )
                    .await?,
                    &[&to_i64(through)?, &BATCHES_PER_TRANSACTION],
                )
                .await?;
            let batches = rows.iter().map(row_to_batch).collect::<Result<Vec<_>, _>>()?;
            let Some(last) = batches.last().map(|b| b.seq_last) else {
                return Err(StoreError::Corrupt(format!("the outbox ends before recorded seq {last_seq}")));
            };
            let mut entries = Vec::new();
            for b in &batches {
                entries.extend(decode_batch(b)?.into_iter().filter(|e| e.seq > through));
            }
            let r = BmiRows::of(&entries)?;
            let insert = format!("{INSERT_BMIS} ORDER BY 2 ON CONFLICT (bmi) DO NOTHING");
            added += tx.execute(insert.as_str(), &[&r.bmis, &r.seqs, &r.contents]).await?;
            let n = tx
                .execute(
                    &tx.prepare_cached("UPDATE sequencer SET bmi_through = $1 WHERE id = 1 AND epoch = $2")
                        .await?,
                    &[&to_i64(last)?, &i64::from(epoch)],
                )
                .await?;
            if n != 1 {
                return Err(StoreError::Fenced { epoch, seq_first: through + 1 });
            }
            tx.commit().await?;
            through = last;
        }
        Ok(added)
    }

    /// What was sequenced before under each of these `bmi`s (absent: never). One query per
    /// batch, answered by the unique index.
    pub async fn known_bmis(&self, bmis: &[Bmi]) -> Result<HashMap<Bmi, Known>, StoreError> {
        let mut known = HashMap::new();
        if bmis.is_empty() {
            return Ok(known);
        }
        let keys: Vec<&[u8]> = bmis.iter().map(Bmi::as_bytes).collect();
        let client = self.pool.get().await?;
        let rows = client
            .query("SELECT bmi, seq, content FROM sequenced_bmi WHERE bmi = ANY($1::bytea[])", &[&keys])
            .await?;
        for r in rows {
            let bmi = Bmi::new(r.get::<_, &[u8]>(0))
                .map_err(|e| StoreError::Corrupt(format!("sequenced_bmi: {e}")))?;
            let content: [u8; 32] = r
                .get::<_, &[u8]>(2)
                .try_into()
                .map_err(|_| StoreError::Corrupt("sequenced_bmi: a content digest is not 32 bytes".into()))?;
            known.insert(bmi, Known { seq: r.get::<_, i64>(1) as u64, content: Content::Sha256(content) });
        }
        Ok(known)
    }

    /// Records one batch durably (before it may be published), its `bmi`s in the same
    /// transaction. `Err(Fenced)` means: step down; `Err(BmiSequenced)`: a `bmi` of the batch
    /// was sequenced before, nothing was recorded — the leader sequences the batch again with
    /// [`SequencerStore::known_bmis`]' answers. `Ok(true)`: the batch was announced on
    /// [`JOURNAL_CHANNEL`] too (it fit [`JOURNAL_NOTICES_MAX`] notices).
    pub async fn record_batch(&self, batch: &OutboxBatch, inbound_offset: i64) -> Result<bool, StoreError> {
        let entries = decode_batch(batch)?;
        let bmis = BmiRows::of(&entries)?;
        let (first, last) = (to_i64(batch.seq_first)?, to_i64(batch.seq_last)?);
        let epoch = i64::from(batch.epoch);
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        // One pipeline (prepared once per connection, then every statement sent before any
        // answer is awaited): the fenced move of the sequencer row, the outbox row, the bmis
        // (`INSERT … UNNEST` for a small batch; a large one COPYs them after), and the push path's
        // notices (`JOURNAL_CHANNEL`: delivered to the listeners at commit, never if it rolls back
        // — only durable batches are announced). The answers are looked at in that order: a
        // fenced leader is refused as such whatever its writes then ran into, and nothing of the
        // transaction stays (dropping it rolls it back).
        let small = bmis.bmis.len() <= PIPELINED_BMIS_MAX;
        let (fence, outbox, notify, insert_bmis) = tokio::try_join!(
            tx.prepare_cached(
                "UPDATE sequencer SET last_seq = $1, inbound_offset = $2, updated_at = now(),
                    bmi_through = CASE WHEN bmi_through = $4 THEN $1 ELSE bmi_through END
                  WHERE id = 1 AND epoch = $3 AND last_seq = $4",
            ),
            tx.prepare_cached(
                "INSERT INTO journal_outbox (seq_first, seq_last, epoch, frames) VALUES ($1, $2, $3, $4)",
            ),
            tx.prepare_cached("SELECT pg_notify($1, $2)"),
            tx.prepare_cached(INSERT_BMIS),
        )?;
        let notices = journal_notices(batch.frames.len(), &entries);
        let previous = first - 1;
        let (moved, r_outbox, r_bmis, r_notices) = tokio::join!(
            async { tx.execute(&fence, &[&last, &inbound_offset, &epoch, &previous]).await },
            async { tx.execute(&outbox, &[&first, &last, &epoch, &batch.frames]).await },
            async {
                if small && !bmis.bmis.is_empty() {
                    tx.execute(&insert_bmis, &[&bmis.bmis, &bmis.seqs, &bmis.contents])
                        .await
                        .map_err(StoreError::from)?;
                }
                Ok::<_, StoreError>(())
            },
            futures_util::future::try_join_all(
                notices.iter().map(|n| async { tx.execute(&notify, &[&JOURNAL_CHANNEL, n]).await }),
            ),
        );
        if moved? != 1 {
            return Err(StoreError::Fenced { epoch: batch.epoch, seq_first: batch.seq_first });
        }
        r_outbox?;
        // One pass over the unique index: a bmi already there fails the statement (an INSERT ...
        // ON CONFLICT cost three times as much here).
        let bmis_written = match r_bmis {
            Ok(()) if !small => copy_bmis(&tx, &bmis).await,
            other => other,
        };
        if let Err(e) = bmis_written {
            return Err(match e {
                StoreError::Pg(pg) if is_unique_violation(&pg) => {
                    StoreError::BmiSequenced { seq_first: batch.seq_first, detail: pg.to_string() }
                }
                other => other,
            });
        }
        r_notices?;
        tx.commit().await?;
        Ok(!notices.is_empty())
    }

    /// Marks every batch starting at or below `seq_first` as published.
    pub async fn mark_published(&self, seq_first: Seq) -> Result<u64, StoreError> {
        let client = self.pool.get().await?;
        Ok(client
            .execute(
                "UPDATE journal_outbox SET published = true WHERE seq_first <= $1 AND NOT published",
                &[&to_i64(seq_first)?],
            )
            .await?)
    }

    /// The leader's lease: refreshes `updated_at` if `epoch` is still current. `false`: fenced.
    pub async fn heartbeat(&self, epoch: u32) -> Result<bool, StoreError> {
        let client = self.pool.get().await?;
        let n = client
            .execute(
                "UPDATE sequencer SET updated_at = now() WHERE id = 1 AND epoch = $1",
                &[&i64::from(epoch)],
            )
            .await?;
        Ok(n == 1)
    }

    /// The broker generation every recorded topic offset refers to (migration 0004).
    pub async fn broker_generation(&self) -> Result<i64, StoreError> {
        let client = self.pool.get().await?;
        Ok(client.query_one("SELECT broker_generation FROM sequencer WHERE id = 1", &[]).await?.get(0))
    }

    /// The last seq recorded: every entry sequenced so far is at or below it (recorded before
    /// any center may see it). The production API asks it before it answers "not found".
    pub async fn last_seq(&self) -> Result<Seq, StoreError> {
        let client = self.pool.get().await?;
        let last: i64 = client.query_one("SELECT last_seq FROM sequencer WHERE id = 1", &[]).await?.get(0);
        Seq::try_from(last).map_err(|_| StoreError::Corrupt(format!("the sequencer's last_seq is {last}")))
    }

    /// The inbound-topic offset whose commands are recorded last (-1: none).
    pub async fn inbound_offset(&self) -> Result<i64, StoreError> {
        let client = self.pool.get().await?;
        Ok(client.query_one("SELECT inbound_offset FROM sequencer WHERE id = 1", &[]).await?.get(0))
    }

    /// Up to `limit` recorded batches after `after_seq_first`, in seq order (a rebuild of the
    /// journal reads the whole outbox this way).
    pub async fn outbox_page(
        &self,
        after_seq_first: Seq,
        limit: i64,
    ) -> Result<Vec<OutboxBatch>, StoreError> {
        let client = self.pool.get().await?;
        let rows = client
            .query(
                "SELECT seq_first, seq_last, epoch, frames FROM journal_outbox
                  WHERE seq_first > $1 ORDER BY seq_first LIMIT $2",
                &[&to_i64(after_seq_first)?, &limit],
            )
            .await?;
        rows.iter().map(row_to_batch).collect()
    }

    /// Ends a rebuild of the journal (every outbox batch published again to new topics): one
    /// transaction raises the broker generation, fences whoever led (epoch + 1) and frees the
    /// lease, starts the new inbound topic from its beginning and marks every batch published.
    /// Returns the new generation and epoch.
    pub async fn journal_rebuilt(&self) -> Result<(i64, u32), StoreError> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        let row = tx
            .query_one(
                &tx.prepare_cached(
                    "UPDATE sequencer SET broker_generation = broker_generation + 1, epoch = epoch + 1,
                        leader = NULL, inbound_offset = -1, updated_at = clock_timestamp()
                  WHERE id = 1 RETURNING broker_generation, epoch",
                )
                .await?,
                &[],
            )
            .await?;
        tx.execute(
            &tx.prepare_cached("UPDATE journal_outbox SET published = true WHERE NOT published").await?,
            &[],
        )
        .await?;
        tx.commit().await?;
        let epoch = u32::try_from(row.get::<_, i64>(1)).map_err(|_| StoreError::Corrupt("epoch".into()))?;
        Ok((row.get(0), epoch))
    }

    /// Seconds since the leader last recorded a batch or renewed its lease, and the epoch.
    pub async fn leader_silence(&self) -> Result<(f64, u32), StoreError> {
        let client = self.pool.get().await?;
        let row = client
            .query_one(
                "SELECT extract(epoch FROM clock_timestamp() - updated_at)::float8, epoch FROM sequencer WHERE id = 1",
                &[],
            )
            .await?;
        let epoch = u32::try_from(row.get::<_, i64>(1)).map_err(|_| StoreError::Corrupt("epoch".into()))?;
        Ok((row.get(0), epoch))
    }

    /// Whether the batch starting at `seq_first` is recorded under `epoch` (settles a
    /// `record_batch` whose commit outcome was lost with the connection).
    pub async fn is_recorded(&self, seq_first: Seq, epoch: u32) -> Result<bool, StoreError> {
        let client = self.pool.get().await?;
        let row = client
            .query_opt(
                "SELECT 1 FROM journal_outbox WHERE seq_first = $1 AND epoch = $2",
                &[&to_i64(seq_first)?, &i64::from(epoch)],
            )
            .await?;
        Ok(row.is_some())
    }

    /// The recorded batches that hold seqs `from..=to` (gap pulls, dedupe rebuild), in order.
    pub async fn batches(&self, from: Seq, to: Seq) -> Result<Vec<OutboxBatch>, StoreError> {
        let client = self.pool.get().await?;
        let rows = client
            .query(
                "SELECT seq_first, seq_last, epoch, frames FROM journal_outbox
                  WHERE seq_last >= $1 AND seq_first <= $2 ORDER BY seq_first",
                &[&to_i64(from)?, &to_i64(to)?],
            )
            .await?;
        rows.iter().map(row_to_batch).collect()
    }
}

#[cfg(test)]
mod push_tests {
    use super::*;
    use rtgs_core::entry::{AccountId, CenterId, Payload, Transfer};

    fn entries(n: u64) -> Vec<Entry> {
        (1..=n)
            .map(|seq| Entry {
                seq,
                epoch: 1,
                timestamp_us: seq,
                origin: CenterId(1),
                bmi: Bmi::new(format!("push-{seq:020}").as_bytes()).unwrap(),
                payload: Payload::Transfer(Transfer {
                    debtor: AccountId(1),
                    creditor: AccountId(2),
                    amount_minor: seq,
                    currency: rtgs_core::entry::Currency::new(b"EUR").unwrap(),
                }),
            })
            .collect()
    }

    #[test]
    fn a_small_batch_is_announced_in_notices_that_fit_and_decode_to_it() {
        use base64::Engine;
        for n in [1, 50, 200, 500] {
            let batch = entries(n);
            let mut frames = Vec::new();
            codec::encode_frame(&batch, &mut frames);
            let notices = journal_notices(frames.len(), &batch);
            assert!(!notices.is_empty() && notices.len() <= JOURNAL_NOTICES_MAX, "{n}: {}", notices.len());
            let mut back = Vec::new();
            for notice in &notices {
                assert!(notice.len() < 8_000, "PostgreSQL refuses payloads of 8,000 bytes: {}", notice.len());
                let f = base64::engine::general_purpose::STANDARD.decode(notice).unwrap();
                codec::decode_frames(&f, &mut back).unwrap();
            }
            assert_eq!(back, batch, "{n} entries, in order, once");
        }
    }

    #[test]
    fn a_large_batch_is_left_to_the_broker() {
        let batch = entries(2_000);
        let mut frames = Vec::new();
        codec::encode_frame(&batch, &mut frames);
        assert!(journal_notices(frames.len(), &batch).is_empty());
        // Just over what the notices hold (100 of these entries are just over one), found by
        // cutting rather than by the quick size check.
        let batch = entries(100 * JOURNAL_NOTICES_MAX as u64);
        assert!(journal_notices(JOURNAL_NOTICES_MAX * JOURNAL_NOTICE_INLINE_BYTES_MAX, &batch).is_empty());
    }
}
