//! The engine's side of the broker: the names (topics, groups), consumers assigned at a
//! position, batches read, messages published until the broker confirms them. Every client
//! setting is spelled out where the clients are built, `rtgs_kafka::clients`.

use crate::error::EngineError;
use crate::frames;
use crate::limits::{
    BROKER_CALL_TIMEOUT, COMMANDS_PER_MESSAGE, CONSUMER_ERROR_PAUSE, PUBLISH_RETRY_PAUSE, PUBLISH_TIMEOUT,
};
use futures_util::FutureExt;
use rdkafka::consumer::{Consumer, ConsumerContext, DefaultConsumerContext, StreamConsumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rtgs_core::codec;
use rtgs_core::entry::{CenterId, Command};
use rtgs_kafka::topics::TopicNames;
use std::time::Duration;

/// Where the broker is and what the cluster's topics and groups are called.
#[derive(Clone, Debug)]
pub struct Broker {
    pub bootstrap: String,
    pub topics: TopicNames,
    /// Groups are prefixed when the topics are (side-by-side clusters, drills).
    group_prefix: Option<String>,
}

impl Broker {
    /// Topics `PREFIX.inbound` ...; groups `PREFIX.sequencer` ... unless the prefix is `rtgs`.
    pub fn new(bootstrap: &str, topic_prefix: &str) -> Self {
        Broker {
            bootstrap: bootstrap.to_string(),
            topics: TopicNames::with_prefix(topic_prefix),
            group_prefix: (topic_prefix != "rtgs").then(|| topic_prefix.to_string()),
        }
    }

    /// Consumer group `name`, prefixed when the topics are.
    pub fn group(&self, name: &str) -> String {
        match &self.group_prefix {
            Some(p) => format!("{p}.{name}"),
            None => name.to_string(),
        }
    }

    pub fn producer(&self, client_id: &str) -> Result<FutureProducer, EngineError> {
        rtgs_kafka::clients::producer(&self.bootstrap, client_id)
            .map_err(|e| EngineError::kafka(format!("producer {client_id}"), e))
    }

    /// A consumer of each of `from`'s topics' one partition from its offset, in group `group`:
    /// assigned, not subscribed (each center reads everything; its progress is in its own
    /// database). Its fetch wait is `wait` (`rtgs_kafka::clients::consumer_waiting`); several
    /// topics are fetched in one request each wait.
    pub fn assigned_consumer(
        &self,
        group: &str,
        client_id: &str,
        from: &[(&str, i64)],
        wait: std::time::Duration,
    ) -> Result<StreamConsumer, EngineError> {
        let consumer: StreamConsumer = rtgs_kafka::clients::consumer_waiting(
            &self.bootstrap,
            &self.group(group),
            client_id,
            DefaultConsumerContext,
            u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
        )
        .map_err(|e| EngineError::kafka(format!("consumer {client_id}"), e))?;
        let mut tpl = rdkafka::TopicPartitionList::new();
        for &(topic, offset) in from {
            tpl.add_partition_offset(topic, 0, rdkafka::Offset::Offset(offset))
                .map_err(|e| EngineError::kafka(format!("assign {topic} from offset {offset}"), e))?;
        }
        consumer.assign(&tpl).map_err(|e| EngineError::kafka(format!("assign {from:?}"), e))?;
        Ok(consumer)
    }
}

/// The end (high watermark) of each of `topics`' one partition, asked by a short-lived client
/// that never creates a topic (the broker-loss check and `rtgs rebuild-journal`).
pub fn topic_ends(bootstrap: &str, topics: &[&str]) -> Result<Vec<i64>, EngineError> {
    let consumer: rdkafka::consumer::BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("client.id", "rtgs-topic-ends")
        .set("allow.auto.create.topics", "false")
        .create()
        .map_err(|e| EngineError::kafka("the topic-ends client", e))?;
    topics
        .iter()
        .map(|topic| {
            tokio::task::block_in_place(|| consumer.fetch_watermarks(topic, 0, BROKER_CALL_TIMEOUT))
                .map(|(_, high)| high)
                .map_err(|e| EngineError::kafka(format!("the end of {topic}"), e))
        })
        .collect()
}

/// Batch on every hop: waits up to `wait` for one message, then takes whatever else is already
/// there, up to about `bytes_max` bytes — `(offset, payload)` in order, empty if none came. A
/// consumer error is reported and paused on (librdkafka reconnects by itself).
pub async fn recv_batch<C: ConsumerContext + 'static>(
    consumer: &StreamConsumer<C>,
    wait: Duration,
    bytes_max: usize,
    who: &str,
) -> Vec<(i64, Vec<u8>)> {
    recv_batch_with(consumer, wait, bytes_max, who, |m| (m.offset(), m.payload().unwrap_or(&[]).to_vec()))
        .await
}

