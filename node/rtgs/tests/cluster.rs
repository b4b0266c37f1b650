//! Drills of the production engine: three real `rtgs node` processes on the real broker and
//! PostgreSQL (started through `scripts/infra-up.sh`; a test fails, never skips, if they cannot
//! be started), loaded by `rtgs load`. Every drill ends by checking that the three center
//! databases reconcile (`rtgs reconcile`: same balances, same state hash, money conserved) and
//! that every submitted `bmi` was applied exactly once in every center and is final.
//!
//! Drill r is the push path's acks across a restart. Drills i and j are the operator's view: `rtgs status` against the nodes' `/status`, and
//! `rtgs reconcile` while transfers flow.
//!
//! Each drill has its own topic prefix and databases. The drills run one at a time (they share
//! two cores with the servers).

mod common;

use common::{lock, u, Cluster, OwnBroker};
use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn a_normal_run_of_50000_transfers_reconciles() {
    let _one = lock();
    let mut c = Cluster::new("a");
    // DC2 logs JSON lines (a log shipper's format); the others the human line.
    c.extra_env[1].push(("RTGS_LOG_FORMAT".into(), "json".into()));
    c.start_all();
    let report = c.load_finish(c.load_spawn("A", &["--transfers", "50000", "--accounts", "1000"]));
    assert_eq!(report["ok"], true);
    assert_eq!(u(&report["missing"]), 0);
    assert_eq!(
        u(&report["settled"]) + report["rejected"].as_object().map_or(0, |r| r.values().map(u).sum()),
        50_000
    );
    c.wait_converged(60);
    c.reconcile();
    c.assert_exactly_once_and_final("A", 50_000);
    let s = c.statuses();
    assert_eq!(s.iter().flatten().filter(|s| s["leader"] == true).count(), 1, "exactly one leader: {s:?}");
    assert_eq!(c.epoch_max(), 1, "a false takeover under full load (the lease was taken from a live leader)");
    let json = std::fs::read_to_string(c.dir.join("dc2.log")).unwrap_or_default();
    let lines: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")))
        .collect();
    assert!(lines.iter().all(|l| l["level"].is_string() && l["message"].is_string()), "{json}");
    assert!(
        lines.iter().any(|l| l["center"] == "DC2" && l["message"] == "running"),
        "DC2's JSON log has no `running` event with its center: {json}"
    );
    let human = std::fs::read_to_string(c.dir.join("dc1.log")).unwrap_or_default();
    assert!(human.lines().any(|l| l == "DC1: running"), "DC1's human log: {human}");
    // The push path carried journal batches and acks beside the broker, without a reconnect.
    for s in s.iter().flatten() {
        let p = &s["push"];
        assert!(u(&p["journal_notices"]) > 0 && u(&p["ack_notices"]) > 0, "{}: push {p}", s["center"]);
        assert_eq!(u(&p["reconnects"]), 0, "{}: push {p}", s["center"]);
    }
}

#[test]
fn b_kill9_of_the_sequencer_leader_hands_over_without_gap_or_duplicate() {
    let _one = lock();
    let mut c = Cluster::new("b");
    c.start_all();
    let old = c.leader();
    let epoch = c.epoch_max();
    // The old leader's own participants wait for its return (only the origin notifies).
    let origins = (1..=3).filter(|&x| x != old).map(|x| x.to_string()).collect::<Vec<_>>().join(",");
    let load = c.load_spawn(
        "B",
        &[
            "--transfers",
            "100000",
            "--accounts",
            "1000",
            "--rate",
            "20000",
            "--timeout-s",
            "180",
            "--origins",
            &origins,
        ],
    );
    c.wait("transfers flowing", 60, |s| s.iter().flatten().any(|s| u(&s["seq_sequenced"]) > 5_000));
    c.kill9(old);
    let takeover = c.wait("another center to take over", 60, |s| {
        s.iter().flatten().any(|s| s["leader"] == true && u(&s["epoch"]) > epoch)
    });
    eprintln!("DRILL b: sequencer takeover after kill -9 of DC{old}: {:.2} s", takeover.as_secs_f64());
    let report = c.load_finish(load);
    assert_eq!(report["ok"], true, "not every transfer became final after the failover");
    c.start(old);
    c.settle_and_check("B", 100_000);
}

