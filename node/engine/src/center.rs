//! One center's apply path: journal → gap buffer → ledger → PostgreSQL → applied-acks.
//!
//! The reader task consumes the journal from the offset after its watermark, drops seqs already
//! applied (republished batches), reorders through the core's gap buffer and applies the
//! contiguous run to the ledger. A lost tail (nothing after it to reveal the hole) is found
//! through the acks of the other centers. A gap that outlives `GAP_TIMEOUT_US` (core limits) is pulled back from the
//! sequencer's outbox (never skipped) and counted. Applied runs go, cut at message boundaries,
//! over a bounded queue to the committer task, which writes each in one transaction (with the
//! finality progress the finality task reached) and only then publishes the acks.
//!
//! With plugins (`--collection`, see [`super::plugins`]) the reader also applies every entry to
//! the plugin host, folds its step digests into the ledger hash, and hands the plugin state to
//! the committer with each batch, which writes it in the batch's transaction.
//!
//! At start the committed-but-unfinal acks are published again: an ack lost in a crash between
//! commit and publish is not lost for the finalizers.

use super::finality::{Handover, Shared, Start};
use super::plugins::{JobPlugins, ReaderPlugins};
use super::{now_us, retry_pg, Node};
use anyhow::Context;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rtgs_core::codec;
use rtgs_core::entry::{Bmi, Currency, Entry, Seq};
use rtgs_core::gap_buffer::{gap_buffer, GapConsumer, GapProducer, Insert};
use rtgs_core::ledger::{Account, Applied, Ledger};
use rtgs_core::limits::{GAP_BUFFER_SLOTS, SEQUENCER_BATCH_ENTRIES_MAX};
use rtgs_core::plugin::Effect;
use rtgs_core::plugin_host::PluginHost;
use rtgs_kafka::wire;
use rtgs_pg::center_store::{BatchCommit, CenterStore};
use rtgs_pg::sequencer_store::SequencerStore;
use rtgs_pg::StoreError;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// Applied batches waiting for their commit (bounded: back-pressure on the reader).
const COMMIT_QUEUE_BATCHES: usize = 32;
/// Queued batches are merged into one commit up to about this many entries (a catching-up
/// center writes each changed balance once per commit, not once per batch).
const MERGED_COMMIT_ENTRIES_MAX: usize = 131_072;
/// Cut a commit batch at this many entries (whole journal messages).
const COMMIT_BATCH_ENTRIES: usize = SEQUENCER_BATCH_ENTRIES_MAX;
/// A journal quiet for this long while another center acked seqs not applied here means a lost
/// tail: those seqs are pulled from the outbox.
const TAIL_TIMEOUT: Duration = Duration::from_micros(rtgs_core::limits::GAP_TIMEOUT_US);
/// Commit finality progress alone when no entry arrives for this long.
const IDLE_COMMIT: Duration = Duration::from_millis(50);

/// An applied run, ready to commit.
pub struct Job {
    entries: Vec<Entry>,
    applied: Vec<Applied>,
    changed: Vec<Account>,
    holds: Vec<(rtgs_core::ledger::HoldKey, Option<rtgs_core::ledger::Hold>)>,
    funded: Vec<(Currency, u64)>,
    journal_offset: i64,
    /// The plugin state to store with the batch (plugins enabled only).
    plugins: JobPlugins,
}

impl Job {
    fn empty(journal_offset: i64) -> Job {
        Job {
            entries: Vec::new(),
            applied: Vec::new(),
            changed: Vec::new(),
            holds: Vec::new(),
            funded: Vec::new(),
            journal_offset,
            plugins: JobPlugins::None,
        }
    }

    /// Appends the next job (its balances are newer: they win).
    fn merge(&mut self, next: Job) {
        self.entries.extend(next.entries);
        self.applied.extend(next.applied);
        self.journal_offset = next.journal_offset;
        self.plugins.merge(next.plugins);
        // Holds: the later state of a key wins (kept in order; the store writes the last).
        self.holds.extend(next.holds);
        self.holds.reverse();
        let mut seen = std::collections::HashSet::new();
        self.holds.retain(|(k, _)| seen.insert(*k));
        self.holds.reverse();
        let mut changed = std::mem::take(&mut self.changed);
        changed.extend(next.changed);
        // Stable sort by id, then keep the last (newest) of each id.
        changed.sort_by_key(|a| a.id);
        let mut merged: Vec<Account> = Vec::with_capacity(changed.len());
        for a in changed {
            match merged.last_mut() {
                Some(last) if last.id == a.id => *last = a,
                _ => merged.push(a),
            }
        }
        self.changed = merged;
        for (currency, total) in next.funded {
            match self.funded.iter_mut().find(|(c, _)| *c == currency) {
                Some(f) => f.1 = total,
                None => self.funded.push((currency, total)),
            }
        }
    }
}

