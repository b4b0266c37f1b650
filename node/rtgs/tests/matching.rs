//! The production engine hosting the matching plugin: three real `rtgs node --matching`
//! processes on the real broker and PostgreSQL (started through `scripts/infra-up.sh`; the test
//! fails, never skips, if they cannot be started), driven by `rtgs match`, against a faulty LP
//! (BUSY, NO_POOL, lost and late answers, rejections after the commit: compensations and
//! escalations happen) and users who retry, cancel, close or never answer. It checks that every
//! order goes through its sessions with none matched twice and none left in flight, that only
//! the owner talked to the LP and the marketplace, that the three centers' stored plugin states
//! are one state and the databases reconcile, and that a center killed with SIGKILL resumes from
//! its stored plugin state and agrees again after a second cycle.
//!
//! The plugin's windows close on `Tick`s, so these nodes run with idle ticks: their journals
//! never stop growing, and a comparison of the databases waits for a moment when the three are
//! at the same seq. The harness is `common/mod.rs`.

mod common;

use common::{assert_stored_states_agree, lock, reconcile_eventually, u, Cluster, BIN};
use serde_json::Value;
use std::process::Command;

const ORDERS: u64 = 200;
const SELLERS: u64 = 20;
const SEED: u64 = 7;

/// A cluster whose three nodes run the matching plugin over their (faulty) LP and marketplace
/// simulators.
fn matching_cluster(name: &str) -> Cluster {
    let mut c = Cluster::new(name);
    for env in &mut c.extra_env {
        env.push(("RTGS_MATCHING".into(), "true".into()));
        env.push(("RTGS_MATCHING_SELLERS".into(), SELLERS.to_string()));
        env.push(("RTGS_MATCHING_SEED".into(), SEED.to_string()));
        env.push(("RTGS_MATCHING_LP_FAULTS".into(), "true".into()));
        // Windows, leases and grace periods end on Ticks.
        env.push(("RTGS_NO_IDLE_TICK".into(), "false".into()));
    }
    c
}

/// `rtgs match` with these extra arguments, waiting on the status files of `centers`.
fn match_command(c: &Cluster, args: &[&str], centers: &[usize]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(["match", "--topic-prefix", &c.prefix, "--timeout-s", "240"])
        .args(["--orders", &ORDERS.to_string(), "--sellers", &SELLERS.to_string()])
        .args(["--seed", &SEED.to_string(), "--window-s", "2,2,2", "--quick-timings"])
        .args(["--order-ttl-s", "20"])
        .args(args);
    for center in centers {
        cmd.arg("--status-file").arg(c.status_path(*center));
    }
    cmd
}

/// `rtgs match` with these extra arguments, waiting on the three status files; its JSON report.
fn run_match(c: &Cluster, args: &[&str]) -> Value {
    let out =
        match_command(c, args, &[1, 2, 3]).output().unwrap_or_else(|e| panic!("cannot run rtgs match: {e}"));
    match_report(c, out)
}

fn match_report(c: &Cluster, out: std::process::Output) -> Value {
    c.command_report("rtgs match", out)
}

fn assert_cycle(report: &Value, orders: u64) {
    assert_eq!(u(&report["orders"]), orders, "{report}");
    assert_eq!(u(&report["sessions"]), orders, "one session per order (a retry keeps it): {report}");
    assert_eq!(u(&report["double_matches"]), 0, "{report}");
    assert_eq!(u(&report["awaiting_user_decision"]), 0, "{report}");
    assert!(u(&report["bundles_committed"]) > 0, "{report}");
    assert_eq!(report["plugin_state_consistent"], true, "{report}");
    assert_eq!(report["waited"], true, "{report}");
}