#[test]
fn c_one_center_down_finality_continues_and_it_catches_up() {
    let _one = lock();
    let mut c = Cluster::new("c");
    c.start_all();
    let leader = c.leader();
    let victim = if leader == 3 { 2 } else { 3 };
    // The victim's own participants wait for it (only the origin notifies): keep them out.
    let origins = (1..=3).filter(|&x| x != victim).map(|x| x.to_string()).collect::<Vec<_>>().join(",");
    let load = c.load_spawn(
        "C",
        &[
            "--transfers",
            "100000",
            "--accounts",
            "1000",
            "--rate",
            "25000",
            "--timeout-s",
            "180",
            "--origins",
            &origins,
        ],
    );
    c.wait_flowing(5_000);
    c.kill9(victim);
    // Finality goes on with two of three: the load finishes while the victim is down.
    let report = c.load_finish(load);
    assert_eq!(report["ok"], true, "finality stopped with one center down");
    let started = Instant::now();
    c.start(victim);
    c.wait_converged(120);
    eprintln!("DRILL c: DC{victim} restarted and converged in {:.2} s", started.elapsed().as_secs_f64());
    c.reconcile();
    c.assert_exactly_once_and_final("C", 100_000);
}

#[test]
fn d_two_centers_down_finality_halts_safely_and_resumes() {
    let _one = lock();
    let mut c = Cluster::new("d");
    c.start_all();
    let leader = c.leader();
    let victims: Vec<usize> = (1..=3).filter(|&x| x != leader).collect();
    let load = c.load_at("D", 60_000, 20_000, 240);
    c.wait_flowing(5_000);
    for &v in &victims {
        c.kill9(v);
    }
    // The survivor goes on sequencing and applying, but nothing more becomes final.
    std::thread::sleep(Duration::from_secs(2));
    let (before, after) = alone_finalizes_nothing(&mut c, leader);
    assert!(
        u(&after["seq_applied"]) > u(&before["seq_unfinal_first"]),
        "the survivor keeps applying: {after}"
    );
    for &v in &victims {
        c.start(v);
    }
    c.finish_and_check(load, "D", 60_000, "finality did not resume after the centers came back");
}

#[test]
fn e_postgresql_restart_under_load_loses_nothing() {
    let _one = lock();
    let mut c = Cluster::new("e");
    c.start_all();
    let load = c.load_at("E", 100_000, 20_000, 240);
    c.wait_flowing(5_000);
    let out = Command::new("pg_ctlcluster")
        .args(["--skip-systemctl-redirect", "15", "main", "restart"])
        .output()
        .unwrap_or_else(|e| panic!("cannot run pg_ctlcluster: {e}"));
    assert!(out.status.success(), "PostgreSQL restart failed: {}", String::from_utf8_lossy(&out.stderr));
    let report = c.load_finish(load);
    assert_eq!(report["ok"], true, "transfers were lost across the PostgreSQL restart");
    c.wait_converged(120);
    let retries: u64 = c.statuses().iter().flatten().map(|s| u(&s["pg_retries"])).sum();
    assert!(retries > 0, "no node noticed the restart, so the drill proved nothing");
    c.reconcile();
    c.assert_exactly_once_and_final("E", 100_000);
}

#[test]
fn f_lost_journal_messages_are_pulled_from_the_outbox() {
    let _one = lock();
    let mut c = Cluster::new("f");
    c.extra_env[2].push(("RTGS_FAULT_DROP_JOURNAL_ONE_IN".into(), "7".into()));
    c.start_all();
    let report =
        c.load_finish(c.load_spawn("F", &["--transfers", "20000", "--accounts", "500", "--rate", "10000"]));
    assert_eq!(report["ok"], true);
    c.wait_converged(60);
    let s = c.statuses();
    let dc3 = s[2].as_ref().unwrap_or_else(|| panic!("DC3 status"));
    assert!(u(&dc3["gap_pulls"]) > 0 && u(&dc3["gap_entries_pulled"]) > 0, "DC3 pulled no gap: {dc3}");
    assert_eq!(u(&s[0].as_ref().map(|s| s["gap_pulls"].clone()).unwrap_or_default()), 0);
    c.reconcile();
    c.assert_exactly_once_and_final("F", 20_000);
}

#[test]
fn g_lost_ack_messages_with_one_center_down_are_published_again() {
    let _one = lock();
    let mut c = Cluster::new("g");
    // Every center "loses" one in 5 of its ack messages. With a center down, each ack of the two
    // others is needed: finality moves on only because a stalled center publishes its acks again.
    for env in &mut c.extra_env {
        env.push(("RTGS_FAULT_DROP_ACKS_ONE_IN".into(), "5".into()));
    }
    c.start_all();
    let leader = c.leader();
    let victim = if leader == 3 { 2 } else { 3 };
    c.kill9(victim);
    let origins = (1..=3).filter(|&x| x != victim).map(|x| x.to_string()).collect::<Vec<_>>().join(",");
    let report = c.load_finish(c.load_spawn(
        "G",
        &[
            "--transfers",
            "20000",
            "--accounts",
            "500",
            "--rate",
            "10000",
            "--timeout-s",
            "180",
            "--origins",
            &origins,
        ],
    ));
    assert_eq!(report["ok"], true, "finality did not get past the lost acks");
    let s = c.statuses();
    let reacks: u64 = s.iter().flatten().map(|s| u(&s["reacks"])).sum();
    assert!(reacks > 0, "no center published its acks again: {s:?}");
    c.start(victim);
    c.settle_and_check("G", 20_000);
}

