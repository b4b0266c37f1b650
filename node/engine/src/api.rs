//! `--api-config FILE`: the participant HTTP API (`rtgs-api`) inside this center's node, over
//! the production engine — the same endpoints, checks and answers as `rtgs serve`.
//!
//! The API is linked to the engine by three paths (`rtgs_api::server::EngineLink`):
//! * **Submissions** go to the inbound topic with this center as origin: a bounded queue to
//!   [`submit_task`], which drains it into frames of at most
//!   [`COMMANDS_PER_MESSAGE`] commands and the message bound (`limits`), each retried until the
//!   broker has it; what fits one notice is pushed to the leader at the same time, paced
//!   (`crate::push`), and sequenced from whichever copy comes first.
//! * **Notices**: [`notice_task`] reads the notify topic from its end at start. Only the origin
//!   notifies, so the final notices of this API's submissions come from this node's own center
//!   task (through its publisher); the sequencer's answers to commands it did not journal arrive
//!   the same way — conflicts (DUPL) and retries (`Duplicate`, with the original seq). The API's
//!   tracker ignores `bmi`s it did not submit. A retry of a `bmi` the tracker no longer knows
//!   (evicted, or before a restart) is therefore answered with its original seq at once, and its
//!   status with the outcome: from the read model, or — final before the node started — from
//!   the center's `applied_batch` (the read model's history, [`history`]). A status query for a
//!   `bmi` the tracker does not know — submitted through another center, before the node
//!   started — reads its seq from the sequencer's `sequenced_bmi` ([`sequenced_bmis`]).
//! * **Balances, statements and plugin reads**: the read model starts from the ledger and the
//!   plugin state stored at start (one seq: they are committed together; its plugin replica is
//!   the node's plugin set, restored from the center's checkpoints) and is
//!   fed every entry the committer commits (in seq order; bounded queue — a slow read model holds
//!   the committer back rather than losing an entry), applying those at or below the highest
//!   final seq the center task shows. With `statement_history` statements are read from the
//!   center's database (`statement_line`, written with every commit: the account's whole
//!   history, across restarts, [`statements`]), as of the read model's seq, paged like the read
//!   model's; without it they are the read model's lines since the node started.
//!
//! Accounts listed in the config are not set up here (the production cluster's accounts are
//! opened through the operator endpoints or `rtgs load`); they are reported and ignored.

use crate::broker::{recv_batch, Broker};
use crate::error::EngineError;
use crate::limits::{
    API_EVENT_QUEUE, API_HISTORY_READ_TIMEOUT, BACKSTOP_PACE, BROKER_CALL_TIMEOUT, COMMANDS_PER_MESSAGE,
    LOCAL_NOTICES_REMEMBERED, NOTICE_FETCH_WAIT, NOTICE_RECV_BYTES_MAX, NOTICE_WAIT, PUSH_INBOUND_INTERVAL,
    SUBMIT_PENDING_MAX, SUBMIT_QUEUE_BATCHES,
};
use crate::Task;
use rdkafka::consumer::Consumer;
use rtgs_api::server::{Api, EngineLink};
use rtgs_core::client::{ClientEvent, EngineSubmit, EntryFeed, Fed, Notice, Refusal};
use rtgs_core::entry::{CenterId, Command, Entry, Outcome, Seq};
use rtgs_core::sequencer::Admission;
use rtgs_kafka::wire::{self, NoticeStatus};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::mpsc;

/// The API's port when `PORT_OFFSET` is 0 (as `rtgs serve`).
const PORT_BASE: u16 = 8080;

