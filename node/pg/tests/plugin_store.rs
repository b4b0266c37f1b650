//! The plugin store against a real PostgreSQL, started through the project's own
//! `scripts/infra-up.sh postgres` (installs it when missing). Each test uses its own database.
//! If the server cannot be started the test fails and says why; it never skips.

use rtgs_collection::command::{CollectionCommand, DepositConfirmed, RegisterRelayer};
use rtgs_collection::types::{ChainId, DepositId, PartnerId, RelayerId, TokenId, WalletId};
use rtgs_collection::CollectionPlugin;
use rtgs_core::entry::{Bmi, CenterId, Entry, Payload};
use rtgs_core::plugin_host::{PluginHost, SetOwner};
use rtgs_pg::dev;
use rtgs_pg::migrate::Schema;
use rtgs_pg::plugin_store;
use rtgs_pg::StoreError;

async fn fresh(name: &str) -> deadpool_postgres::Pool {
    if let Err(e) = dev::start_postgres() {
        panic!("PostgreSQL could not be started, so this test cannot run: {e}");
    }
    dev::fresh_database(&dev::PgSettings::from_env(), name, Schema::Center, 2)
        .await
        .unwrap_or_else(|e| panic!("cannot create {name}: {e}"))
}

fn host() -> PluginHost {
    PluginHost::new(CenterId(2), vec![Box::new(CollectionPlugin::new())]).unwrap_or_else(|e| panic!("{e}"))
}

fn entry(seq: u64, payload: Payload) -> Entry {
    let bmi = Bmi::numbered("PS", seq).unwrap_or_else(|e| panic!("{e}"));
    Entry { seq, epoch: 1, timestamp_us: 1_000 * seq, origin: CenterId(1), bmi, payload }
}

/// A host with some collection state and a moved owner, at seq `n + 2`.
fn busy_host(n: u64) -> PluginHost {
    let mut h = host();
    // Collection moves no ledger money: a scratch ledger takes its (absent) intents.
    let mut ledger = rtgs_core::ledger::Ledger::new();
    let relayer = CollectionCommand::RegisterRelayer(RegisterRelayer {
        chain: ChainId(1),
        relayer: RelayerId(7),
        next_nonce: 0,
    });
    h.apply(
        &entry(1, Payload::Plugin(relayer.to_plugin_command().unwrap_or_else(|e| panic!("{e}")))),
        &mut ledger,
    );
    for i in 0..n {
        let d = CollectionCommand::DepositConfirmed(DepositConfirmed {
            deposit: DepositId(i + 1),
            partner: PartnerId(1),
            wallet: WalletId(100 + i),
            chain: ChainId(1),
            token: TokenId(1),
            amount_minor: 2_000_000,
            block_height: 5,
        });
        h.apply(
            &entry(2 + i, Payload::Plugin(d.to_plugin_command().unwrap_or_else(|e| panic!("{e}")))),
            &mut ledger,
        );
    }
    let owner = SetOwner { term: 1, owner: CenterId(3) };
    let cmd = owner.to_command(rtgs_core::entry::PluginKind::Collection).unwrap_or_else(|e| panic!("{e}"));
    h.apply(&entry(2 + n, Payload::Plugin(cmd)), &mut ledger);
    h
}

#[tokio::test]
async fn plugin_state_round_trips_and_is_replaced() {
    let pool = fresh("rtgs_test_plugin_store").await;
    let client = pool.get().await.unwrap_or_else(|e| panic!("{e}"));
    let mut empty = host();
    assert_eq!(plugin_store::load(&client, &mut empty).await.unwrap_or_else(|e| panic!("{e}")), None);

    let first = busy_host(3);
    plugin_store::save(&pool, 5, &first).await.unwrap_or_else(|e| panic!("{e}"));
    let later = busy_host(40);
    plugin_store::save(&pool, 42, &later).await.unwrap_or_else(|e| panic!("{e}"));

    let mut back = host();
    let seq = plugin_store::load(&client, &mut back).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(seq, Some(42), "the later save replaced the earlier one");
    assert_eq!(back.state_hash(), later.state_hash());
    assert_ne!(back.state_hash(), first.state_hash());
    assert_eq!(back.owner(rtgs_core::entry::PluginKind::Collection), Some((CenterId(3), 1)));
    let rows: i64 = client
        .query_one("SELECT count(*) FROM plugin_state", &[])
        .await
        .map(|r| r.get(0))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(rows, 1, "one row per plugin");
}

#[tokio::test]
async fn save_in_commits_and_rolls_back_with_the_callers_transaction() {
    let pool = fresh("rtgs_test_plugin_store_tx").await;
    let mut client = pool.get().await.unwrap_or_else(|e| panic!("{e}"));
    let h = busy_host(2);
    {
        let tx = client.transaction().await.unwrap_or_else(|e| panic!("{e}"));
        plugin_store::save_in(&tx, 9, &h).await.unwrap_or_else(|e| panic!("{e}"));
        tx.rollback().await.unwrap_or_else(|e| panic!("{e}"));
    }
    let mut back = host();
    assert_eq!(plugin_store::load(&client, &mut back).await.unwrap_or_else(|e| panic!("{e}")), None);
    {
        let tx = client.transaction().await.unwrap_or_else(|e| panic!("{e}"));
        plugin_store::save_in(&tx, 9, &h).await.unwrap_or_else(|e| panic!("{e}"));
        tx.commit().await.unwrap_or_else(|e| panic!("{e}"));
    }
    assert_eq!(plugin_store::load(&client, &mut back).await.unwrap_or_else(|e| panic!("{e}")), Some(9));
    assert_eq!(back.state_hash(), h.state_hash());
}

#[tokio::test]
async fn corrupt_or_foreign_rows_are_refused_and_leave_the_host_alone() {
    let pool = fresh("rtgs_test_plugin_store_bad").await;
    let client = pool.get().await.unwrap_or_else(|e| panic!("{e}"));
    let h = busy_host(4);
    plugin_store::save(&pool, 6, &h).await.unwrap_or_else(|e| panic!("{e}"));

    // A flipped bit in the stored state: the hash check refuses it.
    client
        .execute("UPDATE plugin_state SET state = overlay(state placing '\\x55'::bytea from 20 for 1)", &[])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut target = busy_host(1);
    let before = target.state_hash();
    let err = plugin_store::load(&client, &mut target).await;
    assert!(matches!(err, Err(StoreError::Corrupt(_))), "{err:?}");
    assert_eq!(target.state_hash(), before, "the host was left as it was");

    // Rows for a plugin this host does not run.
    plugin_store::save(&pool, 6, &h).await.unwrap_or_else(|e| panic!("{e}"));
    let mut none = PluginHost::empty(CenterId(2));
    assert!(matches!(plugin_store::load(&client, &mut none).await, Err(StoreError::Corrupt(_))));
}
