//! Does the broker lose or repeat messages when several producers write one partition at once?
//! `cargo run -p rtgs-kafka --example broker_stress -- [PRODUCERS] [MESSAGES_EACH] [BYTES]`
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::producer::FutureRecord;
use rdkafka::{Message, Offset, TopicPartitionList};
use rtgs_kafka::topics::{ensure, TopicSpec};
use std::time::Duration;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<u64> = std::env::args().skip(1).map(|a| a.parse().unwrap_or(0)).collect();
    let (producers, each, bytes) = (
        args.first().copied().unwrap_or(3),
        args.get(1).copied().unwrap_or(20_000),
        args.get(2).copied().unwrap_or(2_000),
    );
    let bootstrap = "127.0.0.1:9092";
    let topic = format!("stress_{}", std::process::id());
    ensure(
        bootstrap,
        &[TopicSpec { name: topic.clone(), partitions: 1, config: vec![] }],
        1,
        Duration::from_secs(20),
    )
    .await
    .expect("topic");
    let mut tasks = Vec::new();
    for p in 0..producers {
        let topic = topic.clone();
        tasks.push(tokio::spawn(async move {
            let producer =
                rtgs_kafka::clients::producer(bootstrap, &format!("stress-{p}")).expect("producer");
            let mut pending = Vec::new();
            for i in 0..each {
                let mut body = vec![0u8; bytes as usize];
                body[..8].copy_from_slice(&p.to_be_bytes());
                body[8..16].copy_from_slice(&i.to_be_bytes());
                let producer = producer.clone();
                let topic = topic.clone();
                pending.push(tokio::spawn(async move {
                    loop {
                        match producer
                            .send(FutureRecord::<(), _>::to(&topic).payload(&body), Duration::from_secs(5))
                            .await
                        {
                            Ok(_) => return 0u64,
                            Err((e, _)) => {
                                eprintln!("send: {e}");
                                tokio::time::sleep(Duration::from_millis(100)).await;
                            }
                        }
                    }
                }));
                if pending.len() >= 64 {
                    for t in pending.drain(..) {
                        let _ = t.await;
                    }
                }
            }
            for t in pending.drain(..) {
                let _ = t.await;
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    let consumer: StreamConsumer = rtgs_kafka::clients::consumer(
        bootstrap,
        &format!("{topic}.check"),
        "check",
        rdkafka::consumer::DefaultConsumerContext,
    )
    .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(&topic, 0, Offset::Beginning).expect("tpl");
    consumer.assign(&tpl).expect("assign");
    let mut seen = vec![vec![0u32; each as usize]; producers as usize];
    let want = producers * each;
    let mut got = 0u64;
    let mut last_offset = -1i64;
    let mut offset_anomalies = 0;
    while got < want {
        match tokio::time::timeout(Duration::from_secs(10), consumer.recv()).await {
            Ok(Ok(m)) => {
                if m.offset() != last_offset + 1 {
                    offset_anomalies += 1;
                    eprintln!("offset {} after {}", m.offset(), last_offset);
                }
                last_offset = m.offset();
                let b = m.payload().unwrap_or(&[]);
                let p = u64::from_be_bytes(b[..8].try_into().unwrap_or_default());
                let i = u64::from_be_bytes(b[8..16].try_into().unwrap_or_default());
                seen[p as usize][i as usize] += 1;
                got += 1;
            }
            Ok(Err(e)) => eprintln!("recv: {e}"),
            Err(_) => break,
        }
    }
    let missing: usize = seen.iter().map(|s| s.iter().filter(|&&c| c == 0).count()).sum();
    let repeated: usize = seen.iter().map(|s| s.iter().filter(|&&c| c > 1).count()).sum();
    println!("{topic}: read {got} of {want}; missing {missing}, repeated {repeated}, offset anomalies {offset_anomalies}");
}