/// h. A `bmi` is paid at most once, ever: 20,000 transfers, then a `kill -9` of the sequencer
/// leader, then the same 20,000 `bmi`s again with other content. The new leader never saw them
/// (no replay window any more): PostgreSQL's unique index tells it, so every one is refused
/// DUPL and none is sequenced again.
#[test]
fn h_every_bmi_ever_sequenced_stays_known_across_a_takeover() {
    let _one = lock();
    let mut c = Cluster::new("h");
    c.start_all();
    let first = c.load_finish(c.load_spawn("H", &["--transfers", "20000", "--accounts", "500"]));
    assert_eq!(first["ok"], true);
    let old = c.leader();
    let epoch = c.epoch_max();
    c.kill9(old);
    c.wait("another center to take over", 60, |s| {
        s.iter().flatten().any(|s| s["leader"] == true && u(&s["epoch"]) > epoch)
    });
    let origins = (1..=3).filter(|&x| x != old).map(|x| x.to_string()).collect::<Vec<_>>().join(",");
    let args = ["--transfers", "20000", "--accounts", "500", "--seed", "99", "--skip-setup"];
    let again = c.load_finish(
        c.load_spawn("H", &[&args[..], &["--origins", &origins, "--timeout-s", "180"]].concat()),
    );
    assert_eq!((u(&again["refused"]), u(&again["settled"])), (20_000, 0), "{again}");
    let rounds: u64 = c.statuses().iter().flatten().map(|s| u(&s["bmi_rounds"])).sum();
    assert!(rounds > 0, "the new leader sequenced the conflicting groups a second time");
    c.start(old);
    c.settle_and_check("H", 20_000);
}

#[test]
fn i_two_centers_down_including_the_leader_halt_safely_and_resume() {
    let _one = lock();
    let mut c = Cluster::new("i");
    c.start_all();
    let leader = c.leader();
    let epoch = c.epoch_max();
    let other = if leader == 1 { 2 } else { 1 };
    let survivor = (1..=3).find(|&x| x != leader && x != other).unwrap_or_else(|| unreachable!());
    let load = c.load_at("I", 60_000, 20_000, 240);
    c.wait_flowing(5_000);
    c.kill9(leader);
    c.kill9(other);
    // The survivor takes the lease and goes on sequencing and applying; nothing more becomes
    // final with one center of three.
    c.wait("the survivor to take over", 60, |s| {
        s[survivor - 1].as_ref().is_some_and(|s| s["leader"] == true && u(&s["epoch"]) > epoch)
    });
    alone_finalizes_nothing(&mut c, survivor);
    c.start(leader);
    c.start(other);
    c.finish_and_check(load, "I", 60_000, "finality did not resume after the centers came back");
}

/// Ten `kill -9`s of whoever leads, under load: each time another center takes the lease, and
/// in the end nothing is lost or doubled. The takeover times are printed (`DRILL j:`) and
/// reported in bench/README.md "Takeover"; they are figures, not assertions.
#[test]
fn j_ten_kill9s_of_the_leader_each_hand_over() {
    let _one = lock();
    let mut c = Cluster::new("j");
    c.start_all();
    let load = c.load_at("J", 100_000, 2_000, 300);
    c.wait_flowing(1_000);
    let mut times = Vec::new();
    let first_epoch = c.epoch_max();
    for round in 1..=10 {
        let old = c.leader();
        let epoch = c.epoch_max();
        c.kill9(old);
        let took = c.wait("another center to take over", 60, |s| {
            s.iter().flatten().any(|s| s["leader"] == true && u(&s["epoch"]) > epoch)
        });
        let new = c.leader();
        assert_ne!(new, old, "round {round}: the killed center cannot lead");
        eprintln!("DRILL j: round {round}: DC{old} killed, DC{new} leads after {:.2} s", took.as_secs_f64());
        times.push(took.as_secs_f64());
        c.start(old);
        c.wait("the killed center to run again", 60, |s| s[old - 1].is_some());
    }
    assert_eq!(c.epoch_max(), first_epoch + 10, "one takeover per kill, no false one");
    times.sort_by(f64::total_cmp);
    eprintln!(
        "DRILL j: takeover after kill -9, ten rounds: median {:.2} s, max {:.2} s ({})",
        (times[4] + times[5]) / 2.0,
        times[9],
        times.iter().map(|t| format!("{t:.2}")).collect::<Vec<_>>().join(" · ")
    );
    c.finish_and_check(load, "J", 100_000, "not every transfer became final across ten takeovers");
}

