//! The journal as the center task gets it (read by `super::streams`). Nothing here decides:
//! what is applied, dropped as a repeat or pulled is the `Center`'s.

use crate::limits::BROKER_CALL_TIMEOUT;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rtgs_core::entry::Entry;

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
