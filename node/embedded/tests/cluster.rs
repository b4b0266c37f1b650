//! The embedded cluster end to end, in process: restart, dedupe answers, ticks, torn tails.

use rtgs_core::entry::{
    AccountId, Bmi, CenterId, Command, Currency, Entry, Outcome, Payload, RejectReason, Transfer,
};
use rtgs_core::ledger::Ledger;
use rtgs_core::sequencer::Admission;
use rtgs_embedded::cluster::{ClientEvent, Cluster, ClusterConfig, Notice, Refusal};
use rtgs_embedded::journal::{self, JournalReader};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rtgs-it-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn eur() -> Currency {
    Currency::new(b"EUR").unwrap_or_else(|_| unreachable!())
}

fn cmd(bmi: &str, n: u64, payload: Payload) -> Command {
    let bmi = Bmi::numbered(bmi, n).unwrap_or_else(|e| panic!("{e}"));
    Command { origin: CenterId((n % 3) as u8 + 1), bmi, payload }
}

fn setup(accounts: u64, prefix: &str) -> Vec<Command> {
    let mut v = Vec::new();
    for a in 1..=accounts {
        v.push(cmd(
            &format!("{prefix}O"),
            a,
            Payload::AccountOpen { account: AccountId(a), currency: eur() },
        ));
        v.push(cmd(
            &format!("{prefix}F"),
            a,
            Payload::AccountFund { account: AccountId(a), amount_minor: 1_000 },
        ));
    }
    v
}

fn transfers(accounts: u64, count: u64, prefix: &str) -> Vec<Command> {
    (0..count)
        .map(|i| {
            let d = 1 + i % accounts;
            let c = 1 + (i * 7 + 3) % accounts;
            let c = if c == d { 1 + c % accounts } else { c };
            cmd(
                prefix,
                i,
                Payload::Transfer(Transfer {
                    debtor: AccountId(d),
                    creditor: AccountId(c),
                    amount_minor: 1 + i % 700,
                    currency: eur(),
                }),
            )
        })
        .collect()
}

/// Submits everything, waits for `expected` final notices (and collects refusals).
fn run(cluster: &Cluster, commands: Vec<Command>, expected: usize) -> (Vec<Notice>, Vec<Refusal>) {
    let submitter = cluster.submitter();
    for chunk in commands.chunks(1000) {
        submitter.submit(chunk.to_vec()).unwrap_or_else(|e| panic!("{e}"));
    }
    let (mut finals, mut refusals) = (Vec::new(), Vec::new());
    while finals.len() < expected {
        match cluster.events().recv_timeout(Duration::from_secs(30)) {
            Ok(ClientEvent::Final(n)) => finals.extend(n),
            Ok(ClientEvent::Refused(r)) => refusals.extend(r),
            Ok(ClientEvent::Divergence(m)) => panic!("{m}"),
            Err(e) => panic!("waiting for {expected} finals, got {}: {e}", finals.len()),
        }
    }
    (finals, refusals)
}

/// Every entry of the journal in `dir`, in seq order.
fn journal_entries(dir: &Path) -> Vec<Entry> {
    let mut r = JournalReader::open(&dir.join("journal"), 1).unwrap_or_else(|e| panic!("{e}"));
    let (mut batch, mut all) = (Vec::new(), Vec::new());
    while r.next_batch(&mut batch).unwrap_or_else(|e| panic!("{e}")) {
        all.append(&mut batch);
    }
    all
}

/// The journal's entries that are not `Tick`s (which come at least once a second, whatever else).
fn commands_journaled(dir: &Path) -> usize {
    journal_entries(dir).iter().filter(|e| e.payload != Payload::Tick).count()
}

fn replay_hash(dir: &Path) -> (u64, u64) {
    let mut ledger = Ledger::new();
    let mut r = JournalReader::open(&dir.join("journal"), 1).unwrap_or_else(|e| panic!("{e}"));
    let mut entries = Vec::new();
    while r.next_batch(&mut entries).unwrap_or_else(|e| panic!("{e}")) {
        for e in entries.drain(..) {
            ledger.apply(&e);
        }
    }
    (ledger.seq_applied(), ledger.state_hash())
}

