//! Withdrawals over HTTP, on the embedded engine with the withdrawal plugin in every center and
//! its simulated world (calm) behind the owner's adapter: a participant's withdrawal from request
//! to COMPLETED, idempotent by `bmi`, visible only to its owner; a cancel too late refused and
//! recorded; operators list by state, run operations and journal the world's answers
//! (idempotent by content); one test per bad input row; a node without the plugin answers 404.

mod common;

use common::{fresh_dir, start, start_withdrawal_on, Edge};
use rtgs_core::entry::{Bmi, CenterId, Payload};
use rtgs_plugins::WithdrawalConfig;
use rtgs_withdrawal::command::{
    AmlVerdict, CreateWithdrawal, DestinationType, RequestKind, Screened, WithdrawalCommand,
};
use rtgs_withdrawal::operation::{Actor, ActorKind};
use rtgs_withdrawal::types::{ActorId, AssetId, LedgerAccount, Text, WithdrawalId};
use rtgs_withdrawal::world::workload::Workload;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// An EVM asset in the cluster's EUR, settled to account 2 (the harness's accounts are EUR).
const ASSET: u32 = 100;

fn post_body(v: Value) -> Vec<u8> {
    v.to_string().into_bytes()
}

async fn node(name: &str) -> common::Node {
    node_on(name, Edge::default()).await
}

async fn node_on(name: &str, edge: Edge) -> common::Node {
    let config = WithdrawalConfig { customers: 1, vaults_per_chain: 2, faults: false, ..Default::default() };
    let node = start_withdrawal_on(&fresh_dir(name), config.clone(), edge).await;
    let setup = config.workload().setup_commands(&Workload::demo_settings()).expect("setup fits");
    node.setup_plugin(setup).await;
    // The EUR asset through the operator's route (journaled before any request that uses it).
    let eur = json!({
        "bmi": "WSET-EUR", "asset": ASSET, "chain": 1, "token": 1, "currency": "EUR",
        "scale_exp": 4, "settlement_account": 2,
    });
    let (status, body) = node.as_ops("POST", "/v1/operator/withdrawal/assets", &post_body(eur)).await;
    assert_eq!(status, 202, "{body}");
    node
}

fn create(bmi: &str, account: u64) -> Value {
    json!({
        "bmi": bmi, "account": account, "asset": ASSET, "amount_minor": 500,
        "destination_type": "whitelisted", "destination": "dest-evm-1",
    })
}

