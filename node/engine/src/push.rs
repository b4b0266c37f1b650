//! The push path: PostgreSQL `LISTEN`/`NOTIFY` beside the broker, for latency only.
//!
//! The broker used here (tansu 0.6) answers every fetch only after its whole
//! `fetch.wait.max.ms` — it does not wake a waiting fetch when data arrives — and every fetch
//! costs it about a millisecond of CPU on its durable storage. So each broker hop costs 1 to 2
//! fetch waits, and a payment crosses four (inbound, journal, acks, notices): 77–120 ms from
//! submission to final on an idle cluster, where PostgreSQL and the core need a few. Shorter
//! fetch waits do not help: the broker's polling cost grows until it is the bottleneck (an idle
//! three-node cluster already kept it at ~1 core with 10 ms waits). See bench/README.md
//! "Production latency".
//!
//! **Decision.** The hops are also *pushed* through the sequencer's PostgreSQL database, which
//! every center already talks to — small things only: under a load that makes batches large the
//! broker's hop is not what a payment waits for, and pushing them would cost the CPU the load
//! needs (measured: pushing every batch and ack halved the throughput here).
//! * the sequencer leader announces each small batch it records on [`JOURNAL_CHANNEL`] **inside
//!   the batch's transaction** (PostgreSQL delivers a notification at commit and never for a
//!   rolled-back transaction: only durable batches are pushed, exactly as only durable batches
//!   are published);
//! * each center's task pushes its small ack messages on [`ACKS_CHANNEL`] (after the commit that
//!   made them true, as for the broker). A seq can then be final before this center's ack of it
//!   is in the topic; so each center notes with its commits how far the broker confirmed its own
//!   acks (`acks_published_through`, center migration 0008), and a restarted center publishes
//!   every ack after that mark again (`center::start`): a center that missed the pushes finds in
//!   the topic every ack it waits for, as when only the stream finalized;
//! * a node's API pushes each small inbound message on [`INBOUND_CHANNEL`] as it hands it to the
//!   broker, not after: the leader sequences it at once and skips the topic's copy when it comes
//!   (admission is by `bmi`, forever: whichever copy comes first is sequenced, `crate::sequencer`).
//!
//! This task listens on all three and hands what it hears to the center task, which feeds the
//! `Center` exactly as journal messages without a position and acks beside the stream
//! (`Center::handle_acks_pushed`), and to the sequencer. **The broker stays the journal of
//! record**: every batch, ack and command still goes through it and is read from it; the stream
//! positions, resume points, rewinds and re-acks are the broker's alone. A notification that is
//! lost (a listener reconnecting, a full queue here) costs time, never an entry: the broker
//! brings it. Entries and acks that arrive twice are duplicates the `Center` already ignores.
//!
//! The fourth hop, the notices to this node's own API, is in-process (`crate::api`).

use crate::error::EngineError;
use crate::limits::{
    PUSH_ACKS_PER_NOTICE, PUSH_INBOUND_BYTES_MAX, PUSH_NOTICES_PER_STATEMENT, PUSH_QUEUE_ITEMS,
    PUSH_RECONNECT_PAUSE,
};
use base64::Engine;
use futures_util::StreamExt;
use rtgs_core::codec;
use rtgs_core::entry::{CenterId, Entry};
use rtgs_core::ledger::Applied;
use rtgs_kafka::wire;
use rtgs_pg::sequencer_store::{ACKS_CHANNEL, INBOUND_CHANNEL, JOURNAL_CHANNEL};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc;
use tokio_postgres::AsyncMessage;

/// What the push path heard, for the center task.
pub enum Pushed {
    /// A recorded batch's entries (durable in the outbox).
    Entries(Vec<Entry>),
    /// One ack message of a center.
    Acks(CenterId, Vec<Applied>),
}

/// Counters of the push path (in the node's status).
#[derive(Default)]
pub struct PushStats {
    pub journal_notices: AtomicU64,
    pub ack_notices: AtomicU64,
    /// Notices that could not be used (did not decode, or the queue to the center was full):
    /// the broker brings what they carried.
    pub skipped: AtomicU64,
    pub reconnects: AtomicU64,
    /// The session listens now (a notice sent meanwhile reaches this center by the push path).
    pub listening: AtomicBool,
}

