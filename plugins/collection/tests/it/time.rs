//! Time never stops (mission.md §3.4): under continuous traffic — the sequencer is never idle for
//! a tick interval — it still journals a `Tick` every interval, and the collection plugin's
//! timers fire on them: the hourly scheduled run (no `RunNow` anywhere) and the stale monitor.
//! The real core `Sequencer` stamps every command; the plugin runs in a `Replica` (ledger + host)
//! as in every center; the chain simulator answers its effects on the journal's clock.

use rtgs_collection::adapter::{NodeAdapter, Workload};
use rtgs_collection::chain_sim::{BroadcastFault, ChainConfig};
use rtgs_collection::command::{CollectionCommand, SetSetting};
use rtgs_collection::settings::{SettingKey, SettingScope};
use rtgs_collection::types::ChainId;
use rtgs_collection::CollectionPlugin;
use rtgs_core::entry::{AccountId, Bmi, CenterId, Command, Currency, Payload, Transfer};
use rtgs_core::ledger::Ledger;
use rtgs_core::limits::TICK_INTERVAL_US;
use rtgs_core::plugin::{Effect, EffectAdapter};
use rtgs_core::plugin_host::PluginHost;
use rtgs_core::replica::Replica;
use rtgs_core::sequencer::{MemoryIndex, Sequencer};

fn figure(host: &PluginHost, name: &str) -> u64 {
    let mut f = Vec::new();
    host.figures(&mut f);
    f.iter().find(|(n, _)| *n == name).map_or(0, |(_, v)| *v)
}

fn setting(key: SettingKey, value: u64, n: u64) -> Command {
    let c =
        CollectionCommand::SetSetting(SetSetting { scope: SettingScope::Global, key, value: Some(value) });
    let bmi = Bmi::numbered("SET", n).unwrap_or_else(|e| panic!("{e}"));
    Command {
        origin: CenterId(1),
        bmi,
        payload: Payload::Plugin(c.to_plugin_command().unwrap_or_else(|e| panic!("{e}"))),
    }
}

#[test]
fn the_schedule_and_the_stale_monitor_fire_under_continuous_traffic() {
    const STEP_US: u64 = 100_000; // a command every 100 ms of journal time, for 75 minutes
    const STEPS: u64 = 75 * 60 * 10;
    let start_us = 1_000_000;
    let w = Workload::new(20, 2);
    let mut chain = w.chain(ChainConfig::default(), 5, start_us);
    // The first sweep is "accepted", then gone from the mempool: only the stale monitor finds it.
    chain.force_broadcast_fault(BroadcastFault::Drop);
    let mut adapter = NodeAdapter::new(chain, start_us, 1);
    let host = PluginHost::new(CenterId(1), vec![Box::new(CollectionPlugin::new())])
        .unwrap_or_else(|e| panic!("{e}"));
    let mut replica = Replica::new(Ledger::new(), host);
    replica.host_mut().set_live();
    let mut sequencer = Sequencer::new(CenterId(1), 1);
    // The driver's index of every bmi ever sequenced (what the engines keep).
    let mut index = MemoryIndex::default();
    let mut inbound: Vec<Command> = w
        .setup_commands(ChainId(1))
        .into_iter()
        .map(|(bmi, c)| Command { origin: CenterId(1), bmi, payload: Payload::Plugin(c) })
        .collect();
    inbound.push(setting(SettingKey::StaleCheckIntervalMinutes, 1, 1));
    inbound.push(setting(SettingKey::StaleThresholdMinutes, 5, 2));
    let eur = Currency::new(b"EUR").unwrap_or_else(|e| panic!("{e}"));
    let (mut entries, mut admissions, mut effects, mut results) =
        (Vec::new(), Vec::new(), Vec::<Effect>::new(), Vec::new());
    let (mut ticks, mut last_ts, mut gap_max_us) = (0u64, start_us, 0u64);
    let mut now = start_us;
    for step in 0..STEPS {
        now += STEP_US;
        // Continuous traffic: a transfer (between accounts that do not exist: rejected, AC01 —
        // what matters is that the sequencer stamps an entry every 100 ms).
        let t = Transfer { debtor: AccountId(1), creditor: AccountId(2), amount_minor: 1, currency: eur };
        let bmi = Bmi::numbered("T", step).unwrap_or_else(|e| panic!("{e}"));
        inbound.push(Command { origin: CenterId(1), bmi, payload: Payload::Transfer(t) });
        adapter.poll(now, &mut results);
        inbound.extend(results.drain(..).map(|(bmi, c)| Command {
            origin: CenterId(1),
            bmi,
            payload: Payload::Plugin(c),
        }));
        entries.clear();
        admissions.clear();
        let commands: Vec<Command> = std::mem::take(&mut inbound);
        let mut lookups = Vec::with_capacity(commands.len());
        index.lookup(&commands, &mut lookups);
        sequencer.handle_commands(now, commands, &lookups, &mut entries, &mut admissions);
        index.record(&entries);
        entries.extend(sequencer.poll_tick(now));
        for e in &entries {
            replica.apply(e);
            gap_max_us = gap_max_us.max(e.timestamp_us - last_ts);
            last_ts = e.timestamp_us;
            ticks += u64::from(e.payload == Payload::Tick);
        }
        replica.host_mut().take_effects(&mut effects);
        for e in effects.drain(..) {
            adapter.execute(&e, now);
        }
    }
    assert!(gap_max_us < TICK_INTERVAL_US, "never idle for an interval: an idle-only tick would never come");
    let expected = STEPS * STEP_US / TICK_INTERVAL_US;
    assert!(ticks + 1 >= expected, "a tick every interval under load: {ticks} of {expected}");
    let host = replica.host();
    assert_eq!(figure(host, "collection_deposits"), w.wallets, "the deposits were journaled");
    assert!(figure(host, "collection_batches") >= 1, "the hourly schedule ran (no RunNow was ever sent)");
    assert!(figure(host, "collection_batches_stale") >= 1, "the stale monitor found the dropped sweep");
}
