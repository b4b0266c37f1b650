//! The participant HTTP API on the production engine: three real `rtgs node --api-config`
//! processes (broker and PostgreSQL started through `scripts/infra-up.sh`; the test fails,
//! never skips, if they cannot be started). Operators open and fund accounts over HTTP, a
//! participant pays through two different centers (JSON, a batch and a pacs.008), sees ACCC,
//! balances and its statement; the three databases then reconcile and every `bmi` is applied
//! exactly once and final.

mod common;

use common::{http_signed, lock, Cluster};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{api_config as config, BANK_A, OPS};

/// The address each center's API announced in its log.
fn api_addrs(c: &Cluster) -> Vec<SocketAddr> {
    let started = Instant::now();
    (1..=3)
        .map(|center| loop {
            let log = std::fs::read_to_string(c.dir.join(format!("dc{center}.log"))).unwrap_or_default();
            if let Some(addr) =
                log.lines().find_map(|l| l.split_once("API listening on http://").map(|(_, a)| a))
            {
                break addr.trim().parse().unwrap_or_else(|e| panic!("{addr}: {e}"));
            }
            assert!(started.elapsed() < Duration::from_secs(60), "DC{center} announced no API:\n{log}");
            std::thread::sleep(Duration::from_millis(100));
        })
        .collect()
}

/// A cluster named `name` whose three nodes serve the API with participants `config` (and the
/// `extra` environment), started; with each center's API address.
fn api_cluster(name: &str, config: &str, extra: &[(&str, &str)]) -> (Cluster, Vec<SocketAddr>) {
    let mut c = Cluster::new(name);
    let config_path = c.dir.join("participants.json");
    std::fs::write(&config_path, config).unwrap_or_else(|e| panic!("{e}"));
    for env in &mut c.extra_env {
        env.push(("RTGS_API_CONFIG".into(), config_path.display().to_string()));
        env.push(("RTGS_API_LISTEN".into(), "127.0.0.1:0".into()));
        env.extend(extra.iter().map(|(k, v)| ((*k).into(), (*v).into())));
    }
    c.start_all();
    let api = api_addrs(&c);
    (c, api)
}

/// Operators open EUR accounts 1 and 2 and fund account 1 with `amount` through `api`; each
/// answer waits for finality (it carries the seq).
fn open_and_fund(api: SocketAddr, amount: &str) {
    let setup = [
        ("/v1/operator/accounts", json!({ "bmi": "OPEN-1", "account": 1, "currency": "EUR" })),
        ("/v1/operator/accounts", json!({ "bmi": "OPEN-2", "account": 2, "currency": "EUR" })),
        ("/v1/operator/accounts/1/fund", json!({ "bmi": "FUND-1", "amount": amount, "currency": "EUR" })),
    ];
    for (path, body) in setup {
        let (status, answer) = call(api, OPS, "POST", path, &body);
        assert_eq!(status, 202, "{path}: {answer}");
        assert!(answer["seq"].as_u64().is_some(), "the final notice came back: {answer}");
    }
}

fn call(addr: SocketAddr, who: (&str, &str), method: &str, path: &str, body: &Value) -> (u16, Value) {
    let text = if body.is_null() { String::new() } else { body.to_string() };
    let (status, answer) = http_signed(addr, who.0, who.1, method, path, &text);
    (status, serde_json::from_str(&answer).unwrap_or(Value::String(answer)))
}

