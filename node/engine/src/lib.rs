//! # rtgs-engine: the production engine (Kafka journal + PostgreSQL)
//!
//! One center of the cluster per process (`rtgs node`, launched by `scripts/run-dc1.sh` ..
//! `run-dc3.sh`): the sequencer instance of that center, and the center itself — the core's
//! `rtgs_core::center::Center`, the one state machine every engine runs, driven here over the
//! broker and PostgreSQL. The tasks move bytes and time; the `Center` and the `Sequencer`
//! decide.
//!
//! # Layout
//! * [`sequencer`] — leads while it holds the lease in PostgreSQL (a survivor claims a silent one
//!   with an epoch bump, which fences the old leader) and then reads the single-partition inbound
//!   topic by assignment: per batch sequence → record (fenced) → publish → mark published.
//! * [`center`] — the center task driving the `Center`, with its stream reader (the journal and
//!   the acks through one consumer), committer and publisher (`center::streams`,
//!   `center::committer`, `center::publisher`).
//! * [`plugins`] — the node's plugin set, its stored state, the adapters executing the owner's
//!   effects (one task per plugin, effects routed by plugin).
//! * [`api`] — the participant HTTP API's link (`--api-config`): submissions, notices, the read
//!   model's feed.
//! * [`metrics`] — `GET /metrics` (Prometheus, loopback only); [`status`] — the status file and
//!   line, and every task's figures.
//! * [`limits`] — every bound of the engine, with `const` assertions on how they relate;
//!   [`error`] — typed errors; [`pg`] — the one PostgreSQL retry policy; [`broker`] — names,
//!   consumers, publishing; [`frames`] — messages cut to the broker's bound; [`clock`] — the
//!   center's monotonic time and the wall clock.
//! * [`broker_loss`] — the node restarts itself when every broker connection is down, and halts
//!   at start while the broker lost data it had read; [`rebuild`] — `rtgs rebuild-journal`: the
//!   outbox published again, the broker generation raised.
//! * [`log`] — the node's log: `tracing` events with structured fields, as the human line or
//!   JSON lines.
//! * [`push`] — the push path: small journal batches, acks and the API's inbound messages also
//!   through PostgreSQL `LISTEN`/`NOTIFY` on the sequencer database, for latency (the broker stays
//!   the record).
//!
//! **Per-task inputs.** Each task is handed what it needs — its settings, its channels, its
//! figures, the metrics — and nothing else; there is no node-wide bag every task reads.
//!
//! **Shutdown: crash-only.** Every step's progress is durable in PostgreSQL in the transaction
//! of the work it covers (the watermark with the entries, the finality and ack positions with
//! the next commit, the inbound offset with the outbox batch), so stopping at any instant is
//! safe and a start always recovers the same way, whether after `kill -9` or SIGTERM. On SIGTERM
//! or Ctrl-C the node therefore drops its tasks (a leader's lease is not handed back: a successor
//! claims it after the lease's silence, as after a crash), writes the status once more and exits; nothing is flushed, because nothing needs to be. A task that ends or
//! fails stops the node the same way. The drills `kill -9` nodes to exercise exactly this path.

pub mod api;
pub mod broker;
pub mod broker_loss;
pub mod center;
pub mod clock;
pub mod error;
pub mod frames;
pub mod limits;
pub mod log;
pub mod metrics;
pub mod pg;
pub mod plugins;
pub mod push;
pub mod rebuild;
pub mod sequencer;
pub mod status;

use crate::error::{EngineError, Invariant};
use crate::limits::{
    API_POOL_CONNECTIONS, API_SEQUENCER_POOL_CONNECTIONS, BROKER_WAIT_PAUSE, CENTER_POOL_CONNECTIONS,
    FEED_QUEUE_BATCHES, LEASE_POOL_CONNECTIONS, OUTBOX_POOL_CONNECTIONS, SEQUENCER_POOL_CONNECTIONS,
    TOPICS_TIMEOUT, WORKER_THREADS,
};
use crate::status::Status;
use rtgs_core::entry::CenterId;
use rtgs_pg::center_store::CenterStore;
use rtgs_pg::migrate::Schema;
use rtgs_pg::sequencer_store::SequencerStore;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