#[test]
fn matching_on_the_production_engine_matches_every_order_once_and_survives_a_kill9() {
    let _one = lock();
    let mut c = matching_cluster("match");
    c.start_all();
    let report = run_match(&c, &[]);
    assert_cycle(&report, ORDERS);
    let s = c.statuses();
    for (i, s) in s.iter().enumerate() {
        let p = &s.as_ref().unwrap_or_else(|| panic!("DC{} has no status", i + 1))["plugins"];
        assert_eq!(u(&p["matching_orders"]), ORDERS, "DC{}: {p}", i + 1);
        assert_eq!(u(&p["matching_sellers"]), SELLERS, "DC{}: {p}", i + 1);
        assert_eq!(u(&p["matching_double_matches"]), 0, "DC{}: {p}", i + 1);
        assert_eq!(u(&p["owner_center"]), 1, "DC{}: {p}", i + 1);
    }
    // Only the owner talked to the LP and the marketplace.
    let handed: Vec<u64> = s.iter().flatten().map(|s| u(&s["plugins"]["effects_handed"])).collect();
    assert!(handed[0] > 0 && handed[1] == 0 && handed[2] == 0, "effects handed per center: {handed:?}");
    assert_stored_states_agree(&c, "matching");
    reconcile_eventually(&c);

    // kill -9 a center that neither leads the sequencer nor owns the plugin, start it again: it
    // resumes from its stored plugin state, and a second cycle's orders agree everywhere.
    let leader = c.leader();
    let victim = if leader == 3 { 2 } else { 3 };
    c.kill9(victim);
    c.start(victim);
    c.wait("the restarted center to run with its plugins", 60, |s| {
        s[victim - 1].as_ref().is_some_and(|s| s["plugins"]["live"] == true)
    });
    assert!(
        c.log(victim).contains("resume at seq") && c.log(victim).contains("(stored state)"),
        "DC{victim} did not resume from its stored plugin state:\n{}",
        c.log(victim)
    );
    let second = run_match(&c, &["--no-setup", "--first-order", &ORDERS.to_string()]);
    assert_cycle(&second, 2 * ORDERS);
    assert_stored_states_agree(&c, "matching");
    reconcile_eventually(&c);
}

/// The owner DC1 is killed in the middle of a cycle: a survivor proposes itself through the
/// journal (DC2, the lowest; DC3 may follow at the next term when DC1 also led the sequencer and
/// DC2, taking that over, is silent for a while), re-executes the pending effects (the LP's
/// idempotency keys make re-sending harmless), and every order still ends, none matched twice,
/// DC2 and DC3 in one state. Each node has its own LP simulator, so the new owner's LP has not
/// seen DC1's reservations: what DC1 had reserved is unknown there and the plugin's own rules
/// (expiry, compensation, the order's deadline) end it.
#[test]
fn a_silent_owner_is_replaced_mid_cycle_and_every_order_still_ends() {
    let _one = lock();
    let mut c = matching_cluster("mown");
    for env in &mut c.extra_env {
        env.push(("RTGS_OWNER_SILENCE_S".into(), "3".into()));
    }
    c.start_all();
    let child = match_command(&c, &[], &[2, 3])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run rtgs match: {e}"));
    c.wait("the orders journaled on DC2", 60, |s| {
        s[1].as_ref().is_some_and(|s| s["plugins"]["matching_orders"].as_u64() >= Some(ORDERS))
    });
    c.kill9(1);
    c.wait("a survivor to own the plugin on both survivors", 40, |s| {
        let owners: Vec<u64> =
            s[1..].iter().flatten().filter_map(|s| s["plugins"]["owner_center"].as_u64()).collect();
        owners.len() == 2 && owners[0] == owners[1] && owners[0] != 1
    });
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    let report = match_report(&c, out);
    assert_eq!(u(&report["orders"]), ORDERS, "{report}");
    assert_eq!(u(&report["sessions"]), ORDERS, "{report}");
    assert_eq!(u(&report["double_matches"]), 0, "{report}");
    let owner = u(&report["owner_center"]) as usize;
    assert!(owner == 2 || owner == 3, "a survivor owns the plugin: {report}");
    assert_eq!(report["plugin_state_consistent"], true, "{report}");
    let s = c.statuses();
    let handed = s[owner - 1].as_ref().map(|s| u(&s["plugins"]["effects_handed"]));
    assert!(
        handed.is_some_and(|h| h > 0),
        "the new owner DC{owner} executed the plugin's effects: {handed:?}"
    );
}
