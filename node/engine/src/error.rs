//! The engine's errors. Three kinds, kept apart because the node treats them apart:
//!
//! * **Unavailable** servers (PostgreSQL not answering, restarting, out of connections): not an
//!   error value at all outside [`crate::pg::PgRetry`], which rides them out; librdkafka does the
//!   same for the broker and the publishers repeat a send until it is confirmed.
//! * **Invariant** violations ([`Invariant`]): a stored state that does not add up, a message the
//!   engine wrote itself that does not decode, a commit that does not follow the watermark. The
//!   node stops; an operator must look.
//! * Everything else that stops the node ([`EngineError`]): a configuration the node cannot run
//!   with, a port in use, a server refusing a call for good, a task that stopped.
//!
//! A fenced sequencer write is none of these: it is [`LeadError::Fenced`], a value the sequencer
//! task matches on (step down, keep running). `anyhow` is the binary's, never used here.

use rtgs_core::entry::Seq;
use rtgs_kafka::KafkaAdapterError;
use rtgs_pg::StoreError;

/// A broken invariant: the node stops.
#[derive(Debug, thiserror::Error)]
#[error("invariant violated: {0}")]
pub struct Invariant(pub String);

/// Why the node stops.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Invariant(#[from] Invariant),
    /// PostgreSQL answered, and the answer is final (a refused statement, a missing table).
    #[error("{what}: {source}")]
    Store { what: String, source: StoreError },
    /// PostgreSQL did not answer within the start-up deadline.
    #[error("{what}: PostgreSQL did not answer ({source}); is it up? (scripts/infra-up.sh)")]
    Unreachable { what: String, source: StoreError },
    #[error("{what}: {source}")]
    Kafka { what: String, source: KafkaAdapterError },
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    #[error("configuration: {0}")]
    Config(String),
    /// A task this one depends on has stopped (its channel closed): the node stops with it.
    #[error("the {0} stopped")]
    TaskGone(&'static str),
}

impl EngineError {
    /// A store error that is not "unavailable" (those are retried, never reach here): stored
    /// data that does not add up is an invariant violation, the rest a final refusal.
    pub fn store(what: impl Into<String>, source: StoreError) -> Self {
        let what = what.into();
        match source {
            StoreError::Corrupt(_) | StoreError::OutOfOrder { .. } | StoreError::Fenced { .. } => {
                EngineError::Invariant(Invariant(format!("{what}: {source}")))
            }
            source => EngineError::Store { what, source },
        }
    }

    pub fn kafka(what: impl Into<String>, source: impl Into<KafkaAdapterError>) -> Self {
        EngineError::Kafka { what: what.into(), source: source.into() }
    }

    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        EngineError::Io { what: what.into(), source }
    }
}

/// Why a sequencer leader's round ended early.
#[derive(Debug, thiserror::Error)]
pub enum LeadError {
    /// Another instance took over (its epoch fences this one's writes): step down.
    #[error("fenced by a newer leader (epoch {epoch} is no longer current at seq {seq_first})")]
    Fenced { epoch: u32, seq_first: Seq },
    #[error(transparent)]
    Stop(#[from] EngineError),
}

impl From<Invariant> for LeadError {
    fn from(e: Invariant) -> Self {
        LeadError::Stop(e.into())
    }
}
