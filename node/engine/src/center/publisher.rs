//! The publisher: what the `Center` asks to send, to the broker, each message repeated until the
//! broker confirms it. In the order asked:
//!
//! * **acks** of committed entries → the applied-acks topic ([`ACKS_PER_MESSAGE`] per message);
//! * **re-acks**: this center's committed acks from a seq again, read back from its database (at
//!   most [`REACK_ENTRIES_MAX`]: the oldest are the ones finality waits for);
//! * **notices** of own entries now final → the notify topic; once confirmed, the center task
//!   learns it (`Center::handle_announced`: a restart need not repeat them);
//! * **commands** (owner proposals) → the inbound topic, origin this center.

use super::Faults;
use crate::broker::{publish, submit, Broker};
use crate::error::{EngineError, Invariant};
use crate::limits::{
    ACKS_PER_MESSAGE, BACKSTOP_PACE, NOTICES_PER_MESSAGE, PUBLISH_QUEUE_ITEMS, REACK_ENTRIES_MAX,
};
use crate::pg::PgRetry;
use crate::status::PublishStats;
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord};
use rtgs_core::client::Notice;
use rtgs_core::entry::{CenterId, Command, Outcome, Seq};
use rtgs_core::ledger::Applied;
use rtgs_kafka::wire::{self, NoticeStatus};
use rtgs_pg::center_store::CenterStore;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::{mpsc, watch};

pub enum Outgoing {
    /// Committed acks, and whether the center task pushed them too.
    Acks(Vec<Applied>, bool),
    Reack(Seq),
    /// Every committed ack from the first seq through the second, again (a restart: the acks
    /// the broker had not confirmed), read back in rounds of [`REACK_ENTRIES_MAX`].
    ReackThrough(Seq, Seq),
    /// Notices of own entries now final, and whether they were handed to this node's API
    /// in-process too.
    Notices(Vec<Notice>, bool),
    Commands(Vec<Command>),
}

impl Outgoing {
    /// Whether the push path carried it too: the broker's copy is the record and the backstop,
    /// and may wait for the pace ([`BACKSTOP_PACE`]).
    fn pushed_too(&self) -> bool {
        matches!(self, Outgoing::Acks(_, true) | Outgoing::Notices(_, true))
    }
}

pub struct Publisher {
    pub name: String,
    pub center: CenterId,
    pub broker: Broker,
    pub producer: FutureProducer,
    pub store: Arc<CenterStore>,
    pub retry: PgRetry,
    pub faults: Faults,
    /// Ack messages published (the drop fault counts them).
    pub ack_messages: u64,
    pub rx: mpsc::Receiver<Outgoing>,
    /// To the center task: notices confirmed through this seq.
    pub announced: watch::Sender<Seq>,
    pub stats: Arc<PublishStats>,
    /// This center's acks confirmed by the broker through this seq (monotone; the committer
    /// notes it with each commit). Ack messages go out in seq order and their confirmations are
    /// collected in order, a failed one published again before the next is counted, so every
    /// ack up to it is in the topic — except in the ack-dropping drill, which runs without
    /// pushed acks (and so without needing the mark).
    pub acks_confirmed: Arc<AtomicU64>,
}

/// A message handed to the producer, waiting for the broker's confirmation.
struct Sent {
    topic: String,
    body: Vec<u8>,
    delivery: Option<DeliveryFuture>,
    /// A notice message: its count and its last seq (announced once confirmed, in order).
    notices: Option<(usize, Seq)>,
    /// An ack message: its last seq (counted in `acks_confirmed` once confirmed).
    acks_last: Option<Seq>,
}

