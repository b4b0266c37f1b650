//! `rtgs rebuild-journal`: the journal published again from the sequencer's outbox, after the
//! broker lost its data (`broker_loss`). Every recorded batch — the whole global order, which
//! PostgreSQL holds durably — is published again in seq order to the journal topic (created if
//! missing), each confirmed by the broker; then one transaction raises the broker generation,
//! fences whoever led (epoch + 1), frees the lease and starts the inbound topic from its
//! beginning. The halted nodes see the new generation, read the new topics from their start and
//! go on. Commands that were on the lost inbound topic and not yet sequenced are gone: their
//! senders retry them by `bmi` (a `bmi` sequenced before is answered, never paid twice).

use crate::broker::{publish, topic_ends, Broker};
use crate::error::EngineError;
use crate::limits::{REBUILD_PAGE_BATCHES, TOPICS_TIMEOUT};
use crate::pg::PgServer;
use rdkafka::producer::FutureRecord;
use rtgs_pg::sequencer_store::SequencerStore;

/// What `rtgs rebuild-journal` is given.
#[derive(Clone, Debug)]
pub struct RebuildConfig {
    pub bootstrap: String,
    pub topic_prefix: String,
    pub seq_db: String,
    pub pg: PgServer,
    /// Publish even though the journal topic is not empty (it lost only part of its data).
    pub force: bool,
}

/// What the rebuild did.
#[derive(Clone, Debug)]
pub struct Rebuilt {
    pub journal_topic: String,
    /// Messages the journal topic held before (0 after a loss).
    pub journal_end_before: i64,
    pub batches: u64,
    pub seq_last: u64,
    pub broker_generation: i64,
    pub epoch: u32,
}

pub fn rebuild_journal(c: RebuildConfig) -> Result<Rebuilt, EngineError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| EngineError::io("the runtime", e))?;
    rt.block_on(run(c))
}

async fn run(c: RebuildConfig) -> Result<Rebuilt, EngineError> {
    let broker = Broker::new(&c.bootstrap, &c.topic_prefix);
    let pool =
        c.pg.pool(&c.seq_db, 2).map_err(|e| EngineError::Config(format!("database {}: {e}", c.seq_db)))?;
    let store = SequencerStore::new(pool);
    // The database must be the cluster's (a typo must not publish an empty journal).
    store
        .broker_generation()
        .await
        .map_err(|e| EngineError::store(format!("reading the sequencer database {}", c.seq_db), e))?;
    let specs = rtgs_kafka::topics::production_named(&broker.topics);
    rtgs_kafka::topics::ensure(&c.bootstrap, &specs, 1, TOPICS_TIMEOUT).await.map_err(|e| {
        EngineError::kafka(format!("cannot prepare the topics on the broker at {}", c.bootstrap), e)
    })?;
    let journal = broker.topics.journal.clone();
    let end_before = topic_ends(&c.bootstrap, &[&journal])?[0];
    if end_before > 0 && !c.force {
        return Err(EngineError::Config(format!(
            "the journal topic {journal} holds {end_before} messages: it was not lost. If it lost only part \
             of its data (the nodes say HALTED: the broker lost data), run again with --force"
        )));
    }
    let producer = broker.producer("rtgs-rebuild-journal")?;
    let (mut after, mut batches, mut seq_last) = (0u64, 0u64, 0u64);
    loop {
        let page = store
            .outbox_page(after, REBUILD_PAGE_BATCHES)
            .await
            .map_err(|e| EngineError::store("reading the outbox", e))?;
        let Some(last) = page.last() else { break };
        after = last.seq_first;
        // Sent together, then each confirmation awaited (one that failed is published again).
        let mut deliveries = Vec::with_capacity(page.len());
        for b in &page {
            let key = b.seq_first.to_be_bytes();
            let record = FutureRecord::to(&journal).payload(b.frames.as_slice()).key(&key[..]);
            deliveries.push(producer.send_result(record).ok());
        }
        for (b, delivery) in page.iter().zip(deliveries) {
            let confirmed = match delivery {
                Some(d) => matches!(d.await, Ok(Ok(_))),
                None => false,
            };
            if !confirmed {
                let key = b.seq_first.to_be_bytes();
                publish(&producer, &journal, Some(&key), &b.frames, "rtgs rebuild-journal").await;
            }
            batches += 1;
            seq_last = b.seq_last;
        }
    }
    let (broker_generation, epoch) =
        store.journal_rebuilt().await.map_err(|e| EngineError::store("raising the broker generation", e))?;
    Ok(Rebuilt {
        journal_topic: journal,
        journal_end_before: end_before,
        batches,
        seq_last,
        broker_generation,
        epoch,
    })
}