/// What this center's origin entries need for a notice once final: seq, bmi, own outcome.
pub type NoticeItem = (Applied, Bmi);

type Task = Pin<Box<dyn Future<Output = anyhow::Result<()>> + Send>>;

pub struct Center {
    start: Start,
    tasks: Vec<Task>,
}

impl Center {
    pub async fn start(
        node: &Arc<Node>,
        center_pool: deadpool_postgres::Pool,
        seq_pool: deadpool_postgres::Pool,
        shared: Arc<Shared>,
        notice_tx: mpsc::Sender<Handover>,
        plugins: Option<(PluginHost, mpsc::Sender<Vec<Effect>>)>,
    ) -> anyhow::Result<Center> {
        let store = Arc::new(CenterStore::new(center_pool));
        let stored = retry_pg(node, "load center state", || store.load()).await?;
        let mut ledger = stored.ledger;
        ledger.track_changes(true);
        let seq_applied = ledger.seq_applied();
        node.stats.seq_applied.store(seq_applied, Ordering::Relaxed);
        node.stats.seq_committed.store(seq_applied, Ordering::Relaxed);
        node.stats.seq_unfinal_first.store(stored.seq_unfinal_first, Ordering::Relaxed);
        eprintln!(
            "{}: center resumes after seq {seq_applied} (journal offset {}), finality from seq {} (ack offset {})",
            node.name, stored.journal_offset, stored.seq_unfinal_first, stored.ack_offset
        );
        let plugins = load_plugins(node, &store, seq_applied, plugins).await?;
        shared.resume(stored.seq_unfinal_first, stored.ack_offset, stored.seq_notice_from);
        let producer = rtgs_kafka::clients::producer(&node.bootstrap, &format!("{}-center", node.name))?;
        // Acks committed but maybe never published, and the origin's notices still owed.
        let from = stored.seq_unfinal_first.min(stored.seq_notice_from);
        let since = retry_pg(node, "read unfinal entries", || store.applied_since(from)).await?;
        let acks: Vec<Applied> =
            since.iter().map(|(a, _, _)| *a).filter(|a| a.seq >= stored.seq_unfinal_first).collect();
        for chunk in acks.chunks(COMMIT_BATCH_ENTRIES) {
            publish_acks(node, &producer, chunk).await?;
        }
        let owed: Vec<NoticeItem> = since
            .iter()
            .filter(|(a, origin, bmi)| {
                *origin == node.center && a.seq >= stored.seq_notice_from && !bmi.is_none()
            })
            .map(|(a, _, b)| (*a, *b))
            .collect();
        if !owed.is_empty() {
            eprintln!("{}: {} notices owed from before the restart", node.name, owed.len());
        }
        notice_tx
            .send(Handover { committed_through: seq_applied, owed })
            .await
            .context("finality task is gone")?;
        let (job_tx, job_rx) = mpsc::channel(COMMIT_QUEUE_BATCHES);
        let reader = Reader {
            node: Arc::clone(node),
            ledger,
            journal_offset: stored.journal_offset,
            seq_store: SequencerStore::new(seq_pool),
            job_tx,
            plugins,
        };
        let committer = Committer { node: Arc::clone(node), store, producer, shared, notice_tx };
        Ok(Center {
            start: Start {
                seq_unfinal_first: stored.seq_unfinal_first,
                ack_offset: stored.ack_offset,
                committed_through: seq_applied,
            },
            tasks: vec![Box::pin(reader.run()), Box::pin(committer.run(job_rx))],
        })
    }

    pub fn finality_start(&self) -> Start {
        self.start
    }

    pub fn into_tasks(self) -> Vec<Task> {
        self.tasks
    }
}

