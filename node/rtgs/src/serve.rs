//! `rtgs serve`: the embedded cluster with the participant HTTP API in front of it.
//!
//! Listens on `127.0.0.1:8080+PORT_OFFSET` (or `--listen`). Participants and the accounts to set
//! up come from a JSON file (`node/api/participants.example.json`, described in
//! `rtgs_api::config`); the accounts are opened and funded only on a fresh data directory, so a
//! restart never funds them twice. SIGTERM / Ctrl-C stops the server — idle connections close at
//! once, requests in flight finish within `rtgs_api::limits::SHUTDOWN_GRACE` (5 s), half-sent
//! ones are dropped — then drains the cluster and writes its checkpoints.
//!
//! With `--collection`, every center also runs the collection plugin, the owner's effects go to
//! the chain simulator (`--collection-wallets` wallets with one confirmed deposit each, approved,
//! and `--collection-relayers` funded relayers, registered on a fresh data directory), and the
//! operator collection endpoints (run, relayers, settings, audit) answer. The simulator lives in
//! memory: a restart starts a new chain, so use a fresh data directory with it.
//!
//! With `--matching`, every center also runs the matching plugin against the LP simulator and a
//! simulated marketplace (`--matching-sellers` sellers, default 20); on a fresh data directory the
//! workload's accounts (LP, sellers, partners) are opened and funded and its LP account and
//! partners' windows journaled before the sellers offer (5 s after the start), and the widget and
//! operator matching endpoints answer. Orders come from outside (the journal's `SubmitOrder`); the
//! customers' PII of orders submitted over HTTP is kept in `<data-dir>/matching-pii.log`, beside the
//! journal, synced before an order is acknowledged and read back at start.

use anyhow::Context;
use clap::Args;
use rtgs_api::config::ApiConfig;
use rtgs_api::read_model::ReadModel;
use rtgs_api::server::{Api, EngineLink};
use rtgs_collection::types::ChainId;
use rtgs_core::entry::CenterId;
use rtgs_core::ledger::Ledger;
use rtgs_embedded::cluster::{Cluster, ClusterConfig, PluginSetup};
use rtgs_plugins::{CollectionConfig, MatchingConfig, PluginsConfig};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// The API's port when `PORT_OFFSET` is 0.
const PORT_BASE: u16 = 8080;
/// The matching orders' customer PII, in the data directory beside (never in) the journal.
pub const PII_FILE: &str = "matching-pii.log";

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
    /// Plugins (with `--collection`: 1,000 wallets and 16 relayers unless set, registered on a
    /// fresh data directory).
    #[command(flatten)]
    pub plugins: crate::plugin_flags::PluginFlags,
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

    let matching = MatchingConfig { orders: 0, sellers: 20, market_start_ms: 5_000, ..Default::default() };
    let plugins = args
        .plugins
        .config_with(CollectionConfig { wallets: 1_000, relayers: 16, ..Default::default() }, matching)?;
    let mut config = ClusterConfig::new(&args.data_dir);
    config.journal_mirror = args.journal_mirror.clone();
    let cluster = start_cluster(&config, &plugins).context("starting the cluster")?;
    let pii = match plugins.matching {
        Some(_) => {
            rtgs_api::pii::PiiStore::open(&args.data_dir.join(PII_FILE)).context("opening the PII store")?
        }
        None => rtgs_api::pii::PiiStore::in_memory(),
    };
    let api = start_api(&cluster, &plugins, credentials, pii);
    let fresh = cluster.recovery().journal.seq_last == 0;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let served = rt.block_on(async {
        if fresh {
            api.setup_accounts(&accounts).await.context("setting up accounts")?;
            eprintln!("rtgs serve: opened {} accounts", accounts.len());
            if let Some(c) = &plugins.collection {
                let relayers = c.workload().setup_commands(ChainId(1));
                let n = relayers.len();
                api.setup_plugin_commands(relayers).await.context("registering relayers")?;
                eprintln!("rtgs serve: collection on, {n} relayers registered");
            }
            if let Some(m) = &plugins.matching {
                let w = m.workload();
                api.setup_payloads(w.setup_payloads()).await.context("opening the matching accounts")?;
                api.setup_plugin_commands(w.setup_commands()).await.context("matching settings")?;
                eprintln!(
                    "rtgs serve: matching on, {} sellers' and {} partners' accounts opened",
                    w.sellers, w.partners
                );
            }
            if let Some(w) = &plugins.withdrawal {
                // The simulated world's chains and funded vaults, and timers of seconds; assets in
                // the participants' currencies are the operators' to register (HTTP).
                let settings = rtgs_withdrawal::world::workload::Workload::demo_settings();
                let setup = w.workload().setup_commands(&settings).context("withdrawal setup")?;
                let n = setup.len();
                api.setup_plugin_commands(setup).await.context("registering the withdrawal world")?;
                eprintln!("rtgs serve: withdrawal on, {n} chains, assets, vaults and timers registered");
            }
        } else {
            eprintln!(
                "rtgs serve: resuming at seq {}; account setup skipped",
                cluster.recovery().journal.seq_last
            );
        }
        let listener =
            tokio::net::TcpListener::bind(listen).await.with_context(|| format!("binding {listen}"))?;
        let local = listener.local_addr()?;
        // Scripts and tests read the address from this line: nothing after it.
        eprintln!("rtgs serve: listening on http://{local}");
        eprintln!("rtgs serve: operator console on http://{local}/console/");
        if !local.ip().is_loopback() {
            eprintln!(
                "rtgs serve: WARNING: listening on {local}, not on loopback: every request is signed, but put TLS \
                 and a firewall in front of it"
            );
        }
        let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        api.serve(listener, stop_signal(term)).await.context("serving")
    });
    eprintln!("rtgs serve: stopping");
    let stopped = api.shutdown();
    let report = cluster.shutdown();
    stopped.join();
    served?;
    for c in &report.centers {
        eprintln!("  {}: seq_applied {} state_hash {:016x}", c.id, c.seq_applied, c.state_hash);
    }
    if !report.errors.is_empty() {
        anyhow::bail!("cluster errors: {:?}", report.errors);
    }
    Ok(ExitCode::SUCCESS)
}

