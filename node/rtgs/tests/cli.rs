//! The `rtgs` binary as an operator uses it: the demo's report, a `kill -9` in the middle of a
//! run followed by a restart from the same data directory, and the audit of that directory.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn rtgs() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rtgs"))
}

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rtgs-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn json_of(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn demo(args: &[&str]) -> (std::process::Output, serde_json::Value) {
    let out = rtgs().arg("demo").args(args).arg("--json").output().unwrap_or_else(|e| panic!("{e}"));
    let v = json_of(&out);
    (out, v)
}

#[test]
fn demo_json_report_has_every_field_and_checks_pass() {
    let (out, r) = demo(&["--transfers", "20000", "--accounts", "200", "--seed", "7"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for key in
        ["submitted", "settled", "rejected", "finalized", "throughput_per_s", "consistent", "conserved"]
    {
        assert!(r.get(key).is_some(), "missing {key}");
    }
    for key in ["p50", "p99", "p999", "max"] {
        assert!(r["latency_us"][key].as_u64().is_some(), "missing latency_us.{key}");
    }
    assert_eq!(r["submitted"], 20000);
    assert_eq!(r["finalized"], 20000);
    assert_eq!(
        r["settled"].as_u64().unwrap_or(0) + r["rejected"].as_u64().unwrap_or(0),
        20000,
        "every transfer is settled or rejected"
    );
    assert!(r["rejected_by_reason"]["AC01"].as_u64().unwrap_or(0) > 0, "unknown accounts are rejected AC01");
    assert_eq!(r["consistent"], true);
    assert_eq!(r["conserved"], true);
    assert!(r["ticks"].as_u64().unwrap_or(0) >= 1, "time never stops: ticks are journaled under load");
    let syncs = &r["journal_syncs"];
    let sync =
        |key: &str| syncs[key].as_u64().unwrap_or_else(|| panic!("missing journal_syncs.{key}: {syncs}"));
    assert!(sync("count") >= 1, "every group is synced: {syncs}");
    assert!(
        sync("p50_us") <= sync("p99_us")
            && sync("p99_us") <= sync("p999_us")
            && sync("p999_us") <= sync("max_us"),
        "quantiles in order: {syncs}"
    );
    assert!(sync("over_5ms") <= sync("count"), "{syncs}");
    let centers = r["centers"].as_array().cloned().unwrap_or_default();
    assert_eq!(centers.len(), 3);
    for c in &centers {
        for key in ["id", "seq_applied", "state_hash", "balance_total_minor"] {
            assert!(c.get(key).is_some(), "center missing {key}");
        }
        assert_eq!(c["state_hash"], centers[0]["state_hash"]);
    }
    // Same seed, same transfers in the same order: the same outcomes. (Not the same state hash:
    // the journal also holds Ticks — at least one a second, wall-clock driven — wherever they
    // fall between the batches, and each shifts the seqs the chained hash covers. Determinism
    // for a given journal is the ledger's and the simulator's to prove.)
    let (_, again) = demo(&["--transfers", "20000", "--accounts", "200", "--seed", "7"]);
    for key in ["settled", "rejected", "rejected_by_reason"] {
        assert_eq!(again[key], r[key], "{key} differs for the same seed");
    }
    let timeline = tempdir("timeline").with_extension("csv");
    let t = timeline.to_string_lossy().into_owned();
    let (out, other) =
        demo(&["--transfers", "20000", "--accounts", "200", "--seed", "8", "--latency-timeline", &t]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_ne!(other["rejected_by_reason"], r["rejected_by_reason"], "another seed, other transfers");
    // The timeline: a header, then one row per 100 ms; the rows count every transfer once.
    let csv = std::fs::read_to_string(&timeline).unwrap_or_else(|e| panic!("{}: {e}", timeline.display()));
    let _ = std::fs::remove_file(&timeline);
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some("t_s,finalized,p50_us,p99_us,max_us"));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert!(rows.iter().all(|r| r.len() == 5), "{csv}");
    let counted: u64 = rows.iter().map(|r| r[1].parse::<u64>().unwrap_or(0)).sum();
    assert_eq!(counted, 20000, "{csv}");
    let max: u64 = rows.iter().filter_map(|r| r[4].parse::<u64>().ok()).max().unwrap_or(0);
    let reported = other["latency_us"]["max"].as_u64().unwrap_or(0);
    assert!(max.abs_diff(reported) * 50 <= reported, "the timeline's max {max} is the report's {reported}");
}

#[test]
fn bad_arguments_are_refused_with_a_message() {
    let out = rtgs().args(["demo", "--accounts", "1"]).output().unwrap_or_else(|e| panic!("{e}"));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--accounts must be at least 2"));
    let out = rtgs().args(["demo", "--transfers", "many"]).output().unwrap_or_else(|e| panic!("{e}"));
    assert!(!out.status.success());
    let out =
        rtgs().args(["verify", "--data-dir", "/nonexistent/rtgs"]).output().unwrap_or_else(|e| panic!("{e}"));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no journal"));
}

fn journal_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir.join("journal"))
        .map(|it| it.filter_map(|e| e.ok()?.metadata().ok()).map(|m| m.len()).sum())
        .unwrap_or(0)
}

#[test]
fn kill_9_mid_run_then_restart_converges_and_audits_clean() {
    let dir = tempdir("kill9");
    let d = dir.to_string_lossy().to_string();
    let mut child = rtgs()
        .args(["demo", "--data-dir", &d, "--transfers", "50000000", "--accounts", "500"])
        .args(["--checkpoint-interval", "20000"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    // Kill it once it has journaled a good amount and checkpointed (whatever the build's speed).
    let deadline = Instant::now() + Duration::from_secs(120);
    // (The files include the writer's zeros ahead, up to 4 MiB: see journal.rs.)
    while journal_bytes(&dir) < 12 << 20 || !dir.join("center-DC3.checkpoint").exists() {
        assert!(Instant::now() < deadline, "the demo made no progress");
        assert!(child.try_wait().ok().flatten().is_none(), "the demo ended before it could be killed");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap_or_else(|e| panic!("{e}")); // SIGKILL
    let _ = child.wait();

    let audit =
        rtgs().args(["verify", "--json", "--data-dir", &d]).output().unwrap_or_else(|e| panic!("{e}"));
    let v = json_of(&audit);
    assert!(audit.status.success(), "audit after the crash: {v}");
    let crashed_at = v["journal_seq_last"].as_u64().unwrap_or(0);
    assert!(crashed_at > 0);

    let (out, r) = demo(&["--data-dir", &d, "--transfers", "5000", "--accounts", "500"]);
    assert!(out.status.success(), "restart run failed: {r}\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(r["resumed_from_seq"].as_u64(), Some(crashed_at));
    assert_eq!(r["consistent"], true);
    assert_eq!(r["conserved"], true);
    assert_eq!(r["finalized"], 5000);
    for c in r["centers"].as_array().cloned().unwrap_or_default() {
        let from = c["seq_resumed_from"].as_u64().unwrap_or(0);
        assert!(from > 0 && from <= crashed_at, "resumed from its checkpoint, not from scratch: {c}");
    }
    let audit =
        rtgs().args(["verify", "--json", "--data-dir", &d]).output().unwrap_or_else(|e| panic!("{e}"));
    let v = json_of(&audit);
    assert!(audit.status.success(), "audit after the restart: {v}");
    assert_eq!(
        v["replay_state_hash"], r["centers"][0]["state_hash"],
        "centers equal a fresh replay of the journal"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `demo --matching --collection`: both plugins in every center; the matching cycle runs its
/// orders against a faulty LP and the marketplace until none is in flight — no order matched
/// twice, identical plugin state everywhere — and the data directory audits clean.
#[test]
fn demo_with_matching_and_collection_matches_every_order_once_and_audits_clean() {
    let dir = tempdir("matching");
    let d = dir.to_str().unwrap_or_else(|| panic!("path"));
    let args = [
        "--matching",
        "--matching-orders",
        "400",
        "--matching-sellers",
        "20",
        "--matching-lp-faults",
        "--collection",
        "--collection-wallets",
        "50",
        "--collection-relayers",
        "5",
        "--transfers",
        "500",
        "--accounts",
        "20",
        "--data-dir",
        d,
    ];
    let (out, r) = demo(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let m = &r["matching"];
    assert_eq!(m["orders"], 400, "{m}");
    assert_eq!(m["sessions"], 400, "one session per order: {m}");
    assert_eq!(m["double_matches"], 0, "{m}");
    assert_eq!(m["awaiting_user_decision"], 0, "{m}");
    assert_eq!(m["plugin_state_consistent"], true, "{m}");
    assert!(m["bundles_committed"].as_u64().is_some_and(|b| b > 0), "{m}");
    for key in
        ["closed_by_user", "auto_closed", "cancelled", "compensated", "escalated", "lp_already_committed"]
    {
        assert!(m[key].is_u64(), "{key} reported: {m}");
    }
    assert_eq!(r["collection"]["rows_collected"], 50);
    assert_eq!((r["consistent"].as_bool(), r["conserved"].as_bool()), (Some(true), Some(true)));
    let verify = rtgs().args(["verify", "--data-dir", d]).output().unwrap_or_else(|e| panic!("{e}"));
    assert!(verify.status.success(), "{}", String::from_utf8_lossy(&verify.stdout));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `demo --withdrawal` beside `--collection`: a sweep cycle, then a withdrawal cycle through the
/// simulated custody, screener, policy engine and chains (faults on), before the transfers; the
/// report's `withdrawal` counts every outcome, nothing is left open, every center holds the same
/// plugin state; the data directory audits clean (the replay runs both plugins); alone, a restart
/// restores the withdrawal state (the same requests are known, none is open, none redone).
#[test]
fn demo_with_withdrawal_beside_collection_reports_and_audits_clean() {
    let dir = tempdir("withdrawal");
    let d = dir.to_str().unwrap_or_else(|| panic!("path"));
    let args = [
        "--collection",
        "--collection-wallets",
        "100",
        "--collection-relayers",
        "4",
        "--withdrawal",
        "--withdrawal-requests",
        "150",
        "--transfers",
        "1000",
        "--accounts",
        "50",
        "--data-dir",
        d,
    ];
    let (out, r) = demo(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let w = &r["withdrawal"];
    for key in [
        "requests",
        "completed",
        "cancelled",
        "failed",
        "rejected",
        "blocked",
        "reversed",
        "stale",
        "chain_broadcasts",
    ] {
        assert!(w[key].is_u64(), "withdrawal.{key} missing: {w}");
    }
    assert_eq!(w["requests"], 150);
    assert_eq!(w["open"], 0, "{w}");
    let ended: u64 = ["completed", "cancelled", "failed", "rejected", "blocked"]
        .iter()
        .map(|k| w[*k].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(ended + w["refused"].as_u64().unwrap_or(0), 150, "every request ended: {w}");
    assert!(
        w["completed"].as_u64().is_some_and(|c| c > 0)
            && w["chain_broadcasts"].as_u64().is_some_and(|c| c > 0)
    );
    assert_eq!(w["plugin_state_consistent"], true);
    assert_eq!(r["collection"]["rows_collected"], 100);
    assert_eq!((r["consistent"].clone(), r["conserved"].clone()), (true.into(), true.into()));
    let verify = rtgs().args(["verify", "--data-dir", d]).output().unwrap_or_else(|e| panic!("{e}"));
    assert!(verify.status.success(), "{}", String::from_utf8_lossy(&verify.stdout));
    let _ = std::fs::remove_dir_all(&dir);
    // Alone, and restarted on its data directory (a restarted sweep cycle is collection's own
    // matter): the withdrawal state is restored, the same requests are known, nothing is redone.
    // (The simulated world starts afresh: a COMPLETED withdrawal not yet twice the threshold
    // deep finds its transaction gone and sends the same signed payload again — harmless.)
    let dir = tempdir("withdrawal-alone");
    let d = dir.to_str().unwrap_or_else(|| panic!("path"));
    let args = [
        "--withdrawal",
        "--withdrawal-requests",
        "60",
        "--transfers",
        "200",
        "--accounts",
        "20",
        "--data-dir",
        d,
    ];
    let (first, r1) = demo(&args);
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let (again, r2) = demo(&args);
    assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
    assert_eq!(r2["withdrawal"]["requests"], 60, "the same requests, none submitted again");
    // Restored, not redone: nothing completed is lost; a failure whose operator retry came after
    // the first run's cycle ended (ended = none open for 2 s) may complete in the second.
    let completed = |r: &serde_json::Value| r["withdrawal"]["completed"].as_u64().unwrap_or(0);
    assert!(
        completed(&r2) >= completed(&r1) && completed(&r2) <= 60,
        "restored, not redone: {} then {}",
        completed(&r1),
        completed(&r2)
    );
    assert_eq!(r2["withdrawal"]["open"], 0);
    assert_eq!(r2["withdrawal"]["plugin_state_consistent"], true);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `sim --withdrawal`: a few seeds with the withdrawal plugin in every center pass, and the
/// replay line of a seed names the withdrawal flags.
#[test]
fn sim_with_withdrawal_passes_and_replays() {
    let out = rtgs()
        .args(["sim", "--withdrawal", "--withdrawal-faults", "--seeds", "2", "--from", "40"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let one = rtgs()
        .args(["sim", "--withdrawal", "--withdrawal-faults", "--seed", "41"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(one.status.success(), "{}", String::from_utf8_lossy(&one.stderr));
    assert!(String::from_utf8_lossy(&one.stdout).contains("plugin_state_hash"));
}

/// `demo --collection`: a sweep cycle through the chain simulator before the transfers, every
/// deposit collected, identical plugin state in every center; the data directory audits clean
/// (the replay runs the plugin host too) and a restart restores the plugin state.
#[test]
fn demo_with_collection_sweeps_every_wallet_and_audits_clean() {
    let dir = tempdir("collection");
    let d = dir.to_str().unwrap_or_else(|| panic!("path"));
    let args = [
        "--collection",
        "--collection-wallets",
        "500",
        "--collection-relayers",
        "20",
        "--transfers",
        "2000",
        "--accounts",
        "50",
        "--data-dir",
        d,
    ];
    let (out, r) = demo(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let c = &r["collection"];
    assert_eq!(c["deposits"], 500);
    assert_eq!(c["rows_collected"], 500);
    assert_eq!(c["batches_confirmed"], 500);
    assert_eq!(c["swept_minor"], 500 * 2_000_000u64);
    assert_eq!(c["plugin_state_consistent"], true);
    assert!(c["sweep_cycle_s"].as_f64().is_some_and(|s| s > 0.0));
    assert_eq!(r["consistent"], true);
    let verify = rtgs().args(["verify", "--data-dir", d]).output().unwrap_or_else(|e| panic!("{e}"));
    assert!(verify.status.success(), "{}", String::from_utf8_lossy(&verify.stdout));
    // Without --collection the same directory is refused (its checkpoints hold plugin state).
    let plain = rtgs()
        .args(["demo", "--transfers", "10", "--data-dir", d])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!plain.status.success());
    assert!(
        String::from_utf8_lossy(&plain.stderr).contains("plugin"),
        "{}",
        String::from_utf8_lossy(&plain.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `rtgs status` with nobody answering: a refused connection and a listener that never answers
/// are both `up: false` rows (the timeout holds), the exit status is 1, never an error (2).
#[test]
fn status_reports_silent_centers_as_down_and_exits_1() {
    let refused = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap_or_else(|e| panic!("{e}"));
    // Accepts connections (the kernel's backlog) but never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let silent_addr = silent.local_addr().unwrap_or_else(|e| panic!("{e}"));
    let addrs = format!("{refused},{silent_addr}");
    let out = rtgs()
        .args(["status", "--json", "--timeout-ms", "300", "--addr", &addrs])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let v = json_of(&out);
    assert_eq!(v["ok"], false);
    assert_eq!(v["centers_up"], 0);
    let centers = v["centers"].as_array().unwrap_or_else(|| panic!("{v}"));
    assert_eq!(centers.len(), 2, "{v}");
    for (i, c) in centers.iter().enumerate() {
        assert_eq!(
            (c["id"].as_str(), &c["up"], &c["leader"]),
            (Some(&*format!("DC{}", i + 1)), &false.into(), &false.into())
        );
        assert!(c["seq_committed"].is_null() && c["lag_entries"].is_null(), "{v}");
    }
    assert!(centers[1]["error"].as_str().is_some_and(|e| e.contains("no answer within 300 ms")), "{v}");
    drop(silent);
    let out = rtgs().args(["status", "--watch", "0"]).output().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(2), "a bad --watch is a usage error");
}
