//! `rtgs node`: the command line of one center of the production engine. The engine itself is
//! `rtgs-engine`; this parses flags and environment into its `NodeConfig` and runs it.

use crate::pg_args::PgArgs;
use clap::Args;
use rtgs_core::entry::CenterId;
use rtgs_engine::{ApiConfig, CollectionConfig, Faults, NodeConfig};
use rtgs_plugins::MatchingConfig;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
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
    pub pg: PgArgs,
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
    /// Fault injection for drills: this center's acks go only by the push path, never to the
    /// topic (as if its node died each time before the broker confirmed them).
    #[arg(long, env = "RTGS_FAULT_ACKS_PUSH_ONLY", hide = true)]
    pub fault_acks_push_only: bool,
    /// The log on stderr: `human` (the line an operator reads, default) or `json` (one object per
    /// line with every field — center, seq, epoch, bmi — for a log shipper).
    #[arg(long, env = "RTGS_LOG_FORMAT", default_value = "human")]
    pub log_format: rtgs_engine::log::LogFormat,
    /// Fault injection for drills: this center acks seq N with a state hash other than the one it
    /// computed, as a diverged center would (finality must halt everywhere). 0: off.
    #[arg(long, env = "RTGS_FAULT_DIVERGE_AT_SEQ", default_value_t = 0, hide = true)]
    pub fault_diverge_at_seq: u64,
    /// No idle Tick entries (`RTGS_NO_IDLE_TICK=true`; drills that compare quiescent databases):
    /// ticks then ride only with batches. Plugin timers need idle ticks: never in production.
    #[arg(long, env = "RTGS_NO_IDLE_TICK", hide = true)]
    pub no_idle_tick: bool,
    /// No push path (`RTGS_NO_PUSH=true`): journal batches and acks reach the other centers only
    /// through the broker — correct, but each hop then costs the broker's fetch wait (about 10 to
    /// 20 ms here). For comparisons and as a way out if PostgreSQL's notifications misbehave.
    #[arg(long, env = "RTGS_NO_PUSH")]
    pub no_push: bool,
    /// Store every statement line with its commit, so that statements (`GET
    /// /v1/accounts/{id}/statement`) cover an account's whole history, across restarts. It costs
    /// the commit ≈ 3× the database time per transfer (bench/README.md); without it a statement
    /// covers what the API's read model applied since the node started. Every center the same.
    #[arg(long, env = "RTGS_STATEMENT_HISTORY")]
    pub statement_history: bool,
    #[command(flatten)]
    pub plugins: PluginArgs,
    #[command(flatten)]
    pub api: ApiArgs,
    /// Where `/metrics` listens (default 127.0.0.1:(9100 + PORT_OFFSET); port 0: any free port,
    /// reported in the status as `metrics_listen`). Loopback callers only, whatever the address.
    #[arg(long, env = "RTGS_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,
    /// Every center's /status listener, in center order, for the operator console's cluster
    /// report (repeat or separate by commas; `RTGS_STATUS_ADDRS`, as for `rtgs status`).
    /// Default: 127.0.0.1:9100, :9101, ... (each center's default --metrics-listen).
    #[arg(long = "status-addr", env = "RTGS_STATUS_ADDRS", value_delimiter = ',', value_name = "ADDR")]
    pub status_addrs: Vec<SocketAddr>,
    /// Check the settings and exit (0: they would run).
    #[arg(long)]
    pub check: bool,
}

/// `rtgs node` options of the plugins (every center must run the same set: their digests are in
/// the state hash; `rtgs collect --wallets` must name the same number of wallets, `rtgs match
/// --sellers --seed` the same sellers and seed).
#[derive(Args, Clone, Debug)]
pub struct PluginArgs {
    /// Plugins (with `--collection`: 500 wallets and 20 relayers unless set, chain seed 1; with
    /// `--matching`: 500 sellers, seed 1, whose opening offers `rtgs match` sends).
    #[command(flatten)]
    pub flags: crate::plugin_flags::PluginFlags,
    /// A center proposes itself as owner when the owner's acks have not advanced for this long.
    #[arg(long, env = "RTGS_OWNER_SILENCE_S", default_value_t = 5)]
    pub owner_silence_s: u64,
}

#[derive(Args, Clone, Debug, Default)]
pub struct ApiArgs {
    /// Serve the participant HTTP API with these participants and operators (JSON, as for
    /// `rtgs serve`); off without it.
    #[arg(long, env = "RTGS_API_CONFIG")]
    pub api_config: Option<PathBuf>,
    /// Listen here instead of 127.0.0.1:8080+PORT_OFFSET (the operator console too, under
    /// /console/; a non-loopback address is logged as a warning).
    #[arg(long, env = "RTGS_API_LISTEN")]
    pub api_listen: Option<SocketAddr>,
    /// Keep the matching orders' customer data (PII: name, phone, bank account) in this file,
    /// synced before an order is acknowledged and read back at start; it never enters the
    /// journal or a database. Without it the API keeps it in memory only (lost when the node
    /// stops; a node with --matching warns).
    #[arg(long, env = "RTGS_PII_FILE")]
    pub pii_file: Option<PathBuf>,
}

impl NodeArgs {
    fn config(self) -> anyhow::Result<NodeConfig> {
        let p = self.plugins;
        // The node's marketplace never offers on its own: `rtgs match` opens the sellers'
        // accounts, then sends their opening offers (a node cannot know when the accounts exist).
        let matching = MatchingConfig { orders: 0, market_opening_outside: true, ..Default::default() };
        let plugins = p
            .flags
            .config_with(CollectionConfig { wallets: 500, relayers: 20, ..Default::default() }, matching)?;
        Ok(NodeConfig {
            center: CenterId(self.center_id),
            center_count: self.center_count,
            port_offset: self.port_offset,
            bootstrap: self.bootstrap,
            topic_prefix: self.topic_prefix,
            db: self.db.unwrap_or_else(|| format!("rtgs_dc{}", self.center_id)),
            seq_db: self.seq_db,
            pg: self.pg.server(),
            status_file: self.status_file,
            status_interval_s: self.status_interval_s,
            faults: Faults {
                drop_journal_one_in: self.fault_drop_journal_one_in,
                drop_acks_one_in: self.fault_drop_acks_one_in,
                acks_push_only: self.fault_acks_push_only,
                diverge_at_seq: self.fault_diverge_at_seq,
            },
            idle_tick: !self.no_idle_tick,
            push: !self.no_push,
            statement_history: self.statement_history,
            plugins,
            owner_silence: Duration::from_secs(p.owner_silence_s.max(1)),
            api: self.api.api_config.map(|config| ApiConfig {
                config,
                listen: self.api.api_listen,
                pii_file: self.api.pii_file,
            }),
            metrics_listen: self.metrics_listen,
            status_addrs: self.status_addrs,
            log_format: self.log_format,
        })
    }
}

pub fn run(args: NodeArgs) -> anyhow::Result<ExitCode> {
    let check = args.check;
    let config = args.config()?;
    if check {
        config.validate()?;
        eprintln!("rtgs node: the settings are valid");
        return Ok(ExitCode::SUCCESS);
    }
    rtgs_engine::run(config)?;
    Ok(ExitCode::SUCCESS)
}