#[test]
fn restart_resumes_where_it_stopped_and_applies_nothing_twice() {
    let dir = tempdir("restart");
    let mut config = ClusterConfig::new(&dir);
    config.checkpoint_interval_entries = 500;
    let cluster = Cluster::start(&config).unwrap_or_else(|e| panic!("{e}"));
    let (finals, _) = run(&cluster, setup(20, "A"), 40);
    assert!(finals.iter().all(|n| n.outcome == Outcome::Accepted));
    let (finals, _) = run(&cluster, transfers(20, 3_000, "A"), 3_000);
    // Each notice comes from its origin center, exactly once.
    let mut seqs: Vec<_> = finals.iter().map(|n| n.seq).collect();
    seqs.sort_unstable();
    seqs.dedup();
    assert_eq!(seqs.len(), 3_000);
    assert!(finals
        .iter()
        .all(|n| n.center == CenterId((n.bmi.to_string()[1..].parse::<u64>().unwrap_or(0) % 3) as u8 + 1)));
    let first = cluster.shutdown();
    assert!(first.errors.is_empty(), "{:?}", first.errors);
    let watermark = first.centers[0].seq_applied;
    assert_eq!(watermark, first.journal_seq_last);

    let cluster = Cluster::start(&config).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cluster.recovery().journal.seq_last, watermark);
    assert_eq!(cluster.recovery().center_watermarks, vec![watermark; 3]);
    assert!(cluster.recovery().epoch >= 2, "a restart is a new epoch");
    let (finals, _) = run(&cluster, transfers(20, 1_000, "B"), 1_000);
    assert_eq!(finals.len(), 1_000);
    let second = cluster.shutdown();
    assert!(second.errors.is_empty(), "{:?}", second.errors);
    let (seq, hash) = replay_hash(&dir);
    for c in &second.centers {
        assert_eq!(c.seq_resumed_from, watermark);
        assert_eq!((c.seq_applied, c.state_hash), (seq, hash), "{} differs from a fresh replay", c.id);
        assert!(c.conserved);
        assert_eq!(c.seq_final_through, seq);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn retry_gets_the_original_seq_and_a_conflicting_reuse_is_refused() {
    let dir = tempdir("dedupe");
    let cluster = Cluster::start(&ClusterConfig::new(&dir)).unwrap_or_else(|e| panic!("{e}"));
    run(&cluster, setup(2, "S"), 4);
    let t = |amount| {
        cmd(
            "PAY",
            1,
            Payload::Transfer(Transfer {
                debtor: AccountId(1),
                creditor: AccountId(2),
                amount_minor: amount,
                currency: eur(),
            }),
        )
    };
    let (finals, _) = run(&cluster, vec![t(10)], 1);
    let seq = finals[0].seq;
    let submitter = cluster.submitter();
    submitter.submit(vec![t(10), t(11)]).unwrap_or_else(|e| panic!("{e}"));
    let mut refusals = Vec::new();
    while refusals.len() < 2 {
        if let Ok(ClientEvent::Refused(r)) = cluster.events().recv_timeout(Duration::from_secs(10)) {
            refusals.extend(r);
        }
    }
    assert_eq!(refusals[0].admission, Admission::Duplicate(seq));
    assert_eq!(refusals[1].admission, Admission::Conflict(seq));
    // An insufficient-funds transfer is a normal, final RJCT.
    let (finals, _) = run(
        &cluster,
        vec![cmd(
            "BIG",
            1,
            Payload::Transfer(Transfer {
                debtor: AccountId(1),
                creditor: AccountId(2),
                amount_minor: 1_000_000,
                currency: eur(),
            }),
        )],
        1,
    );
    assert_eq!(finals[0].outcome, Outcome::Rejected(RejectReason::InsufficientFunds));
    drop(submitter);
    let report = cluster.shutdown();
    // Ticks come at least every second whatever the load: count what is not one.
    let mut r = JournalReader::open(&dir.join("journal"), 1).unwrap_or_else(|e| panic!("{e}"));
    let (mut entries, mut all) = (Vec::new(), Vec::new());
    while r.next_batch(&mut entries).unwrap_or_else(|e| panic!("{e}")) {
        all.append(&mut entries);
    }
    assert_eq!(all.len() as u64, report.journal_seq_last);
    let commands = all.iter().filter(|e| e.payload != Payload::Tick).count();
    assert_eq!(commands, 4 + 1 + 1, "retries and conflicts were not journaled");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn idle_cluster_journals_ticks() {
    let dir = tempdir("tick");
    let cluster = Cluster::start(&ClusterConfig::new(&dir)).unwrap_or_else(|e| panic!("{e}"));
    run(&cluster, setup(1, "T"), 2);
    std::thread::sleep(Duration::from_millis(1_300));
    let report = cluster.shutdown();
    let mut r = JournalReader::open(&dir.join("journal"), 1).unwrap_or_else(|e| panic!("{e}"));
    let (mut entries, mut all) = (Vec::new(), Vec::new());
    while r.next_batch(&mut entries).unwrap_or_else(|e| panic!("{e}")) {
        all.append(&mut entries);
    }
    assert_eq!(all.len() as u64, report.journal_seq_last);
    let last_command = all.iter().rposition(|e| e.payload != Payload::Tick).unwrap_or(0);
    let tick = all[last_command..].iter().find(|e| e.payload == Payload::Tick);
    assert!(tick.is_some(), "idle after the setup: a tick");
    assert!(tick.is_some_and(|t| t.timestamp_us >= 1_000_000), "stamped with the time");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn torn_journal_tail_is_cut_and_the_cluster_carries_on() {
    let dir = tempdir("torn");
    let config = ClusterConfig::new(&dir);
    let cluster = Cluster::start(&config).unwrap_or_else(|e| panic!("{e}"));
    run(&cluster, setup(3, "X"), 6);
    let report = cluster.shutdown();
    // A crash in the middle of the next write: half a frame header and some body.
    let segs = journal::segments(&dir.join("journal")).unwrap_or_else(|e| panic!("{e}"));
    let last = &segs[segs.len() - 1].1;
    let mut f = std::fs::OpenOptions::new().append(true).open(last).unwrap_or_else(|e| panic!("{e}"));
    std::io::Write::write_all(&mut f, &[200, 0, 0, 0, 1, 2, 3, 4, 5, 6]).unwrap_or_else(|e| panic!("{e}"));
    drop(f);
    let cluster = Cluster::start(&config).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cluster.recovery().journal.truncated_bytes, 10);
    assert_eq!(cluster.recovery().journal.seq_last, report.journal_seq_last);
    let before = commands_journaled(&dir);
    run(&cluster, transfers(3, 10, "Y"), 10);
    let after = cluster.shutdown();
    assert!(after.errors.is_empty(), "{:?}", after.errors);
    assert_eq!(after.centers[2].seq_applied, after.journal_seq_last);
    assert_eq!(commands_journaled(&dir), before + 10, "the 10 transfers after the cut, and nothing else");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn checkpoint_ahead_of_journal_refuses_to_start() {
    let dir = tempdir("ahead");
    let config = ClusterConfig::new(&dir);
    let cluster = Cluster::start(&config).unwrap_or_else(|e| panic!("{e}"));
    run(&cluster, setup(3, "Z"), 6);
    cluster.shutdown();
    // Lose the journal (but keep the checkpoints): the node must not guess.
    std::fs::remove_dir_all(dir.join("journal")).unwrap_or_else(|e| panic!("{e}"));
    match Cluster::start(&config) {
        Err(e) => assert!(e.to_string().contains("journal lost durable entries"), "{e}"),
        Ok(_) => panic!("started over a journal that lost entries"),
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A retry older than anything the index holds in memory is still answered with the original
/// seq (from a run on disk, checked against the journal), a different content under that bmi is
/// refused — before and after a restart — and nothing is journaled for either.
#[test]
fn a_retry_older_than_any_in_memory_window_gets_its_original_seq() {
    let dir = tempdir("old-retry");
    let mut config = ClusterConfig::new(&dir);
    config.bmi_index = rtgs_embedded::bmi_index::BmiIndexConfig {
        recent_entries: 64,
        filter_keys_first: 64,
        merge_fanout: 2,
    };
    let cluster = Cluster::start(&config).unwrap_or_else(|e| panic!("{e}"));
    run(&cluster, setup(5, "W"), 10);
    let (finals, _) = run(&cluster, transfers(5, 3_000, "OLD"), 3_000);
    let original = |bmi: &str| finals.iter().find(|n| n.bmi.to_string() == bmi).map(|n| n.seq);
    let (first, middle) = (original("OLD0"), original("OLD1500"));
    assert!(first.is_some() && middle.is_some());
    // More traffic, final batch by batch (so every generation may leave memory): the OLD bmis
    // are now far behind the two exact recent generations.
    for k in 0..10 {
        run(&cluster, transfers(5, 100, &format!("FILL{k}-")), 100);
    }
    let again = transfers(5, 3_000, "OLD");
    let mut conflicting = again[0].clone();
    if let Payload::Transfer(t) = &mut conflicting.payload {
        t.amount_minor += 1;
    }
    let retries = vec![again[0].clone(), again[1500].clone(), conflicting];
    let answers = |cluster: &Cluster| {
        cluster.submitter().submit(retries.clone()).unwrap_or_else(|e| panic!("{e}"));
        let mut refusals = Vec::new();
        while refusals.len() < 3 {
            match cluster.events().recv_timeout(Duration::from_secs(30)) {
                Ok(ClientEvent::Refused(r)) => refusals.extend(r),
                Ok(_) => {}
                Err(e) => panic!("no answer to the retries: {e}"),
            }
        }
        refusals.iter().map(|r| r.admission).collect::<Vec<_>>()
    };
    let expected = vec![
        Admission::Duplicate(first.unwrap_or(0)),
        Admission::Duplicate(middle.unwrap_or(0)),
        Admission::Conflict(first.unwrap_or(0)),
    ];
    assert_eq!(answers(&cluster), expected);
    let report = cluster.shutdown();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let stats = &report.bmi_index;
    assert_eq!(stats.recent_hits, 0, "not from the exact recent generations: {stats:?}");
    assert!(
        stats.old_hits >= 3 && stats.journal_reads >= 3,
        "from the runs, checked against the journal: {stats:?}"
    );
    let journaled = commands_journaled(&dir);
    let cluster = Cluster::start(&config).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(answers(&cluster), expected, "the same after a restart");
    let after = cluster.shutdown();
    assert!(after.errors.is_empty(), "{:?}", after.errors);
    assert_eq!(commands_journaled(&dir), journaled, "nothing journaled for the retries (ticks aside)");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A status question (`BmiQueries`, what the API asks for a `bmi` its tracker does not know)
/// names a seq only once the entry is final — a crash before its sync could give a seq still in
/// flight to another entry — and knows every `bmi` ever sequenced, after a restart too.
#[test]
fn a_status_question_names_a_seq_only_once_final_and_survives_a_restart() {
    let dir = tempdir("question");
    let config = ClusterConfig::new(&dir);
    let cluster = Cluster::start(&config).unwrap_or_else(|e| panic!("{e}"));
    run(&cluster, setup(5, "Q"), 10);
    let (queries, final_through) = (cluster.bmi_queries(), cluster.final_through());
    // The client's side of the events, drained meanwhile (the cluster waits on a full queue).
    let events = cluster.events().clone();
    let drained = std::thread::spawn(move || {
        let mut finals = Vec::new();
        while finals.len() < 2_000 {
            match events.recv_timeout(Duration::from_secs(30)) {
                Ok(ClientEvent::Final(n)) => finals.extend(n),
                Ok(_) => {}
                Err(e) => panic!("waiting for the finals: {e}"),
            }
        }
        finals
    });
    let batch = transfers(5, 2_000, "ASK");
    let asked: Vec<Bmi> = batch.iter().rev().step_by(50).map(|c| c.bmi).collect();
    let submitter = cluster.submitter();
    for chunk in batch.chunks(500) {
        submitter.submit(chunk.to_vec()).unwrap_or_else(|e| panic!("{e}"));
    }
    for bmi in &asked {
        let seq = loop {
            let answer = queries.ask(*bmi).unwrap_or_else(|e| panic!("{e}"));
            match answer.recv_timeout(Duration::from_secs(10)).unwrap_or_else(|e| panic!("{e}")) {
                Ok(Some(seq)) => break seq,
                Ok(None) => std::thread::sleep(Duration::from_millis(1)), // not sequenced yet
                Err(e) => panic!("{e}"),
            }
        };
        assert!(seq <= final_through(), "{bmi} named seq {seq} before it was final");
    }
    let finals = drained.join().unwrap_or_else(|_| panic!("the drain panicked"));
    let seq_of = |bmi: &Bmi| finals.iter().find(|n| n.bmi == *bmi).map(|n| n.seq);
    drop(submitter); // shutdown waits for every submitter
    let report = cluster.shutdown();
    assert!(report.errors.is_empty(), "{:?}", report.errors);

    let cluster = Cluster::start(&config).unwrap_or_else(|e| panic!("{e}"));
    let ask = |bmi: Bmi| {
        let answer = cluster.bmi_queries().ask(bmi).unwrap_or_else(|e| panic!("{e}"));
        answer.recv_timeout(Duration::from_secs(10)).unwrap_or_else(|e| panic!("{e}"))
    };
    for bmi in &asked {
        assert_eq!(ask(*bmi), Ok(seq_of(bmi)), "{bmi} after a restart");
        assert!(seq_of(bmi).is_some());
    }
    let never = Bmi::numbered("NEVER", 1).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ask(never), Ok(None));
    let report = cluster.shutdown();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let _ = std::fs::remove_dir_all(&dir);
}
