//! The PostgreSQL stores against a real PostgreSQL, started through the project's own
//! `scripts/infra-up.sh postgres` (installs it when missing). Each test uses its own database.
//! If the server cannot be started the test fails and says why; it never skips.

use rtgs_core::center::{Commit, Progress};
use rtgs_core::codec;
use rtgs_core::entry::{AccountId, Bmi, CenterId, Currency, Entry, Outcome, Payload, PluginKind, Transfer};
use rtgs_core::ledger::{ChangedRows, HoldKey, Ledger, LedgerIntent};
use rtgs_core::statement::{AccountLine, LineKind};
use rtgs_pg::center_store::{CenterStore, PluginSave};
use rtgs_pg::dev;
use rtgs_pg::migrate::{migrate, Schema};
use rtgs_pg::sequencer_store::{OutboxBatch, SequencerStore};
use rtgs_pg::StoreError;

/// A fresh, migrated database `name`, and a pool on it; PostgreSQL is started through the
/// project's script, and a failure to start it fails the test with the script's message.
async fn fresh(name: &str, schema: Schema) -> deadpool_postgres::Pool {
    if let Err(e) = dev::start_postgres() {
        panic!("PostgreSQL could not be started, so this test cannot run: {e}");
    }
    let pool = dev::fresh_database(&dev::PgSettings::from_env(), name, schema, 4)
        .await
        .unwrap_or_else(|e| panic!("cannot create {name}: {e}"));
    let mut client = pool.get().await.unwrap_or_else(|e| panic!("{e}"));
    assert!(
        migrate(&mut client, schema).await.unwrap_or_else(|e| panic!("{e}")).is_empty(),
        "already migrated"
    );
    pool
}

fn eur() -> Currency {
    Currency::new(b"EUR").unwrap_or_else(|_| unreachable!())
}

fn entry(seq: u64, payload: Payload) -> Entry {
    Entry {
        seq,
        epoch: 1,
        timestamp_us: 1_000 + seq,
        origin: CenterId((seq % 3) as u8 + 1),
        bmi: Bmi::numbered("PG", seq).unwrap_or_else(|_| unreachable!()),
        payload,
    }
}

fn ticks(seqs: std::ops::RangeInclusive<u64>, epoch: u32) -> OutboxBatch {
    let (first, last) = (*seqs.start(), *seqs.end());
    let entries: Vec<Entry> = seqs.map(|seq| Entry::tick(seq, epoch, seq, CenterId(1))).collect();
    let mut frames = Vec::new();
    codec::encode_frame(&entries, &mut frames);
    OutboxBatch { seq_first: first, seq_last: last, epoch, frames }
}

#[tokio::test]
async fn migrations_apply_once() {
    let pool = fresh("rtgs_test_migrate", Schema::Center).await;
    let mut client = pool.get().await.unwrap_or_else(|e| panic!("{e}"));
    assert!(
        migrate(&mut client, Schema::Center).await.unwrap_or_else(|e| panic!("{e}")).is_empty(),
        "second run applies nothing"
    );
    let versions: Vec<String> = client
        .query("SELECT version FROM schema_migrations", &[])
        .await
        .map(|rows| rows.iter().map(|r| r.get(0)).collect())
        .unwrap_or_default();
    assert_eq!(
        versions,
        vec![
            "0001_init",
            "0002_account_fillfactor",
            "0003_notice_watermark",
            "0004_plugin_state",
            "0005_holds",
            "0006_broker_generation",
            "0007_statement_line",
            "0008_acks_published",
            "0009_account_change",
            "0010_applied_batch"
        ]
    );
}

/// A commit of finality progress alone: no entries, these final ranges.
fn progress_commit(final_ranges: Vec<(u64, u64)>) -> Commit {
    Commit {
        applied: Vec::new(),
        entries: Vec::new(),
        changed: ChangedRows::default(),
        lines: Vec::new(),
        funded: Vec::new(),
        plugins_changed: false,
        journal_next: None,
        progress: Progress { final_ranges, seq_unfinal_first: 1, ack_next: 0, seq_notice_from: 1 },
    }
}

/// How far the broker confirmed a center's own acks: 0 on a fresh database, moved by the
/// commits that note it, never backwards, kept by those that do not.
#[tokio::test]
async fn the_acks_published_mark_only_moves_forward() {
    let store = CenterStore::new(fresh("rtgs_test_acks_published", Schema::Center).await);
    let mark = |s: &CenterStore| {
        let s = s.clone();
        async move { s.load().await.unwrap_or_else(|e| panic!("{e}")).acks_published_through }
    };
    assert_eq!(mark(&store).await, Some(0), "a fresh center published nothing");
    let progress_only = progress_commit(Vec::new());
    for (noted, want) in [(Some(5), 5), (Some(3), 5), (None, 5), (Some(9), 9)] {
        store.commit_noting(&progress_only, PluginSave::None, noted).await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(mark(&store).await, Some(want), "after noting {noted:?}");
    }
}

