//! The sequencer's leadership: whoever is assigned the single `rtgs.inbound` partition in group
//! `sequencer` leads. The flag is raised after an assignment that holds the partition and lowered
//! *before* a revoke completes (or on a rebalance error, or when the assignment is lost), so a
//! member never believes it leads while another may. The flag is advisory: the epoch-fenced
//! update in PostgreSQL is what actually stops a stale leader from recording a batch.

use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, ConsumerContext, Rebalance};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

#[derive(Clone, Debug)]
pub struct Leadership {
    topic: String,
    leader: Arc<AtomicBool>,
    changes: Arc<AtomicU64>,
}

impl Leadership {
    pub fn new(topic: &str) -> Self {
        Leadership {
            topic: topic.to_string(),
            leader: Arc::new(AtomicBool::new(false)),
            changes: Arc::new(AtomicU64::new(0)),
        }
    }
    pub fn is_leader(&self) -> bool {
        self.leader.load(Ordering::Acquire)
    }
    /// How many times leadership was gained or lost here.
    pub fn changes(&self) -> u64 {
        self.changes.load(Ordering::Acquire)
    }
    fn set(&self, leader: bool) {
        if self.leader.swap(leader, Ordering::AcqRel) != leader {
            self.changes.fetch_add(1, Ordering::AcqRel);
        }
    }
}

impl ClientContext for Leadership {}

impl ConsumerContext for Leadership {
    fn pre_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        // Step down first: revoke, loss and errors all end this member's claim.
        if matches!(rebalance, Rebalance::Revoke(_) | Rebalance::Error(_)) {
            self.set(false);
        }
    }

    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(tpl) = rebalance {
            let holds = tpl.elements().iter().any(|e| e.topic() == self.topic && e.partition() == 0);
            self.set(holds);
        }
    }
}
