//! The stream reader: the journal and every center's applied-acks, through **one** consumer,
//! decoded, in batches to the center task (journal messages and ack batches on their own
//! queues). One consumer fetches both topics in one request each wait: the broker here spends
//! about a millisecond and a half of CPU on every fetch whatever it holds, and a reader for each
//! topic doubled them (bench/README.md "One fetch for both streams"). It decides nothing: what
//! is applied, dropped as a repeat or pulled, and when the acks are read again (a [`Rewind`]),
//! are the `Center`'s.

use super::acks::{AckBatch, AckMessage, Rewind};
use super::journal::JournalMessage;
use super::Faults;
use crate::broker::recv_batch_with;
use crate::error::{EngineError, Invariant};
use crate::limits::{BROKER_CALL_TIMEOUT, STREAMS_RECV_BYTES_MAX, STREAMS_WAIT};
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::Message;
use rtgs_core::codec;
use rtgs_kafka::wire;
use tokio::sync::{mpsc, watch};

pub struct Reader {
    pub name: String,
    /// Assigned the journal topic and the applied-acks topic (`Broker::assigned_consumer`).
    pub consumer: StreamConsumer,
    pub journal_topic: String,
    pub acks_topic: String,
    pub faults: Faults,
    pub journal: mpsc::Sender<Vec<JournalMessage>>,
    pub acks: mpsc::Sender<AckBatch>,
    pub rewind: watch::Receiver<Rewind>,
}

impl Reader {
    pub async fn run(mut self) -> Result<(), EngineError> {
        let who = format!("{}: journal and applied-acks", self.name);
        let mut seen = 0u64;
        let mut generation = 0u64;
        loop {
            if self.rewind.has_changed().map_err(|_| EngineError::TaskGone("center task"))? {
                let r = *self.rewind.borrow_and_update();
                self.seek_acks(r.position)?;
                generation = r.generation;
            }
            let journal_topic = self.journal_topic.as_str();
            let batch = recv_batch_with(&self.consumer, STREAMS_WAIT, STREAMS_RECV_BYTES_MAX, &who, |m| {
                (m.topic() == journal_topic, m.offset(), m.payload().unwrap_or(&[]).to_vec())
            })
            .await;
            if batch.is_empty() {
                continue;
            }
            let mut messages = Vec::new();
            let mut acks = Vec::new();
            for (is_journal, offset, payload) in batch {
                if is_journal {
                    seen += 1;
                    let drop = self.faults.drop_journal_one_in;
                    if drop > 0 && seen.is_multiple_of(drop) {
                        continue; // drill: this message is "lost"; a gap pull must recover it
                    }
                    // The journal is written only by the sequencer: damage is an invariant
                    // violation, not input.
                    let mut entries = Vec::new();
                    codec::decode_frames(&payload, &mut entries).map_err(|e| {
                        Invariant(format!("journal message at offset {offset} does not decode: {e}"))
                    })?;
                    let offset =
                        u64::try_from(offset).map_err(|_| Invariant(format!("journal offset {offset}")))?;
                    messages.push(JournalMessage { offset, entries });
                } else {
                    let mut applied = Vec::new();
                    // Acks are written only by centers: damage is an invariant violation.
                    let from = wire::decode_acks(&payload, &mut applied).ok_or_else(|| {
                        Invariant(format!("applied-acks message at offset {offset} does not decode"))
                    })?;
                    let offset =
                        u64::try_from(offset).map_err(|_| Invariant(format!("ack offset {offset}")))?;
                    acks.push(AckMessage { offset, from, acks: applied });
                }
            }
            // The center task takes from both queues in turn, whatever it waits for: a full one
            // holds this reader back, never forever.
            if !messages.is_empty() {
                self.journal.send(messages).await.map_err(|_| EngineError::TaskGone("center task"))?;
            }
            if !acks.is_empty() {
                let batch = AckBatch { generation, messages: acks };
                self.acks.send(batch).await.map_err(|_| EngineError::TaskGone("center task"))?;
            }
        }
    }

    fn seek_acks(&self, position: u64) -> Result<(), EngineError> {
        let offset = i64::try_from(position).map_err(|_| Invariant(format!("ack position {position}")))?;
        tokio::task::block_in_place(|| {
            self.consumer.seek(&self.acks_topic, 0, rdkafka::Offset::Offset(offset), BROKER_CALL_TIMEOUT)
        })
        .map_err(|e| EngineError::kafka(format!("read {} again from offset {offset}", self.acks_topic), e))
    }
}
