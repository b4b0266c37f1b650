//! The production engine hosting the withdrawal plugin: three real `rtgs node --withdrawal
//! [--withdrawal-calm]` processes on the real broker and PostgreSQL (started through
//! `scripts/infra-up.sh`; the test fails, never skips, if they cannot be started), driven by
//! `rtgs withdraw`, which journals the world's setup (accounts opened and funded, chains, assets,
//! vaults and timers registered) and then the requests. It checks that every request ends (none
//! open), some COMPLETED, that only the owner talked to the simulated world, that the three
//! centers' stored plugin states are one state and the databases reconcile, and that a center
//! killed with SIGKILL resumes from its stored plugin state and agrees again after a second
//! cycle; that when the owner is killed mid-cycle a survivor takes over and every request
//! still ends; and that with every fault of the simulated world on (dropped, stuck, replaced and
//! reorged transactions, RPC timeouts, missing and duplicate webhooks, signer and screener
//! timeouts) every request still ends in one state on the three centers, nothing is paid twice
//! and the ledgers reconcile.
//!
//! The plugin's timers run on journal time, so these nodes run with idle ticks: their journals
//! never stop growing, and a comparison of the databases waits for a moment when the three are
//! at the same seq. The harness is `common/mod.rs`.

mod common;

use common::{assert_stored_states_agree, lock, reconcile_eventually, u, Cluster, BIN};
use serde_json::Value;
use std::process::Command;

const REQUESTS: u64 = 30;
const CUSTOMERS: u64 = 10;
const VAULTS: u64 = 2;
const SEED: u64 = 7;

/// A cluster whose three nodes run the withdrawal plugin over its simulated world, calm or with
/// every fault of the world on.
fn withdrawal_cluster(name: &str, calm: bool) -> Cluster {
    let mut c = Cluster::new(name);
    for env in &mut c.extra_env {
        env.push(("RTGS_WITHDRAWAL".into(), "true".into()));
        env.push(("RTGS_WITHDRAWAL_CALM".into(), calm.to_string()));
        env.push(("RTGS_WITHDRAWAL_CUSTOMERS".into(), CUSTOMERS.to_string()));
        env.push(("RTGS_WITHDRAWAL_VAULTS".into(), VAULTS.to_string()));
        env.push(("RTGS_CHAIN_SEED".into(), SEED.to_string()));
        // The plugin's timers end on Ticks.
        env.push(("RTGS_NO_IDLE_TICK".into(), "false".into()));
    }
    c
}

/// `rtgs withdraw` with these extra arguments, waiting on the status files of `centers`.
fn withdraw_command(c: &Cluster, args: &[&str], centers: &[usize]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(["withdraw", "--topic-prefix", &c.prefix, "--timeout-s", "180"])
        .args(["--requests", &REQUESTS.to_string(), "--customers", &CUSTOMERS.to_string()])
        .args(["--vaults", &VAULTS.to_string(), "--seed", &SEED.to_string()])
        .args(args);
    for center in centers {
        cmd.arg("--status-file").arg(c.status_path(*center));
    }
    cmd
}

/// `rtgs withdraw` with these extra arguments, waiting on the three status files; its report.
fn run_withdraw(c: &Cluster, args: &[&str]) -> Value {
    let out = withdraw_command(c, args, &[1, 2, 3])
        .output()
        .unwrap_or_else(|e| panic!("cannot run rtgs withdraw: {e}"));
    withdraw_report(c, out)
}

fn withdraw_report(c: &Cluster, out: std::process::Output) -> Value {
    c.command_report("rtgs withdraw", out)
}

fn assert_cycle(report: &Value, requests: u64) {
    assert_eq!(u(&report["requests"]), requests, "{report}");
    assert_eq!(u(&report["open"]), 0, "every request ended: {report}");
    assert!(u(&report["completed"]) >= 1, "a calm world completes withdrawals: {report}");
    assert_eq!(report["plugin_state_consistent"], true, "{report}");
    assert_eq!(report["waited"], true, "{report}");
}

