//! `--api-config FILE`: the participant HTTP API (`rtgs-api`) inside this center's node, over
//! the production engine — the same endpoints, checks and answers as `rtgs serve`.
//!
//! The API is linked to the engine by three paths (`rtgs_api::server::EngineLink`):
//! * **Submissions** go to the inbound topic with this center as origin: a bounded queue to
//!   [`submit_task`], which drains it, encodes one commands frame per ≤ [`FRAME_COMMANDS_MAX`]
//!   commands and produces it, retrying until the broker has it (a request answered ACSP was
//!   handed to the broker, never dropped).
//! * **Notices**: [`notice_task`] reads the notify topic from its end at start. Only the origin
//!   notifies, so the final notices of this API's submissions come from this node's own finality
//!   task; the sequencer's DUPL refusals arrive the same way. The API's tracker ignores `bmi`s it
//!   did not submit. A retry of a `bmi` the tracker no longer knows (after a restart) is silently
//!   deduplicated by the sequencer: the request then waits its 10 s and is answered ACSP without a
//!   seq; its status is found later through a new submission's conflict answer or the databases.
//! * **Balances and statements**: the read model starts from the ledger stored at start and is
//!   fed every entry the journal reader applies (in seq order; bounded queue — a slow read model
//!   holds the reader back rather than losing an entry), applying those at or below the highest
//!   final seq. Statements therefore cover what was applied since the node started.
//!
//! Accounts listed in the config are not set up here (the production cluster's accounts are
//! opened through the operator endpoints or `rtgs load`); they are reported and ignored.

use super::Node;
use anyhow::Context;
use clap::Args;
use rdkafka::consumer::Consumer;
use rdkafka::producer::FutureRecord;
use rtgs_api::server::{Api, EngineLink, EngineSubmit, Feed};
use rtgs_core::codec;
use rtgs_core::entry::{Command, Entry, Outcome};
use rtgs_core::sequencer::Admission;
use rtgs_embedded::cluster::{ClientEvent, Notice, Refusal};
use rtgs_kafka::wire::{self, NoticeStatus};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// The API's port when `PORT_OFFSET` is 0 (as `rtgs serve`).
const PORT_BASE: u16 = 8080;

/// Commands per inbound message (well under the broker's 1 MB message limit).
pub const FRAME_COMMANDS_MAX: usize = 4_096;

/// Submissions queued towards the broker.
const SUBMIT_QUEUE: usize = 1_024;

/// Applied batches queued towards the read model.
pub const FEED_QUEUE_BATCHES: usize = 256;

#[derive(Args, Clone, Debug, Default)]
pub struct ApiArgs {
    /// Serve the participant HTTP API with these participants and operators (JSON, as for
    /// `rtgs serve`); off without it.
    #[arg(long, env = "RTGS_API_CONFIG")]
    pub api_config: Option<PathBuf>,
    /// Listen here instead of 127.0.0.1:8080+PORT_OFFSET.
    #[arg(long, env = "RTGS_API_LISTEN")]
    pub api_listen: Option<SocketAddr>,
}

struct InboundQueue {
    tx: mpsc::Sender<Vec<Command>>,
}

impl EngineSubmit for InboundQueue {
    fn try_submit(&self, commands: Vec<Command>) -> Result<(), Option<Vec<Command>>> {
        match self.tx.try_send(commands) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Full(c)) => Err(Some(c)),
            Err(mpsc::error::TrySendError::Closed(_)) => Err(None),
        }
    }
    fn submit(&self, commands: Vec<Command>) -> bool {
        self.tx.blocking_send(commands).is_ok()
    }
}

/// A task `serve` runs for the API.
pub type ApiTask = std::pin::Pin<Box<dyn std::future::Future<Output = anyhow::Result<()>> + Send>>;

/// Reads the config and loads the ledger the read model starts from; `None` without
/// `--api-config`. Called before the center starts (both load the same watermark).
pub async fn prepare(
    args: &ApiArgs,
    center_pool: &deadpool_postgres::Pool,
) -> anyhow::Result<Option<(rtgs_api::config::Credentials, rtgs_core::ledger::Ledger)>> {
    let Some(path) = &args.api_config else { return Ok(None) };
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let (credentials, accounts) = rtgs_api::config::ApiConfig::from_json(&text)
        .and_then(|c| c.build())
        .with_context(|| format!("invalid API config {}", path.display()))?;
    if !accounts.is_empty() {
        eprintln!(
            "api: {} accounts in {} are not set up by rtgs node (use the operator endpoints)",
            accounts.len(),
            path.display()
        );
    }
    let store = rtgs_pg::center_store::CenterStore::new(center_pool.clone());
    let stored = store.load().await.context("loading the ledger for the API's read model")?;
    Ok(Some((credentials, stored.ledger)))
}

