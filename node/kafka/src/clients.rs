//! Every client of the node is built here, with every setting spelled out and its reason.

use crate::KafkaAdapterError;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{ConsumerContext, StreamConsumer};
use rdkafka::producer::FutureProducer;

/// Largest message a producer sends (`message.max.bytes`) and a topic accepts
/// (`max.message.bytes`, see [`crate::topics`]): 1 MiB, Apache Kafka's default order of size.
/// The engine's limits relate every message it builds to this.
pub const MESSAGE_BYTES_MAX: usize = 1_048_576;
/// [`MESSAGE_BYTES_MAX`] as the settings spell it.
pub const MESSAGE_BYTES_MAX_TEXT: &str = "1048576";
/// A member silent this long leaves its group (`session.timeout.ms`; only subscribed clients
/// have one: the engine's consumers are assigned).
pub const SESSION_TIMEOUT_MS: u64 = 6_000;
/// The producer's client queue (`queue.buffering.max.kbytes`): messages waiting for the broker.
pub const PRODUCER_QUEUE_KBYTES: usize = 262_144;

/// The producer for the journal, acks and notices.
pub fn producer(bootstrap: &str, client_id: &str) -> Result<FutureProducer, KafkaAdapterError> {
    Ok(ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("client.id", client_id)
        // Not idempotent: tansu 0.6 advances a producer's sequence before it stores the batch
        // and cannot bump a producer epoch, so a produce that fails there is retried, answered
        // DUPLICATE_SEQUENCE_NUMBER — success to librdkafka — and never stored: a silent loss
        // (read in tansu's source; a possible cause of notices once found missing even on a
        // re-read of the topic, not proven). Every reader here is idempotent already
        // (journal entries by seq, acks by center and seq, notices at-least-once, inbound
        // commands by bmi), so a duplicate from a retry is harmless; one request in flight
        // keeps retries from reordering a producer's messages.
        .set("enable.idempotence", "false")
        .set("acks", "all")
        .set("max.in.flight.requests.per.connection", "1")
        .set("message.send.max.retries", "2147483647")
        // Batch on every hop, but never hold a message long: the quorum waits on it.
        .set("linger.ms", "1")
        // Small requests on loopback and across data centers: never held back by Nagle.
        .set("socket.nagle.disable", "true")
        .set("batch.num.messages", "10000")
        .set("batch.size", "1048576")
        // The engine cuts every message below this (its `limits`: journal frames, acks, notices
        // and commands per message are sized against it).
        .set("message.max.bytes", MESSAGE_BYTES_MAX_TEXT)
        // CPU is the scarce resource on the target hosts; frames are already compact.
        .set("compression.type", "none")
        // Bounded client queue: back-pressure instead of unbounded growth.
        .set("queue.buffering.max.messages", "100000")
        .set("queue.buffering.max.kbytes", PRODUCER_QUEUE_KBYTES.to_string())
        // After this a send counts as failed; the outbox republishes it (at-least-once).
        .set("message.timeout.ms", "30000")
        .set("retry.backoff.ms", "100")
        .set("socket.keepalive.enable", "true")
        // Topics are created by `topics::ensure` only. librdkafka's producer default (true)
        // lets the broker re-create a topic that vanished (a broker on memory storage
        // restarted) as a new, empty topic with a new identity — which both hides the loss and,
        // in librdkafka 2.12, crashes every client that knew the old identity (SIGSEGV in the
        // metadata cache, confluentinc/librdkafka#4964).
        .set("allow.auto.create.topics", "false")
        .create()?)
}

/// The fetch wait of [`consumer`].
pub const FETCH_WAIT_MS: u64 = 10;

/// A consumer in `group` (`sequencer`, `ledger-DC1`, `finalizer-DC2`, ...), fetch wait
/// [`FETCH_WAIT_MS`].
pub fn consumer<C: ConsumerContext + 'static>(
    bootstrap: &str,
    group: &str,
    client_id: &str,
    context: C,
) -> Result<StreamConsumer<C>, KafkaAdapterError> {
    consumer_waiting(bootstrap, group, client_id, context, FETCH_WAIT_MS)
}

/// [`consumer`] with its own `fetch.wait.max.ms`. The broker here (tansu 0.6) answers a fetch
/// only after the whole wait, even when data arrived at once, and each fetch costs it about a
/// millisecond of CPU on durable storage: a short wait is a short hop but a busy broker (an
/// idle three-node cluster with 10 ms waits kept it at about one core), a long one is cheap but
/// slow. Readers that something faster stands beside (the engine's push path) wait long.
pub fn consumer_waiting<C: ConsumerContext + 'static>(
    bootstrap: &str,
    group: &str,
    client_id: &str,
    context: C,
    fetch_wait_ms: u64,
) -> Result<StreamConsumer<C>, KafkaAdapterError> {
    Ok(ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("client.id", client_id)
        .set("group.id", group)
        // Progress lives in PostgreSQL, committed with the work it covers; the broker's
        // OffsetCommit is not fenced by group generation here, so it is never relied on.
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        // The engine's consumers are assigned their partitions, never subscribed (leadership is
        // a lease in PostgreSQL, not a group): these group settings only matter to a subscribed
        // client (the Kafka tests). 6 s is Apache Kafka's default group.min.session.timeout.ms.
        .set("session.timeout.ms", SESSION_TIMEOUT_MS.to_string())
        .set("heartbeat.interval.ms", "500")
        .set("max.poll.interval.ms", "30000")
        .set("fetch.wait.max.ms", fetch_wait_ms.to_string())
        .set("socket.nagle.disable", "true")
        .set("fetch.min.bytes", "1")
        .set("max.partition.fetch.bytes", "8388608")
        .set("fetch.max.bytes", "52428800")
        // Classic group protocol only (the broker here has no other).
        .set("partition.assignment.strategy", "range")
        // No transactions anywhere.
        .set("isolation.level", "read_uncommitted")
        .set("enable.partition.eof", "false")
        .set("allow.auto.create.topics", "false")
        .set("socket.keepalive.enable", "true")
        .create_with_context(context)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_bound_reads_the_same_in_both_spellings() {
        assert_eq!(MESSAGE_BYTES_MAX_TEXT.parse::<usize>().ok(), Some(MESSAGE_BYTES_MAX));
    }
}
