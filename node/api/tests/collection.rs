//! Collection over HTTP, on the embedded engine with the collection plugin in every center and
//! the chain simulator behind the owner's adapter: the seed's end-to-end case (deposits 1.0 +
//! 0.5 + 0.3 → one batch of 1.8 → three rows COLLECTED) traced both ways through the operator
//! audit endpoints, and the endpoints' errors.

mod common;

use common::{fresh_dir, start, start_collection, CHAIN_START_US};
use rtgs_collection::chain_sim::ChainConfig;
use rtgs_collection::types::{DepositId, PartnerId, TokenId, WalletId};
use rtgs_collection::ChainSim;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const USDT: u128 = 1_000_000;
const RELAYER: u64 = 500;

/// GETs `path` as the operator until `done` holds for a 200 answer (at most 60 s).
async fn poll(node: &common::Node, path: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let (status, body) = node.as_ops("GET", path, b"").await;
        if status == 200 && done(&body) {
            return body;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "{what}: still {status} {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn post_body(v: Value) -> Vec<u8> {
    v.to_string().into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_case_is_swept_in_one_batch_and_traceable_both_ways() {
    let mut chain = ChainSim::new(ChainConfig::default(), 42, CHAIN_START_US);
    chain.fund_native(RELAYER, 1_000_000_000_000_000_000_000);
    let wallet = WalletId(1);
    for (id, amount) in [(5, USDT), (6, USDT / 2), (7, 3 * USDT / 10)] {
        chain.deposit(DepositId(id), PartnerId(1), wallet, TokenId(1), amount);
    }
    chain.approve(wallet, TokenId(1), u128::MAX);
    let node = start_collection(&fresh_dir("collection-seed"), chain, 1_000).await;

    let relayer = json!({ "bmi": "RLY-500", "chain": 1, "relayer": RELAYER, "next_nonce": 0 });
    let (status, body) = node.as_ops("POST", "/v1/operator/collection/relayers", &post_body(relayer)).await;
    assert_eq!(status, 202, "{body}");

    // The chain confirms the deposits; they reach the journal through the owner's adapter.
    for id in [5, 6, 7] {
        let path = format!("/v1/operator/collection/deposits/{id}");
        let body = poll(&node, &path, "deposit queued", |b| b["deposit"]["status"] == "QUEUED").await;
        assert_eq!(body["batch"], Value::Null, "{body}");
    }
    let run = json!({ "bmi": "RUN-1", "partner": 1 });
    let (status, body) = node.as_ops("POST", "/v1/operator/collection/run", &post_body(run)).await;
    assert_eq!(status, 202, "{body}");

    // Forward: deposit → batch → transaction hash.
    let trace = poll(&node, "/v1/operator/collection/deposits/7", "deposit 7 collected", |b| {
        b["deposit"]["status"] == "COLLECTED" && b["batch"]["status"] == "CONFIRMED"
    })
    .await;
    let batch = &trace["batch"];
    assert_eq!(batch["amount_minor"], "1800000", "collected amount = on-chain balance: {trace}");
    assert!(batch["gas_cost_usd_micros"].as_u64().is_some_and(|g| g > 0), "gas cost recorded: {trace}");
    let hashes = trace["tx_hashes"].as_array().cloned().unwrap_or_default();
    assert_eq!(hashes.len(), 1, "{trace}");
    assert_eq!(trace["tx_hashes"], batch["tx_hashes"]);
    let id = batch["batch"].as_u64().unwrap_or(0);

    // Backward: batch → its three deposits, which add up to the sweep.
    let (status, back) = node.as_ops("GET", &format!("/v1/operator/collection/batches/{id}"), b"").await;
    assert_eq!(status, 200, "{back}");
    let listed: Vec<(u64, String)> = back["deposits"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|d| {
                    (d["deposit"].as_u64().unwrap_or(0), d["amount_minor"].as_str().unwrap_or("").into())
                })
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        listed,
        [(5, "1000000".to_string()), (6, "500000".to_string()), (7, "300000".to_string())],
        "{back}"
    );
    assert_eq!(back["deposits_amount_minor"], "1800000");
    for id in [5, 6] {
        let (_, t) = node.as_ops("GET", &format!("/v1/operator/collection/deposits/{id}"), b"").await;
        assert_eq!(
            (t["deposit"]["status"].as_str(), &t["batch"]["batch"]),
            (Some("COLLECTED"), &json!(id_of(&back)))
        );
    }

    // From the chain's side: the hash names the same batch.
    let hash = hashes[0].as_str().unwrap_or("");
    let (status, by_hash) =
        node.as_ops("GET", &format!("/v1/operator/collection/transactions/{hash}"), b"").await;
    assert_eq!(status, 200, "{by_hash}");
    assert_eq!(by_hash["batch"]["batch"], json!(id));

    let bmis = node.finish().await;
    for b in ["RLY-500", "RUN-1"] {
        assert_eq!(bmis.iter().filter(|x| *x == b).count(), 1, "{b} journaled once: {bmis:?}");
    }
}

fn id_of(batch_deposits: &Value) -> u64 {
    batch_deposits["batch"]["batch"].as_u64().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collection_endpoints_refuse_bad_requests_with_their_codes() {
    let node = start_collection(
        &fresh_dir("collection-errors"),
        ChainSim::new(ChainConfig::default(), 1, CHAIN_START_US),
        1_000,
    )
    .await;
    let cases: [(&str, &str, Value, u16, &str); 7] = [
        ("GET", "/v1/operator/collection/deposits/404", Value::Null, 404, "unknown_deposit"),
        ("GET", "/v1/operator/collection/batches/404", Value::Null, 404, "unknown_batch"),
        ("GET", "/v1/operator/collection/deposits/x1", Value::Null, 400, "invalid_id"),
        ("GET", "/v1/operator/collection/transactions/0x12", Value::Null, 400, "invalid_id"),
        (
            "POST",
            "/v1/operator/collection/settings",
            json!({ "bmi": "S-1", "name": "collection.colour", "value": 1 }),
            400,
            "unknown_setting",
        ),
        (
            "POST",
            "/v1/operator/collection/settings",
            json!({ "bmi": "S-2", "name": "collection.schedule_interval_hours", "value": 0 }),
            400,
            "setting_out_of_range",
        ),
        (
            "POST",
            "/v1/operator/collection/settings",
            json!({ "bmi": "S-3", "name": "stale_tx.threshold_minutes", "value": 30, "partner": 1 }),
            400,
            "setting_out_of_range",
        ),
    ];
    for (method, path, body, want, code) in cases {
        let bytes = if body.is_null() { Vec::new() } else { post_body(body) };
        let (status, answer) = node.as_ops(method, path, &bytes).await;
        assert_eq!((status, answer["code"].as_str()), (want, Some(code)), "{method} {path}: {answer}");
    }
    // A valid setting is journaled; a participant's key is unknown to operator endpoints.
    let ok = json!({ "bmi": "S-4", "name": "collection.min_amount_usd", "value": 2_000_000 });
    assert_eq!(node.as_ops("POST", "/v1/operator/collection/settings", &post_body(ok.clone())).await.0, 202);
    let (status, answer) = node.as_a("POST", "/v1/operator/collection/settings", &post_body(ok)).await;
    assert_eq!((status, answer["code"].as_str()), (401, Some("unknown_key")), "{answer}");
    let bmis = node.finish().await;
    assert_eq!(bmis.iter().filter(|b| b.starts_with("S-")).collect::<Vec<_>>(), ["S-4"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_collection_its_endpoints_answer_collection_disabled() {
    let node = start(&fresh_dir("collection-off"), false).await;
    let (status, answer) = node.as_ops("GET", "/v1/operator/collection/deposits/1", b"").await;
    assert_eq!((status, answer["code"].as_str()), (404, Some("collection_disabled")), "{answer}");
    let run = post_body(json!({ "bmi": "RUN-X" }));
    let (status, answer) = node.as_ops("POST", "/v1/operator/collection/run", &run).await;
    assert_eq!((status, answer["code"].as_str()), (404, Some("collection_disabled")), "{answer}");
    assert!(node.finish().await.iter().all(|b| b != "RUN-X"), "nothing journaled");
}

/// `(status, code)` of an operator request.
async fn refused(node: &common::Node, method: &str, path: &str, body: Value) -> (u16, Option<String>) {
    let bytes = if body.is_null() { Vec::new() } else { post_body(body) };
    let (status, answer) = node.as_ops(method, path, &bytes).await;
    (status, answer["code"].as_str().map(String::from))
}

/// A request, and the status and code it is refused with.
type Case = (&'static str, String, Value, (u16, Option<String>));

fn code(status: u16, code: &str) -> (u16, Option<String>) {
    (status, Some(code.to_string()))
}

/// The operator's reads and actions on a live sweep: QUEUED rows per wallet, a run skipped below
/// the minimum (the skipped groups say why), the settings read back, a sweep, refusals of actions
/// on a CONFIRMED batch, a relayer nonce reset (forward only), and ownership moved by `SetOwner`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_read_and_act_on_collection_through_the_api() {
    let mut chain = ChainSim::new(ChainConfig::default(), 43, CHAIN_START_US);
    chain.fund_native(RELAYER, 1_000_000_000_000_000_000_000);
    let wallet = WalletId(1);
    for (id, amount) in [(5, USDT), (6, USDT / 2), (7, 3 * USDT / 10)] {
        chain.deposit(DepositId(id), PartnerId(1), wallet, TokenId(1), amount);
    }
    chain.approve(wallet, TokenId(1), u128::MAX);
    let node = start_collection(&fresh_dir("collection-ops"), chain, 1_000).await;
    let relayer = json!({ "bmi": "RLY-500", "chain": 1, "relayer": RELAYER, "next_nonce": 0 });
    assert_eq!(node.as_ops("POST", "/v1/operator/collection/relayers", &post_body(relayer)).await.0, 202);

    // QUEUED rows per wallet: all three deposits, in one group; another wallet has none.
    let queued = poll(&node, "/v1/operator/collection/wallets/1/queued", "three rows queued", |b| {
        b["groups"][0]["queued_count"] == 3
    })
    .await;
    assert_eq!(queued["groups"][0]["amount_minor"], "1800000", "{queued}");
    assert_eq!(queued["groups"][0]["deposits"].as_array().map(Vec::len), Some(3), "{queued}");
    let (_, all) = node.as_ops("GET", "/v1/operator/collection/queued", b"").await;
    assert_eq!(all["groups"], queued["groups"], "one wallet holds every QUEUED row");
    let (_, other) = node.as_ops("GET", "/v1/operator/collection/wallets/2/queued", b"").await;
    assert_eq!(other["groups"], json!([]), "{other}");

    // A minimum above the balance: the run skips the group, and says why.
    let high = json!({ "bmi": "S-HIGH", "name": "collection.min_amount_usd", "value": 1_000_000_000u64 });
    assert_eq!(node.as_ops("POST", "/v1/operator/collection/settings", &post_body(high)).await.0, 202);
    let settings = poll(&node, "/v1/operator/collection/settings", "minimum set", |b| {
        b["global"]["collection.min_amount_usd"] == 1_000_000_000u64
    })
    .await;
    assert_eq!(settings["ranges"]["collection.schedule_interval_hours"]["max"], 168, "{settings}");
    let run = json!({ "bmi": "RUN-SKIP", "partner": 1 });
    assert_eq!(node.as_ops("POST", "/v1/operator/collection/run", &post_body(run)).await.0, 202);
    let skipped = poll(&node, "/v1/operator/collection/skipped", "group skipped", |b| {
        b["groups"].as_array().is_some_and(|g| !g.is_empty())
    })
    .await;
    let group = &skipped["groups"][0];
    assert_eq!(
        (group["wallet"].as_u64(), group["reason"].as_str()),
        (Some(1), Some("BelowMinimum")),
        "{skipped}"
    );
    assert_eq!(group["queued_count"], 3, "a skip leaves the rows QUEUED: {skipped}");

    // A partner's override, then the run that sweeps.
    let low = json!({ "bmi": "S-LOW", "name": "collection.min_amount_usd", "value": 1_000, "partner": 1 });
    assert_eq!(node.as_ops("POST", "/v1/operator/collection/settings", &post_body(low)).await.0, 202);
    poll(&node, "/v1/operator/collection/settings", "override set", |b| {
        b["partners"].as_array().is_some_and(|p| {
            p.iter().any(|p| p["partner"] == 1 && p["overrides"]["collection.min_amount_usd"] == 1_000)
        })
    })
    .await;
    let run = json!({ "bmi": "RUN-SWEEP", "partner": 1 });
    assert_eq!(node.as_ops("POST", "/v1/operator/collection/run", &post_body(run)).await.0, 202);
    let trace = poll(&node, "/v1/operator/collection/deposits/7", "collected", |b| {
        b["batch"]["status"] == "CONFIRMED"
    })
    .await;
    let batch = trace["batch"]["batch"].as_u64().unwrap_or(0);
    let (_, stale) = node.as_ops("GET", "/v1/operator/collection/stale", b"").await;
    assert_eq!(stale["batches"], json!([]), "{stale}");
    let (_, queued) = node.as_ops("GET", "/v1/operator/collection/queued", b"").await;
    assert_eq!(queued["groups"], json!([]), "every row COLLECTED: {queued}");

    // Actions on a CONFIRMED batch are refused with their codes; nothing is journaled.
    let fail = format!("/v1/operator/collection/batches/{batch}/fail");
    let bump = format!("/v1/operator/collection/batches/{batch}/bump-gas");
    assert_eq!(refused(&node, "POST", &fail, json!({ "bmi": "F-1" })).await, code(409, "batch_not_stale"));
    let body = json!({ "bmi": "G-1", "gas_price_wei": u64::MAX });
    assert_eq!(refused(&node, "POST", &bump, body).await, code(409, "batch_not_in_flight"));

    // The relayer's nonce: 1 after the sweep; a reset goes forward only.
    let relayers = poll(&node, "/v1/operator/collection/relayers", "nonce used", |b| {
        b["relayers"][0]["next_nonce"] == 1
    })
    .await;
    assert_eq!(relayers["relayers"][0]["available"], true, "{relayers}");
    let reset = format!("/v1/operator/collection/relayers/{RELAYER}/reset-nonce");
    let behind = json!({ "bmi": "N-1", "chain_nonce": 0 });
    assert_eq!(refused(&node, "POST", &reset, behind).await, code(400, "nonce_behind"));
    let ahead = json!({ "bmi": "N-2", "chain_nonce": 4 });
    assert_eq!(node.as_ops("POST", &reset, &post_body(ahead)).await.0, 202);
    poll(&node, "/v1/operator/collection/relayers", "nonce reset", |b| b["relayers"][0]["next_nonce"] == 4)
        .await;

    // Ownership: DC1 at first; moved to DC2 through the journal (term 1).
    let (_, owners) = node.as_ops("GET", "/v1/operator/plugins", b"").await;
    assert_eq!(owners["plugins"], json!([{ "plugin": "collection", "owner": 1, "term": 0 }]), "{owners}");
    let owner = "/v1/operator/plugins/collection/owner";
    assert_eq!(refused(&node, "POST", owner, json!({ "center": 1 })).await, code(409, "already_owner"));
    let (status, moved) = node.as_ops("POST", owner, &post_body(json!({ "center": 2 }))).await;
    assert_eq!((status, &moved["term"]), (202, &json!(1)), "{moved}");
    poll(&node, "/v1/operator/plugins", "owner moved", |b| {
        b["plugins"] == json!([{ "plugin": "collection", "owner": 2, "term": 1 }])
    })
    .await;

    let bmis = node.finish().await;
    for b in ["F-1", "G-1", "N-1"] {
        assert!(!bmis.iter().any(|x| x == b), "{b} refused, never journaled: {bmis:?}");
    }
    for b in ["S-HIGH", "S-LOW", "RUN-SKIP", "RUN-SWEEP", "N-2", "OWNER-1-1"] {
        assert_eq!(bmis.iter().filter(|x| *x == b).count(), 1, "{b} journaled once: {bmis:?}");
    }
}

/// Every bad input of the operator actions, a clear code each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collection_operator_actions_refuse_bad_input_with_their_codes() {
    let node = start_collection(
        &fresh_dir("collection-ops-errors"),
        ChainSim::new(ChainConfig::default(), 2, CHAIN_START_US),
        1_000,
    )
    .await;
    let base = "/v1/operator/collection";
    let cases: Vec<Case> = vec![
        ("POST", format!("{base}/batches/x/fail"), json!({ "bmi": "E-1" }), code(400, "invalid_id")),
        ("POST", format!("{base}/batches/9/fail"), json!({ "bmi": "E-2" }), code(404, "unknown_batch")),
        (
            "POST",
            format!("{base}/batches/9/fail"),
            json!({ "bmi": "E-3", "why": 1 }),
            code(400, "unknown_field"),
        ),
        ("POST", format!("{base}/batches/9/fail"), json!({}), code(400, "missing_field")),
        (
            "POST",
            format!("{base}/batches/9/bump-gas"),
            json!({ "bmi": "E-4", "gas_price_wei": 5 }),
            code(404, "unknown_batch"),
        ),
        (
            "POST",
            format!("{base}/batches/9/bump-gas"),
            json!({ "bmi": "E-5", "gas_price_wei": -5 }),
            code(400, "invalid_field"),
        ),
        (
            "POST",
            format!("{base}/relayers/7/reset-nonce"),
            json!({ "bmi": "E-6", "chain_nonce": 1 }),
            code(404, "unknown_relayer"),
        ),
        (
            "POST",
            format!("{base}/relayers/r/reset-nonce"),
            json!({ "bmi": "E-7", "chain_nonce": 1 }),
            code(400, "invalid_id"),
        ),
        ("GET", format!("{base}/wallets/w/queued"), Value::Null, code(400, "invalid_id")),
        (
            "POST",
            "/v1/operator/plugins/nope/owner".into(),
            json!({ "center": 2 }),
            code(404, "unknown_plugin"),
        ),
        (
            "POST",
            "/v1/operator/plugins/matching/owner".into(),
            json!({ "center": 2 }),
            code(404, "plugin_disabled"),
        ),
        (
            "POST",
            "/v1/operator/plugins/collection/owner".into(),
            json!({ "center": 0 }),
            code(400, "invalid_center"),
        ),
        (
            "POST",
            "/v1/operator/plugins/collection/owner".into(),
            json!({ "center": 300 }),
            code(400, "invalid_center"),
        ),
        (
            "POST",
            "/v1/operator/plugins/collection/owner".into(),
            json!({ "centre": 2 }),
            code(400, "unknown_field"),
        ),
    ];
    for (method, path, body, want) in cases {
        assert_eq!(refused(&node, method, &path, body.clone()).await, want, "{method} {path} {body}");
    }
    // A participant's key is unknown to the operator routes, reads included.
    let (status, answer) = node.as_a("GET", &format!("{base}/stale"), b"").await;
    assert_eq!((status, answer["code"].as_str()), (401, Some("unknown_key")), "{answer}");
    let bmis = node.finish().await;
    assert!(
        bmis.iter().all(|b| !b.starts_with("E-") && !b.starts_with("OWNER-")),
        "nothing journaled: {bmis:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_collection_its_operator_reads_answer_collection_disabled() {
    let node = start(&fresh_dir("collection-ops-off"), false).await;
    for path in ["stale", "queued", "skipped", "settings", "relayers"] {
        let (status, answer) = node.as_ops("GET", &format!("/v1/operator/collection/{path}"), b"").await;
        assert_eq!((status, answer["code"].as_str()), (404, Some("collection_disabled")), "{path}: {answer}");
    }
    let (status, answer) = node.as_ops("GET", "/v1/operator/plugins", b"").await;
    assert_eq!((status, &answer["plugins"]), (200, &json!([])), "{answer}");
    node.finish().await;
}
