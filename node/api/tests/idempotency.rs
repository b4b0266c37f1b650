//! Idempotency that belongs to the participant (issue 15, point 2), one test per attack class,
//! on the embedded engine over real HTTP:
//! * two participants may use the same `bmi` text: both are paid, each its own payment;
//! * a participant probing another's `bmi` learns nothing: its answers for a `bmi` another
//!   participant used are exactly its answers for one nobody used;
//! * a retry the API's tracker forgot (evicted, or before a restart) is answered with its
//!   original seq at once and its status with the original outcome; other content under it is
//!   `bmi_conflict`, naming only the participant's own entry.

mod common;

use common::{fresh_dir, journaled, start, start_tracking, transfer};
use serde_json::Value;

/// Every field name of a JSON answer, with the value's JSON type (the answer's shape).
fn shape(v: &Value) -> Vec<(String, &'static str)> {
    let kind = |v: &Value| match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    let mut fields: Vec<(String, &'static str)> =
        v.as_object().map(|o| o.iter().map(|(k, v)| (k.clone(), kind(v))).collect()).unwrap_or_default();
    fields.sort();
    fields
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_participants_may_use_the_same_bmi_text_and_both_are_paid() {
    let node = start(&fresh_dir("idem-same-text"), true).await;
    let (status, a) = node.as_a("POST", "/v1/transfers", &transfer("SAME-1", 1, 2, "5.00")).await;
    assert_eq!((status, a["bmi"].as_str()), (202, Some("SAME-1")), "{a}");
    let (status, b) = node.as_b("POST", "/v1/transfers", &transfer("SAME-1", 3, 1, "2.00")).await;
    assert_eq!((status, b["bmi"].as_str()), (202, Some("SAME-1")), "{b}");
    let (seq_a, seq_b) = (a["seq"].as_u64().expect("A's seq"), b["seq"].as_u64().expect("B's seq"));
    assert_ne!(seq_a, seq_b, "two payments");

    // Each participant's status is its own payment, under its own text.
    let (_, sa) = node.as_a("GET", "/v1/transfers/SAME-1", b"").await;
    let (_, sb) = node.as_b("GET", "/v1/transfers/SAME-1", b"").await;
    assert_eq!(
        (sa["seq"].as_u64(), sa["status"].as_str(), sa["bmi"].as_str()),
        (Some(seq_a), Some("ACCC"), Some("SAME-1"))
    );
    assert_eq!(
        (sb["seq"].as_u64(), sb["status"].as_str(), sb["bmi"].as_str()),
        (Some(seq_b), Some("ACCC"), Some("SAME-1"))
    );
    // pacs.002: each names its own text and seq.
    for (key, seq) in [("bank-a", seq_a), ("bank-b", seq_b)] {
        let (status, xml) = node.send_signed_raw(key, "GET", "/v1/iso20022/pacs002/SAME-1", b"").await;
        assert_eq!(status, 200, "{xml}");
        assert!(xml.contains("<OrgnlMsgId>SAME-1</OrgnlMsgId>") && !xml.contains('~'), "{xml}");
        assert!(xml.contains(&format!(">{seq}<")), "{key}: its own seq {seq}: {xml}");
    }

    // Both moved money: 1 paid 5.00 to 2 and got 2.00 from 3.
    let one = node.account_at(1, seq_a.max(seq_b)).await;
    assert_eq!(one["balance"], "997.00");
    assert_eq!(node.account_at(2, seq_a).await["balance"], "5.00");
    // A's statement names both lines by the text their writers used, never a scoped key.
    let (status, statement) = node.as_a("GET", "/v1/accounts/1/statement", b"").await;
    assert_eq!(status, 200, "{statement}");
    let lines: Vec<(Option<&str>, Option<&str>)> = statement["lines"]
        .as_array()
        .map(|l| {
            l.iter()
                .filter(|x| x["seq"].as_u64() >= Some(seq_a.min(seq_b)))
                .map(|x| (x["bmi"].as_str(), x["type"].as_str()))
                .collect()
        })
        .unwrap_or_default();
    let mut want = vec![(Some("SAME-1"), Some("DEBIT")), (Some("SAME-1"), Some("CREDIT"))];
    if seq_b < seq_a {
        want.reverse();
    }
    assert_eq!(lines, want, "{statement}");

    let bmis = node.finish().await;
    assert_eq!(journaled(&bmis), ["SAME-1", "SAME-1"]);
    let keys: Vec<&String> = bmis.iter().filter(|b| b.ends_with("SAME-1")).collect();
    assert!(keys.len() == 2 && keys[0] != keys[1], "two engine bmis: {keys:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_participant_probing_anothers_bmi_learns_nothing() {
    let node = start(&fresh_dir("idem-probe"), true).await;
    let (status, a) = node.as_a("POST", "/v1/transfers", &transfer("A-SECRET", 1, 2, "3.00")).await;
    assert_eq!(status, 202, "{a}");
    let seq_a = a["seq"].as_u64().expect("A's seq");

    // B's reads of the bmi A used and of one nobody used: the same answers, but for the text.
    for (path, name) in [("/v1/transfers/{}", "status"), ("/v1/transfers/{}?wait_s=0", "status, no wait")] {
        let used = node.as_b("GET", &path.replace("{}", "A-SECRET"), b"").await;
        let fresh = node.as_b("GET", &path.replace("{}", "NOBODY-1"), b"").await;
        assert_eq!((used.0, used.1["code"].clone()), (fresh.0, fresh.1["code"].clone()), "{name}");
        assert_eq!((used.0, used.1["code"].as_str()), (404, Some("unknown_transfer")), "{name}: {}", used.1);
        assert_eq!(
            used.1["message"].as_str().map(|m| m.replace("A-SECRET", "X")),
            fresh.1["message"].as_str().map(|m| m.replace("NOBODY-1", "X"))
        );
        assert_eq!(shape(&used.1), shape(&fresh.1));
    }
    let used = node.send_signed_raw("bank-b", "GET", "/v1/iso20022/pacs002/A-SECRET", b"").await;
    let fresh = node.send_signed_raw("bank-b", "GET", "/v1/iso20022/pacs002/NOBODY-1", b"").await;
    assert_eq!((used.0, used.1.replace("A-SECRET", "X")), (fresh.0, fresh.1.replace("NOBODY-1", "X")));
    assert_eq!(used.0, 404, "{}", used.1);

    // B's writes under the bmi A used and under a fresh one: both new payments of B's, the same
    // shape of answer; nothing names A's seq.
    let used = node.as_b("POST", "/v1/transfers", &transfer("A-SECRET", 3, 1, "1.00")).await;
    let fresh = node.as_b("POST", "/v1/transfers", &transfer("NOBODY-1", 3, 1, "1.00")).await;
    assert_eq!((used.0, fresh.0), (202, 202), "{} {}", used.1, fresh.1);
    assert_eq!((used.1["status"].as_str(), used.1["bmi"].as_str()), (Some("ACSP"), Some("A-SECRET")));
    assert_eq!(shape(&used.1), shape(&fresh.1));
    assert_ne!(used.1["seq"].as_u64(), Some(seq_a));
    // B conflicting with its own entry under that text: told about its own seq only.
    let seq_b = used.1["seq"].as_u64().expect("B's seq");
    let (status, conflict) = node.as_b("POST", "/v1/transfers", &transfer("A-SECRET", 3, 1, "1.01")).await;
    assert_eq!((status, conflict["code"].as_str()), (422, Some("bmi_conflict")), "{conflict}");
    let message = conflict["message"].as_str().unwrap_or("");
    assert!(
        message.contains(&format!("seq {seq_b}")) && !message.contains(&format!("seq {seq_a})")),
        "{message}"
    );
    // A batch: the same.
    let batch = |bmi: &str| {
        format!(
            r#"{{"transfers":[{{"bmi":"{bmi}","debtor":3,"creditor":1,"amount":"1.00","currency":"EUR"}}]}}"#
        )
    };
    assert_eq!(node.as_a("POST", "/v1/transfers", &transfer("A-SECRET-2", 1, 2, "1.00")).await.0, 202);
    let used = node.as_b("POST", "/v1/transfers/batch", batch("A-SECRET-2").as_bytes()).await;
    let again = node.as_b("POST", "/v1/transfers/batch", batch("NOBODY-2").as_bytes()).await;
    assert_eq!((used.0, again.0), (202, 202));
    assert_eq!(shape(&used.1["transfers"][0]), shape(&again.1["transfers"][0]));
    // A's own payment is untouched.
    let (_, own) = node.as_a("GET", "/v1/transfers/A-SECRET", b"").await;
    assert_eq!((own["seq"].as_u64(), own["status"].as_str()), (Some(seq_a), Some("ACCC")));

    let bmis = node.finish().await;
    let mut texts = journaled(&bmis);
    texts.sort();
    assert_eq!(texts, ["A-SECRET", "A-SECRET", "A-SECRET-2", "A-SECRET-2", "NOBODY-1", "NOBODY-2"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_the_tracker_forgot_gets_its_original_seq_and_outcome_at_once() {
    // A tracker of two records: every later submission evicts the older ones.
    let node = start_tracking(&fresh_dir("idem-forgot"), true, 2).await;
    let (_, settled) = node.as_a("POST", "/v1/transfers", &transfer("OLD-OK", 1, 2, "4.00")).await;
    let (_, rejected) = node.as_a("POST", "/v1/transfers", &transfer("OLD-NO", 1, 2, "5000.00")).await;
    let (seq_ok, seq_no) = (settled["seq"].as_u64().expect("seq"), rejected["seq"].as_u64().expect("seq"));
    for i in 0..3 {
        assert_eq!(
            node.as_a("POST", "/v1/transfers", &transfer(&format!("FILL-{i}"), 1, 2, "0.01")).await.0,
            202
        );
    }
    // Forgotten by the tracker, not by the engine: its index of every bmi ever sequenced
    // answers a status query with the seq, the read model with the outcome.
    let (_, ok) = node.as_a("GET", "/v1/transfers/OLD-OK", b"").await;
    assert_eq!((ok["seq"].as_u64(), ok["status"].as_str()), (Some(seq_ok), Some("ACCC")), "{ok}");
    let (status, never) = node.as_a("GET", "/v1/transfers/NEVER-USED", b"").await;
    assert_eq!((status, never["code"].as_str()), (404, Some("unknown_transfer")), "{never}");

    // The retries: the engine knows them; answered at once (not after the 10 s seq wait) with
    // the original seq, and the status is the original outcome.
    let started = std::time::Instant::now();
    let again = node.as_a("POST", "/v1/transfers", &transfer("OLD-OK", 1, 2, "4.00")).await;
    assert_eq!(again, (202, settled.clone()));
    let again = node.as_a("POST", "/v1/transfers", &transfer("OLD-NO", 1, 2, "5000.00")).await;
    assert_eq!(again, (202, rejected.clone()));
    assert!(started.elapsed() < rtgs_api::limits::SEQ_WAIT, "answered by the engine, not the wait");
    let (_, ok) = node.as_a("GET", "/v1/transfers/OLD-OK", b"").await;
    assert_eq!((ok["seq"].as_u64(), ok["status"].as_str()), (Some(seq_ok), Some("ACCC")), "{ok}");
    let (_, no) = node.as_a("GET", "/v1/transfers/OLD-NO", b"").await;
    assert_eq!(
        (no["seq"].as_u64(), no["status"].as_str(), no["reason"].as_str()),
        (Some(seq_no), Some("RJCT"), Some("AM04")),
        "{no}"
    );

    // Other content under a forgotten bmi: the engine's conflict, naming the original seq.
    for i in 0..3 {
        assert_eq!(
            node.as_a("POST", "/v1/transfers", &transfer(&format!("FILL2-{i}"), 1, 2, "0.01")).await.0,
            202
        );
    }
    let (status, conflict) = node.as_a("POST", "/v1/transfers", &transfer("OLD-OK", 1, 2, "4.01")).await;
    assert_eq!((status, conflict["code"].as_str()), (422, Some("bmi_conflict")), "{conflict}");
    assert!(
        conflict["message"].as_str().is_some_and(|m| m.contains("OLD-OK") && !m.contains('~')),
        "{conflict}"
    );

    let bmis = node.finish().await;
    let olds = journaled(&bmis).into_iter().filter(|b| b.starts_with("OLD-")).count();
    assert_eq!(olds, 2, "each journaled once: {bmis:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_a_restart_gets_its_original_seq_and_outcome_and_other_content_conflicts() {
    let dir = fresh_dir("idem-restart");
    let node = start(&dir, true).await;
    let (_, first) = node.as_a("POST", "/v1/transfers", &transfer("RS-1", 1, 2, "6.00")).await;
    let (_, other) = node.as_b("POST", "/v1/transfers", &transfer("RS-1", 3, 1, "60.00")).await;
    node.stop().await;

    let node = start(&dir, false).await;
    let started = std::time::Instant::now();
    assert_eq!(
        node.as_a("POST", "/v1/transfers", &transfer("RS-1", 1, 2, "6.00")).await,
        (202, first.clone())
    );
    assert_eq!(
        node.as_b("POST", "/v1/transfers", &transfer("RS-1", 3, 1, "60.00")).await,
        (202, other.clone())
    );
    assert!(started.elapsed() < rtgs_api::limits::SEQ_WAIT);
    let (_, a) = node.as_a("GET", "/v1/transfers/RS-1", b"").await;
    assert_eq!((a["seq"].as_u64(), a["status"].as_str()), (first["seq"].as_u64(), Some("ACCC")), "{a}");
    let (_, b) = node.as_b("GET", "/v1/transfers/RS-1", b"").await;
    assert_eq!(
        (b["seq"].as_u64(), b["status"].as_str(), b["reason"].as_str()),
        (other["seq"].as_u64(), Some("RJCT"), Some("AM04")),
        "{b}"
    );
    let (status, conflict) = node.as_a("POST", "/v1/transfers", &transfer("RS-1", 1, 2, "6.01")).await;
    assert_eq!((status, conflict["code"].as_str()), (422, Some("bmi_conflict")), "{conflict}");
    let bmis = node.finish().await;
    assert_eq!(journaled(&bmis), ["RS-1", "RS-1"]);
}