pub use crate::api::ApiConfig;
pub use crate::center::Faults;
pub use crate::pg::PgServer;
pub use rtgs_plugins::{CollectionConfig, MatchingConfig, PluginsConfig};

/// A task of the node.
pub type Task = Pin<Box<dyn Future<Output = Result<(), EngineError>> + Send>>;

/// `/metrics` listens on `127.0.0.1:(METRICS_PORT_BASE + port offset)` unless told otherwise.
pub const METRICS_PORT_BASE: u16 = 9100;

/// Everything `rtgs node` is told (the CLI builds it from flags and environment).
#[derive(Clone, Debug)]
pub struct NodeConfig {
    pub center: CenterId,
    pub center_count: usize,
    /// Added to the listening ports: the API on 8080 + it, `/metrics` on 9100 + it.
    pub port_offset: u16,
    pub bootstrap: String,
    pub topic_prefix: String,
    /// This center's database.
    pub db: String,
    /// The sequencer's database, shared by all centers.
    pub seq_db: String,
    pub pg: PgServer,
    pub status_file: Option<PathBuf>,
    /// Seconds between status lines on stderr (0: none).
    pub status_interval_s: u64,
    /// The log on stderr: the human line (default) or JSON lines (`log`).
    pub log_format: log::LogFormat,
    pub faults: Faults,
    /// `Tick`s also when idle (off only in drills comparing quiescent databases).
    pub idle_tick: bool,
    /// The push path (`push`): journal batches and acks also through PostgreSQL's
    /// notifications, for latency (the broker still carries everything).
    pub push: bool,
    /// Every statement line stored with its commit (`statement_line`): statements cover an
    /// account's whole history. Off by default: it costs the commit ≈ 3× the database time per
    /// transfer (`bench/README.md`, "Statements in the commit"); off, a statement covers what the
    /// API's read model applied since the node started.
    pub statement_history: bool,
    pub plugins: PluginsConfig,
    /// The owner failure detector's silence.
    pub owner_silence: Duration,
    pub api: Option<ApiConfig>,
    pub metrics_listen: Option<SocketAddr>,
    /// Every center's `/status` listener, in center order (the operator console's cluster
    /// report); empty: `127.0.0.1:(9100 + N − 1)` for each center N.
    pub status_addrs: Vec<SocketAddr>,
}

impl NodeConfig {
    /// This center's name (`DC1` ...).
    pub fn name(&self) -> String {
        format!("DC{}", self.center.0)
    }

    /// Refuses settings the node cannot run with (also `rtgs node --check`).
    pub fn validate(&self) -> Result<(), EngineError> {
        let max = rtgs_core::limits::CENTER_COUNT_MAX;
        if !(1..=max).contains(&self.center_count) {
            return Err(EngineError::Config(format!("CENTER_COUNT must be 1..={max}")));
        }
        if self.center.0 == 0 || usize::from(self.center.0) > self.center_count {
            return Err(EngineError::Config(format!(
                "CENTER_ID must be 1..={} (got {})",
                self.center_count, self.center.0
            )));
        }
        for db in [&self.db, &self.seq_db] {
            rtgs_pg::migrate::check_database_name(db).map_err(|e| EngineError::Config(e.to_string()))?;
        }
        if self.owner_silence.is_zero() {
            return Err(EngineError::Config("the owner silence must be positive".into()));
        }
        self.metrics_address()?;
        if let Some(api) = &self.api {
            api::listen_address(api.listen, self.port_offset)?;
        }
        if !self.status_addrs.is_empty() && self.status_addrs.len() != self.center_count {
            return Err(EngineError::Config(format!(
                "{} status addresses for {} centers (RTGS_STATUS_ADDRS: one per center, in order)",
                self.status_addrs.len(),
                self.center_count
            )));
        }
        Ok(())
    }