/// `--api-config`: where the participants are, and where to listen.
#[derive(Clone, Debug)]
pub struct ApiConfig {
    /// Participants and operators (JSON, as for `rtgs serve`).
    pub config: PathBuf,
    /// Listen here instead of 127.0.0.1:(8080 + port offset).
    pub listen: Option<SocketAddr>,
    /// Where the matching orders' customer data (PII) is kept (`rtgs_api::pii::PiiStore`: synced
    /// before an order is acknowledged, never in the journal or a database); `None`: in memory
    /// only, lost when the node stops (a node running the matching plugin warns).
    pub pii_file: Option<PathBuf>,
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

/// The participants and operators of `path` (read before anything starts: a bad file stops the
/// node at once).
pub fn credentials(path: &Path) -> Result<rtgs_api::config::Credentials, EngineError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| EngineError::io(format!("reading {}", path.display()), e))?;
    let (credentials, accounts) = rtgs_api::config::ApiConfig::from_json(&text)
        .and_then(|c| c.build())
        .map_err(|e| EngineError::Config(format!("invalid API config {}: {e}", path.display())))?;
    if !accounts.is_empty() {
        tracing::warn!(
            who = "api",
            "{} accounts in {} are not set up by rtgs node (use the operator endpoints)",
            accounts.len(),
            path.display()
        );
    }
    Ok(credentials)
}

/// The in-process path of this center's final notices to its own API (the third hop of a
/// payment, see `crate::push`): the center task hands them over the moment they are due,
/// beside the notify topic. A notice it could not hand over (the API's queue full) still comes
/// through the topic; one it did is recognised there and not handed over twice.
pub struct LocalNotices {
    events: crossbeam_channel::Sender<ClientEvent>,
    delivered: std::sync::Mutex<SeqWindow>,
}

/// The last [`LOCAL_NOTICES_REMEMBERED`] seqs handed over in-process.
#[derive(Default)]
struct SeqWindow {
    seqs: std::collections::HashSet<Seq>,
    order: std::collections::VecDeque<Seq>,
}

impl LocalNotices {
    /// A path into the API's event queue; `events_rx` is the API's end.
    pub fn channel() -> (Arc<LocalNotices>, crossbeam_channel::Receiver<ClientEvent>) {
        let (events, rx) = crossbeam_channel::bounded(API_EVENT_QUEUE);
        (Arc::new(LocalNotices { events, delivered: Default::default() }), rx)
    }

    /// Hands `notices` to the API if its queue has room (never waits: the center task must not);
    /// whether they were (if not, the notify topic brings them).
    pub fn deliver(&self, notices: &[Notice]) -> bool {
        let handed = self.events.try_send(ClientEvent::Final(notices.to_vec())).is_ok();
        if handed {
            let mut w = self.delivered.lock().unwrap_or_else(|e| e.into_inner());
            for n in notices {
                if w.seqs.insert(n.seq) {
                    w.order.push_back(n.seq);
                }
            }
            while w.order.len() > LOCAL_NOTICES_REMEMBERED {
                if let Some(old) = w.order.pop_front() {
                    w.seqs.remove(&old);
                }
            }
        }
        handed
    }

    /// Whether the notice of `seq` was handed over in-process (the topic's copy is dropped).
    fn delivered(&self, seq: Seq) -> bool {
        self.delivered.lock().unwrap_or_else(|e| e.into_inner()).seqs.contains(&seq)
    }
}

/// What the API link is given.
pub struct ApiInputs {
    pub name: String,
    pub center: CenterId,
    pub broker: Broker,
    pub listen: SocketAddr,
    pub credentials: rtgs_api::config::Credentials,
    /// The ledger as stored when the center started (the read model starts from it).
    pub ledger: rtgs_core::ledger::Ledger,
    /// The node's plugins as stored at the same seq (the read model's replica).
    pub plugins: rtgs_core::plugin_host::PluginHost,
    /// Every committed entry, in seq order.
    pub feed: mpsc::Receiver<Vec<Entry>>,
    /// Every seq up to here is final.
    pub final_through: Arc<AtomicU64>,
    /// The in-process notices (`LocalNotices::channel`) and the API's end of that queue.
    pub local_notices: Arc<LocalNotices>,
    pub events: crossbeam_channel::Receiver<ClientEvent>,
    /// The push path's outgoing notices (`None`: off): each inbound message goes there too.
    pub push: Option<mpsc::Sender<crate::push::Outgoing>>,
    /// Every center's `/status` listener (the operator console's cluster report).
    pub status_addrs: Vec<SocketAddr>,
    /// The center's database, for what was final before the node started: the outcome a retry
    /// of any age is answered with.
    pub history: rtgs_pg::center_store::CenterStore,
    /// The sequencer's database, for how far the journal reaches before the API answers "not
    /// found" ([`journal_end`]) and for the seq of any `bmi` ever sequenced ([`sequenced_bmis`]).
    pub sequencer: rtgs_pg::sequencer_store::SequencerStore,
    /// The center stores every statement line: statements are read from its database.
    pub statement_history: bool,
    /// The matching orders' customer data (`ApiConfig::pii_file`).
    pub pii: rtgs_api::pii::PiiStore,
    /// The node's metrics (`rtgs_api_submit_seconds`).
    pub metrics: Arc<crate::metrics::Metrics>,
}

