//! `rtgs node`: one center of the production engine (Kafka journal + PostgreSQL), one process
//! per data center, launched by `scripts/run-dc1.sh` .. `run-dc3.sh`.
//!
//! # Tasks (one tokio runtime, two workers)
//! * [`sequencer`] — member of consumer group `sequencer` on the single-partition inbound topic;
//!   leads while it holds that partition: takes over in PostgreSQL (epoch bump fences the old
//!   leader), republishes what was recorded but not published, then per batch: sequence →
//!   record in the outbox (fenced) → publish to the journal → mark published.
//! * [`center`] — reads the whole journal from its own watermark, reorders through the gap
//!   buffer (pulling a timed-out gap back from the outbox), applies to the ledger, and hands
//!   batches to the committer: one PostgreSQL transaction per batch, then the applied-acks are
//!   published (never before the commit).
//! * [`finality`] — reads every center's applied-acks, counts them in the quorum finalizer, and
//!   as origin center publishes the participants' notices; the finality ranges and the ack
//!   offset it reached are persisted by the committer with the next batch.
//! * [`plugins`] (with `--collection` only) — the reader's plugin host (digests folded into the
//!   ledger hash, state committed with each batch), the owner's adapter task over this
//!   process's chain simulator, and the owner failure detector.
//! * [`metrics`] — `GET /metrics` (Prometheus, loopback only) on 127.0.0.1:(9100 + PORT_OFFSET).
//!
//! Everything the node decides is in the core's state machines; these tasks only move bytes.
//! Errors of the servers are retried with a pause (the node rides out a PostgreSQL restart);
//! an invariant violation (a stored state that does not add up) stops the node.

pub mod api;
pub mod center;
pub mod finality;
pub mod metrics;
pub mod plugins;
pub mod sequencer;

use anyhow::Context;
use clap::Args;
use rtgs_core::entry::CenterId;
use rtgs_kafka::topics::TopicNames;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(Args, Clone, Debug)]
pub struct NodeArgs {
    /// This center's number, 1..=CENTER_COUNT.
    #[arg(long, env = "CENTER_ID")]
    pub center_id: u8,
    /// Number of centers in the cluster (quorum = floor(N/2) + 1).
    #[arg(long, env = "CENTER_COUNT", default_value_t = 3)]
    pub center_count: usize,
    /// Offset added to this node's listening ports: the HTTP API (with --api-config) on
    /// 8080 + PORT_OFFSET, /metrics on 9100 + PORT_OFFSET.
    #[arg(long, env = "PORT_OFFSET", default_value_t = 0)]
    pub port_offset: u16,
    /// Kafka bootstrap servers.
    #[arg(long, env = "RTGS_BOOTSTRAP", default_value = "127.0.0.1:9092")]
    pub bootstrap: String,
    /// Topic prefix: topics PREFIX.inbound, .journal, .applied, .notify (and, for a prefix other
    /// than `rtgs`, consumer groups PREFIX.sequencer, PREFIX.ledger-DC1, ...).
    #[arg(long, env = "RTGS_TOPIC_PREFIX", default_value = "rtgs")]
    pub topic_prefix: String,
    /// This center's database (default rtgs_dcN).
    #[arg(long, env = "RTGS_DB")]
    pub db: Option<String>,
    /// The sequencer's database, shared by all centers.
    #[arg(long, env = "RTGS_SEQ_DB", default_value = "rtgs_seq")]
    pub seq_db: String,
    #[command(flatten)]
    pub pg: crate::pg_args::PgArgs,
    /// Write the node's status as JSON to this file about every 200 ms (tests, scripts).
    #[arg(long, env = "RTGS_STATUS_FILE")]
    pub status_file: Option<PathBuf>,
    /// Seconds between status lines on stderr (0: none).
    #[arg(long, env = "RTGS_STATUS_INTERVAL_S", default_value_t = 5)]
    pub status_interval_s: u64,
    /// Fault injection for drills: drop one in N journal messages as if lost in transit (the
    /// gap buffer must then pull the missing entries from the outbox). 0: off.
    #[arg(long, env = "RTGS_FAULT_DROP_JOURNAL_ONE_IN", default_value_t = 0, hide = true)]
    pub fault_drop_journal_one_in: u64,
    /// Fault injection for drills: one in N of this center's ack messages is not published (as
    /// if the broker lost it; finality must recover by publishing acks again). 0: off.
    #[arg(long, env = "RTGS_FAULT_DROP_ACKS_ONE_IN", default_value_t = 0, hide = true)]
    pub fault_drop_acks_one_in: u64,
    /// No idle Tick entries (`RTGS_NO_IDLE_TICK=true`; drills that compare quiescent databases; timers of plugins need
    /// ticks, so never in production).
    #[arg(long, env = "RTGS_NO_IDLE_TICK", hide = true)]
    pub no_idle_tick: bool,
    #[command(flatten)]
    pub plugins: plugins::PluginArgs,
    #[command(flatten)]
    pub api: api::ApiArgs,
    #[command(flatten)]
    pub metrics: metrics::MetricsArgs,
}

