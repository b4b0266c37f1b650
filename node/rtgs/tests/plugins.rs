//! The production engine hosting the collection plugin: three real `rtgs node --collection`
//! processes on the real broker and PostgreSQL (started through `scripts/infra-up.sh`; the test
//! fails, never skips, if they cannot be started), driven by `rtgs collect`. It checks that every
//! deposit is swept, that the three centers' stored plugin states (`plugin_state`) are equal and
//! at their ledger watermark, that the databases reconcile, and that a center killed with
//! SIGKILL resumes from its stored plugin state and still agrees after more plugin entries.
//!
//! The helpers are those of `cluster.rs` (copied: integration tests are separate crates).

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_rtgs");
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
const WALLETS: u64 = 400;
const RELAYERS: u64 = 16;

/// A stored `plugin_state` row: kind, seq_applied, owner, state_hash.
type PluginRow = (String, i64, i16, i64);

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
            // Quiescent after a cycle, so that the databases can be compared exactly.
            .env("RTGS_NO_IDLE_TICK", "true")
            .env("RTGS_COLLECTION", "true")
            .env("RTGS_COLLECTION_WALLETS", WALLETS.to_string())
            .env("RTGS_COLLECTION_RELAYERS", RELAYERS.to_string())
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

    /// `rtgs collect` round `round`, waiting on the three status files; its JSON report.
    fn collect(&self, round: u64) -> Value {
        let mut cmd = Command::new(BIN);
        cmd.args(["collect", "--topic-prefix", &self.prefix, "--timeout-s", "40"])
            .args(["--wallets", &WALLETS.to_string(), "--relayers", &RELAYERS.to_string()])
            .args(["--round", &round.to_string()]);
        for c in 1..=3 {
            cmd.arg("--status-file").arg(self.status_path(c));
        }
        let out = cmd.output().unwrap_or_else(|e| panic!("cannot run rtgs collect: {e}"));
        assert!(
            out.status.success(),
            "rtgs collect failed: {}\n{}\nDC1:\n{}\nDC2:\n{}\nDC3:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.log(1),
            self.log(2),
            self.log(3)
        );
        let report: Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("collect report: {e}"));
        eprintln!("collect report: {report}");
        report
    }

    /// Per center: (watermark seq, plugin rows as (kind, seq_applied, owner, state_hash)).
    fn plugin_rows(&self) -> Vec<(i64, Vec<PluginRow>)> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        rt.block_on(async {
            let pg = rtgs_pg::dev::PgSettings::from_env();
            let mut out = Vec::new();
            for c in 1..=3 {
                let db = format!("{}_dc{c}", self.prefix);
                let pool = rtgs_pg::pool(&pg.host, pg.port, &pg.user, &pg.password, &db, 1)
                    .unwrap_or_else(|e| panic!("{e}"));
                let client = pool.get().await.unwrap_or_else(|e| panic!("{db}: {e}"));
                let w = client
                    .query_one("SELECT seq_applied FROM watermark WHERE id = 1", &[])
                    .await
                    .unwrap_or_else(|e| panic!("{db}: {e}"));
                let rows = client
                    .query("SELECT kind, seq_applied, owner, state_hash FROM plugin_state ORDER BY kind", &[])
                    .await
                    .unwrap_or_else(|e| panic!("{db}: {e}"))
                    .iter()
                    .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
                    .collect();
                out.push((w.get(0), rows));
            }
            out
        })
    }

    /// The three centers' stored plugin states are one state, at each center's watermark.
    fn assert_plugin_states_agree(&self) {
        let rows = self.plugin_rows();
        eprintln!("plugin_state rows: {rows:?}");
        for (c, (watermark, plugins)) in rows.iter().enumerate() {
            assert_eq!(plugins.len(), 1, "DC{}: one plugin row expected: {plugins:?}", c + 1);
            assert_eq!(plugins[0].1, *watermark, "DC{}: plugin state not at the watermark", c + 1);
        }
        assert!(rows.iter().all(|r| r == &rows[0]), "the centers' plugin states differ: {rows:?}");
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

fn plugins(status: &Value) -> &Value {
    &status["plugins"]
}

#[test]
fn collection_sweeps_agree_across_centers_and_survive_a_kill9() {
    let _one = lock();
    let mut c = Cluster::new("plug");
    c.start_all();
    let report = c.collect(1);
    assert_eq!(u(&report["wallets"]), WALLETS);
    c.wait_converged(30);
    let s = c.statuses();
    for (i, s) in s.iter().enumerate() {
        let p = plugins(s.as_ref().unwrap_or_else(|| panic!("DC{} has no status", i + 1)));
        assert_eq!(u(&p["collection_rows_collected"]), WALLETS, "DC{}: {p}", i + 1);
        assert_eq!(u(&p["collection_rows_queued"]), 0, "DC{}: {p}", i + 1);
        assert!(u(&p["collection_batches_confirmed"]) > 0, "DC{}: {p}", i + 1);
        assert_eq!(u(&p["owner_center"]), 1, "DC{}: {p}", i + 1);
    }
    // Only the owner executed effects.
    let handed: Vec<u64> = s.iter().flatten().map(|s| u(&plugins(s)["effects_handed"])).collect();
    assert!(handed[0] > 0 && handed[1] == 0 && handed[2] == 0, "effects handed per center: {handed:?}");
    c.assert_plugin_states_agree();
    c.reconcile();

    // kill -9 a center that neither leads the sequencer nor owns the plugin, start it again: it
    // resumes from its stored plugin state and applies the next plugin entries like the others.
    let leader = c.leader();
    let victim = if leader == 3 { 2 } else { 3 };
    c.kill9(victim);
    c.start(victim);
    c.wait("the restarted center to run with its plugins", 30, |s| {
        s[victim - 1].as_ref().is_some_and(|s| plugins(s)["live"] == true)
    });
    assert!(
        c.log(victim).contains("resume at seq") && c.log(victim).contains("(stored state)"),
        "DC{victim} did not resume from its stored plugin state:\n{}",
        c.log(victim)
    );
    // A second cycle: every deposit is collected already, so it reads balances and sweeps
    // nothing — plugin entries the restarted center applies on top of its restored state.
    let seq_before = c.plugin_rows()[0].0;
    c.collect(2);
    c.wait_converged(30);
    let rows = c.plugin_rows();
    assert!(rows[0].0 > seq_before, "the second cycle journaled nothing: {rows:?}");
    c.assert_plugin_states_agree();
    c.reconcile();
}

#[test]
fn a_silent_owner_is_replaced_through_the_journal() {
    let _one = lock();
    let mut c = Cluster::new("own");
    for env in &mut c.extra_env {
        // The failure detector needs acks to flow: idle ticks on.
        env.push(("RTGS_NO_IDLE_TICK".into(), "false".into()));
        env.push(("RTGS_OWNER_SILENCE_S".into(), "3".into()));
    }
    c.start_all();
    c.collect(1);
    c.kill9(1);
    // DC2 is the lowest center other than the silent owner: it proposes itself, term 1.
    c.wait("DC2 to own the plugin on both survivors", 40, |s| {
        s[1..].iter().all(|s| {
            s.as_ref().is_some_and(|s| plugins(s)["owner_center"] == 2 && plugins(s)["owner_term"] == 1)
        })
    });
    let s = c.statuses();
    let proposals: Vec<u64> = s[1..].iter().flatten().map(|s| u(&plugins(s)["owner_proposals"])).collect();
    assert!(proposals[0] >= 1 && proposals[1] == 0, "owner proposals of DC2, DC3: {proposals:?}");
    // The old owner comes back as a follower: same owner, same term, and it proposes nothing.
    c.start(1);
    c.wait("DC1 to see DC2 as owner", 40, |s| {
        s[0].as_ref().is_some_and(|s| {
            plugins(s)["live"] == true && plugins(s)["owner_center"] == 2 && plugins(s)["owner_term"] == 1
        })
    });
}
