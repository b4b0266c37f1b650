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
//! **Decision.** Two hops are also *pushed* through the sequencer's PostgreSQL database, which
//! every center already talks to — small things only: under a load that makes batches large
//! the broker's hop is not what a payment waits for, and pushing them would cost the CPU the
//! load needs (measured: pushing every batch and ack halved the throughput here).
//! * the sequencer leader announces each small batch it records on [`JOURNAL_CHANNEL`] **inside
//!   the batch's transaction** (PostgreSQL delivers a notification at commit and never for a
//!   rolled-back transaction: only durable batches are pushed, exactly as only durable batches
//!   are published);
//! * a node's API pushes each small inbound message on [`INBOUND_CHANNEL`] once the broker
//!   stored it, with its offset (the leader takes it only in offset order: `crate::sequencer`).
//!
//! This task listens on both and hands what it hears to the center task, which feeds the
//! `Center` exactly as journal messages without a position, and to the sequencer. **The broker
//! stays the journal of record**: every batch and command still goes through it and is read
//! from it. A notification that is lost (a listener reconnecting, a full queue here) costs time,
//! never an entry: the broker brings it. Entries that arrive twice are duplicates the `Center`
//! already ignores.
//!
//! **Acks are not pushed.** They were, counted beside the stream, and drill k (the broker killed
//! and restarted under load; every node restarts itself when the broker is gone) stood still for
//! good: finality reached from pushed acks lets a center pass seqs whose acks never reached the
//! stream (their publisher died with the node), and a restarted center re-acks only from its
//! first unfinal seq — so a center that had not finalized them yet waited for acks nobody would
//! publish again. Finality from the stream alone keeps the invariant the re-ack rule rests on:
//! two acks of every final seq are in the stream. (Pushing them again needs each center to
//! persist how far its acks were confirmed in the stream and re-ack from there after a restart.)
//!
//! The notices to this node's own API are in-process (`crate::api`).

use crate::error::EngineError;
use crate::limits::{PUSH_INBOUND_BYTES_MAX, PUSH_QUEUE_ITEMS, PUSH_RECONNECT_PAUSE};
use base64::Engine;
use futures_util::StreamExt;
use rtgs_core::codec;
use rtgs_core::entry::Entry;
use rtgs_pg::sequencer_store::{INBOUND_CHANNEL, JOURNAL_CHANNEL};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc;
use tokio_postgres::AsyncMessage;

/// What the push path heard, for the center task: a recorded batch's entries (durable in the
/// outbox).
pub type Pushed = Vec<Entry>;

/// Counters of the push path (in the node's status).
#[derive(Default)]
pub struct PushStats {
    pub journal_notices: AtomicU64,
    /// Notices that could not be used (did not decode, or the queue to the center was full):
    /// the broker brings what they carried.
    pub skipped: AtomicU64,
    pub reconnects: AtomicU64,
}

/// A notice to send: its channel and payload.
pub type Outgoing = (&'static str, String);

/// An inbound message pushed by an API after the broker stored it: its offset and its body.
pub type InboundPushed = (i64, Vec<u8>);

/// What [`INBOUND_CHANNEL`] says of an inbound message the broker stored at `offset`: `None`
/// when it is too large for a notice (the broker alone carries it).
pub fn inbound_notice(offset: i64, body: &[u8]) -> Option<String> {
    (body.len() <= PUSH_INBOUND_BYTES_MAX)
        .then(|| format!("{offset}:{}", base64::engine::general_purpose::STANDARD.encode(body)))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Heard {
    Journal,
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
    /// Notices to send: its API's inbound messages.
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

    /// One connection: listen, forward, send this node's notices. Returns why it ended.
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
        let listen = format!("LISTEN {JOURNAL_CHANNEL}; LISTEN {INBOUND_CHANNEL}");
        if let Err(e) = client.batch_execute(&listen).await {
            driver.abort();
            return format!("LISTEN failed: {e}");
        }
        // Nothing to send (no API): listening goes on.
        let mut sending = true;
        let why = loop {
            tokio::select! {
                heard = heard.recv() => match heard {
                    Some((heard, payload)) => {
                        if let Err(why) = self.on_notice(heard, &payload).await {
                            break why;
                        }
                    }
                    None => break "the listener stopped".to_owned(),
                },
                out = self.out.recv(), if sending => match out {
                    Some((channel, payload)) => {
                        if let Err(e) = client.execute("SELECT pg_notify($1, $2)", &[&channel, &payload]).await {
                            break format!("NOTIFY failed: {e}");
                        }
                    }
                    None => sending = false,
                },
            }
        };
        driver.abort();
        match driver.await {
            Ok(reason) => reason,
            Err(_) => why,
        }
    }

    async fn on_notice(&mut self, heard: Heard, payload: &str) -> Result<(), String> {
        if heard == Heard::Inbound {
            let parsed = payload.split_once(':').and_then(|(offset, body)| {
                Some((
                    offset.parse::<i64>().ok()?,
                    base64::engine::general_purpose::STANDARD.decode(body).ok()?,
                ))
            });
            match parsed {
                Some(message) => {
                    if self.to_sequencer.try_send(message).is_err() {
                        self.skip();
                    }
                }
                None => self.skip(),
            }
            return Ok(());
        }
        if !self.journal {
            return Ok(());
        }
        self.stats.journal_notices.fetch_add(1, Ordering::Relaxed);
        let Ok(frames) = base64::engine::general_purpose::STANDARD.decode(payload) else {
            return self.skipped();
        };
        let mut entries = Vec::new();
        if codec::decode_frames(&frames, &mut entries).is_err() {
            return self.skipped();
        }
        if self.to_center.try_send(entries).is_err() {
            self.skip();
        }
        Ok(())
    }

    fn skip(&self) {
        self.stats.skipped.fetch_add(1, Ordering::Relaxed);
    }

    /// [`Self::skip`], and the notice is done with.
    fn skipped(&self) -> Result<(), String> {
        self.skip();
        Ok(())
    }
}
