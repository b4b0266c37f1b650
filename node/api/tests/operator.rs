//! Operator endpoints over real HTTP: open, fund, close accounts with operator credentials, the
//! ledger's answers to impossible requests, and the separation of operator and participant keys.

mod common;

use common::{fresh_dir, journaled, start, transfer, Node, SECRET_A, SECRET_OPS};
use serde_json::{json, Value};

async fn as_ops(node: &Node, method: &str, path: &str, body: &Value) -> (u16, Value) {
    let body = if body.is_null() { Vec::new() } else { body.to_string().into_bytes() };
    node.signed_at("ops", SECRET_OPS, method, path, &body, 0).await
}

/// Status of an entry, as operators see it.
async fn entry(node: &Node, bmi: &str) -> (Option<String>, Option<String>) {
    let (status, body) = as_ops(node, "GET", &format!("/v1/operator/entries/{bmi}"), &Value::Null).await;
    assert_eq!(status, 200, "{body}");
    (body["status"].as_str().map(String::from), body["reason"].as_str().map(String::from))
}

fn some(status: &str, reason: Option<&str>) -> (Option<String>, Option<String>) {
    (Some(status.to_string()), reason.map(String::from))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_opens_funds_and_closes_accounts_through_the_journal() {
    let node = start(&fresh_dir("ops-lifecycle"), true).await;
    let (status, body) = as_ops(
        &node,
        "POST",
        "/v1/operator/accounts",
        &json!({"bmi": "OP-OPEN-9", "account": 9, "currency": "EUR"}),
    )
    .await;
    assert_eq!((status, body["status"].as_str()), (202, Some("ACSP")), "{body}");
    assert_eq!(entry(&node, "OP-OPEN-9").await, some("ACCC", None));

    let fund = json!({"bmi": "OP-FUND-9", "amount": "100.00", "currency": "EUR"});
    let (status, body) = as_ops(&node, "POST", "/v1/operator/accounts/9/fund", &fund).await;
    assert_eq!(status, 202, "{body}");
    let (status, body) = node.as_a("POST", "/v1/transfers", &transfer("OP-T-1", 9, 2, "100.00")).await;
    assert_eq!(status, 202, "{body}");
    let emptied = node.account_at(9, body["seq"].as_u64().unwrap_or(u64::MAX)).await;
    assert_eq!(emptied["balance"], "0.00");

    let close = |bmi: &str| json!({ "bmi": bmi });
    let (status, body) = as_ops(&node, "POST", "/v1/operator/accounts/9/close", &close("OP-CLOSE-9")).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(entry(&node, "OP-CLOSE-9").await, some("ACCC", None));
    let closed = node.account_at(9, body["seq"].as_u64().unwrap_or(u64::MAX)).await;
    assert_eq!(closed["closed"], true);

    // The ledger's answers: an existing account, a non-zero balance, a closed debtor.
    let again = json!({"bmi": "OP-OPEN-1", "account": 1, "currency": "EUR"});
    assert_eq!(as_ops(&node, "POST", "/v1/operator/accounts", &again).await.0, 202);
    assert_eq!(entry(&node, "OP-OPEN-1").await, some("RJCT", Some("RT01")));
    assert_eq!(as_ops(&node, "POST", "/v1/operator/accounts/1/close", &close("OP-CLOSE-1")).await.0, 202);
    assert_eq!(entry(&node, "OP-CLOSE-1").await, some("RJCT", Some("RT02")));
    // A closed account is bad input for a new transfer: 422, nothing journaled.
    let (status, body) = node.as_a("POST", "/v1/transfers", &transfer("OP-T-2", 9, 2, "1.00")).await;
    assert_eq!((status, body["code"].as_str()), (422, Some("account_closed")), "{body}");
    let (status, body) = node.as_a("POST", "/v1/transfers", &transfer("OP-T-3", 2, 9, "1.00")).await;
    assert_eq!((status, body["code"].as_str()), (422, Some("account_closed")), "{body}");
    // A retry of a transfer accepted before the close still gets its original answer.
    assert_eq!(node.as_a("POST", "/v1/transfers", &transfer("OP-T-1", 9, 2, "100.00")).await.0, 202);

    let bmis = node.finish().await;
    let want = ["OP-OPEN-9", "OP-FUND-9", "OP-T-1", "OP-CLOSE-9", "OP-OPEN-1", "OP-CLOSE-1"];
    assert_eq!(journaled(&bmis), want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_requests_are_checked_like_any_other_and_keys_do_not_cross() {
    let node = start(&fresh_dir("ops-checks"), true).await;
    let fund =
        |bmi: &str, amount: &str, currency: &str| json!({"bmi": bmi, "amount": amount, "currency": currency});
    let rows = [
        (
            "currency of another account",
            "/v1/operator/accounts/4/fund",
            fund("OC-1", "1.00", "EUR"),
            400,
            "currency_mismatch",
        ),
        (
            "unknown account",
            "/v1/operator/accounts/77/fund",
            fund("OC-2", "1.00", "EUR"),
            404,
            "unknown_account",
        ),
        (
            "too many decimals",
            "/v1/operator/accounts/1/fund",
            fund("OC-3", "1.001", "EUR"),
            400,
            "too_many_decimals",
        ),
        ("zero", "/v1/operator/accounts/1/fund", fund("OC-4", "0", "EUR"), 400, "amount_not_positive"),
        (
            "bad account id",
            "/v1/operator/accounts/x/fund",
            fund("OC-5", "1.00", "EUR"),
            400,
            "invalid_account_id",
        ),
        (
            "unknown field",
            "/v1/operator/accounts/1/close",
            json!({"bmi": "OC-6", "why": "x"}),
            400,
            "unknown_field",
        ),
        (
            "missing field",
            "/v1/operator/accounts",
            json!({"bmi": "OC-7", "account": 5}),
            400,
            "missing_field",
        ),
        (
            "unknown currency",
            "/v1/operator/accounts",
            json!({"bmi": "OC-8", "account": 5, "currency": "ABC"}),
            400,
            "unknown_currency",
        ),
    ];
    for (name, path, body, want_status, want_code) in rows {
        let (status, answer) = as_ops(&node, "POST", path, &body).await;
        assert_eq!((status, answer["code"].as_str()), (want_status, Some(want_code)), "{name}: {answer}");
    }
    // A participant's key is unknown to the operator endpoints, and the other way round.
    let open = json!({"bmi": "OC-9", "account": 5, "currency": "EUR"}).to_string();
    let (status, answer) =
        node.signed_at("bank-a", SECRET_A, "POST", "/v1/operator/accounts", open.as_bytes(), 0).await;
    assert_eq!((status, answer["code"].as_str()), (401, Some("unknown_key")), "{answer}");
    let pay = transfer("OC-10", 1, 2, "1.00");
    let (status, answer) = node.signed_at("ops", SECRET_OPS, "POST", "/v1/transfers", &pay, 0).await;
    assert_eq!((status, answer["code"].as_str()), (401, Some("unknown_key")), "{answer}");
    // A participant's bmi is in its own namespace: an operator's "OC-10" is another entry, and
    // an operator's bmi may not look like a participant's scoped key.
    assert_eq!(node.as_a("POST", "/v1/transfers", &pay).await.0, 202);
    let open = |bmi: &str, account: u64| json!({"bmi": bmi, "account": account, "currency": "EUR"});
    let (status, answer) = as_ops(&node, "POST", "/v1/operator/accounts", &open("OC-10", 5)).await;
    assert_eq!(status, 202, "{answer}");
    let (status, answer) = as_ops(&node, "POST", "/v1/operator/accounts", &open("OC-10", 6)).await;
    assert_eq!((status, answer["code"].as_str()), (422, Some("bmi_conflict")), "{answer}");
    let (status, answer) = as_ops(&node, "POST", "/v1/operator/accounts", &open("~AAAAAAAOC-10", 6)).await;
    assert_eq!((status, answer["code"].as_str()), (400, Some("invalid_bmi")), "{answer}");
    // Operators read a participant's entry under its journaled (scoped) key.
    let key = rtgs_api::scope::Scope::of("bank-a").key(rtgs_core::entry::Bmi::new(b"OC-10").expect("bmi"));
    let (status, entry) = as_ops(&node, "GET", &format!("/v1/operator/entries/{key}"), &json!(null)).await;
    assert_eq!(
        (status, entry["bmi"].as_str(), entry["status"].as_str()),
        (200, Some(key.as_str()), Some("ACCC")),
        "{entry}"
    );

    let bmis = node.finish().await;
    assert_eq!(journaled(&bmis), ["OC-10", "OC-10"]);
}
