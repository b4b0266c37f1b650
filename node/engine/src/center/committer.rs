//! The committer: each [`Commit`] the `Center` asks for becomes one PostgreSQL transaction
//! (`CenterStore::commit`: entries by binary COPY, changed balances and holds, finality ranges,
//! the watermark and the stream positions, the plugin state when it changed). Commits that queue
//! up behind a running one are merged into one (an account that changed in several is written
//! once: balance upserts are the dearest rows here). Then the center task learns how far it is
//! durable — and only then does the `Center` release the acks.
//!
//! A commit whose outcome was lost with its connection is settled by reading the watermark back
//! ([`PgRetry::write`]); a commit that does not follow the watermark is an invariant violation.

use crate::error::EngineError;
use crate::limits::{MERGED_COMMIT_ENTRIES_MAX, PROGRESS_COMMIT_DELAY};
use crate::metrics::Metrics;
use crate::pg::PgRetry;
use crate::plugins::StoredPlugins;
use crate::status::CommitStats;
use rtgs_core::center::Commit;
use rtgs_core::entry::{Entry, Seq};
use rtgs_pg::center_store::CenterStore;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::{mpsc, watch};

/// A commit and what to store of the plugin state with it.
pub struct CommitJob {
    pub commit: Commit,
    pub plugins: StoredPlugins,
}

impl CommitJob {
    /// `self` then `next` as one commit.
    pub fn merge(&mut self, next: CommitJob) {
        self.commit.merge(next.commit);
        self.plugins.merge(next.plugins);
    }
}

pub struct Committer {
    pub name: String,
    pub store: Arc<CenterStore>,
    pub retry: PgRetry,
    pub rx: mpsc::Receiver<CommitJob>,
    /// To the center task: durable through this seq.
    pub committed: watch::Sender<Seq>,
    pub feed: Option<mpsc::Sender<Vec<Entry>>>,
    pub stats: Arc<CommitStats>,
    pub metrics: Arc<Metrics>,
    /// This center's acks the broker confirmed, through this seq (the publisher's): noted with
    /// each commit, where a restart publishes again from.
    pub acks_confirmed: Arc<AtomicU64>,
}

impl Committer {
    pub async fn run(mut self) -> Result<(), EngineError> {
        loop {
            let mut job = self.rx.recv().await.ok_or(EngineError::TaskGone("center task"))?;
            // Finality progress alone waits a little for something to ride with.
            if job.commit.applied.is_empty() {
                if let Ok(Some(next)) = tokio::time::timeout(PROGRESS_COMMIT_DELAY, self.rx.recv()).await {
                    job.merge(next);
                }
            }
            while job.commit.applied.len() < MERGED_COMMIT_ENTRIES_MAX {
                match self.rx.try_recv() {
                    Ok(next) => job.merge(next),
                    Err(_) => break,
                }
            }
            self.commit(job).await?;
        }
    }

    async fn commit(&mut self, job: CommitJob) -> Result<(), EngineError> {
        let last = job.commit.seq_last();
        let (store, started) = (&self.store, Instant::now());
        let acks_confirmed = self.acks_confirmed.load(Ordering::Acquire);
        let answered = self
            .retry
            .write(
                "commit",
                || store.commit_noting(&job.commit, job.plugins.as_save(), Some(acks_confirmed)),
                // The commit may have happened before the connection was lost: it did if the
                // watermark is at its last seq (progress alone is simply written again).
                || async move {
                    match last {
                        Some(last) => Ok(store.seq_applied().await? >= last),
                        None => Ok(false),
                    }
                },
            )
            .await
            .map_err(|e| EngineError::store(format!("{}: commit of seqs up to {last:?}", self.name), e))?;
        let Some(last) = last else { return Ok(()) };
        self.stats.seq_committed.store(last, Ordering::Relaxed);
        self.stats.batches_committed.fetch_add(1, Ordering::Relaxed);
        // A commit settled by reading the watermark back is not timed.
        if answered.is_some() {
            self.metrics.committed(&job.commit.entries, started.elapsed(), crate::clock::wall_us());
        }
        // Its acks may go out now (the `Center` releases them).
        self.committed.send_replace(last);
        if let Some(feed) = &self.feed {
            // Every committed entry, in order: the API's read model (waits if it is behind).
            feed.send(job.commit.entries).await.map_err(|_| EngineError::TaskGone("API's read model"))?;
        }
        Ok(())
    }
}