/// GETs `path` as `who` until `done` holds for a 200 answer (at most 60 s).
async fn poll(node: &common::Node, ops: bool, path: &str, done: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let (status, body) =
            if ops { node.as_ops("GET", path, b"").await } else { node.as_a("GET", path, b"").await };
        if status == 200 && done(&body) {
            return body;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "{path}: still {status} {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_participants_withdrawal_completes_and_only_it_sees_it() {
    let node = node("withdrawal-e2e").await;
    let (status, first) = node.as_a("POST", "/v1/withdrawals", &post_body(create("W-1", 1))).await;
    assert_eq!(status, 202, "{first}");
    let id = first["seq"].as_u64().expect("seq");
    // The same bmi again: the same answer, nothing journaled twice.
    let (status, again) = node.as_a("POST", "/v1/withdrawals", &post_body(create("W-1", 1))).await;
    assert_eq!((status, again["seq"].as_u64()), (202, Some(id)), "{again}");

    let path = format!("/v1/withdrawals/{id}");
    let w = poll(&node, false, &path, |b| b["status"] == "COMPLETED").await;
    assert_eq!((w["account"].as_u64(), w["amount_minor"].as_u64()), (Some(1), Some(500)), "{w}");
    assert_eq!(w["money"], "SETTLED");
    assert!(w["broadcast_attempts"].as_array().is_some_and(|a| !a.is_empty()), "{w}");
    assert!(w["as_of_seq"].as_u64().is_some_and(|s| s >= id));
    // Settled through the ledger: 1000.00 - 5.00 on the customer, 5.00 on the settlement account.
    let seq = w["as_of_seq"].as_u64().unwrap_or(0);
    assert_eq!(node.account_at(1, seq).await["balance"], "995.00");
    assert_eq!(node.account_at(2, seq).await["balance"], "5.00");

    // Another participant: as if unknown, for reading and cancelling.
    let (status, body) = node.as_b("GET", &path, b"").await;
    assert_eq!((status, body["code"].as_str()), (404, Some("unknown_withdrawal")), "{body}");
    let cancel = post_body(json!({ "bmi": "WC-B" }));
    let (status, body) = node.as_b("POST", &format!("{path}/cancel"), &cancel).await;
    assert_eq!((status, body["code"].as_str()), (404, Some("unknown_withdrawal")), "{body}");

    // Its owner cancels too late: journaled, refused by the plugin, recorded with its code.
    let cancel = post_body(json!({ "bmi": "WC-A", "reason": "changed my mind" }));
    let (status, body) = node.as_a("POST", &format!("{path}/cancel"), &cancel).await;
    assert_eq!(status, 202, "{body}");
    let w = poll(&node, false, &path, |b| b["operations"].as_array().is_some_and(|o| !o.is_empty())).await;
    assert_eq!(w["operations"][0]["operation"], "cancel");
    assert_eq!(w["operations"][0]["refused"], "state_not_allowed", "{w}");
    assert_eq!(w["status"], "COMPLETED");

    // Operators: the list by state, any withdrawal, an operation.
    let list = poll(&node, true, "/v1/operator/withdrawals?status=COMPLETED&limit=10", |b| {
        b["withdrawals"].as_array().is_some_and(|l| l.iter().any(|w| w["withdrawal"].as_u64() == Some(id)))
    })
    .await;
    assert!(list["count"].as_u64().is_some_and(|c| c >= 1), "{list}");
    let (status, body) =
        node.as_ops("GET", "/v1/operator/withdrawals?status=QUEUED&after=0&limit=5", b"").await;
    assert_eq!((status, body["count"].as_u64()), (200, Some(0)), "{body}");
    let notes = post_body(json!({ "bmi": "WOP-1", "operation": "edit-notes", "notes": "audited" }));
    let (status, body) =
        node.as_ops("POST", &format!("/v1/operator/withdrawals/{id}/operations"), &notes).await;
    assert_eq!(status, 202, "{body}");
    let w = poll(&node, true, &format!("/v1/operator/withdrawals/{id}"), |b| b["notes"] == "audited").await;
    assert_eq!(w["operations"][1]["actor"], "Operator", "{w}");
    node.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worlds_answers_enter_once_and_refused_requests_show_to_operators() {
    let node = node("withdrawal-results").await;
    // An answer about a withdrawal that does not exist: journaled (the plugin ignores it), and
    // the same report again is the same entry.
    let cmd = WithdrawalCommand::Screened(Screened {
        effect_id: 77,
        withdrawal: WithdrawalId(123_456),
        verdict: AmlVerdict::Accept,
        case_ref: 1,
    });
    let (op, body) = cmd.encode();
    let req = post_body(json!({ "op": op, "body_hex": hex_of(&body) }));
    let (status, first) = node.as_ops("POST", "/v1/operator/withdrawal/results", &req).await;
    assert_eq!(status, 202, "{first}");
    let (status, again) = node.as_ops("POST", "/v1/operator/withdrawal/results", &req).await;
    assert_eq!((status, &again["seq"]), (202, &first["seq"]), "{again}");
    assert_eq!(first["bmi"], "WR77");

    // A request the plugin refuses (more than the account holds): a refusal, for operators.
    let mut big = create("W-BIG", 1);
    big["amount_minor"] = json!(10_000_000);
    let (status, body) = node.as_a("POST", "/v1/withdrawals", &post_body(big)).await;
    assert_eq!(status, 202, "{body}");
    let id = body["seq"].as_u64().expect("seq");
    let refused =
        poll(&node, true, &format!("/v1/operator/withdrawals/{id}"), |b| b["status"] == "REFUSED").await;
    assert_eq!(refused["refuse_code"], "ledger_refused", "{refused}");
    let (status, body) = node.as_a("GET", &format!("/v1/withdrawals/{id}"), b"").await;
    assert_eq!((status, body["code"].as_str()), (404, Some("unknown_withdrawal")), "{body}");
    node.finish().await;
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Who (`a` or `ops`), method, path, body, the status and the error code answered.
type Row = (&'static str, &'static str, String, Vec<u8>, u16, &'static str);

/// One row per bad input: who sends what, the status and error code answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_input_row_is_a_4xx_with_its_code() {
    let node = node("withdrawal-bad").await;
    let with = |f: &dyn Fn(&mut Value)| {
        let mut v = create("W-BAD", 1);
        f(&mut v);
        post_body(v)
    };
    let long = "x".repeat(129);
    let rows: Vec<Row> = vec![
        ("a", "POST", "/v1/withdrawals".into(), post_body(create("W-3", 3)), 403, "account_not_owned"),
        ("a", "POST", "/v1/withdrawals".into(), with(&|v| v["extra"] = json!(1)), 400, "unknown_field"),
        ("a", "POST", "/v1/withdrawals".into(), with(&|v| v["bmi"] = json!("")), 400, "invalid_bmi"),
        ("a", "POST", "/v1/withdrawals".into(), b"{".to_vec(), 400, "malformed_json"),
        (
            "a",
            "POST",
            "/v1/withdrawals".into(),
            with(&|v| v["destination_type"] = json!("moon")),
            400,
            "invalid_field",
        ),
        (
            "a",
            "POST",
            "/v1/withdrawals".into(),
            with(&|v| v["kind"] = json!("teleport")),
            400,
            "invalid_field",
        ),
        ("a", "POST", "/v1/withdrawals".into(), with(&|v| v["kind"] = json!("raw")), 400, "invalid_field"),
        (
            "a",
            "POST",
            "/v1/withdrawals".into(),
            with(&|v| v["digest"] = json!("00".repeat(32))),
            400,
            "invalid_field",
        ),
        (
            "a",
            "POST",
            "/v1/withdrawals".into(),
            with(&|v| {
                v["kind"] = json!("raw");
                v["digest"] = json!("zz")
            }),
            400,
            "invalid_field",
        ),
        (
            "a",
            "POST",
            "/v1/withdrawals".into(),
            with(&|v| v["destination"] = json!(long)),
            400,
            "invalid_field",
        ),
        (
            "a",
            "POST",
            "/v1/withdrawals".into(),
            with(&|v| v["amount_minor"] = json!(-1)),
            400,
            "invalid_field",
        ),
        ("a", "GET", "/v1/withdrawals/abc".into(), Vec::new(), 400, "invalid_id"),
        ("a", "GET", "/v1/withdrawals/999999".into(), Vec::new(), 404, "unknown_withdrawal"),
        (
            "a",
            "POST",
            "/v1/withdrawals/999999/cancel".into(),
            post_body(json!({ "bmi": "WC-9" })),
            404,
            "unknown_withdrawal",
        ),
        ("a", "POST", "/v1/withdrawals/1/cancel".into(), post_body(json!({})), 400, "missing_field"),
        ("a", "GET", "/v1/operator/withdrawals?status=QUEUED".into(), Vec::new(), 401, "unknown_key"),
        (
            "ops",
            "POST",
            "/v1/operator/withdrawals/1/operations".into(),
            post_body(json!({ "bmi": "WOP-9", "operation": "fly" })),
            400,
            "unknown_operation",
        ),
        (
            "ops",
            "POST",
            "/v1/operator/withdrawals/x/operations".into(),
            post_body(json!({ "bmi": "WOP-9", "operation": "retry" })),
            400,
            "invalid_id",
        ),
        ("ops", "GET", "/v1/operator/withdrawals".into(), Vec::new(), 400, "invalid_query"),
        ("ops", "GET", "/v1/operator/withdrawals?status=DONE".into(), Vec::new(), 400, "invalid_field"),
        (
            "ops",
            "GET",
            "/v1/operator/withdrawals?status=QUEUED&limit=0".into(),
            Vec::new(),
            400,
            "invalid_field",
        ),
        (
            "ops",
            "GET",
            "/v1/operator/withdrawals?status=QUEUED&color=red".into(),
            Vec::new(),
            400,
            "invalid_query",
        ),
        (
            "ops",
            "GET",
            "/v1/operator/withdrawals?status=QUEUED&after=x".into(),
            Vec::new(),
            400,
            "invalid_query",
        ),
        (
            "ops",
            "POST",
            "/v1/operator/withdrawal/results".into(),
            post_body(json!({ "op": 16, "body_hex": "zz" })),
            400,
            "invalid_field",
        ),
        (
            "ops",
            "POST",
            "/v1/operator/withdrawal/results".into(),
            post_body(json!({ "op": 16, "body_hex": "00" })),
            400,
            "invalid_field",
        ),
        (
            "ops",
            "POST",
            "/v1/operator/withdrawal/results".into(),
            post_body(json!({ "op": 999, "body_hex": "" })),
            400,
            "invalid_field",
        ),
        ("ops", "GET", "/v1/withdrawals/1".into(), Vec::new(), 401, "unknown_key"),
    ];
    let create_cmd = WithdrawalCommand::Create(rtgs_withdrawal::command::CreateWithdrawal {
        account: LedgerAccount(1),
        asset: AssetId(ASSET),
        amount_minor: 1,
        destination_type: rtgs_withdrawal::command::DestinationType::Whitelisted,
        destination: None,
        memo: None,
        kind: rtgs_withdrawal::command::RequestKind::Standard,
        aml: false,
        notes: None,
        actor: rtgs_withdrawal::operation::Actor {
            kind: rtgs_withdrawal::operation::ActorKind::Operator,
            id: rtgs_withdrawal::types::ActorId(1),
        },
    });
    let (op, body) = create_cmd.encode();
    let not_a_result = post_body(json!({ "op": op, "body_hex": hex_of(&body) }));
    let mut rows = rows;
    let chain = |f: &dyn Fn(&mut Value)| {
        let mut v = json!({ "bmi": "WS-BAD", "chain": 9, "family": "evm", "fee_initial": 1, "node": "n" });
        f(&mut v);
        post_body(v)
    };
    let chains = "/v1/operator/withdrawal/chains".to_string();
    rows.push(("ops", "POST", chains.clone(), chain(&|v| v["family"] = json!("moon")), 400, "invalid_field"));
    rows.push((
        "ops",
        "POST",
        chains.clone(),
        chain(&|v| v["confirmations"] = json!(0)),
        400,
        "invalid_field",
    ));
    rows.push((
        "ops",
        "POST",
        chains.clone(),
        chain(&|v| v["validity_window_us"] = json!(5)),
        400,
        "invalid_field",
    ));
    rows.push(("ops", "POST", chains, chain(&|v| v["node"] = json!("n".repeat(65))), 400, "invalid_field"));
    let asset = json!({ "bmi": "WS-A", "asset": 7, "chain": 1, "token": 1, "currency": "XXQ", "scale_exp": 4, "settlement_account": 2 });
    rows.push((
        "ops",
        "POST",
        "/v1/operator/withdrawal/assets".into(),
        post_body(asset),
        400,
        "unknown_currency",
    ));
    let vault = json!({ "bmi": "WS-V2", "vault": 1, "chain": 1, "address": 1 });
    rows.push((
        "ops",
        "POST",
        "/v1/operator/withdrawal/vaults".into(),
        post_body(vault),
        400,
        "missing_field",
    ));
    let enabled = post_body(json!({ "bmi": "WS-E", "enabled": true }));
    rows.push(("ops", "POST", "/v1/operator/withdrawal/vaults/x/enabled".into(), enabled, 400, "invalid_id"));
    let setting = |name: &str, value: u64| post_body(json!({ "bmi": "WS-S2", "name": name, "value": value }));
    rows.push((
        "ops",
        "POST",
        "/v1/operator/withdrawal/settings".into(),
        setting("speed", 1),
        400,
        "unknown_setting",
    ));
    rows.push((
        "ops",
        "POST",
        "/v1/operator/withdrawal/settings".into(),
        setting("stale_tx.threshold_seconds", 0),
        400,
        "setting_out_of_range",
    ));
    rows.push((
        "a",
        "POST",
        "/v1/operator/withdrawal/settings".into(),
        setting("stale_tx.threshold_seconds", 5),
        401,
        "unknown_key",
    ));
    rows.push(("ops", "POST", "/v1/operator/withdrawal/results".into(), not_a_result, 400, "invalid_field"));
    for (who, method, path, body, status, code) in rows {
        let (got, answer) = match who {
            "a" => node.as_a(method, &path, &body).await,
            _ => node.as_ops(method, &path, &body).await,
        };
        assert_eq!((got, answer["code"].as_str()), (status, Some(code)), "{who} {method} {path}: {answer}");
    }
    node.finish().await;
}

/// Operators set up over HTTP: a chain with its family's defaults, a vault, a timer; a vault out
/// of the rotation holds a withdrawal QUEUED until it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_register_chains_vaults_and_timers() {
    let node = node("withdrawal-setup").await;
    let posts = [
        (
            "/v1/operator/withdrawal/chains",
            json!({ "bmi": "WS-C", "chain": 9, "family": "tezos", "fee_initial": 1000, "node": "tz-node" }),
        ),
        (
            "/v1/operator/withdrawal/vaults",
            json!({ "bmi": "WS-V", "vault": 9001, "chain": 9, "address": 77, "next_slot": 0 }),
        ),
        (
            "/v1/operator/withdrawal/settings",
            json!({ "bmi": "WS-S", "name": "stale_tx.threshold_seconds", "value": 5 }),
        ),
    ];
    for (path, body) in posts {
        let (status, answer) = node.as_ops("POST", path, &post_body(body)).await;
        assert_eq!(status, 202, "{path}: {answer}");
    }
    // Chain 1 (EVM) has vaults 1000 and 1001: both out, a request waits QUEUED.
    for v in [1000, 1001] {
        let off = post_body(json!({ "bmi": format!("WS-OFF-{v}"), "enabled": false }));
        let (status, body) =
            node.as_ops("POST", &format!("/v1/operator/withdrawal/vaults/{v}/enabled"), &off).await;
        assert_eq!(status, 202, "{body}");
    }
    let (status, body) = node.as_a("POST", "/v1/withdrawals", &post_body(create("W-Q", 1))).await;
    assert_eq!(status, 202, "{body}");
    let path = format!("/v1/withdrawals/{}", body["seq"].as_u64().expect("seq"));
    poll(&node, false, &path, |b| b["status"] == "QUEUED").await;
    let on = post_body(json!({ "bmi": "WS-ON", "enabled": true }));
    let (status, body) = node.as_ops("POST", "/v1/operator/withdrawal/vaults/1001/enabled", &on).await;
    assert_eq!(status, 202, "{body}");
    let w = poll(&node, false, &path, |b| b["status"] == "COMPLETED").await;
    assert_eq!(w["vault"], 1001, "{w}");
    node.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_without_the_plugin_answers_withdrawal_disabled() {
    let node = start(&fresh_dir("withdrawal-off"), true).await;
    let (status, body) = node.as_a("POST", "/v1/withdrawals", &post_body(create("W-1", 1))).await;
    assert_eq!((status, body["code"].as_str()), (404, Some("withdrawal_disabled")), "{body}");
    let (status, body) = node.as_ops("GET", "/v1/operator/withdrawals?status=QUEUED", b"").await;
    assert_eq!((status, body["code"].as_str()), (404, Some("withdrawal_disabled")), "{body}");
    node.finish().await;
}

/// A node that lags and does not know it (`common::Edge::lag`) never calls a withdrawal made
/// through another center unknown: the read waits until the node holds everything sequenced
/// before it, or says "try again" (503 `read_model_behind`) — never 404 for what exists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_node_never_calls_a_withdrawal_made_elsewhere_unknown() {
    let gate = Arc::new(AtomicU64::new(u64::MAX));
    let node = node_on("withdrawal-lag", Edge { lag: Some(Arc::clone(&gate)), ..Edge::default() }).await;
    let made_elsewhere = |bmi: &str| {
        let create = CreateWithdrawal {
            account: LedgerAccount(1),
            asset: AssetId(ASSET),
            amount_minor: 500,
            destination_type: DestinationType::Whitelisted,
            destination: Some(Text::new("dest-evm-1", 64).expect("text")),
            memo: None,
            kind: RequestKind::Standard,
            aml: false,
            notes: None,
            actor: Actor { kind: ActorKind::Participant, id: ActorId(1) },
        };
        let command = WithdrawalCommand::Create(create).to_plugin_command().expect("a command");
        let bmi = Bmi::new(bmi.as_bytes()).expect("bmi");
        node.submit_through(CenterId(2), vec![(bmi, Payload::Plugin(command))]);
        bmi
    };
    // Stuck behind: "try again", not "unknown".
    gate.store(node.seq_final(), Ordering::Release);
    let id = node.final_elsewhere(made_elsewhere("ELSEWHERE-W-1")).await;
    let (status, body) = node.as_ops("GET", &format!("/v1/operator/withdrawals/{id}"), b"").await;
    assert_eq!((status, body["code"].as_str()), (503, Some("read_model_behind")), "{body}");
    // Catching up a moment later: the withdrawal, to its owner too.
    let release = Arc::clone(&gate);
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        release.store(u64::MAX, Ordering::Release);
    });
    let (status, body) = node.as_a("GET", &format!("/v1/withdrawals/{id}"), b"").await;
    assert_eq!((status, body["withdrawal"].as_u64()), (200, Some(id)), "{body}");
    // Caught up, one that does not exist is unknown.
    let (status, body) =
        node.as_ops("GET", &format!("/v1/operator/withdrawals/{}", id + 1_000_000), b"").await;
    assert_eq!((status, body["code"].as_str()), (404, Some("unknown_withdrawal")), "{body}");
    let _ = node.finish().await;
}
