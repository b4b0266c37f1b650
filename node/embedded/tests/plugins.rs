//! The embedded cluster with the collection plugin and the chain simulator: a sweep end to end
//! through the journal, identical plugin state in every center, plugin state restored from the
//! checkpoint on restart, and a data directory refused when the plugin set does not match it.

use rtgs_collection::adapter::{NodeAdapter, Workload};
use rtgs_collection::chain_sim::ChainConfig;
use rtgs_collection::types::ChainId;
use rtgs_collection::CollectionPlugin;
use rtgs_core::entry::{CenterId, Command, Payload};
use rtgs_core::plugin_host::SetOwner;
use rtgs_embedded::cluster::{Cluster, ClusterConfig, Figures, PluginSetup, StartError};
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rtgs-it-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn setup(w: &Workload) -> PluginSetup {
    // The chain runs 1,000× faster than the journal's clock: a 12 s block every 12 ms.
    let chain = w.chain(ChainConfig::default(), 3, 1_000_000);
    PluginSetup {
        make: Box::new(|| vec![Box::new(CollectionPlugin::new())]),
        adapter: Box::new(NodeAdapter::new(chain, 1_000_000, 1_000)),
    }
}

fn figure(f: &Figures, name: &str) -> u64 {
    f.iter().find(|(n, _)| *n == name).map_or(0, |(_, v)| *v)
}

/// Polls DC1's published figures until `done` holds (a generous bound: a stuck engine fails).
fn wait_for(cluster: &Cluster, what: &str, done: impl Fn(&Figures) -> bool) {
    let start = Instant::now();
    loop {
        let f = cluster.plugin_figures(CenterId(1));
        if done(&f) {
            return;
        }
        assert!(start.elapsed() < Duration::from_secs(120), "{what}: never happened; figures {f:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn submit(cluster: &Cluster, commands: Vec<(rtgs_core::entry::Bmi, rtgs_core::entry::PluginCommand)>) {
    let commands = commands.into_iter().map(|(bmi, c)| Command {
        origin: CenterId(1),
        bmi,
        payload: Payload::Plugin(c),
    });
    cluster.submitter().submit(commands.collect()).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn a_sweep_runs_through_the_journal_and_plugin_state_survives_a_restart() {
    let dir = tempdir("plugins");
    let w = Workload::new(300, 16);
    let cluster =
        Cluster::start_with_plugins(&ClusterConfig::new(&dir), setup(&w)).unwrap_or_else(|e| panic!("{e}"));
    submit(&cluster, w.setup_commands(ChainId(1)));
    wait_for(&cluster, "deposits queued", |f| figure(f, "collection_rows_queued") == w.wallets);
    // Ownership moves to DC2 by a journal entry: from then on DC2's thread hands the effects over.
    let kind = rtgs_core::entry::PluginKind::Collection;
    let owner = SetOwner { term: 1, owner: CenterId(2) }.to_command(kind).unwrap_or_else(|e| panic!("{e}"));
    submit(&cluster, vec![(SetOwner::bmi(kind, 1).unwrap_or_else(|e| panic!("{e}")), owner)]);
    wait_for(&cluster, "DC2 owns the plugin", |f| figure(f, "owner_center") == 2);
    submit(&cluster, w.run_now(1).into_iter().collect());
    wait_for(&cluster, "every deposit collected", |f| figure(f, "collection_rows_collected") == w.wallets);
    assert!(figure(&cluster.adapter_figures(), "adapter_effects_executed") > 0);
    let report = cluster.shutdown();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let first = &report.centers[0];
    assert_eq!(figure(&first.plugin_figures, "collection_batches_confirmed"), w.wallets);
    assert_eq!(figure(&first.plugin_figures, "owner_center"), 2, "every center agrees DC2 owns it");
    assert_ne!(first.plugin_state_hash, 0);
    for c in &report.centers {
        assert_eq!(c.seq_applied, report.journal_seq_last);
        assert_eq!(c.state_hash, first.state_hash, "{} folds the same plugin steps", c.id);
        assert_eq!(c.plugin_state_hash, first.plugin_state_hash, "{} holds the same plugin state", c.id);
    }

    // Restart: the plugin state comes back from the checkpoints.
    let cluster =
        Cluster::start_with_plugins(&ClusterConfig::new(&dir), setup(&w)).unwrap_or_else(|e| panic!("{e}"));
    let again = cluster.shutdown();
    assert!(again.errors.is_empty(), "{:?}", again.errors);
    for c in &again.centers {
        assert_eq!(c.seq_resumed_from, report.journal_seq_last, "{} resumed from its checkpoint", c.id);
        assert_eq!(c.plugin_state_hash, again.centers[0].plugin_state_hash, "{} agrees", c.id);
        if again.journal_seq_last == report.journal_seq_last {
            // No `Tick` came in between (a slow machine may stamp one): nothing changed the state.
            assert_eq!(c.plugin_state_hash, first.plugin_state_hash, "{} restored its plugin state", c.id);
        }
        assert_eq!(figure(&c.plugin_figures, "collection_rows_collected"), w.wallets);
    }

    // Plugin state lives in its own file per center, older ones deleted once superseded.
    let files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.starts_with("center-DC1.plugins."))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");

    // The same data directory without the plugin is refused, not silently diverged.
    match Cluster::start(&ClusterConfig::new(&dir)) {
        Err(StartError::Plugins { .. }) => {}
        Err(e) => panic!("unexpected error {e}"),
        Ok(c) => {
            c.shutdown();
            panic!("started without the plugins its checkpoints hold");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