/// Starts the API (its threads) and returns the tasks `serve` runs for it.
pub async fn start(
    node: &Arc<Node>,
    args: &ApiArgs,
    port_offset: u16,
    credentials: rtgs_api::config::Credentials,
    ledger: rtgs_core::ledger::Ledger,
    feed_rx: mpsc::Receiver<Vec<Entry>>,
) -> anyhow::Result<Vec<ApiTask>> {
    let (submit_tx, submit_rx) = mpsc::channel(SUBMIT_QUEUE);
    let (events_tx, events_rx) = crossbeam_channel::bounded(1_024);
    let final_through = {
        let node = Arc::clone(node);
        Arc::new(move || node.stats.seq_unfinal_first.load(Ordering::Relaxed).saturating_sub(1))
    };
    let link = EngineLink {
        submit: Arc::new(InboundQueue { tx: submit_tx }),
        events: events_rx,
        read_model: rtgs_api::read_model::ReadModel::with_ledger(ledger),
        feed: Feed::Entries { rx: feed_rx, final_through },
    };
    let api = Arc::new(Api::start_linked(link, credentials, node.center));
    let port = PORT_BASE.checked_add(port_offset).context("PORT_OFFSET too large")?;
    let listen = args.api_listen.unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], port)));
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding the API to {listen}"))?;
    eprintln!("{}: API listening on http://{}", node.name, listener.local_addr()?);
    let notices = notice_task(Arc::clone(node), events_tx)?;
    let submit = submit_task(Arc::clone(node), submit_rx);
    let server = async move {
        api.serve(listener, std::future::pending()).await.context("the API server stopped")?;
        Ok(())
    };
    Ok(vec![Box::pin(notices), Box::pin(submit), Box::pin(server)])
}

/// Drains the submission queue into inbound messages (batch on every hop).
async fn submit_task(node: Arc<Node>, mut rx: mpsc::Receiver<Vec<Command>>) -> anyhow::Result<()> {
    let producer = rtgs_kafka::clients::producer(&node.bootstrap, &format!("{}-api", node.name))?;
    let mut commands: Vec<Command> = Vec::new();
    let mut body = Vec::new();
    loop {
        let Some(first) = rx.recv().await else { return Ok(()) };
        commands.extend(first);
        while commands.len() < FRAME_COMMANDS_MAX {
            match rx.try_recv() {
                Ok(more) => commands.extend(more),
                Err(_) => break,
            }
        }
        for chunk in commands.chunks(FRAME_COMMANDS_MAX) {
            body.clear();
            codec::encode_commands_frame(chunk, &mut body);
            loop {
                let record = FutureRecord::<(), _>::to(&node.topics.inbound).payload(&body);
                match producer.send(record, Duration::from_secs(10)).await {
                    Ok(_) => break,
                    Err((e, _)) => {
                        eprintln!("{}: api: submitting to {}: {e}; again", node.name, node.topics.inbound);
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        }
        commands.clear();
    }
}

/// Notices and refusals from the notify topic, as the API's client events.
fn notice_task(
    node: Arc<Node>,
    events: crossbeam_channel::Sender<ClientEvent>,
) -> anyhow::Result<impl std::future::Future<Output = anyhow::Result<()>>> {
    let consumer = node.assigned_consumer("api", &node.topics.notify, 0)?;
    let (_, high) = consumer
        .fetch_watermarks(&node.topics.notify, 0, Duration::from_secs(20))
        .with_context(|| format!("reading the end of {}", node.topics.notify))?;
    let mut tpl = rdkafka::TopicPartitionList::new();
    tpl.add_partition_offset(&node.topics.notify, 0, rdkafka::Offset::Offset(high))?;
    consumer.assign(&tpl)?;
    Ok(async move {
        let mut notices = Vec::new();
        loop {
            let batch =
                super::recv_batch(&node, "api notices", &consumer, Duration::from_millis(50), 1 << 20).await;
            let (mut finals, mut refusals) = (Vec::new(), Vec::new());
            for (offset, payload) in batch {
                notices.clear();
                if wire::decode_notices(&payload, &mut notices).is_none() {
                    eprintln!(
                        "{}: api: notice message at offset {offset} does not decode; ignored",
                        node.name
                    );
                    continue;
                }
                for n in &notices {
                    let outcome = match n.status {
                        NoticeStatus::Settled => Outcome::Accepted,
                        NoticeStatus::Rejected(o) => o,
                        NoticeStatus::Refused => {
                            let admission = Admission::Conflict(n.seq);
                            refusals.push(Refusal { bmi: n.bmi, admission, submitted_at_us: 0 });
                            continue;
                        }
                    };
                    finals.push(Notice {
                        center: node.center,
                        seq: n.seq,
                        bmi: n.bmi,
                        outcome,
                        submitted_at_us: 0,
                    });
                }
            }
            let events_now = [
                (!finals.is_empty()).then_some(ClientEvent::Final(finals)),
                (!refusals.is_empty()).then_some(ClientEvent::Refused(refusals)),
            ];
            for event in events_now.into_iter().flatten() {
                // The API's dispatcher is a thread with a bounded queue: usually there is room;
                // when it is full, wait off this worker.
                match events.try_send(event) {
                    Ok(()) => {}
                    Err(crossbeam_channel::TrySendError::Full(event)) => {
                        let events = events.clone();
                        tokio::task::spawn_blocking(move || events.send(event))
                            .await
                            .context("api events")?
                            .map_err(|_| anyhow::anyhow!("the API's dispatcher stopped"))?;
                    }
                    Err(crossbeam_channel::TrySendError::Disconnected(_)) => {
                        anyhow::bail!("the API's dispatcher stopped")
                    }
                }
            }
        }
    })
}
