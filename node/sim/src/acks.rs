//! The ack stream, modelled on the production engine's `applied` topic: one durable ordered log
//! of ack messages (one center's contiguous acks each) that every center reads at its own
//! position, its own acks included. Positions are indices. A message becomes readable a latency
//! after it was appended, and a reader reads in order: it waits for a late message rather than
//! skip it. A publish that never reaches the stream is simply not appended (a lost ack message).

use rtgs_core::entry::CenterId;
use rtgs_core::ledger::Applied;

pub struct AckMessage {
    pub from: CenterId,
    pub acks: Vec<Applied>,
    /// When readers can first read it.
    pub visible_at_us: u64,
}

#[derive(Default)]
pub struct AckStream {
    messages: Vec<AckMessage>,
}

impl AckStream {
    pub fn append(&mut self, from: CenterId, acks: Vec<Applied>, visible_at_us: u64) {
        self.messages.push(AckMessage { from, acks, visible_at_us });
    }

    /// The message at `position` if a reader can read it at `now_us`.
    pub fn readable(&self, position: u64, now_us: u64) -> Option<&AckMessage> {
        let m = self.messages.get(usize::try_from(position).ok()?)?;
        (m.visible_at_us <= now_us).then_some(m)
    }

    pub fn len(&self) -> u64 {
        self.messages.len() as u64
    }
}