/// The plugin host restored from `plugin_state`, checked against the ledger's watermark and
/// against whether plugins are enabled (their step digests are in the state hash: a center that
/// changed its mind would diverge at its next plugin entry, so it refuses to start instead).
async fn load_plugins(
    node: &Node,
    store: &CenterStore,
    seq_applied: Seq,
    plugins: Option<(PluginHost, mpsc::Sender<Vec<Effect>>)>,
) -> anyhow::Result<Option<ReaderPlugins>> {
    let Some((mut host, effects_tx)) = plugins else {
        let mut empty = PluginHost::empty(node.center);
        return match load_plugin_rows(node, store, &mut empty).await {
            Ok(None) => Ok(None),
            Ok(Some(_)) | Err(StoreError::Corrupt(_)) => anyhow::bail!(
                "{}: plugin state is stored in this center's database but plugins are not enabled; \
                 start with --collection (RTGS_COLLECTION=true) like the other centers",
                node.name
            ),
            Err(e) => Err(e).context("load plugin state"),
        };
    };
    let stored =
        load_plugin_rows(node, store, &mut host).await.context("the stored plugin state does not load")?;
    match stored {
        Some(at) if at != seq_applied => anyhow::bail!(
            "{}: the stored plugin state is at seq {at} but the ledger at seq {seq_applied}; they are \
             committed together, so the database was changed outside the node",
            node.name
        ),
        None if seq_applied > 0 => anyhow::bail!(
            "{}: plugins are enabled but this center applied {seq_applied} entries without them (no \
             plugin state is stored); its state hash would diverge from centers that host them",
            node.name
        ),
        _ => {}
    }
    eprintln!(
        "{}: plugins {:?} resume at seq {seq_applied} ({})",
        node.name,
        host.kinds().collect::<Vec<_>>(),
        if stored.is_some() { "stored state" } else { "fresh" }
    );
    let plugins = ReaderPlugins::new(host, stored.is_some(), effects_tx);
    plugins.publish_restored(node, seq_applied);
    Ok(Some(plugins))
}

/// [`CenterStore::load_plugins`], retried while PostgreSQL does not answer.
async fn load_plugin_rows(
    node: &Node,
    store: &CenterStore,
    host: &mut PluginHost,
) -> Result<Option<Seq>, StoreError> {
    loop {
        match store.load_plugins(host).await {
            Err(e @ (StoreError::Pg(_) | StoreError::Pool(_))) => {
                eprintln!("{}: load plugin state: {e}; retrying until PostgreSQL answers", node.name);
                node.stats.pg_retries.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(super::RETRY_PAUSE).await;
            }
            other => return other,
        }
    }
}