    /// Every center's `/status` listener (the console's cluster report).
    pub fn status_addresses(&self) -> Vec<SocketAddr> {
        if !self.status_addrs.is_empty() {
            return self.status_addrs.clone();
        }
        (0..self.center_count)
            .map(|i| SocketAddr::from(([127, 0, 0, 1], METRICS_PORT_BASE.saturating_add(i as u16))))
            .collect()
    }

    fn metrics_address(&self) -> Result<SocketAddr, EngineError> {
        let port = METRICS_PORT_BASE
            .checked_add(self.port_offset)
            .ok_or_else(|| EngineError::Config("PORT_OFFSET too large".into()))?;
        Ok(self.metrics_listen.unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], port))))
    }
}

/// How the node stopped without an error.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Stopped {
    /// SIGTERM or Ctrl-C.
    Signal,
}

/// Runs the node until a signal stops it (`Ok`) or a task fails or ends (`Err`).
pub fn run(config: NodeConfig) -> Result<Stopped, EngineError> {
    config.validate()?;
    log::init(config.log_format);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKER_THREADS)
        .enable_all()
        .build()
        .map_err(|e| EngineError::io("the runtime", e))?;
    rt.block_on(serve(config))
}

async fn serve(config: NodeConfig) -> Result<Stopped, EngineError> {
    let name = config.name();
    let status = Arc::new(Status::new(&name, config.center_count, !config.plugins.is_empty()));
    let metrics = Arc::new(metrics::Metrics::new(&name, config.center_count));
    let mut tasks = tokio::task::JoinSet::new();
    // /metrics answers from the start (also while the servers are awaited).
    let listener = metrics::bind(config.metrics_address()?).await?;
    tasks.spawn(metrics::serve(Arc::clone(&metrics), Arc::clone(&status), listener));
    let started = tokio::select! {
        started = start(&config, &status, &metrics, &mut tasks) => Some(started),
        () = shutdown_signal() => None,
    };
    let outcome = match started {
        Some(Ok(())) => wait(&name, &mut tasks).await,
        Some(Err(e)) => Err(e),
        None => {
            tracing::info!(center = %name, "stopping (signal, while starting)");
            Ok(Stopped::Signal)
        }
    };
    // Crash-only (crate docs): dropping the tasks closes the consumers, so the groups see this
    // member leave at once; everything done is already durable.
    tasks.abort_all();
    while tasks.join_next().await.is_some() {}
    if let Some(file) = &config.status_file {
        status.write(file);
    }
    outcome
}