/// The embedded cluster with `plugins` in every center.
pub fn start_cluster(
    config: &ClusterConfig,
    plugins: &PluginsConfig,
) -> Result<Cluster, rtgs_embedded::cluster::StartError> {
    if plugins.is_empty() {
        return Cluster::start(config);
    }
    let make = plugins.clone();
    let setup = PluginSetup { make: Box::new(move || make.hosted()), adapter: Box::new(plugins.adapters()) };
    Cluster::start_with_plugins(config, setup)
}

/// The HTTP API over the embedded cluster (submissions enter through DC1); its read model
/// replays the journal files with a replica of the same plugins; customers' PII in `pii`.
pub fn start_api(
    cluster: &Cluster,
    plugins: &PluginsConfig,
    credentials: rtgs_api::config::Credentials,
    pii: rtgs_api::pii::PiiStore,
) -> Api {
    let link = cluster.client_link();
    // A status query for a bmi the API's tracker does not know asks the sequencer thread.
    let (queries, host) = (link.bmi_queries, plugins.host(CenterId(0)));
    let sequenced = rtgs_api::read_model::sequenced_bmis_asked(move |bmi| queries.ask(bmi));
    let api = Api::start_linked_with_pii(
        EngineLink {
            submit: Arc::new(link.submit),
            events: link.events,
            read_model: ReadModel::new(Ledger::new(), host).with_sequenced_bmis(sequenced),
            feed: Box::new(link.feed),
            final_through: link.final_through,
        },
        credentials,
        CenterId(1),
        pii,
    );
    let syncs = cluster.journal_syncs();
    api.set_engine_metrics(Arc::new(move || journal_sync_exposition(&syncs())));
    api
}

/// A sync over this long holds up the whole pipeline: counted in `rtgs_journal_sync_slow_total`
/// (the demo's `over_5ms`; the alert `RtgsJournalSyncSlow`).
pub const SLOW_SYNC_US: u64 = 5_000;

/// The embedded journal's sync times as Prometheus series: a summary since start (quantiles,
/// `_sum`, `_count`) and the slow ones as a counter, both exported from the start (at 0).
pub fn journal_sync_exposition(t: &rtgs_embedded::journal::SyncTimes) -> String {
    let s = |us: u64| us as f64 / 1e6;
    let mut out = String::from(
        "# HELP rtgs_journal_sync_seconds The embedded journal writer's fdatasync calls since start \
         (one per group, mark or rotation).\n# TYPE rtgs_journal_sync_seconds summary\n",
    );
    for (label, q) in [("0.5", 0.5), ("0.99", 0.99), ("0.999", 0.999)] {
        let v = s(t.quantile_us(q));
        out.push_str(&format!("rtgs_journal_sync_seconds{{quantile=\"{label}\"}} {v}\n"));
    }
    out.push_str(&format!("rtgs_journal_sync_seconds_sum {}\n", s(t.total_us())));
    out.push_str(&format!("rtgs_journal_sync_seconds_count {}\n", t.count()));
    out.push_str(&format!(
        "# HELP rtgs_journal_sync_slow_total The embedded journal's fdatasync calls over {} ms.\n\
         # TYPE rtgs_journal_sync_slow_total counter\nrtgs_journal_sync_slow_total {}\n",
        SLOW_SYNC_US / 1000,
        t.over_us(SLOW_SYNC_US)
    ));
    out
}

/// SIGTERM (`term`) or Ctrl-C.
async fn stop_signal(mut term: tokio::signal::unix::Signal) {
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journal_syncs_are_exported_from_the_start_as_prometheus_text() {
        let text = journal_sync_exposition(&rtgs_embedded::journal::SyncTimes::default());
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (name, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("not a sample: {line}"));
            assert!(name.starts_with("rtgs_journal_sync_"), "{line}");
            assert_eq!(value.parse::<f64>().ok(), Some(0.0), "nothing synced yet: {line}");
        }
        for series in [
            "rtgs_journal_sync_seconds{quantile=\"0.99\"} 0",
            "rtgs_journal_sync_seconds_sum 0",
            "rtgs_journal_sync_seconds_count 0",
            "# TYPE rtgs_journal_sync_slow_total counter",
            "rtgs_journal_sync_slow_total 0",
        ] {
            assert!(text.contains(series), "{series} missing from:\n{text}");
        }
    }
}
