//! Drills of the production engine: three real `rtgs node` processes on the real broker and
//! PostgreSQL (started through `scripts/infra-up.sh`; a test fails, never skips, if they cannot
//! be started), loaded by `rtgs load`. Every drill ends by checking that the three center
//! databases reconcile (`rtgs reconcile`: same balances, same state hash, money conserved) and
//! that every submitted `bmi` was applied exactly once in every center and is final.
//!
//! Each drill has its own topic prefix and databases. The drills run one at a time (they share
//! two cores with the servers).

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_rtgs");
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn servers() {
    if let Err(e) = rtgs_pg::dev::start_infra("all") {
        panic!("PostgreSQL and the broker could not be started, so this drill cannot run: {e}");
    }
}

struct Cluster {
    prefix: String,
    dir: PathBuf,
    nodes: Vec<Option<Child>>,
    extra_env: Vec<Vec<(String, String)>>,
    /// Load generators started (killed on drop if a drill fails before they finish).
    loads: std::cell::RefCell<Vec<u32>>,
}

impl Cluster {
    /// Fresh databases and topics named after `name`; nothing started yet.
    fn new(name: &str) -> Cluster {
        servers();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() % 1_000_000_000);
        let prefix = format!("drill_{name}_{nanos}");
        let dir = std::env::temp_dir().join(&prefix);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        Cluster {
            prefix,
            dir,
            nodes: (0..3).map(|_| None).collect(),
            extra_env: vec![Vec::new(); 3],
            loads: Default::default(),
        }
    }

    fn start(&mut self, center: usize) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("dc{center}.log")))
            .unwrap_or_else(|e| panic!("{e}"));
        let _ = std::fs::remove_file(self.status_path(center));
        let mut cmd = Command::new(BIN);
        cmd.arg("node")
            .env("CENTER_ID", center.to_string())
            .env("CENTER_COUNT", "3")
            .env("PORT_OFFSET", (center - 1).to_string())
            .env("RTGS_DB", format!("{}_dc{center}", self.prefix))
            .env("RTGS_SEQ_DB", format!("{}_seq", self.prefix))
            .env("RTGS_TOPIC_PREFIX", &self.prefix)
            .env("RTGS_STATUS_FILE", self.status_path(center))
            .env("RTGS_STATUS_INTERVAL_S", "2")
            // Quiescent after the load, so that the databases can be compared exactly.
            .env("RTGS_NO_IDLE_TICK", "true")
            .stdout(Stdio::null())
            .stderr(log);
        for (k, v) in &self.extra_env[center - 1] {
            cmd.env(k, v);
        }
        let child = cmd.spawn().unwrap_or_else(|e| panic!("cannot start {BIN} node: {e}"));
        self.nodes[center - 1] = Some(child);
    }

    fn start_all(&mut self) {
        for c in 1..=3 {
            self.start(c);
        }
        // Settled: three centers up and the same leader at the same epoch for 3 s (the group
        // rebalances while its members join, and leadership may move meanwhile).
        let mut seen: Option<(usize, u64, Instant)> = None;
        self.wait("a settled sequencer leader and three running centers", 90, |s| {
            let leader = (1..=3).find(|&c| s[c - 1].as_ref().is_some_and(|s| s["leader"] == true));
            let (Some(leader), 3) = (leader, s.iter().filter(|s| s.is_some()).count()) else {
                seen = None;
                return false;
            };
            let epoch = s[leader - 1].as_ref().map_or(0, |s| u(&s["epoch"]));
            match seen {
                Some((l, e, since)) if l == leader && e == epoch => since.elapsed() >= Duration::from_secs(3),
                _ => {
                    seen = Some((leader, epoch, Instant::now()));
                    false
                }
            }
        });
    }

    /// The highest epoch any running center has seen.
    fn epoch_max(&mut self) -> u64 {
        self.statuses().iter().flatten().map(|s| u(&s["epoch"])).max().unwrap_or(0)
    }

    fn kill9(&mut self, center: usize) {
        if let Some(mut child) = self.nodes[center - 1].take() {
            let _ = child.kill(); // SIGKILL
            let _ = child.wait();
        }
        let _ = std::fs::remove_file(self.status_path(center));
    }

    fn status_path(&self, center: usize) -> PathBuf {
        self.dir.join(format!("dc{center}.json"))
    }

    /// The status of each running center (None: not running or no status yet).
    fn statuses(&mut self) -> Vec<Option<Value>> {
        (1..=3)
            .map(|c| {
                if let Some(child) = self.nodes[c - 1].as_mut() {
                    if let Ok(Some(exit)) = child.try_wait() {
                        panic!("DC{c} exited ({exit}); log:\n{}", self.log(c));
                    }
                } else {
                    return None;
                }
                std::fs::read(self.status_path(c)).ok().and_then(|b| serde_json::from_slice(&b).ok())
            })
            .collect()
    }

    fn log(&self, center: usize) -> String {
        let text = std::fs::read_to_string(self.dir.join(format!("dc{center}.log"))).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    fn wait(&mut self, what: &str, seconds: u64, mut done: impl FnMut(&[Option<Value>]) -> bool) -> Duration {
        let started = Instant::now();
        loop {
            let s = self.statuses();
            if done(&s) {
                return started.elapsed();
            }
            if started.elapsed() > Duration::from_secs(seconds) {
                panic!(
                    "waited {seconds} s for {what}; statuses: {s:?}\nDC1:\n{}\nDC2:\n{}\nDC3:\n{}",
                    self.log(1),
                    self.log(2),
                    self.log(3)
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn leader(&mut self) -> usize {
        let s = self.statuses();
        (1..=3)
            .find(|c| s[c - 1].as_ref().is_some_and(|s| s["leader"] == true))
            .unwrap_or_else(|| panic!("no leader: {s:?}"))
    }

    /// `rtgs load` with these extra arguments, in the background.
    fn load_spawn(&self, run_id: &str, args: &[&str]) -> Child {
        let child = Command::new(BIN)
            .args(["load", "--json", "--topic-prefix", &self.prefix, "--run-id", run_id])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start rtgs load: {e}"));
        self.loads.borrow_mut().push(child.id());
        child
    }

    fn load_finish(&self, child: Child) -> Value {
        let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
        let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "rtgs load did not report ({e}): {}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        eprintln!("load report: {report}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !stderr.trim().is_empty() {
            eprintln!("load said:\n{stderr}");
        }
        report
    }

    /// All three running centers applied the same seq and finalized everything up to it.
    fn wait_converged(&mut self, seconds: u64) -> Duration {
        self.wait("the three centers to converge", seconds, |s| {
            let applied: Vec<u64> =
                s.iter().flatten().map(|s| s["seq_committed"].as_u64().unwrap_or(0)).collect();
            let unfinal: Vec<u64> =
                s.iter().flatten().map(|s| s["seq_unfinal_first"].as_u64().unwrap_or(0)).collect();
            applied.len() == 3
                && applied.iter().all(|a| *a == applied[0] && *a > 0)
                && unfinal.iter().all(|u| *u > applied[0])
        })
    }

    /// `rtgs reconcile` says the three databases agree.
    fn reconcile(&self) {
        let out = Command::new(BIN)
            .args(["reconcile", "--json", "--db-prefix", &format!("{}_dc", self.prefix)])
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        let report: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("reconcile: {e}: {}", String::from_utf8_lossy(&out.stderr)));
        assert!(out.status.success() && report["ok"] == true, "the centers do not reconcile: {report}");
        let hashes: Vec<&Value> = report["centers"]
            .as_array()
            .map(|c| c.iter().map(|c| &c["state_hash"]).collect())
            .unwrap_or_default();
        assert_eq!(hashes.len(), 3);
        assert!(hashes.iter().all(|h| *h == hashes[0]), "state hashes differ: {report}");
    }

    /// Every `RUN-T<i>` for i < n is applied exactly once in every center and is final there.
    fn assert_exactly_once_and_final(&self, run_id: &str, n: u64) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        rt.block_on(async {
            let pg = rtgs_pg::dev::PgSettings::from_env();
            for c in 1..=3 {
                let db = format!("{}_dc{c}", self.prefix);
                let pool = rtgs_pg::pool(&pg.host, pg.port, &pg.user, &pg.password, &db, 1)
                    .unwrap_or_else(|e| panic!("{e}"));
                let client = pool.get().await.unwrap_or_else(|e| panic!("{db}: {e}"));
                let pattern = format!("{run_id}-T%");
                let row = client
                    .query_one(
                        "SELECT count(*), count(DISTINCT bmi),
                                count(*) FILTER (WHERE NOT EXISTS (
                                    SELECT 1 FROM finality f WHERE e.seq BETWEEN f.seq_first AND f.seq_last))
                           FROM applied_entry e WHERE bmi LIKE $1",
                        &[&pattern],
                    )
                    .await
                    .unwrap_or_else(|e| panic!("{db}: {e}"));
                let (rows, distinct, unfinal): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
                assert_eq!(rows as u64, n, "{db}: {rows} applied entries for {n} submitted transfers");
                assert_eq!(distinct, rows, "{db}: a bmi was applied twice");
                assert_eq!(unfinal, 0, "{db}: {unfinal} applied transfers are not recorded final");
            }
        });
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // The drill failed: what the nodes said is the first thing to read.
            for c in 1..=3 {
                let log = std::fs::read_to_string(self.dir.join(format!("dc{c}.log"))).unwrap_or_default();
                let lines: Vec<&str> = log.lines().collect();
                eprintln!("---- last lines of DC{c}'s log ({}) ----", self.dir.display());
                for line in &lines[lines.len().saturating_sub(60)..] {
                    eprintln!("{line}");
                }
            }
        }
        for c in 1..=3 {
            self.kill9(c);
        }
        for pid in self.loads.borrow().iter() {
            // Finished loads are gone already; a failed drill's load is stopped here.
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).stderr(Stdio::null()).status();
        }
    }
}

