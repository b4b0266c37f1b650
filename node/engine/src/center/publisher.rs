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
use crate::limits::{ACKS_PER_MESSAGE, NOTICES_PER_MESSAGE, REACK_ENTRIES_MAX};
use crate::pg::PgRetry;
use crate::status::PublishStats;
use rdkafka::producer::FutureProducer;
use rtgs_core::client::Notice;
use rtgs_core::entry::{CenterId, Command, Outcome, Seq};
use rtgs_core::ledger::Applied;
use rtgs_kafka::wire::{self, NoticeStatus};
use rtgs_pg::center_store::CenterStore;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::sync::{mpsc, watch};

pub enum Outgoing {
    Acks(Vec<Applied>),
    Reack(Seq),
    Notices(Vec<Notice>),
    Commands(Vec<Command>),
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
}

impl Publisher {
    pub async fn run(mut self) -> Result<(), EngineError> {
        while let Some(item) = self.rx.recv().await {
            match item {
                Outgoing::Acks(acks) => self.acks(&acks).await?,
                Outgoing::Reack(from) => {
                    let store = &self.store;
                    let again = self
                        .retry
                        .get("read acks to publish again", || store.applied_from(from, REACK_ENTRIES_MAX))
                        .await?;
                    let acks: Vec<Applied> = again.into_iter().map(|(a, _, _)| a).collect();
                    self.acks(&acks).await?;
                }
                Outgoing::Notices(notices) => self.notices(&notices).await,
                Outgoing::Commands(commands) => self.commands(&commands).await,
            }
        }
        Err(EngineError::TaskGone("center task"))
    }

    /// This center's acks, in messages of contiguous seqs.
    async fn acks(&mut self, acks: &[Applied]) -> Result<(), EngineError> {
        for run in acks.chunk_by(|a, b| a.seq + 1 == b.seq) {
            for chunk in run.chunks(ACKS_PER_MESSAGE) {
                let body = wire::encode_acks(self.center, chunk)
                    .ok_or_else(|| Invariant(format!("acks from seq {} do not encode", chunk[0].seq)))?;
                self.ack_messages += 1;
                let drop = self.faults.drop_acks_one_in;
                if drop > 0 && self.ack_messages.is_multiple_of(drop) {
                    continue; // drill: this ack message is "lost"; finality must recover by re-acking
                }
                publish(&self.producer, &self.broker.topics.applied, None, &body, &self.name).await;
            }
        }
        Ok(())
    }

    async fn notices(&mut self, notices: &[Notice]) {
        for chunk in notices.chunks(NOTICES_PER_MESSAGE) {
            let wire: Vec<wire::Notice> = chunk
                .iter()
                .map(|n| wire::Notice {
                    seq: n.seq,
                    bmi: n.bmi,
                    status: match n.outcome {
                        Outcome::Accepted => NoticeStatus::Settled,
                        o @ Outcome::Rejected(_) => NoticeStatus::Rejected(o),
                    },
                })
                .collect();
            let body = wire::encode_notices(&wire);
            publish(&self.producer, &self.broker.topics.notify, None, &body, &self.name).await;
            self.stats.notices.fetch_add(chunk.len() as u64, Ordering::Relaxed);
            if let Some(last) = chunk.last() {
                self.announced.send_replace(last.seq);
            }
        }
    }

    /// Commands for the sequencer (owner proposals), origin this center.
    async fn commands(&mut self, commands: &[Command]) {
        for c in commands {
            eprintln!("{}: proposing {:?} ({})", self.name, c.payload, c.bmi);
        }
        submit(&self.producer, &self.broker, self.center, commands, &self.name).await;
    }
}