/// Everything the tasks share: settings and counters (read by the status reporter).
pub struct Node {
    pub center: CenterId,
    pub center_count: usize,
    pub name: String,
    pub topics: TopicNames,
    pub bootstrap: String,
    group_prefix: Option<String>,
    pub fault_drop_journal_one_in: u64,
    pub fault_drop_acks_one_in: u64,
    /// Ack messages published (counts for the drop fault).
    pub ack_messages: AtomicU64,
    pub idle_tick: bool,
    pub stats: Stats,
    /// With the HTTP API: every applied entry goes to its read model (in seq order).
    pub read_feed: Option<tokio::sync::mpsc::Sender<Vec<rtgs_core::entry::Entry>>>,
    pub metrics: metrics::Metrics,
}

impl Node {
    /// A consumer of `topic`'s one partition from `offset`, in group `ROLE-DCn`: assigned, not
    /// subscribed (each center reads everything; its progress is in its own database).
    pub fn assigned_consumer(
        &self,
        role: &str,
        topic: &str,
        offset: i64,
    ) -> anyhow::Result<rdkafka::consumer::StreamConsumer> {
        use rdkafka::consumer::Consumer;
        let consumer: rdkafka::consumer::StreamConsumer = rtgs_kafka::clients::consumer(
            &self.bootstrap,
            &self.group(&format!("{role}-{}", self.name)),
            &format!("{}-{role}", self.name),
            rdkafka::consumer::DefaultConsumerContext,
        )?;
        let mut tpl = rdkafka::TopicPartitionList::new();
        tpl.add_partition_offset(topic, 0, rdkafka::Offset::Offset(offset))?;
        consumer.assign(&tpl).with_context(|| format!("assign {topic} from offset {offset}"))?;
        Ok(consumer)
    }

    /// Consumer group `name`, prefixed when the topics are.
    pub fn group(&self, name: &str) -> String {
        match &self.group_prefix {
            Some(p) => format!("{p}.{name}"),
            None => name.to_string(),
        }
    }
}

/// Counters, all monotone except the flags and watermarks.
#[derive(Default)]
pub struct Stats {
    pub leader: AtomicBool,
    pub epoch: AtomicU64,
    pub takeovers: AtomicU64,
    pub seq_sequenced: AtomicU64,
    pub seq_applied: AtomicU64,
    pub seq_committed: AtomicU64,
    pub seq_unfinal_first: AtomicU64,
    /// Highest seq another center acked.
    pub seq_acked_elsewhere: AtomicU64,
    pub finalized: AtomicU64,
    pub divergences: AtomicU64,
    pub halted: AtomicBool,
    pub gap_pulls: AtomicU64,
    pub gap_entries_pulled: AtomicU64,
    pub notices: AtomicU64,
    /// Times finality stood still and this center published its acks again.
    pub reacks: AtomicU64,
    /// Times the finality task read the acks topic again: for acks it had dropped as too far
    /// ahead of its window, or because finality stood still.
    pub ack_rewinds: AtomicU64,
    pub refusals: AtomicU64,
    pub batches_committed: AtomicU64,
    pub pg_retries: AtomicU64,
    pub malformed_inbound: AtomicU64,
    /// Sequencer groups sequenced a second time because a `bmi` in them was sequenced before.
    pub bmi_rounds: AtomicU64,
    pub plugins: plugins::PluginStats,
}