fn lock() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn a_normal_run_of_50000_transfers_reconciles() {
    let _one = lock();
    let mut c = Cluster::new("a");
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
    c.wait_converged(120);
    c.reconcile();
    c.assert_exactly_once_and_final("B", 100_000);
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
    c.wait("transfers flowing", 60, |s| s.iter().flatten().any(|s| u(&s["seq_committed"]) > 5_000));
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
    let load = c.load_spawn(
        "D",
        &["--transfers", "60000", "--accounts", "1000", "--rate", "20000", "--timeout-s", "240"],
    );
    c.wait("transfers flowing", 60, |s| s.iter().flatten().any(|s| u(&s["seq_committed"]) > 5_000));
    for &v in &victims {
        c.kill9(v);
    }
    // The survivor goes on sequencing and applying, but nothing more becomes final.
    std::thread::sleep(Duration::from_secs(2));
    let before = c.statuses()[leader - 1].clone().unwrap_or_else(|| panic!("leader status"));
    std::thread::sleep(Duration::from_secs(3));
    let after = c.statuses()[leader - 1].clone().unwrap_or_else(|| panic!("leader status"));
    assert_eq!(
        before["finalized"], after["finalized"],
        "finalized with one center of three: {before} → {after}"
    );
    assert!(
        u(&after["seq_applied"]) >= u(&after["seq_unfinal_first"]),
        "applied entries wait for a quorum: {after}"
    );
    assert!(
        u(&after["seq_applied"]) > u(&before["seq_unfinal_first"]),
        "the survivor keeps applying: {after}"
    );
    for &v in &victims {
        c.start(v);
    }
    let report = c.load_finish(load);
    assert_eq!(report["ok"], true, "finality did not resume after the centers came back");
    c.wait_converged(120);
    c.reconcile();
    c.assert_exactly_once_and_final("D", 60_000);
}

#[test]
fn e_postgresql_restart_under_load_loses_nothing() {
    let _one = lock();
    let mut c = Cluster::new("e");
    c.start_all();
    let load = c.load_spawn(
        "E",
        &["--transfers", "100000", "--accounts", "1000", "--rate", "20000", "--timeout-s", "240"],
    );
    c.wait("transfers flowing", 60, |s| s.iter().flatten().any(|s| u(&s["seq_committed"]) > 5_000));
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