/// A final range recorded again from the same first seq with a longer end (a restarted center
/// re-deriving finality along the same batch boundaries) keeps the longer end; a shorter one
/// never shortens it; a commit naming one first seq twice is recorded without error.
#[tokio::test]
async fn a_final_range_recorded_again_from_the_same_seq_keeps_the_longer_end() {
    let pool = fresh("rtgs_test_finality_ranges", Schema::Center).await;
    let store = CenterStore::new(pool.clone());
    let client = pool.get().await.unwrap_or_else(|e| panic!("{e}"));
    let recorded = |seq: i64| {
        let client = &client;
        async move {
            let row = client
                .query_one(
                    "SELECT count(*) FROM finality WHERE $1::bigint BETWEEN seq_first AND seq_last",
                    &[&seq],
                )
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            row.get::<_, i64>(0) > 0
        }
    };
    for ranges in [vec![(10, 20)], vec![(10, 30), (40, 50)], vec![(10, 15)], vec![(40, 45), (40, 48)]] {
        store
            .commit_noting(&progress_commit(ranges), PluginSave::None, None)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    for seq in [10, 20, 21, 30, 40, 50] {
        assert!(recorded(seq).await, "seq {seq} is recorded final");
    }
    for seq in [9, 31, 39, 51] {
        assert!(!recorded(seq).await, "seq {seq} was never final");
    }
}

#[tokio::test]
async fn sequencer_is_durable_before_publish_and_fenced_by_epoch() {
    let store = SequencerStore::new(fresh("rtgs_test_sequencer", Schema::Sequencer).await);
    let a = store.take_over("DC1").await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((a.epoch, a.last_seq, a.inbound_offset, a.unpublished.len()), (1, 0, -1, 0));
    store.record_batch(&ticks(1..=3, a.epoch), 10).await.unwrap_or_else(|e| panic!("{e}"));
    store.record_batch(&ticks(4..=5, a.epoch), 12).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(store.mark_published(1).await.unwrap_or_else(|e| panic!("{e}")), 1);

    // DC2 takes over: the epoch rises, and what DC1 recorded but did not publish comes back.
    let b = store.take_over("DC2").await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((b.epoch, b.last_seq, b.inbound_offset), (2, 5, 12));
    assert_eq!(b.unpublished, vec![ticks(4..=5, 1)]);

    // The old leader is fenced; the new one continues gap-free and cannot skip a seq.
    match store.record_batch(&ticks(6..=7, a.epoch), 13).await {
        Err(StoreError::Fenced { epoch: 1, seq_first: 6 }) => {}
        other => panic!("old leader not fenced: {other:?}"),
    }
    store.record_batch(&ticks(6..=7, b.epoch), 13).await.unwrap_or_else(|e| panic!("{e}"));
    assert!(
        matches!(store.record_batch(&ticks(9..=9, b.epoch), 14).await, Err(StoreError::Fenced { .. })),
        "a gap is refused"
    );
    let all = store.batches(1, 100).await.unwrap_or_else(|e| panic!("{e}"));
    let seqs: Vec<(u64, u64)> = all.iter().map(|b| (b.seq_first, b.seq_last)).collect();
    assert_eq!(seqs, vec![(1, 3), (4, 5), (6, 7)], "no gap, no duplicate");
    // How far the journal reaches (what an API asks before it answers "not found"): the last
    // recorded seq, not what a fenced or refused write tried.
    assert_eq!(store.last_seq().await.unwrap_or_else(|e| panic!("{e}")), 7);
    assert_eq!(
        store.batches(5, 6).await.map(|v| v.len()).unwrap_or(0),
        2,
        "gap pulls find the batches holding a range"
    );

    // Frames that do not hold the seqs they claim are refused before anything is written.
    let mut bad = ticks(8..=8, b.epoch);
    bad.seq_last = 9;
    assert!(matches!(store.record_batch(&bad, 15).await, Err(StoreError::Corrupt(_))));
}

#[tokio::test]
async fn exactly_one_survivor_takes_a_silent_lease() {
    let store = SequencerStore::new(fresh("rtgs_test_lease", Schema::Sequencer).await);
    // Nobody ever led: the first claim wins at once, whatever the silence asked for.
    let a = store.take_over_if_free("DC1", 60.0, false).await.unwrap_or_else(|e| panic!("{e}"));
    let a = a.unwrap_or_else(|| panic!("a never-held lease is free"));
    assert_eq!((a.previous_leader.as_deref(), a.previous_renewal_age_ms), (None, None), "nobody led before");
    // A fresh lease cannot be taken: the leader is alive.
    assert!(store.take_over_if_free("DC2", 0.5, false).await.unwrap_or_else(|e| panic!("{e}")).is_none());
    // ... except by the leader's own next life (a restarted DC1), and by nobody else that way.
    assert!(store.take_over_if_free("DC2", 0.5, true).await.unwrap_or_else(|e| panic!("{e}")).is_none());
    let a2 = store.take_over_if_free("DC1", 60.0, true).await.unwrap_or_else(|e| panic!("{e}"));
    let a2 = a2.unwrap_or_else(|| panic!("a restarted leader takes its own lease back"));
    assert!(a2.epoch > a.epoch);
    assert!(!store.heartbeat(a.epoch).await.unwrap_or_else(|e| panic!("{e}")), "the old life is fenced");
    // Renewals keep the lease.
    for _ in 0..4 {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert!(store.heartbeat(a2.epoch).await.unwrap_or_else(|e| panic!("{e}")));
        assert!(store.take_over_if_free("DC2", 0.5, false).await.unwrap_or_else(|e| panic!("{e}")).is_none());
    }
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    let (silence, epoch) = store.leader_silence().await.unwrap_or_else(|e| panic!("{e}"));
    assert!(silence >= 0.5 && epoch == a2.epoch, "silence {silence} s at epoch {epoch}");
    // Two survivors see the same silent lease at once: exactly one of them takes it.
    let (x, y) =
        tokio::join!(store.take_over_if_free("DC2", 0.5, false), store.take_over_if_free("DC3", 0.5, false));
    let claims = [x, y].map(|r| r.unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(claims.iter().filter(|c| c.is_some()).count(), 1, "claims {claims:?}");
    let b = claims.into_iter().flatten().next().unwrap_or_else(|| unreachable!());
    assert_eq!(b.epoch, a2.epoch + 1);
    // The claim says whose lease it took and how long it had been silent (the console's figure).
    let silent_ms = b.previous_renewal_age_ms.unwrap_or(0);
    assert_eq!(b.previous_leader.as_deref(), Some("DC1"));
    assert!((500..60_000).contains(&silent_ms), "the lease was silent {silent_ms} ms");
    assert!(
        !store.heartbeat(a2.epoch).await.unwrap_or_else(|e| panic!("{e}")),
        "the silent leader is fenced"
    );
    assert!(store.heartbeat(b.epoch).await.unwrap_or_else(|e| panic!("{e}")));
}

#[tokio::test]
async fn center_commits_batches_atomically_restores_and_never_applies_twice() {
    let pool = fresh("rtgs_test_center", Schema::Center).await;
    let store = CenterStore::new(pool.clone());
    let mut payloads = Vec::new();
    for a in 1..=4 {
        payloads.push(Payload::AccountOpen { account: AccountId(a), currency: eur() });
        payloads.push(Payload::AccountFund { account: AccountId(a), amount_minor: 1_000 });
    }
    for i in 0..40u64 {
        payloads.push(Payload::Transfer(Transfer {
            debtor: AccountId(1 + i % 4),
            creditor: AccountId(1 + (i + 1) % 4),
            amount_minor: if i % 7 == 0 { 1_000_000 } else { 10 + i },
            currency: eur(),
        }));
    }
    payloads.push(Payload::Tick);
    let entries: Vec<Entry> = payloads.into_iter().enumerate().map(|(i, p)| entry(i as u64 + 1, p)).collect();
    let mut ledger = Ledger::new();
    ledger.track_changes(true);
    let mut batches = Vec::new();
    for (k, chunk) in entries.chunks(17).enumerate() {
        let applied: Vec<_> = chunk.iter().map(|e| ledger.apply(e)).collect();
        let applied_outcomes: Vec<Outcome> = applied.iter().map(|a| a.outcome).collect();
        // Plugin holds are rows too: two made after the first batch, one settled after the second.
        let hold = |id, account| LedgerIntent::Hold { id, account: AccountId(account), amount_minor: 5 };
        let intents: &[LedgerIntent] = match k {
            1 => &[hold(1, 1), hold(2, 2)],
            2 => &[LedgerIntent::Settle { id: 1, to: AccountId(3) }],
            _ => &[],
        };
        ledger.apply_intents(PluginKind::Withdrawal, intents).unwrap_or_else(|e| panic!("{e}"));
        let mut changed = ChangedRows::default();
        let funded = ledger.take_changed(&mut changed).to_vec();
        let last = applied[applied.len() - 1].seq;
        let commit = Commit {
            applied,
            entries: chunk.to_vec(),
            changed,
            funded,
            // Statement lines (their balances here arbitrary): the debtor's and the creditor's
            // of every settled transfer.
            lines: settled_lines(chunk, &applied_outcomes, |e| e.seq),
            plugins_changed: false,
            journal_next: Some(k as u64 + 1),
            progress: Progress {
                final_ranges: vec![(chunk[0].seq, last - 1)],
                seq_unfinal_first: last,
                ack_next: 101 + k as u64,
                seq_notice_from: 1,
            },
        };
        store.commit(&commit, PluginSave::None).await.unwrap_or_else(|e| panic!("batch {k}: {e}"));
        batches.push(commit);
    }
    assert!(entries.iter().zip(1..).all(|(e, s)| e.seq == s), "the journal under test is gap-free");

    // Statement lines: an account's, in seq order, each with its entry's bmi; the outcome of a
    // final entry (a rejection) and none for one not final yet.
    let want: Vec<(u64, LineKind)> = batches
        .iter()
        .flat_map(|b| b.lines.iter())
        .filter(|l| l.account == AccountId(1))
        .map(|l| (l.line.seq, l.line.kind))
        .collect();
    let lines =
        store.statement_lines(AccountId(1), 0, u64::MAX >> 1, 1_000).await.unwrap_or_else(|e| panic!("{e}"));
    assert!(!want.is_empty());
    assert_eq!(lines.iter().map(|l| (l.seq, l.kind)).collect::<Vec<_>>(), want);
    assert!(lines.iter().all(|l| l.bmi == entries[l.seq as usize - 1].bmi && l.balance_after_minor == l.seq));
    let page =
        store.statement_lines(AccountId(1), want[1].0, want[3].0, 2).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(page.iter().map(|l| l.seq).collect::<Vec<_>>(), [want[1].0, want[2].0]);
    let rejected = 8 + 7 + 1; // the transfer of i = 7 asks for 1,000,000
    assert_eq!(
        store.final_outcome(rejected).await.unwrap_or_else(|e| panic!("{e}")),
        Some(Outcome::Rejected(rtgs_core::entry::RejectReason::InsufficientFunds))
    );
    assert_eq!(store.final_outcome(10).await.unwrap_or_else(|e| panic!("{e}")), Some(Outcome::Accepted));
    assert_eq!(
        store.final_outcome(entries.len() as u64).await.unwrap_or_else(|e| panic!("{e}")),
        None,
        "not final"
    );

    // Read back by seq across the batches of 17 (one row each): the acks with their origin and
    // bmi from any seq on, at most `max` of them; each seq's state hash, none past the end.
    let acks: Vec<_> = batches.iter().flat_map(|b| b.applied.iter().copied()).collect();
    let end = entries.len() as u64;
    for (from, max) in [(1, usize::MAX), (17, 1), (18, 17), (20, 20), (end, 5), (end + 1, 5), (0, 3)] {
        let got = store.applied_from(from, max).await.unwrap_or_else(|e| panic!("{e}"));
        let want: Vec<_> = acks.iter().filter(|a| a.seq >= from).take(max).copied().collect();
        assert_eq!(got.iter().map(|(a, _, _)| *a).collect::<Vec<_>>(), want, "from {from}, at most {max}");
        let e = |a: &rtgs_core::ledger::Applied| &entries[a.seq as usize - 1];
        assert!(got.iter().all(|(a, origin, bmi)| *bmi == e(a).bmi && *origin == e(a).origin));
    }
    for a in &acks {
        let at = rtgs_pg::reconcile::state_hash_at(&pool, a.seq).await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(at, Some((a.state_hash, a.outcome.code() as i16)), "seq {}", a.seq);
    }
    let past = rtgs_pg::reconcile::state_hash_at(&pool, end + 1).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(past, None);

    // A re-delivered batch (say after a restart) is refused, not applied twice.
    let again = &batches[1];
    match store.commit(again, PluginSave::None).await {
        Err(StoreError::OutOfOrder { seq_first: 18, seq_applied }) => {
            assert_eq!(seq_applied, entries.len() as u64)
        }
        other => panic!("re-delivered batch was not refused: {other:?}"),
    }

    // Restart: everything comes back exactly as the in-memory ledger has it.
    let stored = store.load().await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(stored.ledger.seq_applied(), ledger.seq_applied());
    assert_eq!(stored.ledger.state_hash(), ledger.state_hash());
    assert_eq!(stored.ledger.timestamp_us(), ledger.timestamp_us());
    let mut mine = ledger.accounts().to_vec();
    mine.sort_by_key(|a| a.id);
    assert_eq!(stored.ledger.accounts(), &mine[..]);
    assert_eq!(
        stored.ledger.balance_total_minor() + stored.ledger.held_total_minor(),
        stored.ledger.funded_total_minor()
    );
    // The hold settled is gone, the other one is back with its account's held sum.
    let key = |id| HoldKey { plugin: PluginKind::Withdrawal, id };
    assert!(stored.ledger.hold(key(1)).is_none());
    assert_eq!(stored.ledger.hold(key(2)), ledger.hold(key(2)));
    assert_eq!(stored.ledger.account(AccountId(2)).map(|a| a.held_minor), Some(5));
    assert_eq!(stored.journal_offset, batches.len() as i64 - 1);
    assert_eq!(stored.ack_offset, 100 + batches.len() as i64 - 1);
    assert_eq!(
        (stored.journal_next(), stored.ack_next()),
        (batches.len() as u64, 101 + batches.len() as u64 - 1)
    );
    assert_eq!(stored.seq_unfinal_first, entries.len() as u64);

    // The rows themselves: every entry exactly once, rejections with their ISO reason number.
    let c = pool.get().await.unwrap_or_else(|e| panic!("{e}"));
    let r = c
        .query_one(
            "SELECT count(*), count(DISTINCT seq), count(*) FILTER (WHERE outcome <> 0) FROM applied_entry",
            &[],
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((r.get::<_, i64>(0), r.get::<_, i64>(1)), (entries.len() as i64, entries.len() as i64));
    let insufficient = Outcome::Rejected(rtgs_core::entry::RejectReason::InsufficientFunds).code() as i16;
    let n: i64 = c
        .query_one("SELECT count(*) FROM applied_entry WHERE outcome = $1", &[&insufficient])
        .await
        .map(|r| r.get(0))
        .unwrap_or(-1);
    assert!(n > 0 && n == r.get::<_, i64>(2), "the oversized transfers are stored as AM04 rejections");
}

/// The debtor's and the creditor's statement lines of every settled transfer of `chunk`
/// (`outcomes`: its entries' outcomes), with `balance_after` as their balances.
fn settled_lines(
    chunk: &[Entry],
    outcomes: &[Outcome],
    balance_after: fn(&Entry) -> u64,
) -> Vec<AccountLine> {
    let mut lines = Vec::new();
    for (e, outcome) in chunk.iter().zip(outcomes) {
        if let (Payload::Transfer(t), Outcome::Accepted) = (&e.payload, outcome) {
            let line = |kind, counterparty| rtgs_core::statement::Line {
                seq: e.seq,
                bmi: e.bmi,
                kind,
                counterparty: Some(counterparty),
                amount_minor: t.amount_minor,
                balance_after_minor: balance_after(e),
            };
            lines.push(AccountLine { account: t.debtor, line: line(LineKind::Debit, t.creditor) });
            lines.push(AccountLine { account: t.creditor, line: line(LineKind::Credit, t.debtor) });
        }
    }
    lines
}

/// A commit of `chunk` applied to `ledger` (statement lines for settled transfers).
fn commit_of(ledger: &mut Ledger, chunk: &[Entry], journal_next: u64) -> Commit {
    let applied: Vec<_> = chunk.iter().map(|e| ledger.apply(e)).collect();
    let outcomes: Vec<Outcome> = applied.iter().map(|a| a.outcome).collect();
    let lines = settled_lines(chunk, &outcomes, |_| 0);
    let mut changed = ChangedRows::default();
    let funded = ledger.take_changed(&mut changed).to_vec();
    let last = applied[applied.len() - 1].seq;
    Commit {
        applied,
        entries: chunk.to_vec(),
        changed,
        funded,
        lines,
        plugins_changed: false,
        journal_next: Some(journal_next),
        progress: Progress {
            final_ranges: vec![(chunk[0].seq, last)],
            seq_unfinal_first: last + 1,
            ack_next: 0,
            seq_notice_from: 1,
        },
    }
}

/// A small commit goes as one pipeline, a large one COPYs its lines first: both store the
/// same rows, both refuse a commit out of order (before it and behind it), and a restart reads
/// back what the ledger has.
#[tokio::test]
async fn small_and_large_commits_store_the_same_rows_and_refuse_any_other_order() {
    use rtgs_pg::center_store::PIPELINED_COMMIT_ENTRIES_MAX;
    let pool = fresh("rtgs_test_center_sizes", Schema::Center).await;
    let store = CenterStore::new(pool.clone());
    let mut payloads = Vec::new();
    for a in 1..=50 {
        payloads.push(Payload::AccountOpen { account: AccountId(a), currency: eur() });
        payloads.push(Payload::AccountFund { account: AccountId(a), amount_minor: 1_000_000 });
    }
    for i in 0..3_000u64 {
        payloads.push(Payload::Transfer(Transfer {
            debtor: AccountId(1 + i % 50),
            creditor: AccountId(1 + (i * 7 + 3) % 50),
            amount_minor: if i % 11 == 0 { 1 << 40 } else { 1 + i },
            currency: eur(),
        }));
    }
    let entries: Vec<Entry> = payloads.into_iter().enumerate().map(|(i, p)| entry(i as u64 + 1, p)).collect();
    let mut ledger = Ledger::new();
    ledger.track_changes(true);
    // 40 opening entries (small), the rest but 50 (large), 50 transfers (small).
    let cuts = [0, 40, entries.len() - 50, entries.len()];
    const { assert!(40 <= PIPELINED_COMMIT_ENTRIES_MAX && 50 <= PIPELINED_COMMIT_ENTRIES_MAX) };
    let mut commits = Vec::new();
    for (k, w) in cuts.windows(2).enumerate() {
        let commit = commit_of(&mut ledger, &entries[w[0]..w[1]], k as u64 + 1);
        if k == 1 {
            // Out of order either way, in either shape: refused, nothing written.
            let ahead = Commit {
                applied: commit.applied[1..].to_vec(),
                entries: commit.entries[1..].to_vec(),
                progress: commit.progress.clone(),
                ..Commit::default()
            };
            assert!(ahead.applied.len() > PIPELINED_COMMIT_ENTRIES_MAX);
            match store.commit(&ahead, PluginSave::None).await {
                Err(StoreError::OutOfOrder { seq_first: 42, seq_applied: 40 }) => {}
                other => panic!("a commit past a gap was not refused: {other:?}"),
            }
        }
        store.commit(&commit, PluginSave::None).await.unwrap_or_else(|e| panic!("commit {k}: {e}"));
        commits.push(commit);
    }
    for (k, again) in commits.iter().enumerate() {
        match store.commit(again, PluginSave::None).await {
            Err(StoreError::OutOfOrder { seq_applied, .. }) => assert_eq!(seq_applied, entries.len() as u64),
            other => panic!("commit {k} re-delivered was not refused: {other:?}"),
        }
    }
    let stored = store.load().await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(stored.ledger.state_hash(), ledger.state_hash());
    let mut mine = ledger.accounts().to_vec();
    mine.sort_by_key(|a| a.id);
    assert_eq!(stored.ledger.accounts(), &mine[..]);
    assert_eq!((stored.journal_next(), stored.seq_unfinal_first), (3, entries.len() as u64 + 1));
    let c = pool.get().await.unwrap_or_else(|e| panic!("{e}"));
    let count = |sql: &'static str| {
        let c = &c;
        async move { c.query_one(sql, &[]).await.map(|r| r.get::<_, i64>(0)).unwrap_or(-1) }
    };
    let lines: usize = commits.iter().map(|c| c.lines.len()).sum();
    assert!(lines > 4_000);
    assert_eq!(count("SELECT count(DISTINCT seq) FROM applied_entry").await, entries.len() as i64);
    assert_eq!(count("SELECT count(*) FROM statement_line").await, lines as i64);
    assert_eq!(
        count("SELECT count(*) FROM applied_entry WHERE outcome <> 0").await,
        273,
        "every 11th of 3,000"
    );
    // The same statement of an account whichever shape of commit wrote its lines.
    let want: Vec<u64> = commits
        .iter()
        .flat_map(|c| &c.lines)
        .filter(|l| l.account == AccountId(7))
        .map(|l| l.line.seq)
        .collect();
    let got =
        store.statement_lines(AccountId(7), 0, u64::MAX >> 1, 10_000).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got.iter().map(|l| l.seq).collect::<Vec<_>>(), want);
}

/// A batch of transfers under the given bmis (amount 1 + i), as the leader records it.
fn transfers(seq_first: u64, bmis: &[&str], epoch: u32) -> (OutboxBatch, Vec<Entry>) {
    let entries: Vec<Entry> = bmis
        .iter()
        .enumerate()
        .map(|(i, b)| Entry {
            seq: seq_first + i as u64,
            epoch,
            timestamp_us: 7,
            origin: CenterId(1),
            bmi: Bmi::new(b.as_bytes()).unwrap_or_else(|_| unreachable!()),
            payload: Payload::Transfer(Transfer {
                debtor: AccountId(1),
                creditor: AccountId(2),
                amount_minor: 1 + i as u64,
                currency: eur(),
            }),
        })
        .collect();
    let mut frames = Vec::new();
    codec::encode_frame(&entries, &mut frames);
    let seq_last = seq_first + entries.len() as u64 - 1;
    (OutboxBatch { seq_first, seq_last, epoch, frames }, entries)
}

/// Every bmi ever recorded is known, whatever its age and across a takeover: the unique index
/// answers the leader's look-up with the original seq and content digest, refuses a batch that
/// would record a bmi twice (nothing of it is written), and a database from before the index is
/// backfilled from the outbox.
#[tokio::test]
async fn every_bmi_ever_recorded_is_known_and_never_recorded_twice() {
    use rtgs_core::sequencer::{sha256_of, Admission, Content, Lookup, Sequencer};
    let store = SequencerStore::new(fresh("rtgs_test_sequenced_bmi", Schema::Sequencer).await);
    let a = store.take_over("DC1").await.unwrap_or_else(|e| panic!("{e}"));
    let (first, first_entries) = transfers(1, &["OLD-1", "OLD-2"], a.epoch);
    store.record_batch(&first, 0).await.unwrap_or_else(|e| panic!("{e}"));
    // Far more history than any window: 300 batches of 100 bmis each.
    let mut seq = 3;
    for k in 0..300 {
        let names: Vec<String> = (0..100).map(|i| format!("N{k}-{i}")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let (b, _) = transfers(seq, &refs, a.epoch);
        store.record_batch(&b, k + 1).await.unwrap_or_else(|e| panic!("{e}"));
        seq = b.seq_last + 1;
    }
    let b = store.take_over("DC2").await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((b.last_seq, b.bmi_through), (seq - 1, seq - 1), "indexed with every batch");

    let old = Bmi::new(b"OLD-2").unwrap_or_else(|_| unreachable!());
    let unknown = Bmi::new(b"NEVER").unwrap_or_else(|_| unreachable!());
    let known = store.known_bmis(&[old, unknown]).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(known.len(), 1);
    let k = known[&old];
    assert_eq!((k.seq, k.content), (2, Content::Sha256(sha256_of(&first_entries[1].payload))));

    // The new leader's core answers with those look-ups: the original seq, or a conflict.
    let mut sequencer = Sequencer::new(CenterId(2), 0);
    sequencer.resume_at(seq, 0, 7);
    sequencer.begin_epoch(b.epoch);
    let (_, retry) = transfers(0, &["OLD-2", "OLD-2"], b.epoch);
    let mut conflicting = retry[1].clone();
    conflicting.payload = first_entries[0].payload.clone();
    let commands = vec![
        rtgs_core::entry::Command {
            origin: CenterId(3),
            bmi: old,
            payload: first_entries[1].payload.clone(),
        },
        rtgs_core::entry::Command { origin: CenterId(3), bmi: old, payload: conflicting.payload },
    ];
    let lookups = [Lookup { key: 1, known: Some(k) }, Lookup { key: 1, known: Some(k) }];
    let (mut entries, mut admissions) = (Vec::new(), Vec::new());
    sequencer.handle_commands(9, commands, &lookups, &mut entries, &mut admissions);
    assert_eq!(admissions, vec![Admission::Duplicate(2), Admission::Conflict(2)]);
    assert!(entries.is_empty());

    // Recording a known bmi again is refused by the unique index, and nothing of that batch
    // is written.
    let (again, _) = transfers(seq, &["FRESH", "OLD-1"], b.epoch);
    match store.record_batch(&again, 999).await {
        Err(StoreError::BmiSequenced { seq_first, .. }) => assert_eq!(seq_first, seq),
        other => panic!("a bmi recorded twice: {other:?}"),
    }
    // The same for a batch too large for the recording pipeline (its bmis COPYed after it).
    let many: Vec<String> = (0..rtgs_pg::sequencer_store::PIPELINED_BMIS_MAX + 10)
        .map(|i| if i == 60 { "N7-7".to_string() } else { format!("BIG-{i}") })
        .collect();
    let refs: Vec<&str> = many.iter().map(String::as_str).collect();
    match store.record_batch(&transfers(seq, &refs, b.epoch).0, 999).await {
        Err(StoreError::BmiSequenced { seq_first, .. }) => assert_eq!(seq_first, seq),
        other => panic!("a bmi recorded twice in a large batch: {other:?}"),
    }
    let c = store.take_over("DC3").await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.last_seq, seq - 1, "the refused batches left nothing");
    let big = Bmi::new(b"BIG-1").unwrap_or_else(|_| unreachable!());
    assert!(store.known_bmis(&[big]).await.unwrap_or_else(|e| panic!("{e}")).is_empty());
    let fresh_bmi = Bmi::new(b"FRESH").unwrap_or_else(|_| unreachable!());
    assert!(store.known_bmis(&[fresh_bmi]).await.unwrap_or_else(|e| panic!("{e}")).is_empty());

    // A database from before the index: the takeover's backfill indexes the outbox again.
    let pool = fresh_pool("rtgs_test_sequenced_bmi").await;
    let client = pool.get().await.unwrap_or_else(|e| panic!("{e}"));
    client.execute("DELETE FROM sequenced_bmi WHERE seq > 2", &[]).await.unwrap_or_else(|e| panic!("{e}"));
    client.execute("UPDATE sequencer SET bmi_through = 2", &[]).await.unwrap_or_else(|e| panic!("{e}"));
    let d = store.take_over("DC1").await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(d.bmi_through, 2);
    let added =
        store.backfill_bmis(d.epoch, d.bmi_through, d.last_seq).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(added, 30_000);
    let n = Bmi::new(b"N299-99").unwrap_or_else(|_| unreachable!());
    assert_eq!(store.known_bmis(&[n]).await.unwrap_or_else(|e| panic!("{e}"))[&n].seq, seq - 1);
    let e = store.take_over("DC2").await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(e.bmi_through, e.last_seq, "backfilled through the last batch");

    // A participant's scoped key is 43 bytes at most (migration 0005): recorded and known.
    let longest = "~".to_string() + &"K".repeat(rtgs_core::limits::BMI_BYTES_MAX - 1);
    let (b, _) = transfers(e.last_seq + 1, &[longest.as_str()], e.epoch);
    let announced =
        store.record_batch(&b, 301).await.unwrap_or_else(|e| panic!("a 43-byte bmi is recorded: {e}"));
    assert!(announced, "a batch of one transfer is announced on the push path");
    let key = Bmi::new(longest.as_bytes()).unwrap_or_else(|_| unreachable!());
    assert_eq!(
        store.known_bmis(&[key]).await.map(|k| k.get(&key).map(|k| k.seq)).ok().flatten(),
        Some(b.seq_last)
    );
    // A large batch is recorded whole (its bmis COPYed after the pipeline), and too large for
    // the push path's notices (≈ 600 transfers).
    let many: Vec<String> = (0..1_000).map(|i| format!("BIG-{i}")).collect();
    assert!(many.len() > rtgs_pg::sequencer_store::PIPELINED_BMIS_MAX);
    let refs: Vec<&str> = many.iter().map(String::as_str).collect();
    let (large, _) = transfers(b.seq_last + 1, &refs, e.epoch);
    let announced = store.record_batch(&large, 302).await.unwrap_or_else(|e| panic!("a large batch: {e}"));
    assert!(!announced, "a batch beyond the journal notices is the broker's alone");
    let last_big = Bmi::new(many[many.len() - 1].as_bytes()).unwrap_or_else(|_| unreachable!());
    assert_eq!(
        store.known_bmis(&[last_big]).await.map(|k| k.get(&last_big).map(|k| k.seq)).ok().flatten(),
        Some(large.seq_last)
    );
}

/// Another pool on a test database that already exists.
async fn fresh_pool(name: &str) -> deadpool_postgres::Pool {
    let s = dev::PgSettings::from_env();
    rtgs_pg::pool(&s.host, s.port, &s.user, &s.password, name, 1).unwrap_or_else(|e| panic!("{e}"))
}

/// Three nodes starting together on an empty database migrate it once, and none of them fails
/// (CI saw "relation schema_migrations already exists" when the bookkeeping table was created
/// outside the migration lock).
#[tokio::test]
async fn concurrent_migrations_of_an_empty_database_all_succeed() {
    if let Err(e) = dev::start_postgres() {
        panic!("PostgreSQL could not be started, so this test cannot run: {e}");
    }
    let pg = dev::PgSettings::from_env();
    for round in 0..5 {
        let name = format!("rtgs_test_concurrent_migrate_{round}");
        let conn = format!(
            "host={} port={} user={} password={} dbname=postgres",
            pg.host, pg.port, pg.user, pg.password
        );
        let (admin, driver) =
            tokio_postgres::connect(&conn, tokio_postgres::NoTls).await.unwrap_or_else(|e| panic!("{e}"));
        tokio::spawn(driver);
        // Two statements: CREATE DATABASE cannot run inside the implicit transaction of one.
        for sql in [format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"), format!("CREATE DATABASE {name}")]
        {
            admin.batch_execute(&sql).await.unwrap_or_else(|e| panic!("{sql}: {e:?}"));
        }
        let pool = rtgs_pg::pool(&pg.host, pg.port, &pg.user, &pg.password, &name, 8)
            .unwrap_or_else(|e| panic!("{e}"));
        let mut tasks = Vec::new();
        for _ in 0..6 {
            let pool = pool.clone();
            tasks.push(tokio::spawn(async move {
                let mut client = pool.get().await.map_err(|e| e.to_string())?;
                migrate(&mut client, Schema::Sequencer).await.map_err(|e| e.to_string())
            }));
        }
        let mut applied = 0;
        for t in tasks {
            let done =
                t.await.unwrap_or_else(|e| panic!("{e}")).unwrap_or_else(|e| panic!("round {round}: {e}"));
            applied += done.len();
        }
        assert_eq!(applied, 5, "round {round}: each migration applied exactly once");
    }
}

/// Changed balances go in as one row per commit and are folded into `account` every
/// `FOLD_COMMITS` commits, in the commit's transaction: after every commit — folding or not, by
/// this store or by one that restarted in between — a restart reads back exactly the ledger,
/// the pending rows never outnumber the bound, and a fold leaves `account` alone current.
#[tokio::test]
async fn balances_fold_into_accounts_and_read_back_exactly_after_every_commit() {
    use rtgs_pg::center_store::FOLD_COMMITS;
    let pool = fresh("rtgs_test_center_fold", Schema::Center).await;
    let mut store = CenterStore::new(pool.clone());
    let mut payloads = Vec::new();
    for a in 1..=6 {
        payloads.push(Payload::AccountOpen { account: AccountId(a), currency: eur() });
        payloads.push(Payload::AccountFund { account: AccountId(a), amount_minor: 10_000 });
    }
    // Three transfers a commit; account 7 opens late (its first row is a pending change).
    let commits = 3 * FOLD_COMMITS + 5;
    for i in 0..3 * commits as u64 {
        if i == 3 * 20 {
            payloads.push(Payload::AccountOpen { account: AccountId(7), currency: eur() });
        }
        payloads.push(Payload::Transfer(Transfer {
            debtor: AccountId(1 + i % 6),
            creditor: AccountId(1 + (i * 5 + 1) % 7),
            amount_minor: 1 + i,
            currency: eur(),
        }));
    }
    let entries: Vec<Entry> = payloads.into_iter().enumerate().map(|(i, p)| entry(i as u64 + 1, p)).collect();
    let mut ledger = Ledger::new();
    ledger.track_changes(true);
    let c = pool.get().await.unwrap_or_else(|e| panic!("{e}"));
    let (mut folds, mut pending_max) = (0, 0);
    for (k, chunk) in entries.chunks(3).enumerate() {
        let commit = commit_of(&mut ledger, chunk, k as u64 + 1);
        store.commit(&commit, PluginSave::None).await.unwrap_or_else(|e| panic!("commit {k}: {e}"));
        let stored = CenterStore::new(pool.clone()).load().await.unwrap_or_else(|e| panic!("{e}"));
        let mut mine = ledger.accounts().to_vec();
        mine.sort_by_key(|a| a.id);
        assert_eq!(stored.ledger.accounts(), &mine[..], "after commit {k}");
        assert_eq!(stored.ledger.state_hash(), ledger.state_hash());
        let pending: i64 =
            c.query_one("SELECT count(*) FROM account_change", &[]).await.map(|r| r.get(0)).unwrap_or(-1);
        assert!((0..FOLD_COMMITS as i64).contains(&pending), "{pending} rows pending after commit {k}");
        pending_max = pending_max.max(pending);
        if pending == 0 {
            folds += 1;
            // Folded: `account` alone is the ledger.
            let rows = c
                .query("SELECT id, balance_minor FROM account ORDER BY id", &[])
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            let folded: Vec<(u64, u64)> =
                rows.iter().map(|r| (r.get::<_, i64>(0) as u64, r.get::<_, i64>(1) as u64)).collect();
            let want: Vec<(u64, u64)> = mine.iter().map(|a| (a.id.0, a.balance_minor)).collect();
            assert_eq!(folded, want, "account after the fold of commit {k}");
        }
        if k == 30 {
            // A restart in between: the new store counts what is pending from the database.
            store = CenterStore::new(pool.clone());
            store.load().await.unwrap_or_else(|e| panic!("{e}"));
        }
    }
    assert_eq!(pending_max, FOLD_COMMITS as i64 - 1, "rows wait for the fold");
    assert!(folds >= 3, "{folds} folds over {} commits", entries.len().div_ceil(3));
}

/// A center database from before migration 0010 keeps every entry: its `applied_entry` rows
/// become batches of consecutive seqs (at most 8,192 a row), and every reader — retries'
/// outcomes, republished acks across a batch boundary, reconcile's state hashes, a restart's
/// timestamp — reads what the rows said.
#[tokio::test]
async fn entries_stored_before_migration_0010_read_back_the_same_after_it() {
    let pool = fresh("rtgs_test_upgrade_0010", Schema::Center).await;
    let mut c = pool.get().await.unwrap_or_else(|e| panic!("{e}"));
    // Back to the schema before 0010: the per-entry table of 0001, rows as the old code wrote them.
    c.batch_execute(
        "DROP VIEW applied_entry; DROP TABLE applied_batch;
         DELETE FROM schema_migrations WHERE version = '0010_applied_batch';",
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    c.batch_execute(include_str!("../../../migrations/center/0001_init.sql"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let am04 = Outcome::Rejected(rtgs_core::entry::RejectReason::InsufficientFunds).code() as i16;
    c.execute(
        "INSERT INTO applied_entry (seq, epoch, timestamp_us, origin, bmi, kind, debtor, creditor,
                                    amount_minor, currency, outcome, state_hash)
         SELECT s, 1, s * 10, s % 3 + 1, 'OLD-' || s, 1, s % 50, (s + 1) % 50, s, 'EUR',
                CASE WHEN s % 7 = 0 THEN $1::smallint ELSE 0 END, s * 31
           FROM generate_series(1::bigint, 10000::bigint) s",
        &[&am04],
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    c.execute("UPDATE watermark SET seq_applied = 10000, state_hash = 310000, seq_unfinal_first = 9001", &[])
        .await
        .unwrap_or_else(|e| panic!("{e}"));

    let applied = migrate(&mut c, Schema::Center).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(applied, ["0010_applied_batch"]);
    let one = |sql: String| {
        let c = &c;
        async move { c.query_one(&sql, &[]).await.map(|r| r.get::<_, i64>(0)).unwrap_or(-1) }
    };
    assert_eq!(one("SELECT count(*) FROM applied_batch".into()).await, 2, "8,192 + 1,808 consecutive seqs");
    let same = format!(
        "SELECT count(*) FROM applied_entry e JOIN generate_series(1::bigint, 10000::bigint) s ON e.seq = s
          WHERE e.epoch = 1 AND e.timestamp_us = s * 10 AND e.origin = s % 3 + 1 AND e.bmi = 'OLD-' || s
            AND e.kind = 1 AND e.debtor = s % 50 AND e.creditor = (s + 1) % 50 AND e.amount_minor = s
            AND e.currency = 'EUR' AND e.outcome = CASE WHEN s % 7 = 0 THEN {am04} ELSE 0 END
            AND e.state_hash = s * 31"
    );
    assert_eq!(one(same).await, 10_000, "every column of every entry as it was");

    let store = CenterStore::new(pool.clone());
    let acks = store.applied_from(8_190, 5).await.unwrap_or_else(|e| panic!("{e}"));
    let got: Vec<(u64, u64, u8, String)> =
        acks.iter().map(|(a, o, b)| (a.seq, a.state_hash, o.0, b.as_str().to_string())).collect();
    let want: Vec<(u64, u64, u8, String)> =
        (8_190..8_195).map(|s| (s, s * 31, (s % 3 + 1) as u8, format!("OLD-{s}"))).collect();
    assert_eq!(got, want, "across the batch boundary");
    let outcome = |s| {
        let store = &store;
        async move { store.final_outcome(s).await.unwrap_or_else(|e| panic!("{e}")) }
    };
    assert_eq!(
        outcome(8_400).await,
        Some(Outcome::Rejected(rtgs_core::entry::RejectReason::InsufficientFunds))
    );
    assert_eq!(outcome(8_401).await, Some(Outcome::Accepted));
    assert_eq!(outcome(9_001).await, None, "not final");
    for s in [1, 8_192, 8_193, 10_000] {
        let at = rtgs_pg::reconcile::state_hash_at(&pool, s).await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(at.map(|(h, _)| h), Some(s * 31), "seq {s}");
    }
    let past = rtgs_pg::reconcile::state_hash_at(&pool, 10_001).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(past, None);
    let stored = store.load().await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((stored.ledger.seq_applied(), stored.ledger.timestamp_us()), (10_000, 100_000));
}