async fn publish_acks(node: &Node, producer: &FutureProducer, acks: &[Applied]) -> anyhow::Result<()> {
    let Some(body) = wire::encode_acks(node.center, acks) else {
        anyhow::bail!("acks to publish are not contiguous (seq {:?})", acks.first().map(|a| a.seq));
    };
    let n = node.ack_messages.fetch_add(1, Ordering::Relaxed) + 1;
    if node.fault_drop_acks_one_in > 0 && n.is_multiple_of(node.fault_drop_acks_one_in) {
        return Ok(()); // drill: this ack message is "lost"; finality must recover by re-acking
    }
    loop {
        let record = FutureRecord::<(), _>::to(&node.topics.applied).payload(&body);
        match producer.send(record, Duration::from_secs(5)).await {
            Ok(_) => return Ok(()),
            Err((e, _)) => {
                eprintln!("{}: publishing acks: {e}; again", node.name);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

struct Reader {
    node: Arc<Node>,
    ledger: Ledger,
    /// Offset of the last journal message whose entries are all applied.
    journal_offset: i64,
    seq_store: SequencerStore,
    job_tx: mpsc::Sender<Job>,
    plugins: Option<ReaderPlugins>,
}

impl Reader {
    async fn run(mut self) -> anyhow::Result<()> {
        let node = Arc::clone(&self.node);
        let consumer = node.assigned_consumer("ledger", &node.topics.journal, self.journal_offset + 1)?;
        if let Some(p) = self.plugins.as_mut() {
            // Where the journal ends now: once applied through it, the plugins are live.
            use rdkafka::consumer::Consumer;
            let topic = node.topics.journal.clone();
            let high = tokio::task::block_in_place(|| {
                consumer.fetch_watermarks(&topic, 0, Duration::from_secs(10)).map(|(_, high)| high)
            });
            match high {
                Ok(high) => p.set_live_from(high),
                Err(e) => {
                    eprintln!("{}: journal end unknown ({e}): plugins go live when it is quiet", node.name)
                }
            }
        }
        let (producer, mut gaps) = gap_buffer::<Entry>(GAP_BUFFER_SLOTS, self.ledger.seq_applied() + 1);
        let mut job = self.new_job();
        let mut decoded = Vec::new();
        let mut messages = 0u64;
        // Highest seq inserted: while above the ledger's, entries wait behind a gap and the
        // journal offset stays at the last message that is applied whole.
        let mut seq_seen_max = self.ledger.seq_applied();
        let mut last_message = std::time::Instant::now();
        loop {
            let batch_messages = super::recv_batch(
                &node,
                "journal",
                &consumer,
                Duration::from_millis(20),
                COMMIT_BATCH_ENTRIES * 64,
            )
            .await;
            for (offset, payload) in &batch_messages {
                messages += 1;
                if node.fault_drop_journal_one_in > 0
                    && messages.is_multiple_of(node.fault_drop_journal_one_in)
                {
                    continue; // drill: this message is "lost"; the gap pull must recover it
                }
                // The journal is written only by the sequencer: damage is an invariant
                // violation, not input. Stop.
                codec::decode_frames(payload, &mut decoded)
                    .with_context(|| format!("journal message at offset {offset} does not decode"))?;
                for e in decoded.drain(..) {
                    seq_seen_max = seq_seen_max.max(e.seq);
                    self.insert(&producer, &mut gaps, e, &mut job).await?;
                }
                self.apply_ready(&mut gaps, &mut job);
                if seq_seen_max <= self.ledger.seq_applied() {
                    self.journal_offset = self.journal_offset.max(*offset);
                }
            }
            if let Some(gap) = gaps.poll_gap(now_us()) {
                self.pull_gap(&producer, &mut gaps, gap.seq_missing_first, gap.seq_seen_max).await?;
                self.apply_ready(&mut gaps, &mut job);
            }
            // A lost tail leaves no hole to see: nothing follows it. But the other centers' acks
            // tell how far the journal goes: pull what another center applied and this one
            // misses once the journal has been quiet for the gap timeout.
            if !batch_messages.is_empty() {
                last_message = std::time::Instant::now();
            } else if last_message.elapsed() >= TAIL_TIMEOUT {
                let known = node.stats.seq_acked_elsewhere.load(Ordering::Relaxed);
                if known >= gaps.seq_next() {
                    let from = gaps.seq_next();
                    self.pull_gap(&producer, &mut gaps, from, known).await?;
                    self.apply_ready(&mut gaps, &mut job);
                    seq_seen_max = seq_seen_max.max(known);
                }
                last_message = std::time::Instant::now();
            }
            job.journal_offset = self.journal_offset;
            if let Some(p) = self.plugins.as_mut() {
                let quiet = batch_messages.is_empty() && seq_seen_max <= self.ledger.seq_applied();
                p.after_apply(&node, self.journal_offset, quiet);
            }
            // Cut when the journal is idle or a quarter batch is ready; the committer merges
            // what queues up behind a running commit.
            if !job.entries.is_empty()
                && (batch_messages.is_empty() || job.entries.len() >= COMMIT_BATCH_ENTRIES / 4)
            {
                let full = std::mem::replace(&mut job, self.new_job());
                self.send(full).await?;
            }
        }
    }

    fn new_job(&self) -> Job {
        Job::empty(self.journal_offset)
    }

    /// Hands an applied run to the committer. Jobs leave in seq order and hold everything
    /// applied before they leave, so the plugin checkpoints taken here are the state at the
    /// job's last seq.
    async fn send(&mut self, mut job: Job) -> anyhow::Result<()> {
        if let Some(feed) = &self.node.read_feed {
            // Every applied entry, in order: the API's read model (waits if it is behind).
            feed.send(job.entries.clone())
                .await
                .map_err(|_| anyhow::anyhow!("the API's read model stopped"))?;
        }
        let mut changed = rtgs_core::ledger::ChangedRows::default();
        let funded = self.ledger.take_changed(&mut changed);
        job.funded = funded.to_vec();
        job.changed.extend(changed.accounts);
        job.holds.extend(changed.holds);
        if let (Some(p), Some(last)) = (self.plugins.as_mut(), job.applied.last()) {
            job.plugins = p.save(&self.node, last.seq);
        }
        self.job_tx.send(job).await.map_err(|_| anyhow::anyhow!("the committer stopped"))
    }

    /// Inserts one entry into the gap buffer (dropping one already applied). When the buffer is
    /// full, applies into `job` and sends it: `job` holds what was applied before, and jobs must
    /// leave in seq order.
    async fn insert(
        &mut self,
        producer: &GapProducer<Entry>,
        gaps: &mut GapConsumer<Entry>,
        e: Entry,
        job: &mut Job,
    ) -> anyhow::Result<()> {
        if e.seq < gaps.seq_next() {
            return Ok(()); // applied already (a republished batch)
        }
        let seq = e.seq;
        match producer.insert(seq, e) {
            Insert::Stored | Insert::Duplicate | Insert::Applied => Ok(()),
            Insert::Full(e) => {
                // Too far ahead of the missing seq: fetch the hole now instead of waiting.
                let next = gaps.seq_next();
                self.pull_gap(producer, gaps, next, seq - 1).await?;
                self.apply_ready(gaps, job);
                if !job.entries.is_empty() {
                    job.journal_offset = self.journal_offset;
                    let full = std::mem::replace(job, self.new_job());
                    self.send(full).await?;
                }
                match producer.insert(seq, e) {
                    Insert::Stored | Insert::Duplicate | Insert::Applied => Ok(()),
                    _ => anyhow::bail!("seq {seq} does not fit the gap buffer after the gap pull"),
                }
            }
            Insert::OutOfRange => anyhow::bail!("journal seq {seq} is out of range"),
        }
    }

    /// Reads `from..=to` back from the sequencer's outbox into the gap buffer.
    async fn pull_gap(
        &mut self,
        producer: &GapProducer<Entry>,
        gaps: &mut GapConsumer<Entry>,
        from: Seq,
        to: Seq,
    ) -> anyhow::Result<()> {
        let node = Arc::clone(&self.node);
        let store = &self.seq_store;
        let batches = retry_pg(&node, "gap pull", || store.batches(from, to)).await?;
        let mut entries = Vec::new();
        for b in &batches {
            codec::decode_frames(&b.frames, &mut entries)
                .with_context(|| format!("outbox batch {} does not decode", b.seq_first))?;
        }
        let mut pulled = 0u64;
        for e in entries {
            if e.seq >= gaps.seq_next() && e.seq <= to {
                if let Insert::Stored = producer.insert(e.seq, e) {
                    pulled += 1;
                }
            }
        }
        node.stats.gap_pulls.fetch_add(1, Ordering::Relaxed);
        node.stats.gap_entries_pulled.fetch_add(pulled, Ordering::Relaxed);
        eprintln!("{}: gap timeout: seqs {from}..={to} pulled from the outbox ({pulled} entries)", node.name);
        Ok(())
    }

    fn apply_ready(&mut self, gaps: &mut GapConsumer<Entry>, job: &mut Job) {
        let (ledger, plugins) = (&mut self.ledger, &mut self.plugins);
        let (now, applied_before) = (now_us(), job.entries.len());
        gaps.drain(usize::MAX, now, |_, e| {
            let mut a = ledger.apply(&e);
            // Plugin state is in the chained hash: the ack vouches for it (plugin_host docs).
            if let Some(digest) = plugins.as_mut().and_then(|p| p.apply(&e, ledger)) {
                a.state_hash = ledger.fold(digest);
            }
            job.applied.push(a);
            job.entries.push(e);
        });
        self.node.stats.seq_applied.store(self.ledger.seq_applied(), Ordering::Relaxed);
        // Timestamps for the quorum latency, once per run of entries (metrics module docs).
        self.node.metrics.applied(&job.entries[applied_before..], now);
    }
}

struct Committer {
    node: Arc<Node>,
    store: Arc<CenterStore>,
    producer: FutureProducer,
    shared: Arc<Shared>,
    notice_tx: mpsc::Sender<Handover>,
}

impl Committer {
    async fn run(self, mut jobs: mpsc::Receiver<Job>) -> anyhow::Result<()> {
        let node = Arc::clone(&self.node);
        loop {
            let mut job = match tokio::time::timeout(IDLE_COMMIT, jobs.recv()).await {
                Ok(Some(job)) => Some(job),
                Ok(None) => anyhow::bail!("the journal reader stopped"),
                Err(_) => None,
            };
            // Behind? Commit what queued up as one transaction: an account that changed in
            // several batches is written once (balance upserts are the dearest rows here).
            if let Some(j) = job.as_mut() {
                while j.entries.len() < MERGED_COMMIT_ENTRIES_MAX {
                    match jobs.try_recv() {
                        Ok(next) => j.merge(next),
                        Err(_) => break,
                    }
                }
            }
            if let Some(from) = self.shared.take_reack() {
                // Finality stalls: this center's acks from there, again (committed ones only).
                let store = &self.store;
                let max = super::finality::REACK_ENTRIES_MAX;
                let since =
                    retry_pg(&node, "read acks to publish again", || store.applied_from(from, max)).await?;
                let acks: Vec<Applied> = since.iter().map(|(a, _, _)| *a).collect();
                for chunk in acks.chunks(COMMIT_BATCH_ENTRIES) {
                    publish_acks(&node, &self.producer, chunk).await?;
                }
            }
            let progress = self.shared.take();
            if job.is_none() && progress.is_none() {
                continue;
            }
            let progress = progress.unwrap_or_else(|| self.shared.current());
            let job = job.unwrap_or_else(|| Job::empty(-1));
            let commit = BatchCommit {
                entries: &job.entries,
                applied: &job.applied,
                journal_offset: job.journal_offset,
                changed_accounts: &job.changed,
                changed_holds: &job.holds,
                funded: &job.funded,
                final_ranges: &progress.ranges,
                tallies: &[],
                seq_unfinal_first: progress.seq_unfinal_first,
                ack_offset: progress.ack_offset,
                seq_notice_from: progress.seq_notice_from,
            };
            let last = job.applied.last().map(|a| a.seq);
            let mut took = Duration::ZERO;
            loop {
                let started = std::time::Instant::now();
                match self.store.commit_batch_with(&commit, job.plugins.as_save()).await {
                    Ok(()) => {
                        took = started.elapsed();
                        break;
                    }
                    Err(e @ (StoreError::Pg(_) | StoreError::Pool(_))) => {
                        node.stats.pg_retries.fetch_add(1, Ordering::Relaxed);
                        eprintln!("{}: commit: {e}; retrying until PostgreSQL answers", node.name);
                        tokio::time::sleep(super::RETRY_PAUSE).await;
                        // The commit may have happened before the connection was lost.
                        let store = &self.store;
                        let applied = retry_pg(&node, "read watermark", || store.seq_applied()).await?;
                        if last.is_some_and(|l| applied >= l) {
                            break;
                        }
                    }
                    Err(e) => return Err(e).context("commit of an applied batch"),
                }
            }
            if let Some(last) = last {
                node.stats.seq_committed.store(last, Ordering::Relaxed);
                node.stats.batches_committed.fetch_add(1, Ordering::Relaxed);
                // `took` stays 0 for a commit settled by reading the watermark back: not timed.
                if !took.is_zero() {
                    node.metrics.committed(&job.entries, took, now_us());
                }
                // Acks only after the commit (mission.md §2.5).
                for chunk in job.applied.chunks(COMMIT_BATCH_ENTRIES) {
                    publish_acks(&node, &self.producer, chunk).await?;
                }
                let owed: Vec<NoticeItem> = job
                    .entries
                    .iter()
                    .zip(&job.applied)
                    .filter(|(e, _)| e.origin == node.center && !e.bmi.is_none())
                    .map(|(e, a)| (*a, e.bmi))
                    .collect();
                self.notice_tx
                    .send(Handover { committed_through: last, owed })
                    .await
                    .map_err(|_| anyhow::anyhow!("the finality task stopped"))?;
            }
        }
    }
}
