//! `rtgs serve` as an operator runs it: start on an ephemeral port from the example config, one
//! signed transfer over plain HTTP, its final status, SIGTERM, then `rtgs verify` of the data
//! directory; a second start resumes without funding the accounts again.

mod common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../api/participants.example.json");
const SECRET_A: &str = "change-me-bank-a-0123456789";
const SECRET_OPS: &str = "change-me-operator-0123456789";

fn rtgs() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rtgs"))
}

/// Starts `rtgs serve` and returns it with the address it announced on stderr.
fn serve(dir: &Path) -> (Child, SocketAddr, Vec<String>) {
    serve_with(dir, &[])
}

fn serve_with(dir: &Path, extra: &[&str]) -> (Child, SocketAddr, Vec<String>) {
    let mut child = rtgs()
        .args(["serve", "--listen", "127.0.0.1:0", "--config", EXAMPLE, "--data-dir"])
        .arg(dir)
        .args(extra)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let stderr = child.stderr.take().unwrap_or_else(|| panic!("no stderr"));
    let mut lines = Vec::new();
    let mut reader = BufReader::new(stderr).lines();
    for line in reader.by_ref() {
        let line = line.unwrap_or_default();
        lines.push(line.clone());
        if let Some(addr) = line.strip_prefix("rtgs serve: listening on http://") {
            // Keep draining stderr: writing to a closed pipe would fail the server's last lines.
            std::thread::spawn(move || reader.for_each(|l| eprintln!("serve: {}", l.unwrap_or_default())));
            return (child, addr.parse().unwrap_or_else(|e| panic!("{addr}: {e}")), lines);
        }
    }
    let _ = child.kill();
    let status = child.wait();
    panic!("rtgs serve did not start ({status:?}): {lines:?}");
}

fn signed(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, serde_json::Value) {
    let (status, text) = common::http_signed(addr, "bank-a", SECRET_A, method, path, body);
    (status, serde_json::from_str(&text).unwrap_or(serde_json::Value::Null))
}

fn stop(mut child: Child) {
    let killed = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
    assert!(killed.is_ok_and(|s| s.success()));
    let status = child.wait().unwrap_or_else(|e| panic!("{e}"));
    assert!(status.success(), "rtgs serve exited with {status}");
}

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rtgs-serve-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn serve_takes_a_signed_transfer_stops_cleanly_and_resumes() {
    let dir = tempdir("run");
    let (child, addr, _) = serve(&dir);
    let body = r#"{"bmi":"S-1","debtor":1,"creditor":3,"amount":"250.50","currency":"EUR"}"#;
    let (status, answer) = signed(addr, "POST", "/v1/transfers", body);
    assert_eq!((status, answer["status"].as_str()), (202, Some("ACSP")), "{answer}");
    let (status, answer) = signed(addr, "GET", "/v1/transfers/S-1", "");
    assert_eq!((status, answer["status"].as_str()), (200, Some("ACCC")), "{answer}");
    stop(child);

    let verified = rtgs().args(["verify", "--data-dir"]).arg(&dir).output().unwrap_or_else(|e| panic!("{e}"));
    assert!(verified.status.success(), "{}", String::from_utf8_lossy(&verified.stderr));

    let (child, addr, lines) = serve(&dir);
    assert!(lines.iter().any(|l| l.contains("account setup skipped")), "{lines:?}");
    let (status, answer) = signed(addr, "POST", "/v1/transfers", body);
    assert_eq!(status, 202, "a retry after the restart is the original answer: {answer}");
    let mut balance = serde_json::Value::Null;
    for _ in 0..1_000 {
        let (status, answer) = signed(addr, "GET", "/v1/accounts/1", "");
        if status == 200 {
            balance = answer;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // Funded 1,000,000.00 once (not again on the restart), less the one transfer.
    assert_eq!(balance["balance"], "999749.50", "{balance}");
    stop(child);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `rtgs serve --matching`: the workload's accounts opened and its settings journaled on a fresh
/// data directory, the sellers offering, the matching endpoints answering (the partners' windows
/// journaled at setup; an order nobody submitted is unknown to the widget); the directory audits
/// clean.
#[test]
fn serve_with_matching_sets_up_its_world_and_answers_the_matching_endpoints() {
    let dir = tempdir("matching");
    let (child, addr, lines) = serve_with(&dir, &["--matching", "--matching-sellers", "5"]);
    assert!(lines.iter().any(|l| l.contains("matching on, 5 sellers")), "{lines:?}");
    let ops = |method: &str, path: &str| {
        let (status, text) = common::http_signed(addr, "ops", SECRET_OPS, method, path, "");
        (status, serde_json::from_str::<serde_json::Value>(&text).unwrap_or(serde_json::Value::Null))
    };
    let (status, answer) = ops("GET", "/v1/operator/matching/partners/1/settings");
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        (answer["settings"]["own"].as_bool(), answer["settings"]["p2p_phase_s"].as_u64()),
        (Some(true), Some(180)),
        "the workload's partner settings were journaled at setup: {answer}"
    );
    let (status, answer) = ops("GET", "/v1/operator/matching/escalations");
    assert_eq!((status, answer["open"].as_u64()), (200, Some(0)), "{answer}");
    let (status, answer) = signed(addr, "GET", "/v1/matching/orders/1", "");
    assert_eq!((status, answer["code"].as_str()), (404, Some("unknown_order")), "{answer}");
    stop(child);
    let verified = rtgs().args(["verify", "--data-dir"]).arg(&dir).output().unwrap_or_else(|e| panic!("{e}"));
    assert!(verified.status.success(), "{}", String::from_utf8_lossy(&verified.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}