impl Publisher {
    /// Batch on every hop: what queued up while the last round was confirmed goes out in one
    /// round — every message handed to the producer at once (one produce request), then the
    /// confirmations collected in order (a failed one published again until it is confirmed).
    /// Awaiting each message before the next cost a broker round trip per message: the origin
    /// center (acks and notices) fell behind the others under load.
    ///
    /// A round of only what the push path carried too starts at most every [`BACKSTOP_PACE`]
    /// (what comes meanwhile joins it; anything else starts it at once): fewer, larger produce
    /// requests where no payment waits for them.
    pub async fn run(mut self) -> Result<(), EngineError> {
        let mut items = Vec::new();
        let mut last_round = tokio::time::Instant::now() - BACKSTOP_PACE;
        while let Some(first) = self.rx.recv().await {
            items.push(first);
            let due = last_round + BACKSTOP_PACE;
            while items.len() < PUBLISH_QUEUE_ITEMS {
                match self.rx.try_recv() {
                    Ok(item) => items.push(item),
                    Err(_) if items.iter().all(Outgoing::pushed_too) => {
                        match tokio::time::timeout_at(due, self.rx.recv()).await {
                            Ok(Some(item)) => items.push(item),
                            Ok(None) => return Err(EngineError::TaskGone("center task")),
                            Err(_) => break,
                        }
                    }
                    Err(_) => break,
                }
            }
            last_round = tokio::time::Instant::now();
            let mut sent = Vec::new();
            for item in items.drain(..) {
                match item {
                    Outgoing::Acks(acks, _) => self.acks(&acks, &mut sent)?,
                    Outgoing::Reack(from) => {
                        let store = &self.store;
                        let again = self
                            .retry
                            .get("read acks to publish again", || store.applied_from(from, REACK_ENTRIES_MAX))
                            .await?;
                        let acks: Vec<Applied> = again.into_iter().map(|(a, _, _)| a).collect();
                        self.acks(&acks, &mut sent)?;
                    }
                    Outgoing::ReackThrough(from, through) => self.reack_through(from, through).await?,
                    Outgoing::Notices(notices, _) => self.notices(&notices, &mut sent),
                    Outgoing::Commands(commands) => self.commands(&commands).await,
                }
            }
            for s in sent {
                self.confirm(s.delivery, &s.topic, &s.body).await;
                if let Some((count, last)) = s.notices {
                    self.stats.notices.fetch_add(count as u64, Ordering::Relaxed);
                    self.announced.send_replace(last);
                }
                if let Some(last) = s.acks_last {
                    self.acks_confirmed.fetch_max(last, Ordering::Release);
                }
            }
        }
        Err(EngineError::TaskGone("center task"))
    }

    /// Hands `body` to the producer (a full client queue: published and confirmed later, one
    /// by one).
    fn send(&self, topic: &str, body: Vec<u8>, notices: Option<(usize, Seq)>) -> Sent {
        let delivery = self.producer.send_result(FutureRecord::<(), [u8]>::to(topic).payload(&body[..])).ok();
        Sent { topic: topic.to_string(), body, delivery, notices, acks_last: None }
    }

    /// Waits for the broker's confirmation of a message handed to the producer; one that failed
    /// (or never got into the client's queue) is published again until it is confirmed.
    async fn confirm(&self, delivery: Option<DeliveryFuture>, topic: &str, body: &[u8]) {
        let confirmed = match delivery {
            Some(delivery) => matches!(delivery.await, Ok(Ok(_))),
            None => false,
        };
        if !confirmed {
            publish(&self.producer, topic, None, body, &self.name).await;
        }
    }

    /// Publishes this center's committed acks `from..=through` again, a round of at most
    /// [`REACK_ENTRIES_MAX`] at a time, each round confirmed before the next is read (a restart:
    /// the acks the broker had not confirmed before it).
    async fn reack_through(&mut self, from: Seq, through: Seq) -> Result<(), EngineError> {
        let mut next = from;
        while next <= through {
            let store = &self.store;
            let again = self
                .retry
                .get("read acks to publish again", || store.applied_from(next, REACK_ENTRIES_MAX))
                .await?;
            let acks: Vec<Applied> =
                again.into_iter().map(|(a, _, _)| a).take_while(|a| a.seq <= through).collect();
            let Some(last) = acks.last().map(|a| a.seq) else { break };
            let mut sent = Vec::new();
            self.acks(&acks, &mut sent)?;
            if self.faults.acks_push_only {
                break; // drill: nothing reaches the topic, the mark stays
            }
            for s in sent {
                self.confirm(s.delivery, &s.topic, &s.body).await;
            }
            self.acks_confirmed.fetch_max(last, Ordering::Release);
            next = last + 1;
        }
        Ok(())
    }

    /// This center's acks, in messages of contiguous seqs.
    fn acks(&mut self, acks: &[Applied], sent: &mut Vec<Sent>) -> Result<(), EngineError> {
        if self.faults.acks_push_only {
            return Ok(()); // drill: only the push path carries them; the mark stays
        }
        let diverge = self.faults.diverge_at_seq;
        let diverged: Vec<Applied>;
        let acks = if diverge > 0 && acks.iter().any(|a| a.seq == diverge) {
            // Drill: this center reports another state at that seq, as a diverged replica would.
            diverged = acks
                .iter()
                .map(|a| if a.seq == diverge { Applied { state_hash: a.state_hash ^ 1, ..*a } } else { *a })
                .collect();
            &diverged[..]
        } else {
            acks
        };
        for (body, last) in ack_messages(self.center, acks)? {
            self.ack_messages += 1;
            let drop = self.faults.drop_acks_one_in;
            if drop > 0 && self.ack_messages.is_multiple_of(drop) {
                continue; // drill: this ack message is "lost"; finality must recover by re-acking
            }
            let mut s = self.send(&self.broker.topics.applied, body, None);
            s.acks_last = Some(last);
            sent.push(s);
        }
        Ok(())
    }