/// [`recv_batch`], each message taken as `take` makes it (a consumer of several topics tells
/// them apart there).
pub async fn recv_batch_with<C: ConsumerContext + 'static, T>(
    consumer: &StreamConsumer<C>,
    wait: Duration,
    bytes_max: usize,
    who: &str,
    take: impl Fn(&rdkafka::message::BorrowedMessage<'_>) -> T,
) -> Vec<T> {
    let mut batch = Vec::new();
    let mut bytes = match tokio::time::timeout(wait, consumer.recv()).await {
        Ok(Ok(m)) => {
            batch.push(take(&m));
            m.payload_len()
        }
        Ok(Err(e)) => {
            crate::broker_loss::note_error(&e);
            tracing::warn!(who = %who, "{e}");
            tokio::time::sleep(CONSUMER_ERROR_PAUSE).await;
            return batch;
        }
        Err(_) => return batch,
    };
    while bytes < bytes_max {
        match consumer.recv().now_or_never() {
            Some(Ok(m)) => {
                bytes += m.payload_len();
                batch.push(take(&m));
            }
            _ => break,
        }
    }
    batch
}

/// Publishes one message and waits for the broker's confirmation, again until it comes (a
/// message the broker may have stored twice is harmless: every reader is idempotent).
/// Returns the offset the broker stored it at.
pub async fn publish(
    producer: &FutureProducer,
    topic: &str,
    key: Option<&[u8]>,
    payload: &[u8],
    who: &str,
) -> i64 {
    loop {
        let mut record = FutureRecord::<[u8], [u8]>::to(topic).payload(payload);
        if let Some(key) = key {
            record = record.key(key);
        }
        match producer.send(record, PUBLISH_TIMEOUT).await {
            Ok(delivery) => return delivery.offset,
            Err((e, _)) => {
                tracing::warn!(who = %who, "publishing to {topic}: {e}; again");
                tokio::time::sleep(PUBLISH_RETRY_PAUSE).await;
            }
        }
    }
}

/// Commands as inbound messages: frames the broker takes.
pub fn inbound_messages(commands: &[Command]) -> Vec<Vec<u8>> {
    frames::cut(commands, COMMANDS_PER_MESSAGE, frames::command_bytes)
        .into_iter()
        .map(|range| {
            let mut body = Vec::new();
            codec::encode_commands_frame(&commands[range], &mut body);
            body
        })
        .collect()
}

/// `commands` as at most [`PUSH_INBOUND_NOTICES_MAX`](crate::limits::PUSH_INBOUND_NOTICES_MAX)
/// inbound messages of at most [`PUSH_INBOUND_BYTES_MAX`](crate::limits::PUSH_INBOUND_BYTES_MAX)
/// bytes each, in order, if they fit (`crate::push`); `None` otherwise — a load that drains more
/// at a time is not waiting for the broker's hop.
pub fn pushable_messages(commands: &[Command]) -> Option<Vec<Vec<u8>>> {
    use crate::limits::{PUSH_INBOUND_BYTES_MAX, PUSH_INBOUND_COMMAND_BYTES_MAX, PUSH_INBOUND_NOTICES_MAX};
    frames::bytes_within(commands, PUSH_INBOUND_COMMAND_BYTES_MAX, frames::command_bytes)?;
    let ranges = frames::cut_within(commands, usize::MAX, PUSH_INBOUND_BYTES_MAX, frames::command_bytes);
    if ranges.len() > PUSH_INBOUND_NOTICES_MAX {
        return None;
    }
    ranges
        .into_iter()
        .map(|range| {
            let mut body = Vec::new();
            codec::encode_commands_frame(&commands[range], &mut body);
            (body.len() <= PUSH_INBOUND_BYTES_MAX).then_some(body)
        })
        .collect()
}

/// Publishes commands to the inbound topic (keyed by their origin), in frames the broker takes,
/// each repeated until confirmed: all handed to the producer at once (one produce request rather
/// than a round trip each), then each waited for.
pub async fn submit(
    producer: &FutureProducer,
    inbound: &str,
    origin: CenterId,
    commands: &[Command],
    who: &str,
) {
    let bodies = inbound_messages(commands);
    let key = [origin.0];
    futures_util::future::join_all(
        bodies.iter().map(|body| publish(producer, inbound, Some(&key), body, who)),
    )
    .await;
}