/// Prepares the servers, restores the center and spawns every task.
async fn start(
    config: &NodeConfig,
    status: &Arc<Status>,
    metrics: &Arc<metrics::Metrics>,
    tasks: &mut tokio::task::JoinSet<Result<(), EngineError>>,
) -> Result<(), EngineError> {
    let name = config.name();
    let broker = broker::Broker::new(&config.bootstrap, &config.topic_prefix);
    tracing::info!(
        center = %name,
        "starting (center {} of {}, journal {}, database {}, sequencer database {}, broker {})",
        config.center.0,
        config.center_count,
        broker.topics.journal,
        config.db,
        config.seq_db,
        config.bootstrap
    );
    // A bad API config stops the node before it touches anything.
    let credentials = config.api.as_ref().map(|a| api::credentials(&a.config)).transpose()?;
    pg::prepare_database(&config.pg, &config.db, Schema::Center).await?;
    pg::prepare_database(&config.pg, &config.seq_db, Schema::Sequencer).await?;
    let pool = |db: &str, size| {
        config.pg.pool(db, size).map_err(|e| EngineError::Config(format!("database {db}: {e}")))
    };
    let (center_pool, seq_pool) =
        (pool(&config.db, CENTER_POOL_CONNECTIONS)?, pool(&config.seq_db, SEQUENCER_POOL_CONNECTIONS)?);
    let (outbox_pool, lease_pool) =
        (pool(&config.seq_db, OUTBOX_POOL_CONNECTIONS)?, pool(&config.seq_db, LEASE_POOL_CONNECTIONS)?);
    let specs = rtgs_kafka::topics::production_named(&broker.topics);
    loop {
        match rtgs_kafka::topics::ensure(&config.bootstrap, &specs, 1, TOPICS_TIMEOUT).await {
            Ok(()) => break,
            // Restarted because the broker went away: wait for it as long as it takes.
            Err(e) if broker_loss::restarted() => {
                tracing::warn!(center = %name, "waiting for the broker at {}: {e}", config.bootstrap);
                tokio::time::sleep(BROKER_WAIT_PAUSE).await;
            }
            Err(e) => {
                return Err(EngineError::kafka(
                    format!("cannot prepare the topics on the broker at {}", config.bootstrap),
                    e,
                ))
            }
        }
    }
    let retry = pg::PgRetry::new(&name, Arc::clone(&status.pg_retries));
    broker_loss::check(
        config,
        &broker.topics,
        &CenterStore::new(center_pool.clone()),
        &SequencerStore::new(outbox_pool.clone()),
        &retry,
        status,
    )
    .await?;
    let links = plugins::links(&name, config.center, &config.plugins, &broker, status.plugins.clone())?;
    let (router, adapters) = match links {
        Some((router, adapters)) => (Some(router), adapters),
        None => (None, Vec::new()),
    };
    let (feed_tx, feed_rx) = match config.api {
        Some(_) => {
            let (tx, rx) = mpsc::channel(FEED_QUEUE_BATCHES);
            (Some(tx), Some(rx))
        }
        None => (None, None),
    };
    let local_notices = config.api.as_ref().map(|_| api::LocalNotices::channel());
    let final_through = Arc::new(AtomicU64::new(0));
    // The push path (`push`): its task and its queues — journal entries heard → center task,
    // inbound messages heard → sequencer, this node's API's inbound messages → the task.
    let (pushed, push_out, pushed_inbound) = if config.push {
        let (pushed_tx, pushed_rx) = mpsc::channel(limits::PUSH_QUEUE_ITEMS);
        let (inbound_tx, inbound_rx) = mpsc::channel(limits::PUSH_QUEUE_ITEMS);
        let (out_tx, out_rx) = mpsc::channel(limits::PUSH_OUT_QUEUE);
        tasks.spawn(
            push::Push {
                name: name.clone(),
                // Named, so an operator sees (and a drill can cut) the push sessions.
                conn: format!("{} application_name=rtgs-push-{name}", config.pg.conn_string(&config.seq_db)),
                to_center: pushed_tx,
                journal: config.faults.drop_journal_one_in == 0,
                to_sequencer: inbound_tx,
                out: out_rx,
                stats: Arc::clone(&status.push),
            }
            .run(),
        );
        (Some(pushed_rx), Some(out_tx), Some(inbound_rx))
    } else {
        (None, None, None)
    };
    let started = center::start(center::CenterInputs {
        name: name.clone(),
        center: config.center,
        center_count: config.center_count,
        owner_silence: config.owner_silence,
        statement_history: config.statement_history,
        broker: broker.clone(),
        faults: config.faults,
        store: CenterStore::new(center_pool),
        outbox: SequencerStore::new(outbox_pool),
        pushed,
        // The ack drills (dropped acks must be recovered by re-acks; a diverged ack must halt
        // finality) change acks in the publisher: no push beside them.
        push_acks: push_out
            .clone()
            .filter(|_| config.faults.drop_acks_one_in == 0 && config.faults.diverge_at_seq == 0),
        local_notices: local_notices.as_ref().map(|(l, _)| Arc::clone(l)),
        retry: retry.clone(),
        plugins: router,
        feed: feed_tx,
        final_through: Arc::clone(&final_through),
        view: Arc::clone(&status.center),
        commit_stats: Arc::clone(&status.commits),
        publish_stats: Arc::clone(&status.publish),
        metrics: Arc::clone(metrics),
        clock: clock::Clock::start(),
    })
    .await?;
    for task in started.tasks {
        tasks.spawn(task);
    }
    for adapter in adapters {
        tasks.spawn(adapter.run());
    }
    tasks.spawn(sequencer::run(sequencer::SequencerInputs {
        name: name.clone(),
        center: config.center,
        broker: broker.clone(),
        idle_tick: config.idle_tick,
        store: SequencerStore::new(seq_pool),
        lease_store: SequencerStore::new(lease_pool),
        retry,
        stats: Arc::clone(&status.sequencer),
        metrics: Arc::clone(metrics),
        pushed: pushed_inbound,
    }));
    if let (Some(api), Some(credentials), Some(feed), Some((local_notices, events))) =
        (&config.api, credentials, feed_rx, local_notices)
    {
        let inputs = api::ApiInputs {
            name: name.clone(),
            center: config.center,
            broker,
            listen: api::listen_address(api.listen, config.port_offset)?,
            credentials,
            ledger: started.ledger,
            plugins: replica_host(config, &started.plugins)?,
            feed,
            final_through,
            local_notices,
            events,
            push: push_out,
            status_addrs: config.status_addresses(),
            history: CenterStore::new(pool(&config.db, API_POOL_CONNECTIONS)?),
            sequencer: SequencerStore::new(pool(&config.seq_db, API_SEQUENCER_POOL_CONNECTIONS)?),
            statement_history: config.statement_history,
            pii: pii_store(&name, api, config.plugins.matching.is_some())?,
            metrics: Arc::clone(metrics),
        };
        for task in api::start(inputs).await? {
            tasks.spawn(task);
        }
    }
    let line_every = (config.status_interval_s > 0).then(|| Duration::from_secs(config.status_interval_s));
    let reporter = Arc::clone(status).report(Arc::clone(metrics), config.status_file.clone(), line_every);
    tasks.spawn(async move {
        reporter.await;
        Ok(())
    });
    tasks.spawn(broker_loss::watch(name.clone()));
    tracing::info!(center = %name, "running");
    Ok(())
}