    fn notices(&mut self, notices: &[Notice], sent: &mut Vec<Sent>) {
        for chunk in notices.chunks(NOTICES_PER_MESSAGE) {
            let wire: Vec<wire::Notice> = chunk.iter().map(wire_notice).collect();
            let body = wire::encode_notices(&wire);
            let last = chunk.last().map_or(0, |n| n.seq);
            sent.push(self.send(&self.broker.topics.notify, body, Some((chunk.len(), last))));
        }
    }

    /// Commands for the sequencer (owner proposals), origin this center.
    async fn commands(&mut self, commands: &[Command]) {
        for c in commands {
            tracing::info!(center = %self.name, bmi = %c.bmi, "proposing {:?} ({})", c.payload, c.bmi);
        }
        submit(&self.producer, &self.broker.topics.inbound, self.center, commands, &self.name).await;
    }
}

/// `acks` as ack messages: runs of contiguous seqs (the wire format names only the first), at
/// most [`ACKS_PER_MESSAGE`] each.
fn ack_messages(center: CenterId, acks: &[Applied]) -> Result<Vec<(Vec<u8>, Seq)>, Invariant> {
    let mut messages = Vec::new();
    for run in acks.chunk_by(|a, b| a.seq + 1 == b.seq) {
        for chunk in run.chunks(ACKS_PER_MESSAGE) {
            let body = wire::encode_acks(center, chunk)
                .ok_or_else(|| Invariant(format!("acks from seq {} do not encode", chunk[0].seq)))?;
            messages.push((body, chunk[chunk.len() - 1].seq));
        }
    }
    Ok(messages)
}

/// The participant's notice of a final own entry: ACCC, or RJCT with its reason.
fn wire_notice(n: &Notice) -> wire::Notice {
    let status = match n.outcome {
        Outcome::Accepted => NoticeStatus::Settled,
        o @ Outcome::Rejected(_) => NoticeStatus::Rejected(o),
    };
    wire::Notice { seq: n.seq, bmi: n.bmi, status }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::{ACK_MESSAGE_BYTES_MAX, NOTICE_MESSAGE_BYTES_MAX};
    use rtgs_core::entry::{Bmi, RejectReason};

    fn ack(seq: u64) -> Applied {
        Applied { seq, outcome: Outcome::Accepted, state_hash: seq * 7 }
    }

    #[test]
    fn acks_go_out_in_contiguous_messages_within_the_bound() {
        // A re-ack and new acks in one go: 1..=20,000 then 30,000..=30,004.
        let acks: Vec<Applied> = (1..=20_000).chain(30_000..=30_004).map(ack).collect();
        let messages = ack_messages(CenterId(2), &acks).unwrap_or_else(|e| panic!("{e}"));
        let mut back = Vec::new();
        for (m, last) in &messages {
            assert!(m.len() <= ACK_MESSAGE_BYTES_MAX, "{} bytes", m.len());
            let mut acks = Vec::new();
            assert_eq!(wire::decode_acks(m, &mut acks), Some(CenterId(2)));
            assert!(acks.len() <= ACKS_PER_MESSAGE);
            assert_eq!(acks.last().map(|a| a.seq), Some(*last), "a message's last seq");
            back.extend(acks);
        }
        assert_eq!(back, acks, "every ack once, in order");
        assert_eq!(messages.len(), 4, "8,192 + 8,192 + 3,616, then the second run");
        assert!(ack_messages(CenterId(2), &[]).unwrap_or_default().is_empty());
    }

    #[test]
    fn the_largest_notice_message_fits_the_bound() {
        let bmi = Bmi::new(&[b'N'; rtgs_core::limits::BMI_BYTES_MAX]).unwrap_or_else(|e| panic!("{e}"));
        let notice = Notice {
            center: CenterId(1),
            seq: u64::MAX,
            bmi,
            outcome: Outcome::Rejected(RejectReason::InsufficientFunds),
            submitted_at_us: 0,
        };
        let notices = vec![wire_notice(&notice); NOTICES_PER_MESSAGE];
        let body = wire::encode_notices(&notices);
        assert!(body.len() <= NOTICE_MESSAGE_BYTES_MAX, "{} > {NOTICE_MESSAGE_BYTES_MAX}", body.len());
        let mut back = Vec::new();
        assert_eq!(wire::decode_notices(&body, &mut back), Some(()));
        assert_eq!(back[0].status, NoticeStatus::Rejected(notice.outcome));
    }
}
