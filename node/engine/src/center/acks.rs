//! Every center's applied-acks (this one's too, read back like the others') as the center task
//! gets them (read by `super::streams`).
//!
//! The `Center` may ask to read the stream again from an earlier position (acks it dropped
//! beyond its tally window, or finality standing still): the center task sends a [`Rewind`]
//! with a new generation, the reader seeks there and tags what it reads from then on with that
//! generation, and the center task drops batches of an older one — they were read before the
//! seek and come again after it. A seek discards what librdkafka fetched beyond it.

use rtgs_core::entry::CenterId;
use rtgs_core::ledger::Applied;

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