/// The broker `kill -9`ed under load and started again on its durable storage: the nodes ride
/// through (reconnect; none dies, in librdkafka or elsewhere), nothing is lost or doubled.
#[test]
fn k_broker_killed_and_restarted_under_load_loses_nothing() {
    let _one = lock();
    let mut c = Cluster::new("k");
    let broker = OwnBroker::new(c.dir.join("broker"), 9094, None);
    broker.start();
    c.bootstrap = broker.bootstrap();
    c.start_all();
    let load = c.load_at("K", 100_000, 20_000, 300);
    c.wait_flowing(5_000);
    let before: u64 = c.statuses().iter().flatten().map(|s| u(&s["seq_committed"])).max().unwrap_or(0);
    broker.kill9();
    std::thread::sleep(Duration::from_secs(2));
    broker.start();
    // `statuses` fails the drill if any node exited (a crash in the client library included).
    let resumed = c.wait("finality to resume after the broker restart", 120, |s| {
        s.iter().flatten().filter(|s| u(&s["seq_unfinal_first"]) > before + 1_000).count() >= 2
    });
    eprintln!("DRILL k: finality went on {:.2} s after the broker came back", resumed.as_secs_f64());
    c.finish_and_check(load, "K", 100_000, "transfers were lost across the broker restart");
}

/// `rtgs status --json` against these `/metrics` listeners: (exit code, report).
fn status(addrs: &[String], json: bool) -> (Option<i32>, String) {
    let out = Command::new(common::BIN)
        .arg("status")
        .args(json.then_some("--json"))
        .args(addrs.iter().flat_map(|a| ["--addr", a.as_str()]))
        .output()
        .unwrap_or_else(|e| panic!("cannot run rtgs status: {e}"));
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
}

fn status_json(addrs: &[String]) -> (Option<i32>, serde_json::Value) {
    let (code, out) = status(addrs, true);
    (code, serde_json::from_str(&out).unwrap_or_else(|e| panic!("rtgs status --json: {e}: {out}")))
}

/// i. `rtgs status` asks every node's `GET /status`: three centers up, one leader, the seqs of a
/// converged cluster; after a `kill -9` the center is `up: false` and the exit status non-zero.
#[test]
fn l_status_shows_every_center_and_a_killed_one_as_down() {
    let _one = lock();
    let mut c = Cluster::new("i");
    c.start_all();
    let report = c.load_finish(c.load_spawn("I", &["--transfers", "2000", "--accounts", "100"]));
    assert_eq!(report["ok"], true);
    c.wait_converged(60);
    let s = c.statuses();
    let addrs: Vec<String> = s
        .iter()
        .map(|s| {
            s.as_ref().and_then(|s| s["metrics_listen"].as_str()).unwrap_or_else(|| panic!("{s:?}")).into()
        })
        .collect();
    let leader = c.leader();
    let (code, v) = status_json(&addrs);
    eprintln!("rtgs status: {v}");
    assert_eq!((code, &v["ok"]), (Some(0), &serde_json::json!(true)), "{v}");
    let centers = v["centers"].as_array().unwrap_or_else(|| panic!("no centers: {v}"));
    assert_eq!(centers.len(), 3);
    let committed = u(&centers[0]["seq_committed"]);
    assert!(committed >= 2000, "the load's entries are committed: {v}");
    for (i, center) in centers.iter().enumerate() {
        assert_eq!(center["id"], format!("DC{}", i + 1), "{v}");
        assert_eq!((&center["up"], &center["halted"]), (&true.into(), &false.into()), "{v}");
        // Converged: every center committed and finalized the same seq, none behind.
        assert_eq!(u(&center["seq_committed"]), committed, "{v}");
        assert!(u(&center["seq_applied"]) >= committed, "{v}");
        assert_eq!(u(&center["seq_final"]), committed, "{v}");
        assert_eq!(u(&center["lag_entries"]), 0, "{v}");
        assert_eq!(center["alerts"], serde_json::json!([]), "{v}");
    }
    let leaders: Vec<usize> = (0..3).filter(|&i| centers[i]["leader"] == true).collect();
    assert_eq!(leaders, [leader - 1], "exactly one leader, the one the status files name: {v}");
    assert_eq!(v["leader"], format!("DC{leader}"));
    assert!(u(&centers[leader - 1]["epoch"]) > 0 && v["epoch"] == centers[leader - 1]["epoch"], "{v}");

    let victim = if leader == 3 { 2 } else { 3 };
    c.kill9(victim);
    let (code, v) = status_json(&addrs);
    eprintln!("rtgs status with DC{victim} killed: {v}");
    assert_eq!(code, Some(1), "a center down is a non-zero exit: {v}");
    assert_eq!(v["ok"], false);
    let centers = v["centers"].as_array().unwrap_or_else(|| panic!("no centers: {v}"));
    for (i, center) in centers.iter().enumerate() {
        assert_eq!(center["up"], i + 1 != victim, "{v}");
    }
    let down = &centers[victim - 1];
    assert!(down["error"].is_string() && down["seq_committed"].is_null(), "{v}");
    // Placed by the acks the survivors heard of it.
    assert!(down["lag_entries"].as_u64().is_some_and(|l| l <= committed), "{v}");
    assert_eq!(v["leader"], format!("DC{leader}"));
    let (code, table) = status(&addrs, false);
    assert_eq!(code, Some(1));
    assert!(table.contains("DOWN") && table.contains("NOT OK: 2 of 3 centers up"), "{table}");
    c.reconcile();
}