/// The entries the center applied, for the read model (on its own thread).
struct AppliedFeed(mpsc::Receiver<Vec<Entry>>);

impl EntryFeed for AppliedFeed {
    fn next_batch(&mut self, out: &mut Vec<Entry>, wait: std::time::Duration) -> Result<Fed, String> {
        match self.0.try_recv() {
            Ok(batch) => {
                out.extend(batch);
                Ok(Fed::Entries)
            }
            Err(mpsc::error::TryRecvError::Empty) => {
                std::thread::sleep(wait);
                Ok(Fed::Idle)
            }
            Err(mpsc::error::TryRecvError::Disconnected) => Ok(Fed::Closed),
        }
    }
}

/// The outcomes of entries final before the node started, from the center's database (one
/// primary-key read; a database that does not answer leaves the status ACSP, said in the log).
fn history(store: rtgs_pg::center_store::CenterStore) -> rtgs_api::read_model::OutcomeHistory {
    let store = Arc::new(store);
    Arc::new(move |seq| {
        let store = Arc::clone(&store);
        Box::pin(async move {
            match tokio::time::timeout(API_HISTORY_READ_TIMEOUT, store.final_outcome(seq)).await {
                Ok(Ok(outcome)) => outcome,
                Ok(Err(e)) => {
                    tracing::warn!(who = "api", "the outcome of seq {seq} could not be read: {e}");
                    None
                }
                Err(_) => {
                    tracing::warn!(who = "api", "the outcome of seq {seq} was not read in time");
                    None
                }
            }
        })
    })
}

/// How far the journal reaches, from the sequencer's database: its `last_seq` is recorded before
/// any center may see an entry, so every entry answered final anywhere is at or below it. This
/// node's own finality is its center's view, late when the center lags — the read model waits
/// for this end before "unknown account" is answered (`rtgs_api::server::read_model_conclusive`).
/// Asked only then, one query at a time: an ask that comes while one is out waits for it and
/// takes the newest answer if that query started after the ask came, else asks once more — a
/// flood of unknown accounts keeps at most one query on the shared database in flight.
fn journal_end(store: rtgs_pg::sequencer_store::SequencerStore) -> rtgs_api::read_model::JournalEnd {
    let shared = Arc::new((store, tokio::sync::Mutex::new(None::<(tokio::time::Instant, Seq)>)));
    Arc::new(move || {
        let shared = Arc::clone(&shared);
        Box::pin(async move {
            let asked = tokio::time::Instant::now();
            let (store, last) = &*shared;
            let mut last = last.lock().await;
            // Started after this ask: it counts every entry sequenced before it.
            if let Some((started, seq)) = *last {
                if started >= asked {
                    return Ok(seq);
                }
            }
            let started = tokio::time::Instant::now();
            let seq = match tokio::time::timeout(API_HISTORY_READ_TIMEOUT, store.last_seq()).await {
                Ok(Ok(seq)) => seq,
                Ok(Err(e)) => return Err(format!("the sequencer's database: {e}")),
                Err(_) => return Err("the sequencer's database did not answer in time".to_string()),
            };
            *last = Some((started, seq));
            Ok(seq)
        })
    })
}

