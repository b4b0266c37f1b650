//! Matching over HTTP, on the embedded engine with the matching plugin in every center and an
//! outside world that never answers (no sellers, an LP that stays silent): an order's window
//! closes unmatched, the widget sees AWAITING_USER_DECISION, the user retries and then closes;
//! the operator sets the partner's windows, reads the session, escalations and dead letters —
//! and every endpoint's bad inputs are refused with their codes.

mod common;

use common::{fresh_dir, start, start_matching};
use rtgs_core::entry::{AccountId, Bmi, Currency};
use rtgs_matching::command::{MatchingCommand, SubmitOrder};
use rtgs_matching::driver::Silent;
use rtgs_matching::types::{Account, Ccy, CustomerRef, OrderId, PartnerId};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

fn post_body(v: Value) -> Vec<u8> {
    v.to_string().into_bytes()
}

/// GETs `path` as participant A until `done` holds for a 200 answer (at most 60 s).
async fn poll_a(node: &common::Node, path: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let (status, body) = node.as_a("GET", path, b"").await;
        if status == 200 && done(&body) {
            return body;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "{what}: still {status} {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Order 1 of partner 1, paid to account 2 (bank A's).
fn submit_order(node: &common::Node) {
    let cmd = MatchingCommand::SubmitOrder(SubmitOrder {
        order: OrderId(1),
        partner: PartnerId(1),
        customer: CustomerRef([7; 16]),
        currency: Ccy(Currency::new(b"EUR").expect("EUR")),
        amount_minor: 10_000,
        credit_account: Account(AccountId(2)),
        expires_at_us: node.now_us() + 600_000_000,
    });
    let pc = cmd.to_plugin_command().expect("encodes");
    node.submit_plugin(vec![(Bmi::new(b"ORD-1").expect("bmi"), pc)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_closes_unmatched_and_the_user_retries_then_closes() {
    let node = start_matching(&fresh_dir("matching-widget"), Box::new(Silent)).await;
    let settings = json!({ "bmi": "MPS-1", "settings": {
        "use_p2p": true, "p2p_phase_s": 1, "lp_phase_s": 1, "decision_grace_s": 600 } });
    let path = "/v1/operator/matching/partners/1/settings";
    let (status, body) = node.as_ops("POST", path, &post_body(settings)).await;
    assert_eq!(status, 202, "{body}");
    let (status, body) = node.as_ops("GET", path, b"").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (body["settings"]["own"].as_bool(), body["settings"]["p2p_phase_s"].as_u64()),
        (Some(true), Some(1))
    );

    submit_order(&node);
    let order = "/v1/matching/orders/1";
    let seen = poll_a(&node, order, "awaiting a decision", |b| b["awaiting_decision"] == true).await;
    assert_eq!(seen["session"]["status"], "AWAITING_USER_DECISION", "{seen}");
    assert_eq!(seen["order"]["credit_account"], 2, "{seen}");
    assert!(
        seen.to_string().find("customer").is_none(),
        "no customer reference in the widget's answer: {seen}"
    );
    // Bank B does not own the order's account: to it the order does not exist.
    let (status, answer) = node.as_b("GET", order, b"").await;
    assert_eq!((status, answer["code"].as_str()), (404, Some("unknown_order")), "{answer}");

    let decision = "/v1/matching/orders/1/decision";
    let retry = post_body(json!({ "bmi": "DEC-1", "decision": "retry" }));
    let (status, body) = node.as_a("POST", decision, &retry).await;
    assert_eq!(status, 202, "{body}");
    let again = poll_a(&node, order, "second window closed", |b| {
        b["session"]["windows"] == 2 && b["awaiting_decision"] == true
    })
    .await;
    let session = again["session"]["session"].as_u64().unwrap_or(0);
    let close = post_body(json!({ "bmi": "DEC-2", "decision": "close" }));
    assert_eq!(node.as_a("POST", decision, &close).await.0, 202);
    let closed = poll_a(&node, order, "closed by user", |b| b["session"]["status"] == "CLOSED_BY_USER").await;
    assert_eq!(closed["awaiting_decision"], false, "{closed}");

    // The operators' view: the session (one, two windows), no case, no letter.
    let (status, s) = node.as_ops("GET", &format!("/v1/operator/matching/sessions/{session}"), b"").await;
    assert_eq!(status, 200, "{s}");
    assert_eq!((s["session"]["windows"].as_u64(), s["session"]["order"].as_u64()), (Some(2), Some(1)), "{s}");
    assert_eq!(s["session"]["bundle"], Value::Null, "{s}");
    let (status, e) = node.as_ops("GET", "/v1/operator/matching/escalations", b"").await;
    assert_eq!((status, e["open"].as_u64()), (200, Some(0)), "{e}");
    let (status, d) = node.as_ops("GET", "/v1/operator/matching/dead-letters", b"").await;
    assert_eq!((status, d["open"].as_u64()), (200, Some(0)), "{d}");

    // As the participant wrote them (a participant's bmi is journaled under its scoped key).
    let bmis: Vec<String> =
        node.finish().await.iter().map(|b| rtgs_api::scope::shown_text(b).to_string()).collect();
    for b in ["MPS-1", "DEC-1", "DEC-2"] {
        assert_eq!(bmis.iter().filter(|x| *x == b).count(), 1, "{b} journaled once: {bmis:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matching_endpoints_refuse_bad_requests_with_their_codes() {
    let node = start_matching(&fresh_dir("matching-errors"), Box::new(Silent)).await;
    submit_order(&node);
    poll_a(&node, "/v1/matching/orders/1", "order journaled", |_| true).await;
    let settings = |lp: u32| {
        json!({ "bmi": "MPS-X", "settings": {
            "use_p2p": true, "p2p_phase_s": 180, "lp_phase_s": lp, "decision_grace_s": 300 } })
    };
    let ops = "ops";
    let a = "a";
    let cases: Vec<(&str, &str, &str, Value, u16, &str)> = vec![
        (a, "GET", "/v1/matching/orders/x", Value::Null, 400, "invalid_id"),
        (a, "GET", "/v1/matching/orders/404", Value::Null, 404, "unknown_order"),
        (
            a,
            "POST",
            "/v1/matching/orders/1/decision",
            json!({ "bmi": "DEC-X", "decision": "later" }),
            400,
            "invalid_decision",
        ),
        (
            a,
            "POST",
            "/v1/matching/orders/1/decision",
            json!({ "bmi": "DEC-X", "decision": "retry", "why": 1 }),
            400,
            "unknown_field",
        ),
        (a, "POST", "/v1/matching/orders/1/decision", json!({ "decision": "retry" }), 400, "missing_field"),
        (
            a,
            "POST",
            "/v1/matching/orders/404/decision",
            json!({ "bmi": "DEC-Y", "decision": "cancel" }),
            404,
            "unknown_order",
        ),
        (ops, "GET", "/v1/operator/matching/partners/p1/settings", Value::Null, 400, "invalid_id"),
        (ops, "POST", "/v1/operator/matching/partners/1/settings", settings(0), 400, "setting_out_of_range"),
        (
            ops,
            "POST",
            "/v1/operator/matching/partners/1/settings",
            settings(3_601),
            400,
            "setting_out_of_range",
        ),
        (ops, "GET", "/v1/operator/matching/sessions/404", Value::Null, 404, "unknown_session"),
        (ops, "GET", "/v1/operator/matching/sessions/-1", Value::Null, 400, "invalid_id"),
        (
            ops,
            "POST",
            "/v1/operator/matching/sessions/1/resolve",
            json!({ "bmi": "RES-X", "resolution": "forget" }),
            400,
            "invalid_resolution",
        ),
        (
            ops,
            "POST",
            "/v1/operator/matching/sessions/404/resolve",
            json!({ "bmi": "RES-Y", "resolution": "release" }),
            404,
            "unknown_session",
        ),
        // A participant's key is unknown to operator endpoints.
        (a, "GET", "/v1/operator/matching/escalations", Value::Null, 401, "unknown_key"),
        (a, "GET", "/v1/operator/matching/dead-letters", Value::Null, 401, "unknown_key"),
    ];
    for (who, method, path, body, want, code) in cases {
        let bytes = if body.is_null() { Vec::new() } else { post_body(body) };
        let (status, answer) = if who == ops {
            node.as_ops(method, path, &bytes).await
        } else {
            node.as_a(method, path, &bytes).await
        };
        assert_eq!((status, answer["code"].as_str()), (want, Some(code)), "{who} {method} {path}: {answer}");
    }
    let bmis: Vec<String> =
        node.finish().await.iter().map(|b| rtgs_api::scope::shown_text(b).to_string()).collect();
    assert!(
        bmis.iter().all(|b| !b.starts_with("DEC-") && !b.starts_with("MPS-") && !b.starts_with("RES-")),
        "nothing refused was journaled: {bmis:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_matching_its_endpoints_answer_matching_disabled() {
    let node = start(&fresh_dir("matching-off"), false).await;
    let (status, answer) = node.as_a("GET", "/v1/matching/orders/1", b"").await;
    assert_eq!((status, answer["code"].as_str()), (404, Some("matching_disabled")), "{answer}");
    let (status, answer) = node.as_ops("GET", "/v1/operator/matching/escalations", b"").await;
    assert_eq!((status, answer["code"].as_str()), (404, Some("matching_disabled")), "{answer}");
    let close = post_body(json!({ "bmi": "DEC-Z", "decision": "close" }));
    let (status, answer) = node.as_a("POST", "/v1/matching/orders/1/decision", &close).await;
    assert_eq!((status, answer["code"].as_str()), (404, Some("matching_disabled")), "{answer}");
    assert!(node.finish().await.iter().all(|b| b != "DEC-Z"), "nothing journaled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn internal_callbacks_are_journaled_under_the_adapters_bmis() {
    let node = start_matching(&fresh_dir("matching-internal"), Box::new(Silent)).await;
    let webhook = "/internal/matching/lp/trade-completed";
    let body = post_body(json!({ "escrow": 77, "trade": 5 }));
    let (status, answer) = node.send("POST", webhook, &[], &body).await;
    assert_eq!(status, 202, "{answer}");
    // The same webhook again is the same entry (the adapter's result for it would be, too).
    let (status, answer) = node.send("POST", webhook, &[], &body).await;
    assert_eq!(status, 202, "{answer}");
    let paid = "/internal/matching/market/leg-paid";
    let (status, answer) =
        node.send("POST", paid, &[], &post_body(json!({ "session": 9, "bundle": 1, "leg": 0 }))).await;
    assert_eq!(status, 202, "{answer}");
    let bad: [(&str, Value, &str); 3] = [
        (webhook, json!({ "escrow": 1 }), "missing_field"),
        (webhook, json!({ "escrow": 1, "trade": 2, "extra": 3 }), "unknown_field"),
        (paid, json!({ "session": 1, "bundle": 1, "leg": 256 }), "invalid_field"),
    ];
    for (path, body, code) in bad {
        let (status, answer) = node.send("POST", path, &[], &post_body(body)).await;
        assert_eq!((status, answer["code"].as_str()), (400, Some(code)), "{path}: {answer}");
    }
    let bmis = node.finish().await;
    assert_eq!(bmis.iter().filter(|b| *b == "TW77").count(), 1, "{bmis:?}");
    assert_eq!(bmis.iter().filter(|b| *b == "PAID9.1.0").count(), 1, "{bmis:?}");
}

/// Customer PII reaches this center's API and stops there: the order is journaled with an opaque
/// reference; the PII is readable by the submitting participant and operators only, kept in its
/// own file beside the journal, and read back after a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_with_pii_is_journaled_without_it_and_read_back_by_its_owner_only() {
    let node = start_matching(&fresh_dir("matching-pii"), Box::new(Silent)).await;
    let order = |bmi: &str, id: u64, account: u64| {
        json!({
            "bmi": bmi, "order": id, "partner": 1, "currency": "EUR", "amount_minor": "25000",
            "credit_account": account, "expires_in_s": 600,
            "customer": { "name": "Jane Q. Customer", "phone": "+33 6 12 34 56 78", "bank_account": "FR7630006000011234567890189" }
        })
    };
    let (status, answer) = node.as_a("POST", "/v1/matching/orders", &post_body(order("ORD-P1", 41, 2))).await;
    assert_eq!(status, 202, "{answer}");
    let seen = poll_a(&node, "/v1/matching/orders/41", "order journaled", |_| true).await;
    assert_eq!(seen["order"]["amount_minor"], "25000", "{seen}");
    let (status, pii) = node.as_a("GET", "/v1/matching/orders/41/customer", b"").await;
    assert_eq!((status, pii["customer"]["name"].as_str()), (200, Some("Jane Q. Customer")), "{pii}");
    let (status, pii) = node.as_ops("GET", "/v1/operator/matching/orders/41/customer", b"").await;
    assert_eq!((status, pii["customer"]["phone"].as_str()), (200, Some("+33 6 12 34 56 78")), "{pii}");
    let (status, answer) = node.as_b("GET", "/v1/matching/orders/41/customer", b"").await;
    assert_eq!((status, answer["code"].as_str()), (404, Some("unknown_order")), "{answer}");
    let mut bad_amount = order("ORD-P2", 42, 2);
    bad_amount["amount_minor"] = json!("0");
    let mut long_name = order("ORD-P3", 43, 2);
    long_name["customer"]["name"] = json!("x".repeat(129));
    let mut bad_currency = order("ORD-P4", 44, 2);
    bad_currency["currency"] = json!("E1");
    let mut pii_in_the_wrong_place = order("ORD-P6", 46, 2);
    pii_in_the_wrong_place["customer"]["email"] = json!("jane@example.com");
    let cases: [(Value, u16, &str); 5] = [
        (order("ORD-P5", 45, 3), 403, "account_not_owned"),
        (bad_amount, 400, "amount_not_positive"),
        (long_name, 400, "invalid_field"),
        (bad_currency, 400, "unknown_currency"),
        (pii_in_the_wrong_place, 400, "unknown_field"),
    ];
    for (body, want, code) in cases {
        let (status, answer) = node.as_a("POST", "/v1/matching/orders", &post_body(body)).await;
        assert_eq!((status, answer["code"].as_str()), (want, Some(code)), "{answer}");
    }
    let dir = std::env::temp_dir().join(format!("rtgs-api-matching-pii-{}", std::process::id()));
    let bmis = node.stop().await;
    let texts: Vec<&str> = bmis.iter().map(|b| rtgs_api::scope::shown_text(b)).collect();
    assert_eq!(texts.iter().filter(|b| b.starts_with("ORD-P")).collect::<Vec<_>>(), [&"ORD-P1"]);
    // The PII survives a restart: read back from its file, for its owner and operators only.
    let node = common::restart_matching(&dir, Box::new(Silent)).await;
    let (status, pii) = node.as_a("GET", "/v1/matching/orders/41/customer", b"").await;
    assert_eq!(
        (status, pii["customer"]["bank_account"].as_str()),
        (200, Some("FR7630006000011234567890189")),
        "{pii}"
    );
    let (status, pii) = node.as_ops("GET", "/v1/operator/matching/orders/41/customer", b"").await;
    assert_eq!((status, pii["customer"]["name"].as_str()), (200, Some("Jane Q. Customer")), "{pii}");
    let (status, answer) = node.as_b("GET", "/v1/matching/orders/41/customer", b"").await;
    assert_eq!((status, answer["code"].as_str()), (404, Some("unknown_order")), "{answer}");
    node.stop().await;
    let pii_file = dir.join(common::PII_FILE);
    let kept = std::fs::read(&pii_file).unwrap_or_else(|e| panic!("{}: {e}", pii_file.display()));
    assert!(kept.windows(16).any(|w| w == b"Jane Q. Customer"), "the PII file holds the customer");
    // Nothing else the centers wrote (journal, checkpoints) holds the customer's PII.
    let mut files = vec![dir.clone()];
    let mut read = 0;
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).into_iter().flatten().flatten().map(|e| e.path()));
        } else if path == pii_file {
            continue;
        } else if let Ok(bytes) = std::fs::read(&path) {
            read += 1;
            for pii in [&b"Jane Q. Customer"[..], b"FR7630006000011234567890189", b"+33 6 12"] {
                assert!(!bytes.windows(pii.len()).any(|w| w == pii), "{} holds PII", path.display());
            }
        }
    }
    assert!(read > 0, "the data directory was read");
    let _ = std::fs::remove_dir_all(&dir);
}