/// j. `rtgs reconcile` while transfers flow: the centers stand at different seqs (lag), compared
/// at their common seq they never differ.
#[test]
fn m_reconcile_on_a_loaded_cluster_reports_lag_never_a_difference() {
    let _one = lock();
    let mut c = Cluster::new("j");
    c.start_all();
    let mut load = c.load_spawn("J", &["--transfers", "80000", "--accounts", "1000", "--rate", "8000"]);
    c.wait_flowing(2_000);
    let (mut rounds, mut lagging) = (0, 0);
    while rounds < 40 && load.try_wait().unwrap_or_else(|e| panic!("{e}")).is_none() {
        // One reading round: no waiting for the centers to stand still.
        let out = Command::new(common::BIN)
            .args(["reconcile", "--json", "--attempts", "1", "--db-prefix", &format!("{}_dc", c.prefix)])
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("reconcile: {e}: {}", String::from_utf8_lossy(&out.stderr)));
        assert!(out.status.success() && v["ok"] == true, "a live cluster reported a difference: {v}");
        assert_eq!(v["differences"], serde_json::json!([]), "{v}");
        let centers = v["centers"].as_array().unwrap_or_else(|| panic!("{v}"));
        let seqs: Vec<u64> = centers.iter().map(|c| u(&c["seq_committed"])).collect();
        let highest = seqs.iter().copied().max().unwrap_or(0);
        assert_eq!(u(&v["common_seq"]), seqs.iter().copied().min().unwrap_or(0), "{v}");
        for (center, seq) in centers.iter().zip(&seqs) {
            assert_eq!(u(&center["lag_entries"]), highest - seq, "{v}");
            assert_eq!(u(&center["entries_past_common"]), seq - u(&v["common_seq"]), "{v}");
        }
        lagging += usize::from(highest > u(&v["common_seq"]));
        rounds += 1;
    }
    eprintln!("DRILL j: {rounds} readings under load, {lagging} with centers at different seqs");
    assert!(lagging > 0, "no reading saw the centers at different seqs, so the drill proved nothing");
    c.finish_and_check(load, "J", 80_000, "not every transfer became final");
}