impl Node {
    /// The status as JSON: every counter of [`Stats`] under its own name.
    fn status(&self) -> serde_json::Value {
        let s = &self.stats;
        let counters: [(&str, &AtomicU64); 18] = [
            ("epoch", &s.epoch),
            ("takeovers", &s.takeovers),
            ("seq_sequenced", &s.seq_sequenced),
            ("seq_applied", &s.seq_applied),
            ("seq_committed", &s.seq_committed),
            ("seq_unfinal_first", &s.seq_unfinal_first),
            ("finalized", &s.finalized),
            ("divergences", &s.divergences),
            ("gap_pulls", &s.gap_pulls),
            ("gap_entries_pulled", &s.gap_entries_pulled),
            ("notices", &s.notices),
            ("refusals", &s.refusals),
            ("batches_committed", &s.batches_committed),
            ("pg_retries", &s.pg_retries),
            ("malformed_inbound", &s.malformed_inbound),
            ("bmi_rounds", &s.bmi_rounds),
            ("reacks", &s.reacks),
            ("ack_rewinds", &s.ack_rewinds),
        ];
        let mut map = serde_json::Map::new();
        map.insert("center".into(), self.name.clone().into());
        map.insert("pid".into(), std::process::id().into());
        map.insert("leader".into(), s.leader.load(Ordering::Relaxed).into());
        map.insert("halted".into(), s.halted.load(Ordering::Relaxed).into());
        map.insert("metrics_listen".into(), self.metrics.listen().map(|a| a.to_string()).into());
        for (name, counter) in counters {
            map.insert(name.into(), counter.load(Ordering::Relaxed).into());
        }
        if s.plugins.enabled.load(Ordering::Relaxed) {
            map.insert("plugins".into(), s.plugins.status());
        }
        serde_json::Value::Object(map)
    }
}

/// Batch on every hop: waits up to `wait` for one message, then takes whatever else is already
/// there, up to about `bytes_max` bytes — `(offset, payload)` in order, empty if none came. A
/// consumer error is reported and paused on (librdkafka reconnects by itself).
pub async fn recv_batch<C: rdkafka::consumer::ConsumerContext + 'static>(
    node: &Node,
    what: &str,
    consumer: &rdkafka::consumer::StreamConsumer<C>,
    wait: Duration,
    bytes_max: usize,
) -> Vec<(i64, Vec<u8>)> {
    use futures_util::FutureExt;
    use rdkafka::message::Message;
    let mut batch = Vec::new();
    match tokio::time::timeout(wait, consumer.recv()).await {
        Ok(Ok(m)) => batch.push((m.offset(), m.payload().unwrap_or(&[]).to_vec())),
        Ok(Err(e)) => {
            eprintln!("{}: {what}: {e}", node.name);
            tokio::time::sleep(Duration::from_millis(100)).await;
            return batch;
        }
        Err(_) => return batch,
    }
    let mut bytes = batch[0].1.len();
    while bytes < bytes_max {
        match consumer.recv().now_or_never() {
            Some(Ok(m)) => {
                let payload = m.payload().unwrap_or(&[]).to_vec();
                bytes += payload.len();
                batch.push((m.offset(), payload));
            }
            _ => break,
        }
    }
    batch
}

/// Pause between retries of a failed server call.
pub const RETRY_PAUSE: Duration = Duration::from_millis(250);

/// Retries `op` while it fails with a server error, counting retries; gives up on other errors.
pub async fn retry_pg<T, F, Fut>(node: &Node, what: &str, mut op: F) -> Result<T, rtgs_pg::StoreError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, rtgs_pg::StoreError>>,
{
    let mut logged = false;
    loop {
        match op().await {
            Err(e @ (rtgs_pg::StoreError::Pg(_) | rtgs_pg::StoreError::Pool(_))) => {
                if !logged {
                    eprintln!("{}: {what}: {e}; retrying until PostgreSQL answers", node.name);
                    logged = true;
                }
                node.stats.pg_retries.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(RETRY_PAUSE).await;
            }
            other => {
                if logged && other.is_ok() {
                    eprintln!("{}: {what}: PostgreSQL answers again", node.name);
                }
                return other;
            }
        }
    }
}

/// Microseconds since the epoch: the adapters' clock (the core never reads one).
pub fn now_us() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}