/// The seq of the entry under a (scoped) `bmi`, from the sequencer's `sequenced_bmi` (written in
/// the batch's own transaction: every `bmi` ever sequenced, forever): a status query through this
/// node for a transfer submitted through another center, or before the node started, is
/// answered with its seq (and outcome) instead of 404. One unique-index read per query the
/// tracker cannot answer, on the API's own connections to that database.
fn sequenced_bmis(store: rtgs_pg::sequencer_store::SequencerStore) -> rtgs_api::read_model::SequencedBmis {
    let store = Arc::new(store);
    Arc::new(move |bmi| {
        let store = Arc::clone(&store);
        Box::pin(async move {
            match tokio::time::timeout(API_HISTORY_READ_TIMEOUT, store.known_bmis(&[bmi])).await {
                Ok(Ok(known)) => Ok(known.get(&bmi).map(|k| k.seq)),
                Ok(Err(e)) => Err(format!("the sequencer's database: {e}")),
                Err(_) => Err("the sequencer's database did not answer in time".to_string()),
            }
        })
    })
}

/// Statements from the center's database: every line it committed (`statement_line`), so a
/// statement covers the account's whole history, across restarts.
fn statements(store: rtgs_pg::center_store::CenterStore) -> rtgs_api::read_model::StatementSource {
    let store = Arc::new(store);
    Arc::new(move |account, from, through, max| {
        let store = Arc::clone(&store);
        Box::pin(async move {
            let read = store.statement_lines(account, from, through, max);
            match tokio::time::timeout(API_HISTORY_READ_TIMEOUT, read).await {
                Ok(Ok(lines)) => Ok(lines),
                Ok(Err(e)) => Err(format!("the statement could not be read: {e}")),
                Err(_) => Err("the statement was not read in time".to_string()),
            }
        })
    })
}

/// `127.0.0.1:(8080 + port_offset)` unless `listen` says otherwise.
pub fn listen_address(listen: Option<SocketAddr>, port_offset: u16) -> Result<SocketAddr, EngineError> {
    let port = PORT_BASE
        .checked_add(port_offset)
        .ok_or_else(|| EngineError::Config("PORT_OFFSET too large".into()))?;
    Ok(listen.unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], port))))
}

/// Starts the API (its threads) and returns the tasks the node runs for it.
pub async fn start(i: ApiInputs) -> Result<Vec<Task>, EngineError> {
    let (submit_tx, submit_rx) = mpsc::channel(SUBMIT_QUEUE_BATCHES);
    let (events_tx, events_rx) = (i.local_notices.events.clone(), i.events);
    let final_through = {
        let f = Arc::clone(&i.final_through);
        Arc::new(move || f.load(Ordering::Relaxed))
    };
    let mut read_model = rtgs_api::read_model::ReadModel::new(i.ledger, i.plugins)
        .with_history(history(i.history.clone()))
        .with_journal_end(journal_end(i.sequencer.clone()))
        .with_sequenced_bmis(sequenced_bmis(i.sequencer));
    if i.statement_history {
        read_model = read_model.with_statements(statements(i.history));
    }
    let link = EngineLink {
        submit: Arc::new(InboundQueue { tx: submit_tx }),
        events: events_rx,
        // The replica hosts the node's plugins from the seq of the ledger: the plugins' audit
        // and operator endpoints answer as on `rtgs serve`.
        read_model,
        feed: Box::new(AppliedFeed(i.feed)),
        final_through,
    };
    let api = Arc::new(Api::start_linked_with_pii(link, i.credentials, i.center, i.pii));
    api.set_cluster_status(i.status_addrs);
    let listener = tokio::net::TcpListener::bind(i.listen)
        .await
        .map_err(|e| EngineError::io(format!("binding the API to {}", i.listen), e))?;
    let local = listener.local_addr().map_err(|e| EngineError::io("the API listener", e))?;
    tracing::info!(center = %i.name, "API listening on http://{local}");
    tracing::info!(center = %i.name, "operator console on http://{local}/console/");
    if !local.ip().is_loopback() {
        tracing::warn!(
            center = %i.name,
            "the API and the operator console listen on {local}, not on loopback: every request is signed, \
             but put TLS and a firewall in front of it"
        );
    }
    let notices = notice_task(i.name.clone(), i.center, &i.broker, events_tx, i.local_notices)?;
    let producer = i.broker.producer(&format!("{}-api", i.name))?;
    let submit = submit_task(i.name, i.center, i.broker, producer, submit_rx, i.push, i.metrics);
    let server = async move {
        api.serve(listener, std::future::pending())
            .await
            .map_err(|e| EngineError::io("the API server stopped", e))
    };
    Ok(vec![Box::pin(notices), Box::pin(submit), Box::pin(server)])
}

