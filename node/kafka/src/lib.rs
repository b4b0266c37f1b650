//! # rtgs-kafka: Kafka adapters of the production engine
//!
//! # Layout
//! * [`topics`] — the four topics and their settings, created idempotently at start; the journal
//!   must have exactly one partition (global order) or the node refuses to start.
//! * [`clients`] — producers and consumers, every librdkafka setting spelled out at the one place
//!   where clients are built, with the reason for each.
//!
//! * [`wire`] — the applied-ack and notice message formats (CRC-checked).
//!
//! No Kafka transactions are used (the broker here has none); progress lives in PostgreSQL.
//! The production engine that drives these with the core's state machines is `rtgs-engine`
//! (`node/engine`).

pub mod clients;
pub mod topics;
pub mod wire;

#[derive(Debug, thiserror::Error)]
pub enum KafkaAdapterError {
    #[error("kafka: {0}")]
    Kafka(#[from] rdkafka::error::KafkaError),
    #[error("cannot create topic {topic}: {code}")]
    TopicCreate { topic: String, code: rdkafka::types::RDKafkaErrorCode },
    #[error("topic {topic} has {found} partitions, {expected} required")]
    Partitions { topic: String, found: usize, expected: usize },
}
