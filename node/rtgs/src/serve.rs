//! `rtgs serve`: the embedded cluster with the participant HTTP API in front of it.
//!
//! Listens on `127.0.0.1:8080+PORT_OFFSET` (or `--listen`). Participants and the accounts to set
//! up come from a JSON file (`node/api/participants.example.json`, described in
//! `rtgs_api::config`); the accounts are opened and funded only on a fresh data directory, so a
//! restart never funds them twice. SIGTERM / Ctrl-C stops the server, lets open requests finish,
//! then drains the cluster and writes its checkpoints.
//!
//! With `--collection`, every center also runs the collection plugin, the owner's effects go to
//! the chain simulator (`--collection-wallets` wallets with one confirmed deposit each, approved,
//! and `--collection-relayers` funded relayers, registered on a fresh data directory), and the
//! operator collection endpoints (run, relayers, settings, audit) answer. The simulator lives in
//! memory: a restart starts a new chain, so use a fresh data directory with it.

use anyhow::Context;
use clap::Args;
use rtgs_api::config::ApiConfig;
use rtgs_api::server::Api;
use rtgs_collection::adapter::{NodeAdapter, Workload};
use rtgs_collection::chain_sim::ChainConfig;
use rtgs_collection::types::ChainId;
use rtgs_core::entry::CenterId;
use rtgs_embedded::cluster::{Cluster, ClusterConfig, PluginSetup};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

/// Where the simulated chain's clock starts.
const CHAIN_START_US: u64 = 1_000_000;

/// The API's port when `PORT_OFFSET` is 0.
const PORT_BASE: u16 = 8080;

#[derive(Args)]
pub struct ServeArgs {
    /// Participants (key ids, secrets, accounts) and the accounts to open: JSON.
    #[arg(long)]
    pub config: PathBuf,
    /// Journal and checkpoints; kept, and a later run resumes from it.
    #[arg(long, default_value = "rtgs-data")]
    pub data_dir: PathBuf,
    /// A second copy of the journal (another disk): written and synced with the first; a frame
    /// damaged in one copy is repaired from the other at start.
    #[arg(long)]
    pub journal_mirror: Option<PathBuf>,
    /// The API listens on 127.0.0.1:8080+PORT_OFFSET.
    #[arg(long, env = "PORT_OFFSET", default_value_t = 0)]
    pub port_offset: u16,
    /// Listen here instead (e.g. 127.0.0.1:0 for an ephemeral port).
    #[arg(long)]
    pub listen: Option<SocketAddr>,
    /// Run the collection plugin against the chain simulator.
    #[arg(long)]
    pub collection: bool,
    /// Deposit wallets on the simulated chain (one confirmed deposit of 2.0 each).
    #[arg(long, default_value_t = 1_000)]
    pub collection_wallets: u64,
    /// Relayer accounts, registered at setup.
    #[arg(long, default_value_t = 16)]
    pub collection_relayers: u64,
    /// How much faster the simulated chain's clock runs than the wall clock (12 s blocks).
    #[arg(long, default_value_t = 1_000)]
    pub chain_time_scale: u64,
    /// Validate the config file and exit.
    #[arg(long)]
    pub check: bool,
}

pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(&args.config)
        .with_context(|| format!("reading {}", args.config.display()))?;
    let (credentials, accounts) =
        ApiConfig::from_json(&text).and_then(|c| c.build()).context("invalid config")?;
    if args.check {
        let (participants, operators) = (credentials.participants.len(), credentials.operators.len());
        eprintln!(
            "config ok: {participants} participants, {operators} operators, {} accounts",
            accounts.len()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let port = PORT_BASE.checked_add(args.port_offset).context("PORT_OFFSET too large")?;
    let listen = args.listen.unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], port)));

    let mut config = ClusterConfig::new(&args.data_dir);
    config.journal_mirror = args.journal_mirror.clone();
    let workload = Workload::new(args.collection_wallets, args.collection_relayers);
    let (cluster, api) = if args.collection {
        let chain = workload.chain(ChainConfig::default(), 1, CHAIN_START_US);
        let setup = PluginSetup {
            make: Box::new(|| vec![Box::new(rtgs_collection::CollectionPlugin::new())]),
            adapter: Box::new(NodeAdapter::new(chain, CHAIN_START_US, args.chain_time_scale)),
        };
        let cluster = Cluster::start_with_plugins(&config, setup).context("starting the cluster")?;
        let api = Api::start_with_collection(&cluster, args.data_dir.clone(), credentials, CenterId(1));
        (cluster, api)
    } else {
        let cluster = Cluster::start(&config).context("starting the cluster")?;
        let api = Api::start(&cluster, args.data_dir.clone(), credentials, CenterId(1));
        (cluster, api)
    };
    let fresh = cluster.recovery().journal.seq_last == 0;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let served = rt.block_on(async {
        if fresh {
            api.setup_accounts(&accounts).await.context("setting up accounts")?;
            eprintln!("rtgs serve: opened {} accounts", accounts.len());
            if args.collection {
                let relayers = workload.setup_commands(ChainId(1));
                let n = relayers.len();
                api.setup_plugin_commands(relayers).await.context("registering relayers")?;
                eprintln!("rtgs serve: collection on, {n} relayers registered");
            }
        } else {
            eprintln!(
                "rtgs serve: resuming at seq {}; account setup skipped",
                cluster.recovery().journal.seq_last
            );
        }
        let listener =
            tokio::net::TcpListener::bind(listen).await.with_context(|| format!("binding {listen}"))?;
        eprintln!("rtgs serve: listening on http://{}", listener.local_addr()?);
        let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        api.serve(listener, stop_signal(term)).await.context("serving")
    });
    eprintln!("rtgs serve: stopping");
    let report = api.shutdown(cluster);
    served?;
    for c in &report.centers {
        eprintln!("  {}: seq_applied {} state_hash {:016x}", c.id, c.seq_applied, c.state_hash);
    }
    if !report.errors.is_empty() {
        anyhow::bail!("cluster errors: {:?}", report.errors);
    }
    Ok(ExitCode::SUCCESS)
}

/// SIGTERM (`term`) or Ctrl-C.
async fn stop_signal(mut term: tokio::signal::unix::Signal) {
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
