//! The ack reader: every center's applied-acks (this one's too, read back like the others'),
//! from the center's resume position, decoded, in batches to the center task.
//!
//! The `Center` may ask to read the stream again from an earlier position (acks it dropped
//! beyond its tally window, or finality standing still): the center task sends a [`Rewind`]
//! with a new generation, this reader seeks there and tags what it reads from then on with that
//! generation, and the center task drops batches of an older one — they were read before the
//! seek and come again after it. A seek discards what librdkafka fetched beyond it.

use crate::broker::{recv_batch, Broker};
use crate::error::{EngineError, Invariant};
use crate::limits::{ACK_RECV_BYTES_MAX, ACK_WAIT, BROKER_CALL_TIMEOUT};
use rdkafka::consumer::{Consumer, StreamConsumer};
use rtgs_core::entry::CenterId;
use rtgs_core::ledger::Applied;
use rtgs_kafka::wire;
use tokio::sync::{mpsc, watch};

/// Read the ack stream again from `position`; batches read before carry an older generation.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Rewind {
    pub generation: u64,
    pub position: u64,
}

/// One center's ack message at its offset (the `Center`'s ack stream position).
pub struct AckMessage {
    pub offset: u64,
    pub from: CenterId,
    pub acks: Vec<Applied>,
}

pub struct AckBatch {
    pub generation: u64,
    pub messages: Vec<AckMessage>,
}

pub struct Reader {
    name: String,
    topic: String,
    consumer: StreamConsumer,
    rewind: watch::Receiver<Rewind>,
    generation: u64,
    tx: mpsc::Sender<AckBatch>,
}

impl Reader {
    pub fn new(
        name: &str,
        broker: &Broker,
        position: u64,
        rewind: watch::Receiver<Rewind>,
        tx: mpsc::Sender<AckBatch>,
        fetch_wait: std::time::Duration,
    ) -> Result<Self, EngineError> {
        let topic = broker.topics.applied.clone();
        let offset = i64::try_from(position).map_err(|_| Invariant(format!("ack position {position}")))?;
        let consumer = broker.assigned_consumer(
            &format!("finalizer-{name}"),
            &format!("{name}-finalizer"),
            &topic,
            offset,
            fetch_wait,
        )?;
        Ok(Reader { name: name.to_string(), topic, consumer, rewind, generation: 0, tx })
    }

    pub async fn run(mut self) -> Result<(), EngineError> {
        let who = format!("{}: applied-acks", self.name);
        loop {
            if self.rewind.has_changed().map_err(|_| EngineError::TaskGone("center task"))? {
                let r = *self.rewind.borrow_and_update();
                self.seek(r.position)?;
                self.generation = r.generation;
            }
            let batch = recv_batch(&self.consumer, ACK_WAIT, ACK_RECV_BYTES_MAX, &who).await;
            if batch.is_empty() {
                continue;
            }
            let mut messages = Vec::with_capacity(batch.len());
            for (offset, payload) in batch {
                let mut acks = Vec::new();
                // Acks are written only by centers: damage is an invariant violation.
                let from = wire::decode_acks(&payload, &mut acks).ok_or_else(|| {
                    Invariant(format!("applied-acks message at offset {offset} does not decode"))
                })?;
                let offset = u64::try_from(offset).map_err(|_| Invariant(format!("ack offset {offset}")))?;
                messages.push(AckMessage { offset, from, acks });
            }
            let batch = AckBatch { generation: self.generation, messages };
            self.tx.send(batch).await.map_err(|_| EngineError::TaskGone("center task"))?;
        }
    }

    fn seek(&self, position: u64) -> Result<(), EngineError> {
        let offset = i64::try_from(position).map_err(|_| Invariant(format!("ack position {position}")))?;
        tokio::task::block_in_place(|| {
            self.consumer.seek(&self.topic, 0, rdkafka::Offset::Offset(offset), BROKER_CALL_TIMEOUT)
        })
        .map_err(|e| EngineError::kafka(format!("read {} again from offset {offset}", self.topic), e))
    }
}