/// The broker on memory storage killed and started again: its topics come back empty, with new
/// identities. No node dies — each restarts itself when the broker goes away (librdkafka would
/// crash on the new identities) — each halts because the broker lost data it had read and
/// finalizes nothing, and all go on after `rtgs rebuild-journal`.
#[test]
fn n_a_wiped_broker_halts_the_nodes_until_the_journal_is_rebuilt() {
    let _one = lock();
    let mut c = Cluster::new("n");
    let broker = OwnBroker::new(c.dir.join("broker"), 9095, Some("memory://tansu/"));
    broker.start();
    c.bootstrap = broker.bootstrap();
    c.start_all();
    let report = c.load_finish(c.load_spawn("N", &["--transfers", "20000", "--accounts", "1000"]));
    assert_eq!(report["ok"], true);
    c.wait_converged(60);
    // A load runs across the wipe: it must end with a clear error, not die in librdkafka.
    let across = c
        .load_spawn("NX", &["--transfers", "200000", "--accounts", "1000", "--rate", "5000", "--skip-setup"]);
    c.wait("transfers of the second load flowing", 60, |s| {
        s.iter().flatten().any(|s| u(&s["seq_committed"]) > 25_000)
    });
    broker.kill9();
    std::thread::sleep(Duration::from_secs(2));
    broker.start();
    let out = across.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "the load across the wipe ended by {:?}: {said}", out.status);
    assert!(said.contains("came back without its data"), "the load did not say why it stopped: {said}");
    // `statuses` fails the drill if a node process exited (a crash in librdkafka included).
    c.wait("every node to halt: the broker lost data", 120, |s| {
        s.iter().flatten().filter(|s| s["broker_data_lost"] == true && s["halted"] == true).count() == 3
    });
    let before: Vec<u64> = c.statuses().iter().flatten().map(|s| u(&s["seq_unfinal_first"])).collect();
    std::thread::sleep(Duration::from_secs(2));
    let after: Vec<u64> = c.statuses().iter().flatten().map(|s| u(&s["seq_unfinal_first"])).collect();
    assert_eq!(before, after, "finality moved while the nodes were halted");
    let out = Command::new(common::BIN)
        .args(["rebuild-journal", "--json", "--topic-prefix", &c.prefix])
        .args(["--seq-db", &format!("{}_seq", c.prefix), "--bootstrap", &c.bootstrap])
        .output()
        .unwrap_or_else(|e| panic!("cannot run rtgs rebuild-journal: {e}"));
    let rebuilt = c.command_report("rebuild-journal", out);
    assert!(u(&rebuilt["batches"]) > 0 && u(&rebuilt["seq_last"]) >= 20_000, "{rebuilt}");
    assert_eq!(u(&rebuilt["broker_generation"]), 1, "{rebuilt}");
    // A second rebuild is refused: the journal holds messages now.
    let again = Command::new(common::BIN)
        .args(["rebuild-journal", "--topic-prefix", &c.prefix])
        .args(["--seq-db", &format!("{}_seq", c.prefix), "--bootstrap", &c.bootstrap])
        .output()
        .unwrap_or_else(|e| panic!("cannot run rtgs rebuild-journal: {e}"));
    assert!(!again.status.success(), "a rebuild over a journal that holds messages must be refused");
    c.wait("every node to go on, and a leader", 120, |s| {
        s.iter().flatten().filter(|s| s["broker_data_lost"] == false && s["halted"] == false).count() == 3
            && s.iter().flatten().any(|s| s["leader"] == true)
    });
    let report = c.load_finish(c.load_spawn("N2", &["--transfers", "10000", "--accounts", "1000"]));
    assert_eq!(report["ok"], true, "the cluster did not go on after the rebuild");
    c.settle_and_check("N", 20_000);
    c.assert_exactly_once_and_final("N2", 10_000);
}

/// One center acks a seq with a state other than the one it computed, as a diverged center
/// would (`RTGS_FAULT_DIVERGE_AT_SEQ`): every center halts finality with a divergence, the
/// series say so, nothing becomes final after it was counted (what two honest centers agreed on
/// before may be), and the ledgers are one.
#[test]
fn o_a_divergence_on_a_real_node_halts_finality_everywhere() {
    let _one = lock();
    let mut c = Cluster::new("o");
    c.extra_env[2].push(("RTGS_FAULT_DIVERGE_AT_SEQ".into(), "5000".into()));
    c.start_all();
    let load = c.load_at("O", 20_000, 10_000, 20);
    c.wait("every center to halt on the divergence", 90, |s| {
        s.iter().flatten().filter(|s| s["halted"] == true && s["halted_reason"] == "divergence").count() == 3
    });
    let report = c.load_finish(load);
    assert_eq!(report["ok"], false, "transfers past a divergence cannot all be final: {report}");
    let before: Vec<u64> = c.statuses().iter().flatten().map(|s| u(&s["seq_unfinal_first"])).collect();
    std::thread::sleep(Duration::from_secs(3));
    let s = c.statuses();
    let after: Vec<u64> = s.iter().flatten().map(|s| u(&s["seq_unfinal_first"])).collect();
    assert_eq!(before, after, "finality moved after the divergence");
    // Seqs after 5,000 may have become final before the diverging ack was counted (two honest
    // centers agreed on them: a quorum); none does once it is.
    assert!(after.iter().all(|&f| f < 20_000), "finality ran through the divergence: {after:?}");
    for (i, st) in s.iter().enumerate() {
        let st = st.as_ref().unwrap_or_else(|| panic!("DC{} status", i + 1));
        assert!(u(&st["divergences"]) > 0, "DC{} counted no divergence: {st}", i + 1);
        let addr = st["metrics_listen"].as_str().unwrap_or_else(|| panic!("metrics address: {st}"));
        let metrics = get(addr, "/metrics");
        assert!(
            metrics.lines().any(|l| l.starts_with("rtgs_finality_halted") && l.trim_end().ends_with(" 1")),
            "DC{}: rtgs_finality_halted is not 1",
            i + 1
        );
    }
    // Only the ack differed: the ledgers and everything final are one.
    c.reconcile();
}

