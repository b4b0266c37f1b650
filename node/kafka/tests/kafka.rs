//! The Kafka adapters against the real Kafka-compatible broker (tansu), started through the
//! project's own `scripts/infra-up.sh broker` (installs it when missing). If it cannot be started
//! the tests fail and say why.

use rdkafka::consumer::{Consumer, DefaultConsumerContext, StreamConsumer};
use rdkafka::message::Message;
use rdkafka::producer::FutureRecord;
use rtgs_core::codec;
use rtgs_core::entry::{CenterId, Entry};
use rtgs_kafka::topics::{self, TopicSpec};
use rtgs_kafka::{clients, KafkaAdapterError};
use std::time::{Duration, Instant};

const BOOTSTRAP: &str = "127.0.0.1:9092";

/// Starts the broker through the project's script (once per test binary); fails the test with
/// the script's message if it cannot.
fn broker() {
    if let Err(e) = rtgs_pg::dev::start_infra("broker") {
        panic!("the broker could not be started, so this test cannot run: {e}");
    }
}

fn unique(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{name}.{}.{nanos}", std::process::id())
}

fn one_partition(name: &str) -> TopicSpec {
    TopicSpec {
        name: name.to_string(),
        partitions: 1,
        config: vec![("retention.ms", topics::RETENTION_FOREVER_MS)],
    }
}

#[tokio::test]
async fn production_topics_are_created_idempotently_with_one_journal_partition() {
    broker();
    let t = Duration::from_secs(20);
    topics::ensure(BOOTSTRAP, &topics::production(), 1, t).await.unwrap_or_else(|e| panic!("{e}"));
    topics::ensure(BOOTSTRAP, &topics::production(), 1, t)
        .await
        .unwrap_or_else(|e| panic!("second run: {e}"));
    // Asking for a partition count the journal does not have is refused, not ignored.
    let mut wrong = topics::production();
    wrong[1].partitions = 3;
    match topics::ensure(BOOTSTRAP, &wrong, 1, t).await {
        Err(KafkaAdapterError::Partitions { topic, found: 1, expected: 3 }) => {
            assert_eq!(topic, topics::JOURNAL)
        }
        other => panic!("partition mismatch not detected: {other:?}"),
    }
}

#[tokio::test]
async fn journal_frames_round_trip_in_order() {
    broker();
    let topic = unique("rtgs.test.journal");
    topics::ensure(BOOTSTRAP, &[one_partition(&topic)], 1, Duration::from_secs(20))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let producer = clients::producer(BOOTSTRAP, "rtgs-test-producer").unwrap_or_else(|e| panic!("{e}"));
    let (frames, per_frame) = (100u64, 50u64);
    let started = Instant::now();
    for f in 0..frames {
        let entries: Vec<Entry> = (f * per_frame + 1..=(f + 1) * per_frame)
            .map(|seq| Entry::tick(seq, 1, seq, CenterId(1)))
            .collect();
        let mut frame = Vec::new();
        codec::encode_frame(&entries, &mut frame);
        let key = (f * per_frame + 1).to_be_bytes();
        producer
            .send(FutureRecord::to(&topic).payload(&frame).key(&key[..]), Duration::from_secs(10))
            .await
            .unwrap_or_else(|(e, _)| panic!("produce: {e}"));
    }
    let produced = started.elapsed();
    let consumer: StreamConsumer =
        clients::consumer(BOOTSTRAP, &unique("ledger-test"), "rtgs-test-consumer", DefaultConsumerContext)
            .unwrap_or_else(|e| panic!("{e}"));
    consumer.subscribe(&[&topic]).unwrap_or_else(|e| panic!("{e}"));
    let mut next = 1u64;
    let deadline = Instant::now() + Duration::from_secs(60);
    while next <= frames * per_frame {
        assert!(Instant::now() < deadline, "consumed only up to seq {} in 60 s", next - 1);
        let Ok(Ok(msg)) = tokio::time::timeout(Duration::from_secs(5), consumer.recv()).await else {
            continue;
        };
        let mut entries = Vec::new();
        let payload = msg.payload().unwrap_or_default();
        assert_eq!(codec::decode_frame(payload, &mut entries), Ok(Some(payload.len())), "frame intact");
        for e in entries {
            assert_eq!(e.seq, next, "journal order");
            next += 1;
        }
    }
    eprintln!("journal round trip: {frames} frames of {per_frame} entries produced in {produced:?}, all consumed in order");
}
