//! When the broker goes away, and when it comes back without its data.
//!
//! **Gone.** When a consumer reports that every broker connection is down, the node restarts
//! itself: the process is replaced by a fresh start of the same command ([`restart`], crash-only:
//! the same as `kill -9` and a start, and everything done is durable). A fresh process holds no
//! client that knew the broker's old topics: librdkafka 2.12 crashes (SIGSEGV in its metadata
//! cache) when a topic it knew comes back with a new identity or unnamed, which is what a broker
//! on memory storage does after a restart. The restarted node waits for the broker as long as
//! it takes.
//!
//! **Back without its data.** At start, before any task reads a topic, [`check`] compares what
//! this node recorded having read (the center's journal and ack offsets, the sequencer's inbound
//! offset) with the topics' ends. A topic that ends before a recorded offset lost its data (a
//! broker on memory storage restarted, a wiped or recreated topic): the node halts — nothing is
//! read, sequenced or finalized; the status says why, `rtgs_broker_data_lost` is 1 and the line
//! repeats every 10 s — until an operator runs `rtgs rebuild-journal`, which publishes the whole
//! outbox again and raises the broker generation in the sequencer database. A center whose
//! generation is older than the sequencer's reads the new topics from their start (what it
//! applied is dropped by seq, finality counts the acks again) and adopts it.

use crate::broker::topic_ends;
use crate::error::EngineError;
use crate::limits::{BROKER_LOSS_POLL, BROKER_LOST_LINE_EVERY};
use crate::pg::PgRetry;
use crate::status::Status;
use crate::NodeConfig;
use rtgs_kafka::topics::TopicNames;
use rtgs_pg::center_store::CenterStore;
use rtgs_pg::sequencer_store::SequencerStore;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Set by any consumer of this process that saw every broker connection down. Process-wide on
/// purpose: the one thing it decides is to restart the whole process.
static GONE: AtomicBool = AtomicBool::new(false);

/// Set in the environment of a node restarted by [`restart`]: it waits for the broker.
pub const RESTARTED_ENV: &str = "RTGS_RESTARTED_AFTER_BROKER_LOSS";

/// A consumer error: every broker connection is down.
pub fn note_error(e: &rdkafka::error::KafkaError) {
    if e.rdkafka_error_code() == Some(rdkafka::types::RDKafkaErrorCode::AllBrokersDown) {
        GONE.store(true, Ordering::Release);
    }
}

/// Whether this node was restarted because the broker went away.
pub fn restarted() -> bool {
    std::env::var_os(RESTARTED_ENV).is_some()
}

/// Watches for the broker going away; then replaces the process (never returns unless the
/// restart itself failed).
pub async fn watch(name: String) -> Result<(), EngineError> {
    loop {
        tokio::time::sleep(BROKER_LOSS_POLL).await;
        if GONE.load(Ordering::Acquire) {
            return Err(restart(&name));
        }
    }
}

/// Replaces this process with a fresh start of the same command line and environment (plus
/// [`RESTARTED_ENV`]). Returns only the error of a failed `exec`.
pub fn restart(name: &str) -> EngineError {
    use std::os::unix::process::CommandExt;
    tracing::warn!(
        center = %name,
        "every broker connection is down: restarting this node (crash-only; a fresh process \
         keeps no client that knew the broker's topics) — it waits for the broker"
    );
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return EngineError::io("restarting the node: its executable", e),
    };
    let e = std::process::Command::new(exe).args(std::env::args_os().skip(1)).env(RESTARTED_ENV, "1").exec();
    EngineError::io("restarting the node", e)
}

/// Before any task reads a topic: adopts a rebuilt broker's generation, or halts while the
/// broker has lost data that nothing rebuilt yet (module docs). `Ok` once the node may run.
pub async fn check(
    config: &NodeConfig,
    topics: &TopicNames,
    center: &CenterStore,
    sequencer: &SequencerStore,
    retry: &PgRetry,
    status: &Arc<Status>,
) -> Result<(), EngineError> {
    let (name, bootstrap, status_file) = (config.name(), &config.bootstrap, config.status_file.as_deref());
    let mut last_line: Option<Instant> = None;
    loop {
        let generation = retry.get("broker generation", || sequencer.broker_generation()).await?;
        let (own, journal_offset, ack_offset) =
            retry.get("broker position", || center.broker_position()).await?;
        if own < generation {
            retry.get("adopt the broker generation", || center.adopt_broker_generation(generation)).await?;
            tracing::info!(
                center = %name,
                generation,
                "the journal was rebuilt (broker generation {generation}): reading the new topics from \
                 their start"
            );
            *crate::status::lock(&status.broker_lost) = None;
            return Ok(());
        }
        let inbound_offset = retry.get("inbound offset", || sequencer.inbound_offset()).await?;
        let ends = topic_ends(bootstrap, &[&topics.journal, &topics.applied, &topics.inbound])?;
        let lost: Vec<String> = [
            (&topics.journal, journal_offset, ends[0], "this center read"),
            (&topics.applied, ack_offset, ends[1], "this center read"),
            (&topics.inbound, inbound_offset, ends[2], "the sequencer recorded"),
        ]
        .iter()
        .filter(|(_, offset, end, _)| *offset >= *end)
        .map(|(topic, offset, end, who)| {
            format!("{topic} ends at offset {end} but {who} up to offset {offset}")
        })
        .collect();
        if lost.is_empty() {
            *crate::status::lock(&status.broker_lost) = None;
            return Ok(());
        }
        let why = lost.join("; ");
        *crate::status::lock(&status.broker_lost) = Some(why.clone());
        if let Some(file) = status_file {
            status.write(file);
        }
        if last_line.is_none_or(|t| t.elapsed() >= BROKER_LOST_LINE_EVERY) {
            last_line = Some(Instant::now());
            tracing::error!(
                center = %name,
                generation,
                "HALTED: the broker lost data ({why}; broker generation {generation}). Nothing is read, \
                 sequenced or finalized. Run `rtgs rebuild-journal` (it publishes the outbox again); this node \
                 then goes on by itself."
            );
        }
        tokio::time::sleep(BROKER_LOSS_POLL * 10).await;
    }
}