/// Drains the submission queue into inbound messages (batch on every hop), and pushes what it
/// drained to the leader — before the broker stored it, paced by a [`PushPacer`]: the leader
/// sequences those commands at once and drops the topic's copies of them silently
/// (`crate::push`, `crate::sequencer`). The broker stores one round at a time, of everything
/// drained meanwhile (it makes the rounds large, so the broker serves few requests); with the
/// push path on, a round of pushed commands only starts at most every [`BACKSTOP_PACE`] (the
/// broker's copy is then the record and the backstop), one holding a command that was not pushed
/// at once. A pushed command never waits for that store to be seen by the leader.
async fn submit_task(
    name: String,
    center: CenterId,
    broker: Broker,
    producer: rdkafka::producer::FutureProducer,
    mut rx: mpsc::Receiver<Vec<Command>>,
    push: Option<mpsc::Sender<crate::push::Outgoing>>,
    metrics: Arc<crate::metrics::Metrics>,
) -> Result<(), EngineError> {
    let who: Arc<str> = Arc::from(format!("{name}: api"));
    let topic: Arc<str> = Arc::from(broker.topics.inbound.as_str());
    // Drained, waiting for the store in progress to end (bounded: beyond, submissions wait in
    // the queue, and the participants' requests for room in it).
    let mut pending: Vec<Command> = Vec::new();
    let mut store: Option<std::pin::Pin<Box<dyn std::future::Future<Output = std::time::Duration> + Send>>> =
        None;
    let mut pacer = PushPacer::new(std::time::Instant::now());
    // With the push path on, a round of only pushed submissions starts at most every
    // BACKSTOP_PACE (the broker's copy is the record and the backstop); one with a submission
    // that was not pushed starts at once.
    let mut last_store = tokio::time::Instant::now() - BACKSTOP_PACE;
    let mut unpushed = push.is_none();
    // Whether every message was pushed (a full queue: the topic brings them, only later).
    let send = |bodies: Vec<Vec<u8>>| {
        let mut all = true;
        for body in bodies {
            if let (Some(push), Some(notice)) = (&push, crate::push::inbound_notice(&body)) {
                all &= push.try_send((rtgs_pg::sequencer_store::INBOUND_CHANNEL, notice)).is_ok();
            }
        }
        all
    };
    loop {
        let push_due = pacer.due().map(tokio::time::Instant::from_std);
        tokio::select! {
            biased;
            stored_in = async { store.as_mut().expect("guarded").await }, if store.is_some() => {
                metrics.api_stored(stored_in);
                store = None;
            }
            () = tokio::time::sleep_until(push_due.unwrap_or_else(tokio::time::Instant::now)), if push_due.is_some() => {
                if let Some(bodies) = pacer.take(std::time::Instant::now()) {
                    unpushed |= !send(bodies);
                }
            }
            () = tokio::time::sleep_until(last_store + BACKSTOP_PACE), if store.is_none() && !pending.is_empty() => {}
            got = rx.recv(), if pending.len() < SUBMIT_PENDING_MAX => {
                let Some(mut commands) = got else { return Err(EngineError::TaskGone("API")) };
                while commands.len() < COMMANDS_PER_MESSAGE {
                    match rx.try_recv() {
                        Ok(more) => commands.extend(more),
                        Err(_) => break,
                    }
                }
                if push.is_some() {
                    let now = std::time::Instant::now();
                    pacer.add(&commands);
                    if let Some(bodies) = pacer.due().filter(|due| *due <= now).and_then(|_| pacer.take(now)) {
                        unpushed |= !send(bodies);
                    }
                }
                pending.append(&mut commands);
            }
        }
        unpushed |= pacer.take_unpushed();
        let now = tokio::time::Instant::now();
        if store.is_none() && !pending.is_empty() && (unpushed || now >= last_store + BACKSTOP_PACE) {
            last_store = now;
            unpushed = push.is_none();
            let round = std::mem::take(&mut pending);
            let (producer, topic, who) = (producer.clone(), topic.clone(), who.clone());
            store = Some(Box::pin(async move {
                let started = std::time::Instant::now();
                crate::broker::submit(&producer, &topic, center, &round, &who).await;
                started.elapsed()
            }));
        }
    }
}

