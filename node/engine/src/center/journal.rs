//! The journal reader: the journal topic from the center's resume position, decoded, in batches
//! to the center task. It decides nothing: what is applied, dropped as a repeat or pulled is
//! the `Center`'s.

use super::Faults;
use crate::broker::recv_batch;
use crate::error::{EngineError, Invariant};
use crate::limits::{BROKER_CALL_TIMEOUT, JOURNAL_RECV_BYTES_MAX, JOURNAL_WAIT};
use rdkafka::consumer::{Consumer, StreamConsumer};
use rtgs_core::codec;
use rtgs_core::entry::Entry;
use tokio::sync::mpsc;

/// One journal message: its offset (the `Center`'s journal position) and its entries.
pub struct JournalMessage {
    pub offset: u64,
    pub entries: Vec<Entry>,
}

/// Where the journal ends now (the offset the next message will have).
pub fn end(consumer: &StreamConsumer, topic: &str) -> Result<u64, rdkafka::error::KafkaError> {
    let (_, high) = tokio::task::block_in_place(|| consumer.fetch_watermarks(topic, 0, BROKER_CALL_TIMEOUT))?;
    Ok(u64::try_from(high).unwrap_or(0))
}

pub struct Reader {
    pub name: String,
    pub consumer: StreamConsumer,
    pub faults: Faults,
    pub tx: mpsc::Sender<Vec<JournalMessage>>,
}

impl Reader {
    pub async fn run(self) -> Result<(), EngineError> {
        let who = format!("{}: journal", self.name);
        let mut seen = 0u64;
        loop {
            let batch = recv_batch(&self.consumer, JOURNAL_WAIT, JOURNAL_RECV_BYTES_MAX, &who).await;
            if batch.is_empty() {
                continue;
            }
            let mut messages = Vec::with_capacity(batch.len());
            for (offset, payload) in batch {
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
            }
            self.tx.send(messages).await.map_err(|_| EngineError::TaskGone("center task"))?;
        }
    }
}