#[test]
fn withdrawals_on_the_production_engine_all_end_in_one_state_and_survive_a_kill9() {
    let _one = lock();
    let mut c = withdrawal_cluster("wdraw", true);
    c.start_all();
    let report = run_withdraw(&c, &[]);
    assert_cycle(&report, REQUESTS);
    let s = c.statuses();
    for (i, s) in s.iter().enumerate() {
        let p = &s.as_ref().unwrap_or_else(|| panic!("DC{} has no status", i + 1))["plugins"];
        assert_eq!(u(&p["withdrawal_requests"]), REQUESTS, "DC{}: {p}", i + 1);
        assert_eq!(u(&p["withdrawal_open"]), 0, "DC{}: {p}", i + 1);
        assert_eq!(u(&p["owner_center"]), 1, "DC{}: {p}", i + 1);
    }
    // Only the owner talked to the world (custody, screener, policy engine, chains).
    let handed: Vec<u64> = s.iter().flatten().map(|s| u(&s["plugins"]["effects_handed"])).collect();
    assert!(handed[0] > 0 && handed[1] == 0 && handed[2] == 0, "effects handed per center: {handed:?}");
    assert_stored_states_agree(&c, "withdrawal");
    reconcile_eventually(&c);

    // kill -9 a center that neither leads the sequencer nor owns the plugin, start it again: it
    // resumes from its stored plugin state, and a second cycle's requests agree everywhere.
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
    let second = run_withdraw(&c, &["--no-setup", "--first-request", &REQUESTS.to_string()]);
    assert_cycle(&second, 2 * REQUESTS);
    assert_stored_states_agree(&c, "withdrawal");
    reconcile_eventually(&c);
}

/// The owner DC1 is killed in the middle of a cycle: a survivor proposes itself through the
/// journal, re-executes the pending effects on its own simulated world, and every request still
/// ends, DC2 and DC3 in one state.
#[test]
fn a_silent_owner_is_replaced_mid_cycle_and_every_withdrawal_still_ends() {
    let _one = lock();
    let mut c = withdrawal_cluster("wown", true);
    for env in &mut c.extra_env {
        env.push(("RTGS_OWNER_SILENCE_S".into(), "3".into()));
    }
    c.start_all();
    let child = withdraw_command(&c, &[], &[2, 3])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run rtgs withdraw: {e}"));
    c.wait("the requests journaled on DC2", 60, |s| {
        s[1].as_ref().is_some_and(|s| s["plugins"]["withdrawal_requests"].as_u64() >= Some(REQUESTS))
    });
    c.kill9(1);
    c.wait("a survivor to own the plugin on both survivors", 40, |s| {
        let owners: Vec<u64> =
            s[1..].iter().flatten().filter_map(|s| s["plugins"]["owner_center"].as_u64()).collect();
        owners.len() == 2 && owners[0] == owners[1] && owners[0] != 1
    });
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    let report = withdraw_report(&c, out);
    assert_eq!(u(&report["requests"]), REQUESTS, "{report}");
    assert_eq!(u(&report["open"]), 0, "every request ended: {report}");
    assert_eq!(report["plugin_state_consistent"], true, "{report}");
    let owner = u(&report["owner_center"]) as usize;
    assert!(owner == 2 || owner == 3, "a survivor owns the plugin: {report}");
    let s = c.statuses();
    let handed = s[owner - 1].as_ref().map(|s| u(&s["plugins"]["effects_handed"]));
    assert!(
        handed.is_some_and(|h| h > 0),
        "the new owner DC{owner} executed the plugin's effects: {handed:?}"
    );
}

/// The simulated world with every fault on (the calm flag off), on the production engine: every
/// request ends, in one state on the three centers (their status figures and their stored plugin
/// states), no withdrawal is settled twice (money is conserved, holds included: `rtgs
/// reconcile`), and only the owner talked to the world.
#[test]
fn withdrawals_under_the_worlds_faults_all_end_in_one_state() {
    let _one = lock();
    let mut c = withdrawal_cluster("wfault", false);
    c.start_all();
    let report = run_withdraw(&c, &[]);
    assert_eq!(u(&report["requests"]), REQUESTS, "{report}");
    assert_eq!(u(&report["open"]), 0, "every request ended: {report}");
    assert_eq!(report["plugin_state_consistent"], true, "{report}");
    let s = c.statuses();
    for (i, s) in s.iter().enumerate() {
        let p = &s.as_ref().unwrap_or_else(|| panic!("DC{} has no status", i + 1))["plugins"];
        assert_eq!(u(&p["withdrawal_requests"]), REQUESTS, "DC{}: {p}", i + 1);
        assert_eq!(u(&p["withdrawal_open"]), 0, "DC{}: {p}", i + 1);
    }
    let handed: Vec<u64> = s.iter().flatten().map(|s| u(&s["plugins"]["effects_handed"])).collect();
    assert!(handed[0] > 0 && handed[1] == 0 && handed[2] == 0, "effects handed per center: {handed:?}");
    assert_stored_states_agree(&c, "withdrawal");
    reconcile_eventually(&c);
}
