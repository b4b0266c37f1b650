//! Participant endpoints over real HTTP: settlement, ISO reject reasons, idempotency (also across
//! a restart), one test per bad-input row, signatures and read permissions. Each test ends by
//! reading the journal back to check what was (and was not) journaled.

mod common;

use common::{fresh_dir, journaled, start, start_lagging, transfer, SECRET_A, SECRET_B, SETUP_BMIS};
use rtgs_api::auth::sign;
use rtgs_core::entry::{AccountId, Bmi, CenterId, Currency, Payload};
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transfer_settles_and_moves_the_balances() {
    let node = start(&fresh_dir("settle"), true).await;
    let (status, body) = node.as_a("POST", "/v1/transfers", &transfer("T-1", 1, 2, "12.34")).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["status"], "ACSP");
    let seq = body["seq"].as_u64().expect("seq known");

    let (status, body) = node.as_a("GET", "/v1/transfers/T-1", b"").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!((body["status"].as_str(), body["seq"].as_u64()), (Some("ACCC"), Some(seq)));

    let debtor = node.account_at(1, seq).await;
    assert_eq!(
        (debtor["balance"].as_str(), debtor["balance_minor"].as_u64()),
        (Some("987.66"), Some(98_766))
    );
    assert_eq!(debtor["currency"], "EUR");
    let creditor = node.account_at(2, seq).await;
    assert_eq!(creditor["balance"], "12.34");

    let bmis = node.finish().await;
    assert_eq!(journaled(&bmis), ["T-1"]);
    assert!(SETUP_BMIS.iter().all(|s| bmis.iter().filter(|b| b == s).count() == 1), "{bmis:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_transfer_reports_its_iso_reason() {
    let node = start(&fresh_dir("reject"), true).await;
    let cases = [("R-FUNDS", 3, 1, "50.01", "AM04"), ("R-SAME", 1, 1, "1.00", "AG01")];
    for (bmi, debtor, creditor, amount, reason) in cases {
        let (key, secret) = if debtor == 3 { ("bank-b", SECRET_B) } else { ("bank-a", SECRET_A) };
        let body = transfer(bmi, debtor, creditor, amount);
        let (status, answer) = node.signed_at(key, secret, "POST", "/v1/transfers", &body, 0).await;
        assert_eq!(status, 202, "{bmi}: {answer}");
        let path = format!("/v1/transfers/{bmi}");
        let (status, body) = node.signed_at(key, secret, "GET", &path, b"", 0).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!((body["status"].as_str(), body["reason"].as_str()), (Some("RJCT"), Some(reason)), "{bmi}");
    }
    let bmis = node.finish().await;
    assert_eq!(journaled(&bmis), ["R-FUNDS", "R-SAME"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_gets_the_original_answer_and_a_changed_request_gets_422() {
    let node = start(&fresh_dir("idem"), true).await;
    let first = node.as_a("POST", "/v1/transfers", &transfer("I-1", 1, 2, "5.00")).await;
    assert_eq!(first.0, 202, "{}", first.1);
    assert!(first.1["seq"].as_u64().is_some());
    // Same content, different JSON layout: the same request.
    let spaced = br#"{ "currency": "EUR", "amount": "5.0", "creditor": 2, "debtor": 1, "bmi": "I-1" }"#;
    for body in [transfer("I-1", 1, 2, "5.00"), spaced.to_vec()] {
        assert_eq!(node.as_a("POST", "/v1/transfers", &body).await, first);
    }
    let (status, body) = node.as_a("POST", "/v1/transfers", &transfer("I-1", 1, 2, "5.01")).await;
    assert_eq!((status, body["code"].as_str()), (422, Some("bmi_conflict")), "{body}");
    // (Another participant's "I-1" is its own payment: tests/idempotency.rs.)

    let settled = node.account_at(2, first.1["seq"].as_u64().unwrap_or(0)).await;
    assert_eq!(settled["balance"], "5.00");
    let bmis = node.finish().await;
    assert_eq!(journaled(&bmis), ["I-1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restart_the_engine_still_answers_retries_and_conflicts() {
    let dir = fresh_dir("restart");
    let node = start(&dir, true).await;
    let first = node.as_a("POST", "/v1/transfers", &transfer("X-1", 1, 2, "7.00")).await;
    assert_eq!(first.0, 202, "{}", first.1);
    node.stop().await;

    // The API's own memory is gone; the sequencer's dedupe window is rebuilt from the journal.
    // A status query before any retry: the engine's index of every bmi ever sequenced answers
    // it (the seq; the outcome from the read model); another participant's probe is 404 as
    // for one nobody used.
    let node = start(&dir, false).await;
    let (status, body) = node.as_a("GET", "/v1/transfers/X-1?wait_s=10", b"").await;
    assert_eq!(
        (status, body["status"].as_str(), body["seq"].as_u64()),
        (200, Some("ACCC"), first.1["seq"].as_u64()),
        "{body}"
    );
    let (status, body) = node.as_b("GET", "/v1/transfers/X-1", b"").await;
    assert_eq!((status, body["code"].as_str()), (404, Some("unknown_transfer")), "{body}");
    let again = node.as_a("POST", "/v1/transfers", &transfer("X-1", 1, 2, "7.00")).await;
    assert_eq!(again, first);
    // And its status is the original outcome at once (from the read model, not a new notice).
    let (status, body) = node.as_a("GET", "/v1/transfers/X-1", b"").await;
    assert_eq!(
        (status, body["status"].as_str(), body["seq"].as_u64()),
        (200, Some("ACCC"), first.1["seq"].as_u64())
    );
    let (status, body) = node.as_a("POST", "/v1/transfers", &transfer("X-1", 1, 2, "7.01")).await;
    assert_eq!((status, body["code"].as_str()), (422, Some("bmi_conflict")), "{body}");
    let balance = node.account_at(2, first.1["seq"].as_u64().unwrap_or(0)).await;
    assert_eq!(balance["balance"], "7.00");
    let bmis = node.finish().await;
    assert_eq!(journaled(&bmis), ["X-1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_4xx_with_a_code_and_nothing_is_journaled() {
    let node = start(&fresh_dir("bad"), true).await;
    let eur = |bmi: &str, amount: &str| transfer(bmi, 1, 2, amount);
    let jpy = json!({ "bmi": "B-JPY", "debtor": 1, "creditor": 4, "amount": "1.5", "currency": "JPY" });
    let rows: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        ("malformed json", b"{\"bmi\": \"B-1\", ".to_vec(), 400, "malformed_json"),
        ("not json", b"bmi=B-2".to_vec(), 400, "malformed_json"),
        ("empty body", b"".to_vec(), 400, "malformed_json"),
        (
            "unknown field",
            br#"{"bmi":"B-3","debtor":1,"creditor":2,"amount":"1.00","currency":"EUR","memo":"x"}"#.to_vec(),
            400,
            "unknown_field",
        ),
        (
            "missing field",
            br#"{"bmi":"B-4","debtor":1,"creditor":2,"currency":"EUR"}"#.to_vec(),
            400,
            "missing_field",
        ),
        (
            "amount as a number",
            br#"{"bmi":"B-5","debtor":1,"creditor":2,"amount":1.5,"currency":"EUR"}"#.to_vec(),
            400,
            "invalid_field",
        ),
        (
            "negative account id",
            br#"{"bmi":"B-6","debtor":-1,"creditor":2,"amount":"1.00","currency":"EUR"}"#.to_vec(),
            400,
            "invalid_field",
        ),
        (
            "lowercase currency",
            br#"{"bmi":"B-7","debtor":1,"creditor":2,"amount":"1.00","currency":"eur"}"#.to_vec(),
            400,
            "unknown_currency",
        ),
        (
            "unknown currency",
            br#"{"bmi":"B-8","debtor":1,"creditor":2,"amount":"1.00","currency":"XXX"}"#.to_vec(),
            400,
            "unknown_currency",
        ),
        ("zero amount", eur("B-9", "0.00"), 400, "amount_not_positive"),
        ("negative amount", eur("B-10", "-1.00"), 400, "amount_not_positive"),
        ("too many decimals", eur("B-11", "1.001"), 400, "too_many_decimals"),
        ("decimals on a zero-exponent currency", jpy.to_string().into_bytes(), 400, "too_many_decimals"),
        ("overflow", eur("B-12", "92233720368547758.08"), 400, "amount_too_large"),
        ("far overflow", eur("B-13", "999999999999999999999999999"), 400, "amount_too_large"),
        ("exponent notation", eur("B-14", "1e3"), 400, "invalid_amount"),
        ("bmi with a space", eur("B 15", "1.00"), 400, "invalid_bmi"),
        ("bmi too long", eur(&"B".repeat(36), "1.00"), 400, "invalid_bmi"),
        ("debtor of another participant", transfer("B-16", 3, 1, "1.00"), 403, "debtor_not_owned"),
        ("unknown creditor", transfer("B-17", 1, 77, "1.00"), 422, "unknown_account"),
        ("own debtor never opened", transfer("B-18", 9, 1, "1.00"), 422, "unknown_account"),
    ];
    for (name, body, want_status, want_code) in rows {
        let (status, answer) = node.as_a("POST", "/v1/transfers", &body).await;
        assert_eq!((status, answer["code"].as_str()), (want_status, Some(want_code)), "{name}: {answer}");
        assert!(answer["message"].as_str().is_some_and(|m| !m.is_empty()), "{name}");
    }
    let bmis = node.finish().await;
    assert_eq!(journaled(&bmis), Vec::<&str>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_body_is_refused_before_it_is_read_whole() {
    let node = start(&fresh_dir("oversized"), true).await;
    let padding = "x".repeat(rtgs_api::limits::BODY_BYTES_MAX);
    let body = json!({ "bmi": "O-1", "debtor": 1, "creditor": 2, "amount": "1.00", "currency": "EUR", "pad": padding });
    let (status, answer) = node.as_a("POST", "/v1/transfers", body.to_string().as_bytes()).await;
    assert_eq!((status, answer["code"].as_str()), (413, Some("body_too_large")), "{answer}");
    let bmis = node.finish().await;
    assert_eq!(journaled(&bmis), Vec::<&str>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsigned_stale_or_forged_requests_get_401_and_nothing_is_journaled() {
    let node = start(&fresh_dir("auth"), true).await;
    let body = transfer("A-1", 1, 2, "1.00");
    let path = "/v1/transfers";
    let (status, answer) = node.send("POST", path, &[], &body).await;
    assert_eq!((status, answer["code"].as_str()), (401, Some("missing_credentials")), "{answer}");
    let cases = [
        ("stale", node.signed_at("bank-a", SECRET_A, "POST", path, &body, -301).await, "stale_timestamp"),
        ("future", node.signed_at("bank-a", SECRET_A, "POST", path, &body, 301).await, "stale_timestamp"),
        ("wrong secret", node.signed_at("bank-a", SECRET_B, "POST", path, &body, 0).await, "bad_signature"),
        ("unknown key", node.signed_at("bank-z", SECRET_A, "POST", path, &body, 0).await, "unknown_key"),
    ];
    for (name, (status, answer), code) in cases {
        assert_eq!((status, answer["code"].as_str()), (401, Some(code)), "{name}: {answer}");
    }
    // A valid signature of another body, or of another path, does not carry over.
    let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs().to_string();
    let other_body = sign(SECRET_A.as_bytes(), "POST", path, &now, &transfer("A-1", 1, 2, "0.01"));
    let other_path = sign(SECRET_A.as_bytes(), "POST", "/v1/transfers?x=1", &now, &body);
    for (name, signature) in
        [("other body", other_body), ("other path", other_path), ("not hex", "zz".into())]
    {
        let headers = [
            ("x-rtgs-key".to_string(), "bank-a".to_string()),
            ("x-rtgs-timestamp".to_string(), now.clone()),
            ("x-rtgs-signature".to_string(), signature),
        ];
        let (status, answer) = node.send("POST", path, &headers, &body).await;
        assert_eq!((status, answer["code"].as_str()), (401, Some("bad_signature")), "{name}: {answer}");
    }
    let (status, answer) = node.signed_at("bank-a", SECRET_A, "GET", "/v1/accounts/1", b"", -400).await;
    assert_eq!((status, answer["code"].as_str()), (401, Some("stale_timestamp")), "{answer}");
    let bmis = node.finish().await;
    assert_eq!(journaled(&bmis), Vec::<&str>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_captured_write_cannot_be_replayed_but_a_re_signed_retry_is_answered() {
    let node = start(&fresh_dir("replay"), true).await;
    let body = transfer("RP-1", 1, 2, "1.00");
    let path = "/v1/transfers";
    let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs();
    let ts = format!("{now}.capture1");
    let headers = [
        ("x-rtgs-key".to_string(), "bank-a".to_string()),
        ("x-rtgs-timestamp".to_string(), ts.clone()),
        ("x-rtgs-signature".to_string(), sign(SECRET_A.as_bytes(), "POST", path, &ts, &body)),
    ];
    let (status, first) = node.send("POST", path, &headers, &body).await;
    assert_eq!(status, 202, "{first}");
    let (status, answer) = node.send("POST", path, &headers, &body).await;
    assert_eq!((status, answer["code"].as_str()), (401, Some("replayed_request")), "{answer}");
    // Signed again (new nonce): the original answer, through idempotency.
    assert_eq!(node.as_a("POST", path, &body).await, (202, first));
    // Reads are not deduplicated.
    let ts = format!("{now}.read1");
    let read = [
        ("x-rtgs-key".to_string(), "bank-a".to_string()),
        ("x-rtgs-timestamp".to_string(), ts.clone()),
        ("x-rtgs-signature".to_string(), sign(SECRET_A.as_bytes(), "GET", "/v1/transfers/RP-1", &ts, b"")),
    ];
    for _ in 0..2 {
        assert_eq!(node.send("GET", "/v1/transfers/RP-1", &read, b"").await.0, 200);
    }
    let bmis = node.finish().await;
    assert_eq!(journaled(&bmis), ["RP-1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_participant_reads_only_its_own_data() {
    let node = start(&fresh_dir("reads"), true).await;
    let (status, answer) = node.as_b("POST", "/v1/transfers", &transfer("D-1", 3, 1, "1.00")).await;
    assert_eq!(status, 202, "{answer}");
    let rows = [
        ("other's account", node.as_a("GET", "/v1/accounts/3", b"").await, 403, "account_not_owned"),
        // Another participant's bmi is not in this one's namespace: unknown, as if never used.
        ("other's transfer", node.as_a("GET", "/v1/transfers/D-1", b"").await, 404, "unknown_transfer"),
        ("unknown transfer", node.as_a("GET", "/v1/transfers/NOPE", b"").await, 404, "unknown_transfer"),
        ("own account never opened", node.as_a("GET", "/v1/accounts/9", b"").await, 404, "unknown_account"),
        (
            "account id not a number",
            node.as_a("GET", "/v1/accounts/abc", b"").await,
            400,
            "invalid_account_id",
        ),
        ("no such endpoint", node.as_a("GET", "/v1/nothing", b"").await, 404, "not_found"),
    ];
    for (name, (status, answer), want_status, want_code) in rows {
        assert_eq!((status, answer["code"].as_str()), (want_status, Some(want_code)), "{name}: {answer}");
    }
    let (status, own) = node.as_b("GET", "/v1/transfers/D-1", b"").await;
    assert_eq!((status, own["status"].as_str()), (200, Some("ACCC")), "{own}");
    let bmis = node.finish().await;
    assert_eq!(journaled(&bmis), ["D-1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_requests_by_route_and_status_and_finality_by_status() {
    let node = start(&fresh_dir("metrics"), true).await;
    assert_eq!(node.as_a("POST", "/v1/transfers", &transfer("M-1", 1, 2, "1.00")).await.0, 202);
    assert_eq!(node.as_a("POST", "/v1/transfers", &transfer("M-2", 1, 2, "5000.00")).await.0, 202);
    assert_eq!(node.as_a("POST", "/v1/transfers", &transfer("M-3", 1, 2, "0")).await.0, 400);
    assert_eq!(node.as_a("POST", "/v1/transfers", &transfer("M-1", 1, 2, "1.00")).await.0, 202);

    // Unsigned: an internal endpoint, answered to loopback callers only. An answer comes before
    // its entry is final everywhere (M-2's rejection may be counted a moment later): read the
    // metrics again until the nine finalities are counted (5 s at most), then check every figure.
    let value_in = |text: &str, name: &str, labels: &[&str]| -> Option<f64> {
        let line = text.lines().find(|l| l.starts_with(name) && labels.iter().all(|x| l.contains(x)))?;
        line.rsplit(' ').next()?.parse().ok()
    };
    let mut text = String::new();
    for _ in 0..100 {
        let (status, t) = node.send_raw("GET", "/metrics", &[], b"").await;
        assert_eq!(status, 200, "{t}");
        text = t;
        let finals = ["ACCC", "RJCT"]
            .iter()
            .filter_map(|s| value_in(&text, "rtgs_finality_total{", &[&format!("status=\"{s}\"")]))
            .sum::<f64>();
        if finals >= 9.0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let value = |name: &str, labels: &[&str]| value_in(&text, name, labels);
    let transfers = "endpoint=\"/v1/transfers\"";
    assert_eq!(value("rtgs_ingress_requests_total{", &[transfers, "status=\"202\""]), Some(3.0), "{text}");
    assert_eq!(value("rtgs_ingress_requests_total{", &[transfers, "status=\"400\""]), Some(1.0), "{text}");
    assert_eq!(value("rtgs_ingress_latency_seconds_count{", &[transfers]), Some(4.0), "{text}");
    assert!(value("rtgs_ingress_latency_seconds_bucket{", &[transfers, "le=\"0.02\""]).is_some(), "{text}");
    // 7 setup entries and M-1 settled, M-2 rejected (AM04); the retry of M-1 was never submitted.
    assert_eq!(value("rtgs_finality_total{", &["status=\"ACCC\""]), Some(8.0), "{text}");
    assert_eq!(value("rtgs_finality_total{", &["status=\"RJCT\""]), Some(1.0), "{text}");
    assert_eq!(value("rtgs_tracked_entries", &[]), Some(9.0), "{text}");

    let bmis = node.finish().await;
    assert_eq!(journaled(&bmis), ["M-1", "M-2"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_copies_of_one_request_are_journaled_once_and_answered_alike() {
    let node = std::sync::Arc::new(start(&fresh_dir("concurrent"), true).await);
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let node = std::sync::Arc::clone(&node);
        tasks.push(tokio::spawn(async move {
            node.as_a("POST", "/v1/transfers", &transfer("C-1", 1, 2, "3.00")).await
        }));
    }
    let mut answers = Vec::new();
    for t in tasks {
        answers.push(t.await.expect("task"));
    }
    assert_eq!(answers[0].0, 202, "{}", answers[0].1);
    assert!(answers[0].1["seq"].as_u64().is_some(), "{}", answers[0].1);
    assert!(answers.iter().all(|a| *a == answers[0]), "{answers:?}");
    let balance = node.account_at(2, answers[0].1["seq"].as_u64().unwrap_or(u64::MAX)).await;
    assert_eq!(balance["balance"], "3.00");
    let node = std::sync::Arc::into_inner(node).expect("every task ended");
    let bmis = node.finish().await;
    assert_eq!(journaled(&bmis), ["C-1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_served_openapi_document_is_the_repos_and_every_path_in_it_is_routed() {
    let node = start(&fresh_dir("openapi"), false).await;
    let (status, served) = node.send_raw("GET", "/v1/openapi.json", &[], b"").await;
    assert_eq!(status, 200);
    let in_repo =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.json")).expect("file");
    assert_eq!(served, in_repo);
    let doc: serde_json::Value = serde_json::from_str(&served).expect("JSON");
    let paths = doc["paths"].as_object().expect("paths");
    assert!(paths.len() >= 9, "{paths:?}");
    for (path, methods) in paths {
        let concrete = path.replace("{bmi}", "X-1").replace("{id}", "1");
        for method in methods.as_object().expect("methods").keys() {
            let signed = doc["paths"][path][method]["security"] != json!([]);
            let (status, body) = node.send(&method.to_uppercase(), &concrete, &[], b"{}").await;
            // An unsigned internal callback answers an empty body with 400 (its fields are missing).
            let want = if signed {
                401
            } else if path.starts_with("/internal/") {
                400
            } else {
                200
            };
            assert_eq!(status, want, "{method} {path}: {body}");
        }
    }
    node.finish().await;
}

fn batch(items: &[(&str, u64, u64, &str)]) -> Vec<u8> {
    let transfers: Vec<serde_json::Value> = items
        .iter()
        .map(|(bmi, d, c, a)| json!({ "bmi": bmi, "debtor": d, "creditor": c, "amount": a, "currency": "EUR" }))
        .collect();
    json!({ "transfers": transfers }).to_string().into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_is_checked_whole_then_answered_one_by_one() {
    let node = start(&fresh_dir("batch"), true).await;
    let path = "/v1/transfers/batch";
    let good = batch(&[("B-1", 1, 2, "1.00"), ("B-2", 1, 3, "2.00"), ("B-3", 2, 1, "0.50")]);
    let (status, first) = node.as_a("POST", path, &good).await;
    assert_eq!((status, first["accepted"].as_u64()), (202, Some(3)), "{first}");
    let seqs: Vec<u64> = first["transfers"]
        .as_array()
        .map(|a| a.iter().filter_map(|t| t["seq"].as_u64()).collect())
        .unwrap_or_default();
    assert_eq!(seqs.len(), 3, "{first}");
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "in order: {first}");
    // The same batch again (signed anew): the same answers, nothing journaled twice.
    assert_eq!(node.as_a("POST", path, &good).await, (202, first.clone()));
    // One conflicting item is answered on its own; the new one goes through.
    let mixed = batch(&[("B-1", 1, 2, "9.99"), ("B-4", 1, 2, "1.00")]);
    let (status, answer) = node.as_a("POST", path, &mixed).await;
    assert_eq!((status, answer["accepted"].as_u64()), (202, Some(1)), "{answer}");
    assert_eq!(answer["transfers"][0]["code"], "bmi_conflict");
    assert_eq!(answer["transfers"][1]["status"], "ACSP");

    let too_many: Vec<(String, u64, u64, &str)> =
        (0..1_001).map(|i| (format!("M-{i}"), 1, 2, "0.01")).collect();
    let too_many: Vec<(&str, u64, u64, &str)> =
        too_many.iter().map(|(b, d, c, a)| (b.as_str(), *d, *c, *a)).collect();
    let refused = [
        ("empty", batch(&[]), 400, "batch_size"),
        ("1001", batch(&too_many), 400, "batch_size"),
        ("zero amount", batch(&[("Z-1", 1, 2, "1.00"), ("Z-2", 1, 2, "0")]), 400, "amount_not_positive"),
        ("not owned", batch(&[("Z-3", 1, 2, "1.00"), ("Z-4", 3, 2, "1.00")]), 403, "debtor_not_owned"),
        ("twice", batch(&[("Z-5", 1, 2, "1.00"), ("Z-5", 1, 2, "1.00")]), 400, "duplicate_bmi"),
        ("unknown field", br#"{"transfers":[],"x":1}"#.to_vec(), 400, "unknown_field"),
    ];
    for (name, body, want, code) in refused {
        let (status, answer) = node.as_a("POST", path, &body).await;
        assert_eq!((status, answer["code"].as_str()), (want, Some(code)), "{name}: {answer}");
        if name == "zero amount" {
            assert!(answer["message"].as_str().is_some_and(|m| m.starts_with("transfers[1]")), "{answer}");
        }
    }
    let bmis = node.finish().await;
    assert_eq!(journaled(&bmis), ["B-1", "B-2", "B-3", "B-4"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_long_poll_answers_once_final_and_checks_its_query() {
    let node = start(&fresh_dir("longpoll"), true).await;
    let (status, body) = node.as_a("POST", "/v1/transfers", &transfer("LP-1", 1, 2, "1.00")).await;
    assert_eq!(status, 202, "{body}");
    let started = std::time::Instant::now();
    let (status, body) = node.as_a("GET", "/v1/transfers/LP-1?wait_s=30", b"").await;
    assert_eq!((status, body["status"].as_str()), (200, Some("ACCC")), "{body}");
    assert!(started.elapsed() < std::time::Duration::from_secs(25), "a final transfer is answered at once");
    for query in ["wait_s=31", "wait_s=x", "colour=blue"] {
        let (status, body) = node.as_a("GET", &format!("/v1/transfers/LP-1?{query}"), b"").await;
        assert_eq!((status, body["code"].as_str()), (400, Some("invalid_query")), "{query}: {body}");
    }
    let _ = node.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_lists_what_moved_the_account_and_pages() {
    let node = start(&fresh_dir("statement"), true).await;
    let mut last = 0;
    for (i, amount) in ["1.00", "2.50", "0.25"].iter().enumerate() {
        let (status, body) =
            node.as_a("POST", "/v1/transfers", &transfer(&format!("ST-{i}"), 1, 2, amount)).await;
        assert_eq!(status, 202, "{body}");
        last = body["seq"].as_u64().unwrap_or(0);
    }
    // A rejected transfer moves nothing and is on no statement.
    assert_eq!(node.as_a("POST", "/v1/transfers", &transfer("ST-X", 2, 1, "999.00")).await.0, 202);
    let (status, st) = node.as_a("GET", "/v1/accounts/2/statement", b"").await;
    assert_eq!(status, 200, "{st}");
    assert!(st["as_of_seq"].as_u64().is_some_and(|s| s >= last), "{st}");
    let lines = st["lines"].as_array().cloned().unwrap_or_default();
    let seen: Vec<(&str, &str, &str)> = lines
        .iter()
        .map(|l| {
            (
                l["type"].as_str().unwrap_or(""),
                l["amount"].as_str().unwrap_or(""),
                l["balance_after"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("OPEN", "0.00", "0.00"),
            ("CREDIT", "1.00", "1.00"),
            ("CREDIT", "2.50", "3.50"),
            ("CREDIT", "0.25", "3.75")
        ]
    );
    assert_eq!((st["balance"].as_str(), lines[1]["counterparty"].as_u64()), (Some("3.75"), Some(1)));
    assert_eq!(st["truncated"], false);
    // Paging: two lines, then from where they stopped.
    let (_, page) = node.as_a("GET", "/v1/accounts/2/statement?limit=2", b"").await;
    assert_eq!(page["lines"].as_array().map(Vec::len), Some(2), "{page}");
    let next = page["next_from_seq"].as_u64().unwrap_or(0);
    let (_, rest) = node.as_a("GET", &format!("/v1/accounts/2/statement?from_seq={next}&limit=2"), b"").await;
    assert_eq!(rest["lines"][0]["bmi"], "ST-1", "{rest}");
    // The last page says so: no next_from_seq (it is there exactly when more lines follow).
    assert_eq!(rest["lines"].as_array().map(Vec::len), Some(2), "{rest}");
    assert_eq!(rest["next_from_seq"], serde_json::Value::Null, "{rest}");
    assert_eq!(st["next_from_seq"], serde_json::Value::Null, "{st}");
    let (_, debtor) = node.as_a("GET", "/v1/accounts/1/statement", b"").await;
    let types: Vec<&str> = debtor["lines"]
        .as_array()
        .map(|a| a.iter().filter_map(|l| l["type"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(types, ["OPEN", "FUND", "DEBIT", "DEBIT", "DEBIT"]);
    // Another participant's account, bad queries.
    let (status, body) = node.as_a("GET", "/v1/accounts/3/statement", b"").await;
    assert_eq!((status, body["code"].as_str()), (403, Some("account_not_owned")));
    for q in ["limit=0", "limit=501", "from_seq=x", "page=2"] {
        let (status, body) = node.as_a("GET", &format!("/v1/accounts/2/statement?{q}"), b"").await;
        assert_eq!((status, body["code"].as_str()), (400, Some("invalid_query")), "{q}: {body}");
    }
    let _ = node.finish().await;
}

/// A node that lags and does not know it — a production node whose center missed the journal's
/// pushes — never calls an account unknown that another center opened and answered final: it
/// waits until it holds everything sequenced before the request (the journal's end), or answers
/// 503 `read_model_behind` (try again) when it cannot get there in time; never a wrong 422/404.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_node_never_calls_an_account_opened_elsewhere_unknown() {
    let gate = Arc::new(AtomicU64::new(u64::MAX));
    let node = start_lagging(&fresh_dir("lagging"), Arc::clone(&gate)).await;
    let open = |bmi: &str, id: u64| {
        let currency = Currency::new(b"EUR").expect("EUR");
        (Bmi::new(bmi.as_bytes()).expect("bmi"), Payload::AccountOpen { account: AccountId(id), currency })
    };
    // This node's view stops here; DC2 opens bank-a's account 9 and the cluster finalizes it.
    let frozen = node.seq_final();
    gate.store(frozen, Ordering::Release);
    let opening = open("ELSEWHERE-OPEN-9", 9);
    node.submit_through(CenterId(2), vec![opening.clone()]);
    node.final_elsewhere(opening.0).await;
    // The node catches up a moment later (its center read the journal at last).
    let release = Arc::clone(&gate);
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        release.store(u64::MAX, Ordering::Release);
    });
    let (status, body) = node.as_a("POST", "/v1/transfers", &transfer("LAG-1", 1, 9, "1.00")).await;
    assert_eq!(status, 202, "a transfer to an account final elsewhere: {body}");

    // A node that stays behind says "try again", not "unknown".
    let frozen = node.seq_final();
    gate.store(frozen, Ordering::Release);
    let opening = open("ELSEWHERE-OPEN-20", 20);
    node.submit_through(CenterId(2), vec![opening.clone()]);
    node.final_elsewhere(opening.0).await;
    let (status, body) = node.as_ops("GET", "/v1/operator/accounts/20", b"").await;
    assert_eq!((status, body["code"].as_str()), (503, Some("read_model_behind")), "{body}");
    let (status, body) = node.as_ops("GET", "/v1/operator/accounts/20/statement", b"").await;
    assert_eq!((status, body["code"].as_str()), (503, Some("read_model_behind")), "{body}");

    // Caught up: the account is there; one never opened is still unknown, at once.
    gate.store(u64::MAX, Ordering::Release);
    let (status, body) = node.as_ops("GET", "/v1/operator/accounts/20", b"").await;
    assert_eq!((status, body["currency"].as_str()), (200, Some("EUR")), "{body}");
    let (status, body) = node.as_ops("GET", "/v1/operator/accounts/21", b"").await;
    assert_eq!((status, body["code"].as_str()), (404, Some("unknown_account")), "{body}");
    let (status, body) = node.as_a("POST", "/v1/transfers", &transfer("LAG-2", 1, 77, "1.00")).await;
    assert_eq!((status, body["code"].as_str()), (422, Some("unknown_account")), "{body}");

    let bmis = node.finish().await;
    assert_eq!(journaled(&bmis), ["ELSEWHERE-OPEN-9", "LAG-1", "ELSEWHERE-OPEN-20"]);
}