/// Which submissions an API pushes to the leader, and when. A push goes out at most every
/// [`PUSH_INBOUND_INTERVAL`] — at once if the last is older — with everything submitted since:
/// each push starts a round of the leader, and a round costs PostgreSQL and the broker more than
/// its commands (one push per request at 2,000/s doubled the leader's rounds and made every hop
/// slower: bench/README.md). A window whose submissions outgrow
/// [`PUSH_INBOUND_NOTICES_MAX`](crate::limits::PUSH_INBOUND_NOTICES_MAX) notices pushes nothing:
/// a load that submits that much is not waiting for the broker's hop, and its large rounds go by
/// the broker alone.
struct PushPacer {
    held: Vec<Command>,
    /// Frame bytes of `held` (`frames::command_bytes`).
    bytes: usize,
    /// This window outgrew its notices: nothing more is held until the next window.
    overflowed: bool,
    /// Some submission was not pushed since [`PushPacer::take_unpushed`] last asked (a window
    /// outgrew its notices, or its messages did not fit them after all).
    unpushed: bool,
    last_push: std::time::Instant,
}

impl PushPacer {
    fn new(now: std::time::Instant) -> Self {
        PushPacer {
            held: Vec::new(),
            bytes: 0,
            overflowed: false,
            unpushed: false,
            last_push: now - PUSH_INBOUND_INTERVAL,
        }
    }

    fn add(&mut self, commands: &[Command]) {
        if self.overflowed {
            return;
        }
        let room = crate::limits::PUSH_INBOUND_COMMAND_BYTES_MAX.saturating_sub(self.bytes);
        match crate::frames::bytes_within(commands, room, crate::frames::command_bytes) {
            Some(bytes) => {
                self.held.extend_from_slice(commands);
                self.bytes += bytes;
            }
            None => {
                self.held.clear();
                self.bytes = 0;
                self.overflowed = true;
                self.unpushed = true;
            }
        }
    }

    /// When the next push (or the end of an overflowed window) is due; `None`: nothing held.
    fn due(&self) -> Option<std::time::Instant> {
        (!self.held.is_empty() || self.overflowed).then(|| self.last_push + PUSH_INBOUND_INTERVAL)
    }

    /// Ends the window: the inbound messages to push (`None` when nothing is held, or they do not
    /// fit the notices after all).
    fn take(&mut self, now: std::time::Instant) -> Option<Vec<Vec<u8>>> {
        self.due()?;
        self.last_push = now;
        self.overflowed = false;
        self.bytes = 0;
        let bodies = (!self.held.is_empty()).then(|| crate::broker::pushable_messages(&self.held)).flatten();
        self.unpushed |= bodies.is_none() && !self.held.is_empty();
        self.held.clear();
        bodies
    }

    /// Whether some submission was not pushed since the last call (its store must not wait for
    /// the pace, [`BACKSTOP_PACE`]); clears it.
    fn take_unpushed(&mut self) -> bool {
        std::mem::take(&mut self.unpushed)
    }
}