#[test]
fn the_api_serves_participants_on_the_production_engine() {
    let _one = lock();
    let (mut c, api) = api_cluster("api", &config(), &[]);

    // Operators set up the accounts through DC1's API; each answer waits for finality.
    open_and_fund(api[0], "1000.00");

    // A transfer through DC1, another through DC2: each answered with its seq, final.
    let t1 = json!({ "bmi": "API-T1", "debtor": 1, "creditor": 2, "amount": "12.34", "currency": "EUR" });
    let (status, answer) = call(api[0], BANK_A, "POST", "/v1/transfers", &t1);
    assert_eq!(status, 202, "{answer}");
    let seq1 = answer["seq"].as_u64().unwrap_or_else(|| panic!("no seq: {answer}"));
    let t2 = json!({ "bmi": "API-T2", "debtor": 1, "creditor": 2, "amount": "0.66", "currency": "EUR" });
    let (status, answer) = call(api[1], BANK_A, "POST", "/v1/transfers", &t2);
    assert_eq!(status, 202, "{answer}");
    let (status, answer) = call(api[1], BANK_A, "GET", "/v1/transfers/API-T2?wait_s=10", &Value::Null);
    assert_eq!((status, answer["status"].as_str()), (200, Some("ACCC")), "{answer}");
    // An account never opened is unknown on every node — concluded once the node's read model
    // holds everything the sequencer's database says is sequenced (a lagging node waits for it).
    let t3 = json!({ "bmi": "API-T3", "debtor": 1, "creditor": 77, "amount": "1.00", "currency": "EUR" });
    let (status, answer) = call(api[1], BANK_A, "POST", "/v1/transfers", &t3);
    assert_eq!((status, answer["code"].as_str()), (422, Some("unknown_account")), "{answer}");
    let (status, answer) = call(api[2], OPS, "GET", "/v1/operator/accounts/77", &Value::Null);
    assert_eq!((status, answer["code"].as_str()), (404, Some("unknown_account")), "{answer}");
    // A retry through DC1 gets the original answer; the same bmi with other content is 422.
    assert_eq!(call(api[0], BANK_A, "POST", "/v1/transfers", &t1).1["seq"].as_u64(), Some(seq1));
    let mut changed = t1.clone();
    changed["amount"] = json!("12.35");
    let (status, answer) = call(api[0], BANK_A, "POST", "/v1/transfers", &changed);
    assert_eq!((status, answer["code"].as_str()), (422, Some("bmi_conflict")), "{answer}");

    // A batch of 50 through DC3.
    let transfers: Vec<Value> = (0..50)
        .map(|i| json!({ "bmi": format!("API-T{}", 100 + i), "debtor": 1, "creditor": 2, "amount": "1.00", "currency": "EUR" }))
        .collect();
    let (status, answer) =
        call(api[2], BANK_A, "POST", "/v1/transfers/batch", &json!({ "transfers": transfers }));
    assert_eq!((status, answer["accepted"].as_u64()), (202, Some(50)), "{answer}");

    // Balances and the statement, read-your-writes through DC1 (its read model is fed by its
    // own journal reader, whichever center the writes entered through).
    let deadline = Instant::now() + Duration::from_secs(30);
    let account = loop {
        let (status, account) = call(api[0], BANK_A, "GET", "/v1/accounts/2", &Value::Null);
        assert_eq!(status, 200, "{account}");
        if account["balance"] == "63.00" || Instant::now() > deadline {
            break account;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(account["balance"], "63.00", "12.34 + 0.66 + 50 × 1.00: {account}");
    let (status, statement) = call(api[0], BANK_A, "GET", "/v1/accounts/2/statement?limit=500", &Value::Null);
    assert_eq!(status, 200, "{statement}");
    let credits =
        statement["lines"].as_array().map_or(0, |l| l.iter().filter(|l| l["type"] == "CREDIT").count());
    assert_eq!(credits, 52, "{statement}");

    c.wait_converged(60);
    c.reconcile();
    c.assert_exactly_once_and_final("API", 52);
    // The APIs pushed their 55 submissions (3 + 2 + 50; the conflict and the retry above were
    // answered by DC1's tracker) to the leader before the broker stored them, and the leader
    // dropped the topic's copies silently — else each copy is answered as a retry (a refusal
    // notice). A copy may rarely come before its push: only those may be answered again.
    let statuses = c.statuses();
    let leader = statuses
        .iter()
        .flatten()
        .find(|s| s["leader"] == true)
        .unwrap_or_else(|| panic!("no leader in {statuses:?}"));
    let count = |k: &str| leader[k].as_u64().unwrap_or_else(|| panic!("no {k} in {leader}"));
    assert!(count("inbound_pushed") > 0, "nothing came by the push path: {leader}");
    assert!(count("inbound_copies_skipped") > 0, "no topic copy was dropped: {leader}");
    assert!(
        count("refusals") <= 55u64.saturating_sub(count("inbound_copies_skipped")),
        "topic copies answered as retries: {leader}"
    );
}

/// Submissions go to the leader before the broker stores them (the push path): a leader killed
/// with `kill -9` in the middle of a stream of them loses none and applies none twice. What it
/// sequenced from the push may not have reached the journal topic yet (its successor publishes
/// the outbox's unpublished batches), and the topic's copies of those commands then reach a
/// leader that never saw the push — admitted as retries, never sequenced again.
#[test]
fn api_submissions_pushed_to_a_leader_killed_mid_stream_are_final_exactly_once() {
    let _one = lock();
    let (mut c, api) = api_cluster("apikill", &config(), &[]);
    open_and_fund(api[0], "100000.00");
    let leader = c.leader();
    let entry = (1..=3).find(|x| *x != leader).unwrap_or(1);
    // 40 batches of 25 through a center that lives on, one every 50 ms or so (≈ 2 s).
    const BATCHES: u64 = 40;
    const PER_BATCH: u64 = 25;
    let addr = api[entry - 1];
    let stream = std::thread::spawn(move || {
        for b in 0..BATCHES {
            let transfers: Vec<Value> = (0..PER_BATCH)
                .map(|i| {
                    let n = b * PER_BATCH + i;
                    json!({ "bmi": format!("API-T{n}"), "debtor": 1, "creditor": 2, "amount": "1.00", "currency": "EUR" })
                })
                .collect();
            let (status, answer) =
                call(addr, BANK_A, "POST", "/v1/transfers/batch", &json!({ "transfers": transfers }));
            assert_eq!((status, answer["accepted"].as_u64()), (202, Some(PER_BATCH)), "batch {b}: {answer}");
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    let epoch = c.epoch_max();
    // Kill the leader once a few batches have been sequenced from the push path.
    c.wait("a few batches sequenced", 60, |s| {
        s[leader - 1].as_ref().is_some_and(|s| s["inbound_pushed"].as_u64().unwrap_or(0) >= 5)
    });
    assert!(!stream.is_finished(), "the stream ended before the kill: nothing was in flight");
    c.kill9(leader);
    stream.join().unwrap_or_else(|_| panic!("the stream of batches failed"));
    assert!(c.epoch_max() > epoch, "no takeover while the stream went on");
    c.start(leader);
    c.wait_converged(120);
    c.reconcile();
    c.assert_exactly_once_and_final("API", BATCHES * PER_BATCH);
}

const BANK_B: (&str, &str) = ("bank-b", "bank-b-secret-0123456789");

/// Issue 15, point 2, on the production engine: two participants' equal `bmi` texts are two
/// payments; a participant probing another's `bmi` is answered as for one nobody used; a retry
/// through a center whose API never saw it, and one after a node restart (its tracker empty, its
/// read model starting from the stored ledger), are answered at once with the original seq —
/// the sequencer's `Duplicate` notice — and their status with the original outcome, from the read
/// model or the center's database; other content under the `bmi` is `bmi_conflict`.
#[test]
fn idempotency_belongs_to_the_participant_on_the_production_engine() {
    let _one = lock();
    let config = json!({
        "participants": [
            { "key_id": BANK_A.0, "secret": BANK_A.1, "accounts": [1, 2] },
            { "key_id": BANK_B.0, "secret": BANK_B.1, "accounts": [3] }
        ],
        "operators": [{ "key_id": OPS.0, "secret": OPS.1 }],
        "accounts": []
    });
    let (mut c, api) = api_cluster("idem", &config.to_string(), &[("RTGS_STATEMENT_HISTORY", "true")]);
    let setup = [
        ("/v1/operator/accounts", json!({ "bmi": "OPEN-1", "account": 1, "currency": "EUR" })),
        ("/v1/operator/accounts", json!({ "bmi": "OPEN-2", "account": 2, "currency": "EUR" })),
        ("/v1/operator/accounts", json!({ "bmi": "OPEN-3", "account": 3, "currency": "EUR" })),
        ("/v1/operator/accounts/1/fund", json!({ "bmi": "FUND-1", "amount": "100.00", "currency": "EUR" })),
        ("/v1/operator/accounts/3/fund", json!({ "bmi": "FUND-3", "amount": "100.00", "currency": "EUR" })),
    ];
    for (path, body) in setup {
        let (status, answer) = call(api[0], OPS, "POST", path, &body);
        assert_eq!((status, answer["seq"].is_u64()), (202, true), "{path}: {answer}");
    }
    let pay = |bmi: &str, debtor: u64, creditor: u64, amount: &str| json!({ "bmi": bmi, "debtor": debtor, "creditor": creditor, "amount": amount, "currency": "EUR" });
    let status_of = |addr: SocketAddr, who: (&str, &str), bmi: &str| {
        let (status, answer) =
            call(addr, who, "GET", &format!("/v1/transfers/{bmi}?wait_s=10"), &Value::Null);
        assert_eq!(status, 200, "{bmi}: {answer}");
        (
            answer["seq"].as_u64(),
            answer["status"].as_str().map(String::from),
            answer["reason"].as_str().map(String::from),
        )
    };

    // The same text, two participants, two payments (through DC1 and DC2).
    let (status, a) = call(api[0], BANK_A, "POST", "/v1/transfers", &pay("SAME", 1, 2, "5.00"));
    assert_eq!((status, a["bmi"].as_str()), (202, Some("SAME")), "{a}");
    let (status, b) = call(api[1], BANK_B, "POST", "/v1/transfers", &pay("SAME", 3, 1, "2.00"));
    assert_eq!((status, b["bmi"].as_str()), (202, Some("SAME")), "{b}");
    let (seq_a, seq_b) = (a["seq"].as_u64().expect("A's seq"), b["seq"].as_u64().expect("B's seq"));
    assert_ne!(seq_a, seq_b);
    assert_eq!(status_of(api[0], BANK_A, "SAME"), (Some(seq_a), Some("ACCC".into()), None));
    assert_eq!(status_of(api[1], BANK_B, "SAME"), (Some(seq_b), Some("ACCC".into()), None));
    let (status, rejected) = call(api[0], BANK_A, "POST", "/v1/transfers", &pay("REJ", 1, 2, "5000.00"));
    assert_eq!(status, 202, "{rejected}");
    let seq_rej = rejected["seq"].as_u64().expect("seq");
    assert_eq!(status_of(api[0], BANK_A, "REJ"), (Some(seq_rej), Some("RJCT".into()), Some("AM04".into())));

    // B probing A's bmi through A's own center: the answer for one nobody used.
    let used = call(api[0], BANK_B, "GET", "/v1/transfers/REJ", &Value::Null);
    let fresh = call(api[0], BANK_B, "GET", "/v1/transfers/NOBODY", &Value::Null);
    assert_eq!((used.0, used.1["code"].as_str()), (404, Some("unknown_transfer")), "{}", used.1);
    assert_eq!((used.0, used.1["code"].clone()), (fresh.0, fresh.1["code"].clone()));
    assert!(!used.1.to_string().contains(&seq_rej.to_string()), "{}", used.1);
    // Status through a center whose API never saw it, no retry: the sequencer's index of every
    // bmi ever sequenced answers it (B's probe there is still the answer for one nobody used).
    assert_eq!(status_of(api[1], BANK_A, "REJ"), (Some(seq_rej), Some("RJCT".into()), Some("AM04".into())));
    let used = call(api[1], BANK_B, "GET", "/v1/transfers/REJ", &Value::Null);
    assert_eq!((used.0, used.1["code"].as_str()), (404, Some("unknown_transfer")), "{}", used.1);

    // A retry through DC3, whose API never saw it: the sequencer's Duplicate, at once.
    let started = Instant::now();
    let (status, again) = call(api[2], BANK_A, "POST", "/v1/transfers", &pay("SAME", 1, 2, "5.00"));
    assert_eq!((status, again["seq"].as_u64()), (202, Some(seq_a)), "{again}");
    assert!(started.elapsed() < Duration::from_secs(10), "answered by the engine, not the 10 s wait");
    assert_eq!(status_of(api[2], BANK_A, "SAME"), (Some(seq_a), Some("ACCC".into()), None));

    // 120 more credits of account 2 (point 6: a statement of more than one page).
    let transfers: Vec<Value> = (0..120).map(|i| pay(&format!("ST-{i}"), 1, 2, "0.01")).collect();
    let (status, answer) =
        call(api[1], BANK_A, "POST", "/v1/transfers/batch", &json!({ "transfers": transfers }));
    assert_eq!((status, answer["accepted"].as_u64()), (202, Some(120)), "{answer}");
    let seq_last = answer["transfers"][119]["seq"].as_u64().expect("seq");

    // DC1 killed and started again: its API's tracker is empty, its read model starts from the
    // stored ledger (past these seqs); the retries are answered from the engine and the database.
    c.wait_converged(60);
    let lines_before = c.log(1).lines().count();
    c.kill9(1);
    c.start(1);
    let dc1 = api_addr_latest(&c, 1, lines_before);
    let started = Instant::now();
    let (status, again) = call(dc1, BANK_A, "POST", "/v1/transfers", &pay("REJ", 1, 2, "5000.00"));
    assert_eq!((status, again["seq"].as_u64()), (202, Some(seq_rej)), "{again}");
    let (status, again) = call(dc1, BANK_A, "POST", "/v1/transfers", &pay("SAME", 1, 2, "5.00"));
    assert_eq!((status, again["seq"].as_u64()), (202, Some(seq_a)), "{again}");
    assert!(started.elapsed() < Duration::from_secs(10), "answered by the engine, not the 10 s wait");
    assert_eq!(status_of(dc1, BANK_A, "REJ"), (Some(seq_rej), Some("RJCT".into()), Some("AM04".into())));
    assert_eq!(status_of(dc1, BANK_A, "SAME"), (Some(seq_a), Some("ACCC".into()), None));
    // One submitted through DC2 and never retried: known to the restarted DC1 all the same.
    let st = answer["transfers"][5]["seq"].as_u64().expect("seq");
    assert_eq!(status_of(dc1, BANK_A, "ST-5"), (Some(st), Some("ACCC".into()), None));
    let (status, conflict) = call(dc1, BANK_A, "POST", "/v1/transfers", &pay("SAME", 1, 2, "5.01"));
    assert_eq!((status, conflict["code"].as_str()), (422, Some("bmi_conflict")), "{conflict}");
    let message = conflict["message"].as_str().unwrap_or("");
    assert!(message.contains(&format!("seq {seq_a}")) && !message.contains('~'), "{message}");

    // Point 6: the restarted DC1's statement of account 2 is its whole history (from the
    // center's database), in pages of 50 that follow each other: OPEN, A's SAME, 120 credits.
    let (mut lines, mut from, mut pages) = (Vec::new(), 0, 0);
    let (last_balance, as_of) = loop {
        let path = format!("/v1/accounts/2/statement?from_seq={from}&limit=50");
        let (status, page) = call(dc1, BANK_A, "GET", &path, &Value::Null);
        assert_eq!((status, page["truncated"].as_bool()), (200, Some(false)), "{page}");
        pages += 1;
        lines.extend(page["lines"].as_array().cloned().unwrap_or_default());
        match page["next_from_seq"].as_u64() {
            Some(next) => from = next,
            None => break (page["balance"].clone(), page["as_of_seq"].as_u64().unwrap_or(0)),
        }
    };
    assert!(as_of >= seq_last, "as of everything final: {as_of} < {seq_last}");
    assert_eq!((pages, lines.len()), (3, 122), "50 + 50 + 22 lines");
    let kinds: Vec<&str> = lines.iter().take(2).filter_map(|l| l["type"].as_str()).collect();
    assert_eq!(kinds, ["OPEN", "CREDIT"]);
    assert_eq!((lines[1]["bmi"].as_str(), lines[1]["seq"].as_u64()), (Some("SAME"), Some(seq_a)));
    let seqs: Vec<u64> = lines.iter().filter_map(|l| l["seq"].as_u64()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "oldest first, each once: {seqs:?}");
    assert_eq!(lines.last().map(|l| l["balance_after"].clone()), Some(last_balance.clone()));
    assert_eq!(last_balance, "6.20", "5.00 + 120 × 0.01");

    // Nothing was paid twice: every participant's entry once, in every center.
    c.wait_converged(60);
    c.reconcile();
    for center in 1..=3 {
        let rows =
            c.sql(center, "SELECT count(*), count(DISTINCT bmi) FROM applied_entry WHERE bmi LIKE '~%'", &[]);
        let (n, distinct): (i64, i64) = (rows[0].get(0), rows[0].get(1));
        assert_eq!((n, distinct), (123, 123), "DC{center}: SAME twice (A and B), REJ and ST-*, each once");
    }
}

/// The address DC`center`'s API announced last (a restarted node appends to its log).
fn api_addr_latest(c: &Cluster, center: usize, after_lines: usize) -> SocketAddr {
    let started = Instant::now();
    loop {
        let log = std::fs::read_to_string(c.dir.join(format!("dc{center}.log"))).unwrap_or_default();
        let found = log
            .lines()
            .skip(after_lines)
            .filter_map(|l| l.split_once("API listening on http://").map(|(_, a)| a.trim().to_string()))
            .last();
        if let Some(addr) = found {
            return addr.parse().unwrap_or_else(|e| panic!("{addr}: {e}"));
        }
        assert!(started.elapsed() < Duration::from_secs(60), "DC{center} announced no API:\n{log}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `rtgs ops` against `api` with the operator's secret from a file: (exit code, stdout, stderr).
fn ops(c: &Cluster, api: SocketAddr, args: &[&str]) -> (i32, String, String) {
    let secret_file = c.dir.join("ops.secret");
    std::fs::write(&secret_file, format!("{}\n", OPS.1)).unwrap_or_else(|e| panic!("{e}"));
    let out = std::process::Command::new(common::BIN)
        .args(["ops", "--api", &format!("http://{api}"), "--key", OPS.0])
        .arg("--secret-file")
        .arg(&secret_file)
        .args(args)
        .env_remove("RTGS_OPS_SECRET")
        .output()
        .unwrap_or_else(|e| panic!("cannot run rtgs ops: {e}"));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(!stdout.contains(OPS.1) && !stderr.contains(OPS.1), "the secret is never printed");
    (out.status.code().unwrap_or(-1), stdout, stderr)
}

/// Plugin reads and operations on the production engine: the collection plugin's GET routes
/// answer on `rtgs node --api-config` (the read model's replica of the node's plugins), an
/// operator's setting and an ownership move made with `rtgs ops` through one center take effect
/// on all three (each center's API, status and stored plugin state), a refusal is exit 1 with
/// the API's code, and a center killed with SIGKILL serves the same answers from its stored
/// plugin state when it comes back.
#[test]
fn plugin_operations_take_effect_on_every_center_of_the_production_engine() {
    let _one = lock();
    let collection =
        [("RTGS_COLLECTION", "true"), ("RTGS_COLLECTION_WALLETS", "4"), ("RTGS_COLLECTION_RELAYERS", "2")];
    let (mut c, api) = api_cluster("apiops", &config(), &collection);

    // The audit routes answer on production (not collection_disabled).
    for addr in &api {
        let (status, answer) = call(*addr, OPS, "GET", "/v1/operator/collection/settings", &Value::Null);
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["global"]["collection.min_amount_usd"], 1_000_000, "the default: {answer}");
        let (status, answer) = call(*addr, OPS, "GET", "/v1/operator/collection/stale", &Value::Null);
        assert_eq!((status, &answer["batches"]), (200, &json!([])), "{answer}");
    }

    // A setting changed through DC2 with `rtgs ops`, read back through every center's API.
    let (code, out, err) = ops(
        &c,
        api[1],
        &["--bmi", "OPS-SET-1", "collection", "settings", "--set", "collection.min_amount_usd=2000000"],
    );
    assert_eq!(code, 0, "{out}{err}");
    for addr in &api {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (_, s) = call(*addr, OPS, "GET", "/v1/operator/collection/settings", &Value::Null);
            if s["global"]["collection.min_amount_usd"] == 2_000_000 {
                break;
            }
            assert!(Instant::now() < deadline, "{addr}: the setting never showed: {s}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    // A refusal: exit 1 with the API's code, nothing journaled.
    let (code, _, err) = ops(&c, api[0], &["collection", "fail-stale", "--batch", "999"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("unknown_batch"), "{err}");

    // Ownership moved to DC3 through DC1's API: every center's host shows it.
    let (code, out, err) = ops(&c, api[0], &["owner", "--plugin", "collection", "--center", "3"]);
    assert_eq!(code, 0, "{out}{err}");
    let moved: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
    assert_eq!((&moved["term"], &moved["bmi"]), (&json!(1), &json!("OWNER-1-1")), "{out}");
    c.wait("DC3 to own collection on every center", 40, |s| {
        s.iter().all(|s| {
            s.as_ref().is_some_and(|s| s["plugins"]["owner_center"] == 3 && s["plugins"]["owner_term"] == 1)
        })
    });
    let (code, out, _) = ops(&c, api[1], &["owner"]);
    assert_eq!(code, 0);
    let owners: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
    assert_eq!(owners["plugins"], json!([{ "plugin": "collection", "owner": 3, "term": 1 }]), "{out}");
    c.wait_converged(30);
    common::assert_stored_states_agree(&c, "collection");

    // A center killed and started again: its API's replica starts from its stored plugin state.
    let lines_before = c.log(2).lines().count();
    c.kill9(2);
    c.start(2);
    let dc2 = api_addr_latest(&c, 2, lines_before);
    let deadline = Instant::now() + Duration::from_secs(30);
    let (settings, owners) = loop {
        let (_, settings) = call(dc2, OPS, "GET", "/v1/operator/collection/settings", &Value::Null);
        let (_, owners) = call(dc2, OPS, "GET", "/v1/operator/plugins", &Value::Null);
        if settings["global"]["collection.min_amount_usd"] == 2_000_000 || Instant::now() > deadline {
            break (settings, owners);
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(settings["global"]["collection.min_amount_usd"], 2_000_000, "{settings}");
    assert_eq!(owners["plugins"], json!([{ "plugin": "collection", "owner": 3, "term": 1 }]), "{owners}");
    assert!(c.log(2).contains("(stored state)"), "DC2 resumed from its stored plugin state:\n{}", c.log(2));
    c.wait_converged(30);
    c.reconcile();
}

/// Matching orders with their customers' PII on the production engine (issue 13): an order
/// submitted through DC1's API is journaled with an opaque reference only; the customer's data
/// stays in DC1's `--pii-file` (synced before the order is acknowledged), readable by the
/// submitting participant and operators there and by nobody through another center; it survives
/// a `kill -9` of DC1 (read back from the file), and neither the journal (the sequencer's outbox)
/// nor any center's stored plugin state holds it.
#[test]
fn matching_orders_keep_their_pii_at_the_origin_center_across_a_kill9() {
    let _one = lock();
    let mut c = Cluster::new("apipii");
    let config_path = c.dir.join("participants.json");
    std::fs::write(&config_path, config()).unwrap_or_else(|e| panic!("{e}"));
    let pii_files: Vec<std::path::PathBuf> = (1..=3).map(|n| c.dir.join(format!("dc{n}.pii"))).collect();
    for (env, pii) in c.extra_env.iter_mut().zip(&pii_files) {
        env.push(("RTGS_API_CONFIG".into(), config_path.display().to_string()));
        env.push(("RTGS_API_LISTEN".into(), "127.0.0.1:0".into()));
        env.push(("RTGS_MATCHING".into(), "true".into()));
        env.push(("RTGS_PII_FILE".into(), pii.display().to_string()));
    }
    c.start_all();
    let api = api_addrs(&c);
    // The order's credit account exists (the plugin refuses an order to an unknown account).
    let open = json!({ "bmi": "OPEN-1", "account": 1, "currency": "EUR" });
    let (status, answer) = call(api[0], OPS, "POST", "/v1/operator/accounts", &open);
    assert_eq!(status, 202, "{answer}");
    const NAME: &str = "Jane Q. Customer";
    let order = json!({
        "bmi": "ORD-PII-1", "order": 4_100_001, "partner": 1, "currency": "EUR", "amount_minor": "25000",
        "credit_account": 1, "expires_in_s": 600,
        "customer": { "name": NAME, "phone": "+33 6 12 34 56 78", "bank_account": "FR7630006000011234567890189" }
    });
    let (status, answer) = call(api[0], BANK_A, "POST", "/v1/matching/orders", &order);
    assert_eq!(status, 202, "{answer}");
    let customer = "/v1/matching/orders/4100001/customer";
    let (status, pii) = call(api[0], BANK_A, "GET", customer, &Value::Null);
    assert_eq!((status, pii["customer"]["name"].as_str()), (200, Some(NAME)), "{pii}");
    // The PII stays at the origin center: another center's API does not know it.
    let (status, answer) = call(api[1], BANK_A, "GET", customer, &Value::Null);
    assert_eq!((status, answer["code"].as_str()), (404, Some("unknown_order")), "{answer}");
    // The order itself is journaled: every center's replica gets it.
    c.wait("the order on every center", 60, |s| {
        s.iter().flatten().filter(|s| s["plugins"]["matching_orders"].as_u64() >= Some(1)).count() == 3
    });

    // kill -9 of the origin: the PII comes back from its file.
    let lines = c.log(1).lines().count();
    c.kill9(1);
    c.start(1);
    let dc1 = api_addr_latest(&c, 1, lines);
    let (status, pii) = call(dc1, OPS, "GET", "/v1/operator/matching/orders/4100001/customer", &Value::Null);
    assert_eq!(
        (status, pii["customer"]["bank_account"].as_str()),
        (200, Some("FR7630006000011234567890189")),
        "{pii}"
    );
    let (status, pii) = call(dc1, BANK_A, "GET", customer, &Value::Null);
    assert_eq!((status, pii["customer"]["phone"].as_str()), (200, Some("+33 6 12 34 56 78")), "{pii}");

    let kept = std::fs::read(&pii_files[0]).unwrap_or_else(|e| panic!("{}: {e}", pii_files[0].display()));
    assert!(kept.windows(NAME.len()).any(|w| w == NAME.as_bytes()), "DC1's PII file holds the customer");
    for other in &pii_files[1..] {
        let bytes = std::fs::read(other).unwrap_or_default();
        assert!(
            !bytes.windows(NAME.len()).any(|w| w == NAME.as_bytes()),
            "{} holds another center's PII",
            other.display()
        );
    }
    // Neither the journal nor a center's stored plugin state holds it.
    let needle = NAME.as_bytes().to_vec();
    for center in 1..=3 {
        let rows = c.sql(
            center,
            "SELECT count(*) FROM plugin_state WHERE position($1::bytea IN state) > 0",
            &[&needle],
        );
        assert_eq!(rows[0].get::<_, i64>(0), 0, "DC{center}'s stored plugin state holds the PII");
    }
    let rows = c.sql_in(
        &format!("{}_seq", c.prefix),
        "SELECT count(*), count(*) FILTER (WHERE position($1::bytea IN frames) > 0) FROM journal_outbox",
        &[&needle],
    );
    let (batches, with_pii): (i64, i64) = (rows[0].get(0), rows[0].get(1));
    assert!(batches > 0, "the journal has batches");
    assert_eq!(with_pii, 0, "the journal holds the PII");
}
