//! The topics of the production engine, created idempotently with explicit settings.

use crate::clients::MESSAGE_BYTES_MAX_TEXT;
use crate::KafkaAdapterError;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::types::RDKafkaErrorCode;
use std::time::Duration;

pub const INBOUND: &str = "rtgs.inbound";
pub const JOURNAL: &str = "rtgs.journal";
pub const APPLIED: &str = "rtgs.applied";
pub const NOTIFY: &str = "rtgs.notify";

/// One topic: name, partitions, settings.
#[derive(Clone, Debug)]
pub struct TopicSpec {
    pub name: String,
    pub partitions: i32,
    pub config: Vec<(&'static str, &'static str)>,
}

const WEEK_MS: &str = "604800000";

/// The names of the four topics: `PREFIX.inbound`, `PREFIX.journal`, `PREFIX.applied`,
/// `PREFIX.notify` (the default prefix `rtgs` gives [`INBOUND`], [`JOURNAL`], ...). Tests and
/// side-by-side clusters on one broker use their own prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicNames {
    pub inbound: String,
    pub journal: String,
    pub applied: String,
    pub notify: String,
}

impl TopicNames {
    pub fn with_prefix(prefix: &str) -> Self {
        TopicNames {
            inbound: format!("{prefix}.inbound"),
            journal: format!("{prefix}.journal"),
            applied: format!("{prefix}.applied"),
            notify: format!("{prefix}.notify"),
        }
    }
}

impl Default for TopicNames {
    fn default() -> Self {
        TopicNames::with_prefix("rtgs")
    }
}

/// `retention.ms` that never expires (`i64::MAX` ms), spelled as the broker takes it.
pub const RETENTION_FOREVER_MS: &str = "9223372036854775807";

/// The four topics. Every one has exactly one partition: the journal must (global order); the
/// inbound topic has one partition so that the sequencer reads every command in one order; acks and notices are
/// small and one partition keeps each center's stream in order.
pub fn production() -> Vec<TopicSpec> {
    production_named(&TopicNames::default())
}

/// [`production`] under other names.
pub fn production_named(names: &TopicNames) -> Vec<TopicSpec> {
    let spec = |name: &str, config: Vec<(&'static str, &'static str)>| TopicSpec {
        name: name.to_string(),
        partitions: 1,
        config,
    };
    // Every topic takes the producers' largest message, whatever the broker's default.
    let max = ("max.message.bytes", MESSAGE_BYTES_MAX_TEXT);
    vec![
        spec(&names.inbound, vec![("cleanup.policy", "delete"), ("retention.ms", WEEK_MS), max]),
        // The journal is the record of money: never deleted by the broker. Not "-1" (Kafka's
        // "no limit"): tansu 0.6's sqlite storage reads -1 as "older than -1 ms" and deleted
        // every journal record at its next retention sweep (seen: a broker restarted with every
        // journal record gone, its watermark intact); the largest value means the same on both.
        spec(&names.journal, vec![("cleanup.policy", "delete"), ("retention.ms", RETENTION_FOREVER_MS), max]),
        spec(&names.applied, vec![("cleanup.policy", "delete"), ("retention.ms", WEEK_MS), max]),
        spec(&names.notify, vec![("cleanup.policy", "delete"), ("retention.ms", WEEK_MS), max]),
    ]
}

/// Creates what is missing (an existing topic is fine) and checks every partition count.
pub async fn ensure(
    bootstrap: &str,
    specs: &[TopicSpec],
    replication: i32,
    timeout: Duration,
) -> Result<(), KafkaAdapterError> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("client.id", "rtgs-admin")
        .set("socket.timeout.ms", "10000")
        .create()?;
    let new: Vec<NewTopic<'_>> = specs
        .iter()
        .map(|s| {
            s.config.iter().fold(
                NewTopic::new(&s.name, s.partitions, TopicReplication::Fixed(replication)),
                |t, (k, v)| t.set(k, v),
            )
        })
        .collect();
    for result in admin.create_topics(&new, &AdminOptions::new().operation_timeout(Some(timeout))).await? {
        match result {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((topic, code)) => return Err(KafkaAdapterError::TopicCreate { topic, code }),
        }
    }
    for s in specs {
        let metadata = admin.inner().fetch_metadata(Some(&s.name), timeout)?;
        let found = metadata.topics().iter().find(|t| t.name() == s.name).map_or(0, |t| t.partitions().len());
        if found != s.partitions as usize {
            return Err(KafkaAdapterError::Partitions {
                topic: s.name.clone(),
                found,
                expected: s.partitions as usize,
            });
        }
    }
    Ok(())
}