/// A bare HTTP/1.0 GET (the whole body, headers dropped).
fn get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap_or_else(|e| panic!("{addr}: {e}"));
    let _ = stream.write_all(format!("GET {path} HTTP/1.0\r\nhost: 127.0.0.1\r\n\r\n").as_bytes());
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response.split_once("\r\n\r\n").map(|(_, body)| body.to_string()).unwrap_or_default()
}

/// The README's three terminals as written: `init-3centers-db.sh` prepares the databases (twice:
/// it is safe to run again), `run-dc1.sh` .. `run-dc3.sh` start the nodes, a load reconciles, a
/// `kill -9` of a node started that way is survived; then `infra-down.sh` stops the servers and
/// `infra-up.sh` starts them again.
#[test]
fn p_the_three_terminal_scripts_run_a_cluster_as_the_readme_says() {
    let _one = lock();
    let mut c = Cluster::new("p");
    c.via_scripts = true;
    let scripts = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts");
    for _ in 0..2 {
        let out = Command::new("bash")
            .arg(scripts.join("init-3centers-db.sh"))
            .env("RTGS_SEQ_DB", format!("{}_seq", c.prefix))
            .env("RTGS_DB_PREFIX", format!("{}_dc", c.prefix))
            .output()
            .unwrap_or_else(|e| panic!("cannot run init-3centers-db.sh: {e}"));
        assert!(out.status.success(), "init-3centers-db.sh: {}", String::from_utf8_lossy(&out.stderr));
    }
    let files =
        std::fs::read_dir(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../migrations/center"))
            .map(|d| d.count())
            .unwrap_or(0) as i64;
    for center in 1..=3 {
        let rows = c.sql(center, "SELECT count(*) FROM schema_migrations", &[]);
        let applied: i64 = rows.first().map_or(0, |r| r.get(0));
        assert_eq!(applied, files, "DC{center}'s database is at the latest schema, each migration once");
    }
    c.start_all();
    let victim = if c.leader() == 3 { 2 } else { 3 };
    let load = c.load_spawn("P", &["--transfers", "30000", "--accounts", "1000", "--rate", "10000"]);
    c.wait_flowing(3_000);
    c.kill9(victim);
    c.start(victim);
    c.finish_and_check(load, "P", 30_000, "not every transfer became final");
    for n in 1..=3 {
        c.kill9(n);
    }
    let down =
        Command::new("bash").arg(scripts.join("infra-down.sh")).output().unwrap_or_else(|e| panic!("{e}"));
    assert!(down.status.success(), "infra-down.sh: {}", String::from_utf8_lossy(&down.stderr));
    assert!(
        std::net::TcpStream::connect("127.0.0.1:9092").is_err(),
        "the broker still listens after infra-down.sh"
    );
    let up = Command::new("bash")
        .arg(scripts.join("infra-up.sh"))
        .arg("all")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(up.status.success(), "infra-up.sh: {}", String::from_utf8_lossy(&up.stderr));
    assert!(std::net::TcpStream::connect("127.0.0.1:9092").is_ok(), "no broker after infra-up.sh");
    assert!(std::net::TcpStream::connect("127.0.0.1:5432").is_ok(), "no PostgreSQL after infra-up.sh");
}

/// The only center running finalizes nothing for 3 s (one of three is no quorum) while its
/// applied entries wait; its statuses before and after.
fn alone_finalizes_nothing(c: &mut Cluster, center: usize) -> (serde_json::Value, serde_json::Value) {
    let before = c.statuses()[center - 1].clone().unwrap_or_else(|| panic!("DC{center} status"));
    std::thread::sleep(Duration::from_secs(3));
    let after = c.statuses()[center - 1].clone().unwrap_or_else(|| panic!("DC{center} status"));
    assert_eq!(
        before["finalized"], after["finalized"],
        "finalized with one center of three: {before} → {after}"
    );
    assert!(
        u(&after["seq_applied"]) >= u(&after["seq_unfinal_first"]),
        "applied entries wait for a quorum: {after}"
    );
    (before, after)
}

#[test]
fn q_the_push_path_cut_twice_or_off_loses_nothing() {
    let _one = lock();
    let mut c = Cluster::new("q");
    // DC3 without the push path: it hears everything through the broker only.
    c.extra_env[2].push(("RTGS_NO_PUSH".into(), "true".into()));
    c.start_all();
    let load = c.load_at("Q", 40_000, 8_000, 120);
    c.wait_flowing(2_000);
    let mut cut = 0;
    for _ in 0..2 {
        // Every push session of the sequencer's database is cut (as a failover of PostgreSQL
        // or a network blip would): the broker carries everything until they are back.
        let rows = c.sql(
            1,
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name LIKE 'rtgs-push-%'",
            &[],
        );
        cut += rows[0].get::<_, i64>(0);
        std::thread::sleep(Duration::from_secs(2));
    }
    assert!(cut >= 2, "two push sessions (DC1, DC2) cut at least once: {cut}");
    c.finish_and_check(load, "Q", 40_000, "after the push sessions were cut");
    let s = c.statuses();
    for (i, s) in s.iter().enumerate() {
        let s = s.as_ref().unwrap_or_else(|| panic!("DC{} wrote no status", i + 1));
        let p = &s["push"];
        if i == 2 {
            assert_eq!(u(&p["journal_notices"]) + u(&p["ack_notices"]), 0, "DC3 runs without: {p}");
        } else {
            assert!(u(&p["reconnects"]) >= 1, "DC{} made its push session again: {p}", i + 1);
            assert!(u(&p["journal_notices"]) > 0, "DC{}: {p}", i + 1);
        }
    }
}

/// r. Acks that only went by the push path reach the topic after a restart. DC1 and DC2 run with
/// their acks pushed and never published (`RTGS_FAULT_ACKS_PUSH_ONLY`: as if each node died
/// before the broker confirmed them), DC3 is down: the two finalize everything from the pushed
/// acks alone, and the topic holds none of their acks. Both are killed and started again
/// without the fault, and DC3 comes back: it reads the topic, where it can find the acks it needs
/// only if a restarted center publishes every ack after its published mark (center migration
/// 0008). Before that rule a restart re-acked from its first unfinal seq — nothing here, all
/// final — and DC3's finality stood still for good (drill k caught it once, by chance).
#[test]
fn r_acks_that_went_only_by_push_reach_the_topic_after_a_restart() {
    let _one = lock();
    let mut c = Cluster::new("r");
    const FAULT: &str = "RTGS_FAULT_ACKS_PUSH_ONLY";
    for env in &mut c.extra_env[..2] {
        env.push((FAULT.into(), "true".into()));
    }
    c.start(1);
    c.start(2);
    // Both must listen on the push path before the load: under the fault a push sent before the
    // other node listens is lost for good (a clean clone's CI once started DC2's session late,
    // and DC2 never finalized its own payments).
    c.wait("a sequencer leader among DC1 and DC2, both listening on the push path", 60, |s| {
        s[..2].iter().flatten().filter(|s| s["leader"] == true).count() == 1
            && s[..2].iter().all(|s| s.as_ref().is_some_and(|s| s["push"]["listening"] == true))
    });
    // Small commits (a slow rate): a commit's acks are pushed only up to 1,000.
    let report = c.load_finish(c.load_spawn(
        "R",
        &[
            "--transfers",
            "3000",
            "--accounts",
            "200",
            "--rate",
            "500",
            "--timeout-s",
            "120",
            "--origins",
            "1,2",
        ],
    ));
    assert_eq!(report["ok"], true, "DC1 and DC2 finalize from pushed acks alone: {report}");
    // Everything each of them applied is final there (their status files come every 2 s).
    c.wait("all final at DC1 and DC2", 30, |s| {
        s[..2].iter().all(|s| {
            s.as_ref().is_some_and(|s| {
                u(&s["seq_applied"]) > 3000 && u(&s["seq_unfinal_first"]) > u(&s["seq_applied"])
            })
        })
    });
    let s = c.statuses();
    let marks: Vec<u64> = s[..2].iter().flatten().map(|s| u(&s["seq_unfinal_first"])).collect();
    c.kill9(1);
    c.kill9(2);
    for env in &mut c.extra_env[..2] {
        env.retain(|(k, _)| k != FAULT);
    }
    c.start(1);
    c.start(2);
    c.start(3);
    let waited = c.wait("DC3 to finalize what DC1 and DC2 finalized", 90, |s| {
        s[2].as_ref().is_some_and(|s| u(&s["seq_unfinal_first"]) >= marks[0].min(marks[1]))
    });
    eprintln!("r: DC3 finalized the pushed-only seqs {waited:?} after the restarts");
    for center in 1..=2 {
        assert!(
            c.log(center).contains("published again (not confirmed in the topic before the restart)"),
            "DC{center} did not publish its acks again:\n{}",
            c.log(center)
        );
    }
    c.settle_and_check("R", 3000);
}