/// The read model's plugin replica: the node's plugin set (as `rtgs serve` gives its read model),
/// restored from the checkpoints the center restored — so it starts at the ledger's seq and
/// applies the same entries after it. `CenterId(0)`: no center, never owner, executes nothing.
fn replica_host(
    config: &NodeConfig,
    checkpoints: &[rtgs_core::plugin_host::PluginCheckpoint],
) -> Result<rtgs_core::plugin_host::PluginHost, EngineError> {
    let mut host = config.plugins.host(CenterId(0));
    if !checkpoints.is_empty() {
        host.restore_checkpoints(checkpoints)
            .map_err(|e| Invariant(format!("the API's plugin replica does not restore: {e}")))?;
    }
    Ok(host)
}

/// Until a signal (`Ok`) or the first task that ends (`Err`: none is meant to).
async fn wait(
    name: &str,
    tasks: &mut tokio::task::JoinSet<Result<(), EngineError>>,
) -> Result<Stopped, EngineError> {
    tokio::select! {
        () = shutdown_signal() => {
            tracing::info!(center = %name, "stopping (signal)");
            Ok(Stopped::Signal)
        }
        Some(done) = tasks.join_next() => match done {
            Ok(Ok(())) => Err(EngineError::TaskGone("a task (it ended)")),
            Ok(Err(e)) => Err(e),
            Err(e) => Err(EngineError::Invariant(error::Invariant(format!("a task failed: {e}")))),
        }
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// The API's store of matching orders' customer data: the file `--pii-file` names (opened, its
/// records read back), or memory — with a warning if the node runs the matching plugin, whose
/// orders' PII would then be lost when the node stops.
fn pii_store(name: &str, api: &ApiConfig, matching: bool) -> Result<rtgs_api::pii::PiiStore, EngineError> {
    match &api.pii_file {
        Some(path) => rtgs_api::pii::PiiStore::open(path)
            .map_err(|e| EngineError::Config(format!("the PII store {}: {e}", path.display()))),
        None => {
            if matching {
                tracing::warn!(
                    center = %name,
                    "matching orders' customer data (PII) is kept in memory only and lost when this node \
                     stops: give --pii-file (RTGS_PII_FILE) a file on this center's disk"
                );
            }
            Ok(rtgs_api::pii::PiiStore::in_memory())
        }
    }
}