pub fn run(args: NodeArgs) -> anyhow::Result<ExitCode> {
    if !(1..=rtgs_core::limits::CENTER_COUNT_MAX).contains(&args.center_count) {
        anyhow::bail!("CENTER_COUNT must be 1..={}", rtgs_core::limits::CENTER_COUNT_MAX);
    }
    if args.center_id == 0 || usize::from(args.center_id) > args.center_count {
        anyhow::bail!("CENTER_ID must be 1..={} (got {})", args.center_count, args.center_id);
    }
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    rt.block_on(serve(args))
}

async fn serve(args: NodeArgs) -> anyhow::Result<ExitCode> {
    let name = format!("DC{}", args.center_id);
    let db = args.db.clone().unwrap_or_else(|| format!("rtgs_dc{}", args.center_id));
    let (feed_tx, feed_rx) = match args.api.api_config {
        Some(_) => {
            let (tx, rx) = tokio::sync::mpsc::channel(api::FEED_QUEUE_BATCHES);
            (Some(tx), Some(rx))
        }
        None => (None, None),
    };
    let node = Arc::new(Node {
        center: CenterId(args.center_id),
        center_count: args.center_count,
        name: name.clone(),
        topics: TopicNames::with_prefix(&args.topic_prefix),
        bootstrap: args.bootstrap.clone(),
        group_prefix: (args.topic_prefix != "rtgs").then(|| args.topic_prefix.clone()),
        fault_drop_journal_one_in: args.fault_drop_journal_one_in,
        fault_drop_acks_one_in: args.fault_drop_acks_one_in,
        ack_messages: AtomicU64::new(0),
        idle_tick: !args.no_idle_tick,
        stats: Stats::default(),
        read_feed: feed_tx,
        metrics: metrics::Metrics::new(&name, args.center_count),
    });
    // /metrics answers from the start (also while the servers are awaited).
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(metrics::serve(Arc::clone(&node), metrics::bind(&args.metrics, args.port_offset).await?));
    eprintln!(
        "{name}: starting (center {} of {}, journal {}, database {db}, sequencer database {}, broker {})",
        args.center_id, args.center_count, node.topics.journal, args.seq_db, args.bootstrap
    );
    prepare_database(&args, &db, rtgs_pg::migrate::Schema::Center).await?;
    prepare_database(&args, &args.seq_db, rtgs_pg::migrate::Schema::Sequencer).await?;
    let center_pool = args.pg.pool(&db, 4)?;
    let seq_pool = args.pg.pool(&args.seq_db, 3)?;
    rtgs_kafka::topics::ensure(
        &args.bootstrap,
        &rtgs_kafka::topics::production_named(&node.topics),
        1,
        Duration::from_secs(30),
    )
    .await
    .with_context(|| format!("cannot prepare the topics on the broker at {}", args.bootstrap))?;

    // The API's read model starts from the ledger as stored now, before the reader moves on.
    let api_prepared = api::prepare(&args.api, &center_pool).await?;
    let (notice_tx, notice_rx) = tokio::sync::mpsc::channel(64);
    let shared = Arc::new(finality::Shared::default());
    let plugin_host = plugins::host(node.center, &args.plugins);
    let (effects_tx, effects_rx) = tokio::sync::mpsc::channel(plugins::EFFECT_QUEUE_BATCHES);
    if plugin_host.is_some() {
        node.stats.plugins.enabled.store(true, Ordering::Relaxed);
        let node = Arc::clone(&node);
        let plugin_args = args.plugins.clone();
        tasks.spawn(
            async move { plugins::run(node, plugin_args, effects_rx).await.context("plugin adapter") },
        );
    }
    let center = center::Center::start(
        &node,
        center_pool,
        seq_pool.clone(),
        Arc::clone(&shared),
        notice_tx,
        plugin_host.map(|h| (h, effects_tx)),
    )
    .await
    .context("cannot start the center")?;
    {
        let node = Arc::clone(&node);
        let seq_pool = seq_pool.clone();
        tasks.spawn(async move { sequencer::run(node, seq_pool).await.context("sequencer") });
    }
    {
        let node = Arc::clone(&node);
        let start = center.finality_start();
        tasks.spawn(async move { finality::run(node, start, shared, notice_rx).await.context("finality") });
    }
    for task in center.into_tasks() {
        tasks.spawn(task);
    }
    if let (Some((credentials, ledger)), Some(feed_rx)) = (api_prepared, feed_rx) {
        let api_tasks = api::start(&node, &args.api, args.port_offset, credentials, ledger, feed_rx)
            .await
            .context("cannot start the HTTP API")?;
        for task in api_tasks {
            tasks.spawn(task);
        }
    }
    {
        let node = Arc::clone(&node);
        let file = args.status_file.clone();
        let interval = args.status_interval_s;
        tasks.spawn(async move {
            report_status(node, file, interval).await;
            Ok(())
        });
    }
    eprintln!("{name}: running");
    let stop = shutdown_signal();
    tokio::pin!(stop);
    let outcome = tokio::select! {
        _ = &mut stop => {
            eprintln!("{name}: stopping (signal)");
            Ok(ExitCode::SUCCESS)
        }
        Some(done) = tasks.join_next() => match done {
            Ok(Ok(())) => Err(anyhow::anyhow!("a task ended unexpectedly")),
            Ok(Err(e)) => Err(e),
            Err(e) => Err(anyhow::anyhow!("a task failed: {e}")),
        }
    };
    // Dropping the tasks closes the consumers: the group sees this member leave at once.
    tasks.abort_all();
    while tasks.join_next().await.is_some() {}
    write_status(&node, args.status_file.as_deref());
    outcome
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

/// Creates the database if needed and applies the migrations; waits for PostgreSQL to answer.
async fn prepare_database(args: &NodeArgs, db: &str, schema: rtgs_pg::migrate::Schema) -> anyhow::Result<()> {
    let conn = |dbname: &str| args.pg.conn_string(dbname);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let attempt = async {
            let (admin, driver) = tokio_postgres::connect(&conn("postgres"), tokio_postgres::NoTls).await?;
            let driver = tokio::spawn(driver);
            // Three nodes may start together: a concurrent CREATE DATABASE loses the race with
            // "already exists", which the next attempt sees as done.
            let created = rtgs_pg::migrate::ensure_database(&admin, db).await;
            driver.abort();
            created?;
            let (mut client, driver) = tokio_postgres::connect(&conn(db), tokio_postgres::NoTls).await?;
            let driver = tokio::spawn(driver);
            let applied = rtgs_pg::migrate::migrate(&mut client, schema).await;
            driver.abort();
            applied?;
            Ok::<_, rtgs_pg::StoreError>(())
        };
        match attempt.await {
            Ok(()) => return Ok(()),
            Err(e) if std::time::Instant::now() < deadline => {
                eprintln!("database {db}: {e}; retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => {
                return Err(anyhow::anyhow!(
                    "cannot prepare database {db} on {}: {e} (is PostgreSQL up? scripts/infra-up.sh)",
                    args.pg.server()
                ))
            }
        }
    }
}

fn write_status(node: &Node, file: Option<&std::path::Path>) {
    let Some(file) = file else { return };
    let tmp = file.with_extension("tmp");
    if let Ok(json) = serde_json::to_vec(&node.status()) {
        if std::fs::write(&tmp, json).is_ok() {
            let _ = std::fs::rename(&tmp, file);
        }
    }
}

async fn report_status(node: Arc<Node>, file: Option<PathBuf>, interval_s: u64) {
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    let mut last_line = std::time::Instant::now();
    loop {
        tick.tick().await;
        write_status(&node, file.as_deref());
        if interval_s > 0 && last_line.elapsed() >= Duration::from_secs(interval_s) {
            last_line = std::time::Instant::now();
            let s = node.status();
            let v = |k: &str| s[k].to_string();
            eprintln!(
                "{}: leader={} epoch={} sequenced={} applied={} committed={} final<{} finalized={} \
                 gap_pulls={} notices={} pg_retries={}{}",
                node.name,
                v("leader"),
                v("epoch"),
                v("seq_sequenced"),
                v("seq_applied"),
                v("seq_committed"),
                v("seq_unfinal_first"),
                v("finalized"),
                v("gap_pulls"),
                v("notices"),
                v("pg_retries"),
                if s["halted"] == true { " FINALITY HALTED (divergence)" } else { "" }
            );
        }
    }
}
