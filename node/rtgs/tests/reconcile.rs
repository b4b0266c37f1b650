//! `rtgs reconcile` against three real center databases: a center behind the others is lag, not
//! a difference (compared at the common seq); equal centers reconcile; a divergence (a different
//! outcome from seq 20 on, hence a different hash chain, and a wrong balance) is found, located,
//! and fails the command.

use rtgs_core::center::{Commit, Progress};
use rtgs_core::entry::{AccountId, Bmi, CenterId, Currency, Entry, Payload, Transfer};
use rtgs_core::ledger::Ledger;
use rtgs_pg::center_store::{CenterStore, PluginSave};
use rtgs_pg::dev;
use rtgs_pg::migrate::Schema;
use std::process::Command;

const PREFIX: &str = "rtgs_test_rc_dc";

fn journal() -> Vec<Entry> {
    let eur = Currency::new(b"EUR").unwrap_or_else(|_| unreachable!());
    let mut p = Vec::new();
    for a in 1..=3 {
        p.push(Payload::AccountOpen { account: AccountId(a), currency: eur });
        p.push(Payload::AccountFund { account: AccountId(a), amount_minor: 500 });
    }
    for i in 0..30u64 {
        p.push(Payload::Transfer(Transfer {
            debtor: AccountId(1 + i % 3),
            creditor: AccountId(1 + (i + 1) % 3),
            amount_minor: 5 + i,
            currency: eur,
        }));
    }
    p.into_iter()
        .enumerate()
        .map(|(i, payload)| Entry {
            seq: i as u64 + 1,
            epoch: 1,
            timestamp_us: i as u64,
            origin: CenterId(1),
            bmi: Bmi::numbered("RC", i as u64).unwrap_or_else(|_| unreachable!()),
            payload,
        })
        .collect()
}

fn reconcile() -> (bool, serde_json::Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_rtgs"))
        .args(["reconcile", "--json", "--db-prefix", PREFIX])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    });
    (out.status.success(), v)
}

async fn commit(store: &CenterStore, ledger: &mut Ledger, chunk: &[Entry]) {
    let applied: Vec<_> = chunk.iter().map(|e| ledger.apply(e)).collect();
    let mut changed = rtgs_core::ledger::ChangedRows::default();
    let funded = ledger.take_changed(&mut changed).to_vec();
    let commit = Commit {
        applied,
        entries: chunk.to_vec(),
        changed,
        funded,
        journal_next: Some(1),
        progress: Progress { seq_unfinal_first: 1, ack_next: 1, seq_notice_from: 1, ..Progress::default() },
        ..Commit::default()
    };
    store.commit(&commit, PluginSave::None).await.unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test]
async fn reconcile_finds_and_locates_divergence() {
    if let Err(e) = dev::start_postgres() {
        panic!("PostgreSQL could not be started, so this test cannot run: {e}");
    }
    let pg = dev::PgSettings::from_env();
    let entries = journal();
    let mut pools = Vec::new();
    let mut stores = Vec::new();
    for c in 1..=3 {
        let pool = dev::fresh_database(&pg, &format!("{PREFIX}{c}"), Schema::Center, 2)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let mut ledger = Ledger::new();
        ledger.track_changes(true);
        stores.push((CenterStore::new(pool.clone()), ledger));
        pools.push(pool);
    }
    let chunks: Vec<&[Entry]> = entries.chunks(10).collect();
    // DC3 is behind by the last chunk: lag, and every center agrees at the common seq.
    for (c, (store, ledger)) in stores.iter_mut().enumerate() {
        let upto = if c == 2 { chunks.len() - 1 } else { chunks.len() };
        for chunk in &chunks[..upto] {
            commit(store, ledger, chunk).await;
        }
    }
    let (ok, v) = reconcile();
    assert!(ok, "a center behind is lag, not a difference: {v}");
    let behind = (entries.len() - chunks[chunks.len() - 1].len()) as u64;
    assert_eq!(
        (v["common_seq"].as_u64(), v["highest_seq"].as_u64()),
        (Some(behind), Some(entries.len() as u64))
    );
    let lag: Vec<(u64, u64)> = v["centers"]
        .as_array()
        .map(|c| {
            c.iter()
                .map(|c| (c["lag_entries"].as_u64().unwrap_or(99), c["seq_committed"].as_u64().unwrap_or(0)))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        lag,
        [(0, entries.len() as u64), (0, entries.len() as u64), (entries.len() as u64 - behind, behind)]
    );
    assert_eq!(v["centers"][2]["balances_compared"], false, "DC3 stands alone at its seq: {v}");
    assert_eq!(v["centers"][1]["balances_compared"], true, "DC1 and DC2 stand at one seq: {v}");
    let (store, ledger) = &mut stores[2];
    commit(store, ledger, chunks[chunks.len() - 1]).await;

    let (ok, v) = reconcile();
    assert!(ok, "equal centers must reconcile: {v}");
    assert_eq!(v["ok"], true);
    assert_eq!(v["common_seq"], entries.len());
    assert!(v["centers"].as_array().is_some_and(|c| c.iter().all(|c| c["lag_entries"] == 0)), "{v}");

    // DC3 diverges: a different chain from seq 20 on, and a balance that is off by one (in the
    // folded row and in any change not folded yet: `account_now` is what a center holds).
    let c = pools[2].get().await.unwrap_or_else(|e| panic!("{e}"));
    c.batch_execute(
        "UPDATE applied_batch SET state_hashes = ARRAY(
                SELECT CASE WHEN seq_first + i - 1 >= 20 THEN h # 1 ELSE h END
                  FROM unnest(state_hashes) WITH ORDINALITY u(h, i) ORDER BY i);
         UPDATE watermark SET state_hash = state_hash # 1;
         UPDATE account SET balance_minor = balance_minor + 1 WHERE id = 2;
         UPDATE account_change SET balances[array_position(ids, 2::bigint)] =
                balances[array_position(ids, 2::bigint)] + 1 WHERE 2 = ANY(ids);",
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let (ok, v) = reconcile();
    assert!(!ok, "a divergence must fail the command: {v}");
    assert_eq!(v["first_divergent_seq"], 20);
    let diffs: Vec<String> =
        v["differences"].as_array().map(|a| a.iter().map(|d| d.to_string()).collect()).unwrap_or_default();
    assert!(diffs.iter().any(|d| d.contains("state hash") && d.contains("DC3")), "{diffs:?}");
    assert!(diffs.iter().any(|d| d.contains("account 2") && d.contains("DC3")), "{diffs:?}");
    assert!(diffs.iter().any(|d| d.contains("DC3: balances add up to")), "{diffs:?}");
}
