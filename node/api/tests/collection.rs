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