/// A notice to send: its channel and payload.
pub type Outgoing = (&'static str, String);

/// An inbound message an API pushed as it handed it to the broker: its body.
pub type InboundPushed = Vec<u8>;

/// What [`INBOUND_CHANNEL`] says of an inbound message (its body, base64): `None` when it is too
/// large for a notice (the broker alone carries it).
pub fn inbound_notice(body: &[u8]) -> Option<String> {
    (body.len() <= PUSH_INBOUND_BYTES_MAX).then(|| base64::engine::general_purpose::STANDARD.encode(body))
}

/// Encodes this center's acks for [`ACKS_CHANNEL`]: ack messages of at most
/// [`PUSH_ACKS_PER_NOTICE`] (within PostgreSQL's 8,000-byte payload), base64.
pub fn ack_notices(center: CenterId, acks: &[Applied]) -> Vec<String> {
    let mut out = Vec::new();
    for run in acks.chunk_by(|a, b| a.seq + 1 == b.seq) {
        for chunk in run.chunks(PUSH_ACKS_PER_NOTICE) {
            if let Some(body) = wire::encode_acks(center, chunk) {
                out.push(base64::engine::general_purpose::STANDARD.encode(body));
            }
        }
    }
    out
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Heard {
    Journal,
    Acks,
    Inbound,
}

/// The push task of one center.
pub struct Push {
    pub name: String,
    /// `tokio_postgres::connect` string of the sequencer's database.
    pub conn: String,
    /// To the center task (bounded; full: the notice is skipped, the broker has it).
    pub to_center: mpsc::Sender<Pushed>,
    /// Journal notices are ignored (a drill that drops journal messages must see gap pulls).
    pub journal: bool,
    /// Inbound messages pushed by the APIs, to this node's sequencer (it uses them when it
    /// leads; full: skipped).
    pub to_sequencer: mpsc::Sender<InboundPushed>,
    /// Notices to send: this center's acks (publisher), its API's inbound messages.
    pub out: mpsc::Receiver<Outgoing>,
    pub stats: Arc<PushStats>,
}

impl Push {
    /// Listens until the node stops (the task is never done: it is dropped with the node); a
    /// lost connection is made again after a pause (meanwhile the broker carries everything,
    /// only slower).
    pub async fn run(mut self) -> Result<(), EngineError> {
        let mut last_warning: Option<Instant> = None;
        loop {
            let why = self.session().await;
            self.stats.reconnects.fetch_add(1, Ordering::Relaxed);
            if last_warning.is_none_or(|t| t.elapsed().as_secs() >= 10) {
                last_warning = Some(Instant::now());
                tracing::warn!(center = %self.name, "push path: {why}; the broker carries everything meanwhile");
            }
            tokio::time::sleep(PUSH_RECONNECT_PAUSE).await;
        }
    }

    /// One connection: listen, forward, send this center's ack notices. Returns why it ended.
    async fn session(&mut self) -> String {
        let (client, mut connection) = match tokio_postgres::connect(&self.conn, tokio_postgres::NoTls).await
        {
            Ok(c) => c,
            Err(e) => return format!("cannot connect to the sequencer database: {e}"),
        };
        // The connection is driven by its own task: notifications come out of it, and the
        // client's queries make progress only while it is polled.
        let (heard_tx, mut heard) = mpsc::channel::<(Heard, String)>(PUSH_QUEUE_ITEMS);
        let stats = Arc::clone(&self.stats);
        let driver = tokio::spawn(async move {
            let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
            while let Some(message) = messages.next().await {
                match message {
                    Ok(AsyncMessage::Notification(n)) => {
                        let heard = match n.channel() {
                            JOURNAL_CHANNEL => Heard::Journal,
                            ACKS_CHANNEL => Heard::Acks,
                            _ => Heard::Inbound,
                        };
                        if heard_tx.try_send((heard, n.payload().to_owned())).is_err() {
                            stats.skipped.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Ok(_) => {}
                    Err(e) => return format!("connection lost: {e}"),
                }
            }
            "connection closed".to_owned()
        });
        let listen = format!("LISTEN {JOURNAL_CHANNEL}; LISTEN {ACKS_CHANNEL}; LISTEN {INBOUND_CHANNEL}");
        if let Err(e) = client.batch_execute(&listen).await {
            driver.abort();
            return format!("LISTEN failed: {e}");
        }
        self.stats.listening.store(true, Ordering::Relaxed);
        // Sending and listening do not wait for each other: a round trip of notices going out
        // (an API's submissions, this center's acks) never holds back what was heard (the journal
        // and the other centers' acks this center waits for). What queued up goes out in one
        // statement, prepared once: one round trip for many notices.
        let notify = match client
            .prepare("SELECT pg_notify(c, p) FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS t(c, p, n) ORDER BY n")
            .await
        {
            Ok(statement) => statement,
            Err(e) => {
                driver.abort();
                return format!("preparing NOTIFY failed: {e}");
            }
        };
        // The sender owns the queue for the session (the listener borrows `self`); it is put
        // back when the session ends.
        let mut out = std::mem::replace(&mut self.out, mpsc::channel(1).1);
        let sending = async {
            let (mut channels, mut payloads): (Vec<&str>, Vec<String>) = (Vec::new(), Vec::new());
            loop {
                let Some((channel, payload)) = out.recv().await else {
                    // Nothing to send ever again (no API, no acks to push): listening goes on.
                    return std::future::pending::<String>().await;
                };
                channels.clear();
                payloads.clear();
                channels.push(channel);
                payloads.push(payload);
                while channels.len() < PUSH_NOTICES_PER_STATEMENT {
                    let Ok((channel, payload)) = out.try_recv() else { break };
                    channels.push(channel);
                    payloads.push(payload);
                }
                let sent = client.execute(&notify, &[&channels, &payloads]).await;
                if let Err(e) = sent {
                    return format!("NOTIFY failed: {e}");
                }
            }
        };
        let listening = async {
            loop {
                match heard.recv().await {
                    Some((heard, payload)) => self.on_notice(heard, &payload),
                    None => return "the listener stopped".to_owned(),
                }
            }
        };
        let why = tokio::select! {
            why = sending => why,
            why = listening => why,
        };
        self.out = out;
        self.stats.listening.store(false, Ordering::Relaxed);
        driver.abort();
        match driver.await {
            Ok(reason) => reason,
            Err(_) => why,
        }
    }

    fn on_notice(&self, heard: Heard, payload: &str) {
        if heard == Heard::Inbound {
            // (A node of an earlier version sent "offset:base64": not base64, skipped.)
            match base64::engine::general_purpose::STANDARD.decode(payload) {
                Ok(message) => {
                    if self.to_sequencer.try_send(message).is_err() {
                        self.skip();
                    }
                }
                Err(_) => self.skip(),
            }
            return;
        }
        let pushed = if heard == Heard::Journal {
            if !self.journal {
                return;
            }
            self.stats.journal_notices.fetch_add(1, Ordering::Relaxed);
            let Ok(frames) = base64::engine::general_purpose::STANDARD.decode(payload) else {
                return self.skip();
            };
            let mut entries = Vec::new();
            if codec::decode_frames(&frames, &mut entries).is_err() {
                return self.skip();
            }
            Pushed::Entries(entries)
        } else {
            self.stats.ack_notices.fetch_add(1, Ordering::Relaxed);
            let Ok(body) = base64::engine::general_purpose::STANDARD.decode(payload) else {
                return self.skip();
            };
            let mut acks = Vec::new();
            let Some(from) = wire::decode_acks(&body, &mut acks) else { return self.skip() };
            Pushed::Acks(from, acks)
        };
        if self.to_center.try_send(pushed).is_err() {
            self.skip();
        }
    }

    fn skip(&self) {
        self.stats.skipped.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtgs_core::entry::Outcome;

    #[test]
    fn ack_notices_fit_a_notify_payload_and_decode_to_the_acks() {
        let acks: Vec<Applied> = (1..=2_000u64)
            .chain(5_000..5_010)
            .map(|seq| Applied { seq, outcome: Outcome::Accepted, state_hash: seq * 7 })
            .collect();
        let notices = ack_notices(CenterId(2), &acks);
        assert_eq!(notices.len(), 5, "2,000 contiguous in four, the separate run in one");
        let mut back = Vec::new();
        for n in &notices {
            assert!(n.len() < 8_000, "PostgreSQL refuses payloads of 8,000 bytes or more: {}", n.len());
            let body = base64::engine::general_purpose::STANDARD.decode(n).unwrap();
            assert_eq!(wire::decode_acks(&body, &mut back), Some(CenterId(2)));
        }
        assert_eq!(back, acks);
    }
}