/// Notices and refusals from the notify topic (read from its end at start), as the API's
/// client events.
fn notice_task(
    name: String,
    center: CenterId,
    broker: &Broker,
    events: crossbeam_channel::Sender<ClientEvent>,
    local: Arc<LocalNotices>,
) -> Result<impl std::future::Future<Output = Result<(), EngineError>>, EngineError> {
    let topic = broker.topics.notify.clone();
    let consumer = broker.assigned_consumer(
        &format!("api-{name}"),
        &format!("{name}-api"),
        &[(&topic, 0)],
        NOTICE_FETCH_WAIT,
    )?;
    let (_, high) = consumer
        .fetch_watermarks(&topic, 0, BROKER_CALL_TIMEOUT * 2)
        .map_err(|e| EngineError::kafka(format!("reading the end of {topic}"), e))?;
    let mut tpl = rdkafka::TopicPartitionList::new();
    tpl.add_partition_offset(&topic, 0, rdkafka::Offset::Offset(high))
        .and_then(|()| consumer.assign(&tpl))
        .map_err(|e| EngineError::kafka(format!("assign {topic} at its end"), e))?;
    Ok(async move {
        let who = format!("{name}: api notices");
        let mut notices = Vec::new();
        loop {
            let batch = recv_batch(&consumer, NOTICE_WAIT, NOTICE_RECV_BYTES_MAX, &who).await;
            let (mut finals, mut refusals) = (Vec::new(), Vec::new());
            for (offset, payload) in batch {
                notices.clear();
                if wire::decode_notices(&payload, &mut notices).is_none() {
                    tracing::warn!(who = %who, "notice message at offset {offset} does not decode; ignored");
                    continue;
                }
                for n in &notices {
                    let outcome = match n.status {
                        NoticeStatus::Settled => Outcome::Accepted,
                        NoticeStatus::Rejected(o) => o,
                        NoticeStatus::Refused | NoticeStatus::Duplicate => {
                            let admission = match n.status {
                                NoticeStatus::Refused => Admission::Conflict(n.seq),
                                _ => Admission::Duplicate(n.seq),
                            };
                            refusals.push(Refusal { bmi: n.bmi, admission, submitted_at_us: 0 });
                            continue;
                        }
                    };
                    if !local.delivered(n.seq) {
                        finals.push(Notice { center, seq: n.seq, bmi: n.bmi, outcome, submitted_at_us: 0 });
                    }
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
                            .map_err(|_| EngineError::TaskGone("API's dispatcher"))?
                            .map_err(|_| EngineError::TaskGone("API's dispatcher"))?;
                    }
                    Err(crossbeam_channel::TrySendError::Disconnected(_)) => {
                        return Err(EngineError::TaskGone("API's dispatcher"))
                    }
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtgs_core::codec;
    use rtgs_core::entry::{AccountId, Bmi, Currency, Payload, Transfer};
    use std::time::{Duration, Instant};

    fn commands(prefix: &str, n: usize) -> Vec<Command> {
        (0..n)
            .map(|k| Command {
                origin: CenterId(1),
                bmi: Bmi::new(format!("{prefix}-{k}").as_bytes()).unwrap(),
                payload: Payload::Transfer(Transfer {
                    debtor: AccountId(1),
                    creditor: AccountId(2),
                    amount_minor: 100,
                    currency: Currency::new(b"EUR").unwrap(),
                }),
            })
            .collect()
    }

    fn decoded(bodies: &[Vec<u8>]) -> Vec<Command> {
        let mut out = Vec::new();
        for body in bodies {
            assert!(body.len() <= crate::limits::PUSH_INBOUND_BYTES_MAX, "{} bytes", body.len());
            codec::decode_commands_frames(body, &mut out).unwrap();
        }
        out
    }

    #[test]
    fn a_push_goes_at_once_when_the_last_is_older_than_the_interval_else_at_its_end() {
        let t0 = Instant::now();
        let mut p = PushPacer::new(t0);
        assert_eq!((p.due(), p.take(t0)), (None, None), "nothing held, nothing pushed");
        let first = commands("a", 2);
        p.add(&first);
        let due = p.due().expect("held");
        assert!(due <= t0, "the last push is older than the interval: at once");
        assert_eq!(decoded(&p.take(t0).expect("fits")), first);
        // Within the interval: held until its end, with what comes meanwhile.
        let (second, third) = (commands("b", 1), commands("c", 3));
        p.add(&second);
        p.add(&third);
        assert_eq!(p.due(), Some(t0 + PUSH_INBOUND_INTERVAL));
        let at = t0 + PUSH_INBOUND_INTERVAL;
        assert_eq!(decoded(&p.take(at).expect("fits")), [second, third].concat());
        assert_eq!(p.due(), None);
    }

    #[test]
    fn a_window_that_outgrows_one_notice_pushes_nothing_until_the_next() {
        let t0 = Instant::now() + Duration::from_secs(1);
        let mut p = PushPacer::new(t0);
        p.add(&commands("small", 3));
        p.add(&commands("large", 2_000));
        assert_eq!(p.due(), Some(t0), "the window still ends (the last push is older)");
        p.add(&commands("late", 1));
        assert_eq!(p.take(t0), None, "a full-load window goes by the broker alone");
        let next = commands("next", 1);
        p.add(&next);
        assert_eq!(p.due(), Some(t0 + PUSH_INBOUND_INTERVAL), "the next window pushes again");
        assert_eq!(decoded(&p.take(t0 + PUSH_INBOUND_INTERVAL).expect("fits")), next);
    }

    #[test]
    fn a_burst_beyond_one_notice_is_pushed_in_several_up_to_their_bound() {
        let t0 = Instant::now() + Duration::from_secs(1);
        let mut p = PushPacer::new(t0);
        // ≈ 13 KB of commands: more than one notice holds, within the window's notices.
        let burst = commands("burst", 300);
        p.add(&burst);
        let bodies = p.take(t0).expect("within the notices");
        assert!(
            bodies.len() > 1 && bodies.len() <= crate::limits::PUSH_INBOUND_NOTICES_MAX,
            "{}",
            bodies.len()
        );
        assert_eq!(decoded(&bodies), burst, "every command once, in order");
        // Beyond what the notices hold (each of these commands is more than 30 bytes): nothing.
        use crate::limits::{PUSH_INBOUND_BYTES_MAX, PUSH_INBOUND_NOTICES_MAX};
        let beyond = commands("beyond", PUSH_INBOUND_NOTICES_MAX * PUSH_INBOUND_BYTES_MAX / 30);
        p.add(&beyond);
        assert!(p.take(t0 + PUSH_INBOUND_INTERVAL).is_none());
        assert!(crate::broker::pushable_messages(&beyond).is_none());
    }

    #[test]
    fn a_submission_not_pushed_is_told_once_so_its_store_does_not_wait_for_the_pace() {
        use crate::limits::{PUSH_INBOUND_BYTES_MAX, PUSH_INBOUND_NOTICES_MAX};
        let t0 = Instant::now() + Duration::from_secs(1);
        let mut p = PushPacer::new(t0);
        p.add(&commands("small", 3));
        assert!(p.take(t0).is_some());
        assert!(!p.take_unpushed(), "everything was pushed: the store may wait for the pace");
        // A window that outgrows its notices: told once, whatever comes after in that window.
        p.add(&commands("some", 3));
        p.add(&commands("beyond", PUSH_INBOUND_NOTICES_MAX * PUSH_INBOUND_BYTES_MAX / 30));
        p.add(&commands("after", 1));
        assert!(p.take_unpushed(), "the window overflowed");
        assert!(!p.take_unpushed(), "told once");
        assert!(p.take(t0 + PUSH_INBOUND_INTERVAL).is_none());
        // The next window is pushed again.
        p.add(&commands("next", 2));
        assert!(p.take(t0 + 2 * PUSH_INBOUND_INTERVAL).is_some());
        assert!(!p.take_unpushed());
    }
}
