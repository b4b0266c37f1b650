//! The drill harness shared by the production-engine tests (`cluster.rs`, `plugins.rs`,
//! `matching.rs`, `withdrawal.rs`, `node_api.rs`, `prometheus.rs`): three real `rtgs node`
//! processes on the real broker and PostgreSQL (started through `scripts/infra-up.sh`; a test fails, never skips, if
//! they cannot be started), each with its own topic prefix and databases, their status files,
//! `rtgs load`, `rtgs reconcile` and SQL checks. Drills run one at a time (they share two cores with the servers).
#![allow(dead_code)] // each test file uses its own part of the harness

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_rtgs");

/// The `rtgs` the cluster's nodes and loads run: this build's, or `RTGS_TEST_BIN` (another build
/// of the same source, e.g. the release binary when a drill takes figures).
/// How long a center's database may take to record finality its status already shows.
pub const FINALITY_RECORD_WAIT: Duration = Duration::from_secs(10);

pub fn bin() -> String {
    std::env::var("RTGS_TEST_BIN").unwrap_or_else(|_| BIN.to_string())
}
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

pub fn servers() {
    if let Err(e) = rtgs_pg::dev::start_infra("all") {
        panic!("PostgreSQL and the broker could not be started, so this drill cannot run: {e}");
    }
}

pub struct Cluster {
    pub prefix: String,
    pub dir: PathBuf,
    nodes: Vec<Option<Child>>,
    /// Per center: extra environment of its process.
    pub extra_env: Vec<Vec<(String, String)>>,
    /// The broker the nodes and `rtgs load` use (`RTGS_BOOTSTRAP`).
    pub bootstrap: String,
    /// Start the nodes through `scripts/run-dcN.sh` (the README's three terminals) with this
    /// binary as `RTGS_BIN`, instead of the binary directly.
    pub via_scripts: bool,
    /// Load generators started (killed on drop if a drill fails before they finish).
    loads: std::cell::RefCell<Vec<u32>>,
}

impl Cluster {
    /// Fresh databases and topics named after `name`; nothing started yet.
    pub fn new(name: &str) -> Cluster {
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
            bootstrap: "127.0.0.1:9092".into(),
            via_scripts: false,
            loads: Default::default(),
        }
    }

    pub fn start(&mut self, center: usize) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("dc{center}.log")))
            .unwrap_or_else(|e| panic!("{e}"));
        let _ = std::fs::remove_file(self.status_path(center));
        let mut cmd = if self.via_scripts {
            let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join(format!("../../scripts/run-dc{center}.sh"));
            let mut cmd = Command::new("bash");
            cmd.arg(script).env("RTGS_BIN", bin());
            cmd
        } else {
            let mut cmd = Command::new(bin());
            cmd.arg("node");
            cmd
        };
        cmd.env("CENTER_ID", center.to_string())
            .env("CENTER_COUNT", "3")
            .env("PORT_OFFSET", (center - 1).to_string())
            .env("RTGS_DB", format!("{}_dc{center}", self.prefix))
            .env("RTGS_SEQ_DB", format!("{}_seq", self.prefix))
            .env("RTGS_TOPIC_PREFIX", &self.prefix)
            .env("RTGS_BOOTSTRAP", &self.bootstrap)
            .env("RTGS_STATUS_FILE", self.status_path(center))
            .env("RTGS_STATUS_INTERVAL_S", "2")
            // Any free port: drills never collide with a cluster on the default 9100 + N.
            .env("RTGS_METRICS_LISTEN", "127.0.0.1:0")
            // Quiescent after the load, so that the databases can be compared exactly.
            .env("RTGS_NO_IDLE_TICK", "true")
            .stdout(Stdio::null())
            .stderr(log);
        for (k, v) in &self.extra_env[center - 1] {
            cmd.env(k, v);
        }
        let child = cmd.spawn().unwrap_or_else(|e| panic!("cannot start {} node: {e}", bin()));
        self.nodes[center - 1] = Some(child);
    }

    pub fn start_all(&mut self) {
        for c in 1..=3 {
            self.start(c);
        }
        // Settled: three centers up and the same leader at the same epoch for 1 s (the first
        // claim of the lease wins; a restarted leader takes its own lease back at once).
        let mut seen: Option<(usize, u64, Instant)> = None;
        self.wait("a settled sequencer leader and three running centers", 90, |s| {
            let leader = (1..=3).find(|&c| s[c - 1].as_ref().is_some_and(|s| s["leader"] == true));
            let (Some(leader), 3) = (leader, s.iter().filter(|s| s.is_some()).count()) else {
                seen = None;
                return false;
            };
            let epoch = s[leader - 1].as_ref().map_or(0, |s| u(&s["epoch"]));
            match seen {
                Some((l, e, since)) if l == leader && e == epoch => since.elapsed() >= Duration::from_secs(1),
                _ => {
                    seen = Some((leader, epoch, Instant::now()));
                    false
                }
            }
        });
    }

    /// The highest epoch any running center has seen.
    pub fn epoch_max(&mut self) -> u64 {
        self.statuses().iter().flatten().map(|s| u(&s["epoch"])).max().unwrap_or(0)
    }

    pub fn kill9(&mut self, center: usize) {
        if let Some(mut child) = self.nodes[center - 1].take() {
            let _ = child.kill(); // SIGKILL
            let _ = child.wait();
        }
        let _ = std::fs::remove_file(self.status_path(center));
    }

    pub fn status_path(&self, center: usize) -> PathBuf {
        self.dir.join(format!("dc{center}.json"))
    }

    /// The status of each running center (None: not running or no status yet).
    pub fn statuses(&mut self) -> Vec<Option<Value>> {
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

    pub fn log(&self, center: usize) -> String {
        let text = std::fs::read_to_string(self.dir.join(format!("dc{center}.log"))).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    pub fn wait(
        &mut self,
        what: &str,
        seconds: u64,
        mut done: impl FnMut(&[Option<Value>]) -> bool,
    ) -> Duration {
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

    pub fn leader(&mut self) -> usize {
        let s = self.statuses();
        (1..=3)
            .find(|c| s[c - 1].as_ref().is_some_and(|s| s["leader"] == true))
            .unwrap_or_else(|| panic!("no leader: {s:?}"))
    }

    /// `rtgs load` with these extra arguments, in the background.
    pub fn load_spawn(&self, run_id: &str, args: &[&str]) -> Child {
        let child = Command::new(bin())
            .args(["load", "--json", "--topic-prefix", &self.prefix, "--run-id", run_id])
            .args(args)
            .env("RTGS_BOOTSTRAP", &self.bootstrap)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start rtgs load: {e}"));
        self.loads.borrow_mut().push(child.id());
        child
    }

    pub fn load_finish(&self, child: Child) -> Value {
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

    /// `rtgs load` of `transfers` transfers over 1,000 accounts at `rate`/s, in the background.
    pub fn load_at(&self, run_id: &str, transfers: u64, rate: u64, timeout_s: u64) -> Child {
        let (transfers, rate, timeout_s) = (transfers.to_string(), rate.to_string(), timeout_s.to_string());
        let args =
            ["--transfers", &transfers, "--accounts", "1000", "--rate", &rate, "--timeout-s", &timeout_s];
        self.load_spawn(run_id, &args)
    }

    /// Until some center committed more than `seqs` (the load is flowing).
    pub fn wait_flowing(&mut self, seqs: u64) -> Duration {
        self.wait("transfers flowing", 60, |s| s.iter().flatten().any(|s| u(&s["seq_committed"]) > seqs))
    }

    /// The three centers converge, their databases reconcile, and every one of the `n` transfers
    /// of `run_id` was applied exactly once in every center and is final.
    pub fn settle_and_check(&mut self, run_id: &str, n: u64) {
        self.wait_converged(120);
        self.reconcile();
        self.assert_exactly_once_and_final(run_id, n);
    }

    /// The end of a drill under load: the load reports every transfer final (else `why`), then
    /// [`Self::settle_and_check`].
    pub fn finish_and_check(&mut self, load: Child, run_id: &str, n: u64, why: &str) {
        let report = self.load_finish(load);
        assert_eq!(report["ok"], true, "{why}: {report}");
        self.settle_and_check(run_id, n);
    }

    /// All three running centers applied the same seq and finalized everything up to it.
    pub fn wait_converged(&mut self, seconds: u64) -> Duration {
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
    pub fn reconcile(&self) {
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

    /// Every `RUN-T<i>` for i < n is applied exactly once in every center and is final there
    /// (a participant's, through the API, under its scoped key: `~` and its tag first).
    ///
    /// A center records finality with its next commit (of entries, or of finality alone), which
    /// can follow the status that showed it by a commit's time — longer while the committer works
    /// off a catch-up — so the finality records get [`FINALITY_RECORD_WAIT`] to appear.
    pub fn assert_exactly_once_and_final(&self, run_id: &str, n: u64) {
        let pattern = format!("{run_id}-T%");
        let pattern = if run_id == "API" { format!("~_______{pattern}") } else { pattern };
        for c in 1..=3 {
            let deadline = Instant::now() + FINALITY_RECORD_WAIT;
            let (rows, distinct, unfinal): (i64, i64, i64) = loop {
                let rows = self.sql(
                    c,
                    "SELECT count(*), count(DISTINCT bmi),
                            count(*) FILTER (WHERE NOT EXISTS (
                                SELECT 1 FROM finality f WHERE e.seq BETWEEN f.seq_first AND f.seq_last))
                       FROM applied_entry e WHERE bmi LIKE $1",
                    &[&pattern],
                );
                let counts = (rows[0].get(0), rows[0].get(1), rows[0].get(2));
                if counts.2 == 0 || Instant::now() > deadline {
                    break counts;
                }
                std::thread::sleep(Duration::from_millis(100));
            };
            let db = format!("{}_dc{c}", self.prefix);
            assert_eq!(rows as u64, n, "{db}: {rows} applied entries for {n} submitted transfers");
            assert_eq!(distinct, rows, "{db}: a bmi was applied twice");
            assert_eq!(unfinal, 0, "{db}: {unfinal} applied transfers are not recorded final");
        }
    }

    /// The rows of `query` in center `center`'s database.
    pub fn sql(
        &self,
        center: usize,
        query: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Vec<tokio_postgres::Row> {
        self.sql_in(&format!("{}_dc{center}", self.prefix), query, params)
    }

    /// The rows of `query` in database `db` (a center's, or the sequencer's `{prefix}_seq`).
    pub fn sql_in(
        &self,
        db: &str,
        query: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Vec<tokio_postgres::Row> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        rt.block_on(async {
            let pg = rtgs_pg::dev::PgSettings::from_env();
            let pool = rtgs_pg::pool(&pg.host, pg.port, &pg.user, &pg.password, db, 1)
                .unwrap_or_else(|e| panic!("{e}"));
            let client = pool.get().await.unwrap_or_else(|e| panic!("{db}: {e}"));
            client.query(query, params).await.unwrap_or_else(|e| panic!("{db}: {e}"))
        })
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
        if !std::thread::panicking() {
            // A drill that passed leaves nothing behind: its databases, topics and files go (a
            // failed one keeps them to be read). A day of runs left ~1,000 databases (18 GB) on
            // the server otherwise, and the broker's file grew by every drill's journal (3.4 GB
            // in a day, slowing the broker).
            self.drop_databases();
            self.delete_topics();
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

impl Cluster {
    /// Deletes the drill's four topics from its broker (best effort, bounded: a broker that is
    /// gone keeps them).
    fn delete_topics(&self) {
        use rdkafka::admin::{AdminClient, AdminOptions};
        use rdkafka::client::DefaultClientContext;
        let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
        let names = rtgs_kafka::topics::TopicNames::with_prefix(&self.prefix);
        let topics = [&names.inbound, &names.journal, &names.applied, &names.notify].map(String::as_str);
        let Ok(admin) = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .set("socket.timeout.ms", "3000")
            .create::<AdminClient<DefaultClientContext>>()
        else {
            return;
        };
        rt.block_on(async {
            let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(5)));
            let _ =
                tokio::time::timeout(Duration::from_secs(8), admin.delete_topics(&topics, &options)).await;
        });
    }

    /// Drops the drill's four databases (best effort: a server that is gone keeps them).
    fn drop_databases(&self) {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
        rt.block_on(async {
            let pg = rtgs_pg::dev::PgSettings::from_env();
            let conn = format!(
                "host={} port={} user={} password={} dbname=postgres",
                pg.host, pg.port, pg.user, pg.password
            );
            let Ok((admin, driver)) = tokio_postgres::connect(&conn, tokio_postgres::NoTls).await else {
                return;
            };
            let driver = tokio::spawn(driver);
            let dbs = ["dc1", "dc2", "dc3", "seq"].map(|d| format!("{}_{d}", self.prefix));
            for db in dbs {
                if rtgs_pg::migrate::check_database_name(&db).is_ok() {
                    let _ = admin.batch_execute(&format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)")).await;
                }
            }
            driver.abort();
        });
    }
}

impl Cluster {
    /// The JSON report a driver command (`rtgs match`, `rtgs withdraw`, ...) printed; on failure
    /// the panic shows its output and the three centers' logs.
    pub fn command_report(&self, what: &str, out: std::process::Output) -> Value {
        assert!(
            out.status.success(),
            "{what} failed: {}\n{}\nDC1:\n{}\nDC2:\n{}\nDC3:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.log(1),
            self.log(2),
            self.log(3)
        );
        let report: Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{what} report: {e}"));
        eprintln!("{what} report: {report}");
        report
    }
}

/// The three centers' stored plugin rows are one state at their watermark, at some moment (idle
/// ticks move the watermarks: read until the three are read at the same seq); each center stores
/// exactly one row, of plugin `kind`.
pub fn assert_stored_states_agree(c: &Cluster, kind: &str) {
    let mut last = Vec::new();
    for _ in 0..40 {
        last = (1..=3)
            .map(|center| {
                let row = c.sql(
                    center,
                    "SELECT w.seq_applied, p.kind, p.seq_applied, p.state_hash
                       FROM watermark w, plugin_state p WHERE w.id = 1 ORDER BY p.kind",
                    &[],
                );
                row.iter()
                    .map(|r| {
                        (r.get::<_, i64>(0), r.get::<_, String>(1), r.get::<_, i64>(2), r.get::<_, i64>(3))
                    })
                    .collect::<Vec<_>>()
            })
            .collect::<Vec<_>>();
        let one_row_at_watermark =
            last.iter().all(|rows| rows.len() == 1 && rows[0].1 == kind && rows[0].0 == rows[0].2);
        assert!(one_row_at_watermark, "each center stores one {kind} row at its watermark: {last:?}");
        if last.iter().all(|rows| rows == &last[0]) {
            return;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    panic!("the centers' stored plugin states were never one state at one seq: {last:?}");
}

/// `rtgs reconcile` finds no difference at some moment (idle ticks keep the watermarks moving).
pub fn reconcile_eventually(c: &Cluster) {
    let mut report = Value::Null;
    for _ in 0..20 {
        let out = Command::new(BIN)
            .args(["reconcile", "--json", "--db-prefix", &format!("{}_dc", c.prefix)])
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        report = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("reconcile: {e}: {}", String::from_utf8_lossy(&out.stderr)));
        if out.status.success() && report["ok"] == true {
            return;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    panic!("the centers never reconciled: {report}");
}

pub fn lock() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

pub fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// One signed request over plain HTTP/1.1 (a new connection, `connection: close`): the status
/// and the body as text. The timestamp carries a nonce, so that two requests in one second
/// differ (a signed write is accepted once).
pub fn http_signed(
    addr: std::net::SocketAddr,
    key: &str,
    secret: &str,
    method: &str,
    path: &str,
    body: &str,
) -> (u16, String) {
    use std::io::{Read, Write};
    static NONCE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NONCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let ts = format!("{now}.t{n}");
    let signature = rtgs_api::auth::sign(secret.as_bytes(), method, path, &ts, body.as_bytes());
    let mut stream = std::net::TcpStream::connect(addr).unwrap_or_else(|e| panic!("{addr}: {e}"));
    let request = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nx-rtgs-key: {key}\r\nx-rtgs-timestamp: {ts}\r\nx-rtgs-signature: {signature}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap_or_else(|e| panic!("{e}"));
    let status = response.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, response.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_string())
}

/// A broker of a drill's own, started and stopped through the project's scripts
/// (`scripts/infra-up.sh broker` / `infra-down.sh broker` with `RTGS_INFRA_DIR` and
/// `RTGS_BROKER_PORT`), on the default durable storage unless `storage` says otherwise.
pub struct OwnBroker {
    pub port: u16,
    pub dir: PathBuf,
    pub storage: Option<String>,
}

impl OwnBroker {
    pub fn new(dir: PathBuf, port: u16, storage: Option<&str>) -> OwnBroker {
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        OwnBroker { port, dir, storage: storage.map(str::to_string) }
    }

    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn script(&self, name: &str, arg: &str) -> std::process::Output {
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts").join(name);
        let mut cmd = Command::new("bash");
        cmd.arg(&script)
            .arg(arg)
            .env("RTGS_INFRA_DIR", &self.dir)
            .env("RTGS_BROKER_PORT", self.port.to_string());
        if let Some(storage) = &self.storage {
            cmd.env("RTGS_BROKER_STORAGE", storage);
        }
        cmd.output().unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()))
    }

    pub fn start(&self) {
        let out = self.script("infra-up.sh", "broker");
        assert!(
            out.status.success(),
            "the drill's broker on port {} could not be started: {}",
            self.port,
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `kill -9` of the broker process (its pid file).
    pub fn kill9(&self) {
        let pid =
            std::fs::read_to_string(self.dir.join("tansu.pid")).unwrap_or_else(|e| panic!("broker pid: {e}"));
        let status = Command::new("kill").args(["-9", pid.trim()]).status().unwrap_or_else(|e| panic!("{e}"));
        assert!(status.success(), "kill -9 {pid} failed");
        let _ = std::fs::remove_file(self.dir.join("tansu.pid"));
        // Until the port is free (the next start must not find the dead one listening).
        let started = Instant::now();
        while std::net::TcpStream::connect(self.bootstrap()).is_ok() {
            assert!(started.elapsed() < Duration::from_secs(10), "the killed broker still listens");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for OwnBroker {
    fn drop(&mut self) {
        let _ = self.script("infra-down.sh", "broker");
    }
}

/// The credentials of the API config [`api_config`] writes.
pub const OPS: (&str, &str) = ("ops", "operator-secret-0123456789");
pub const BANK_A: (&str, &str) = ("bank-a", "bank-a-secret-0123456789");

/// An API config: [`BANK_A`] owning accounts 1 and 2, operator [`OPS`], no accounts set up.
pub fn api_config() -> String {
    serde_json::json!({
        "participants": [{ "key_id": BANK_A.0, "secret": BANK_A.1, "accounts": [1, 2] }],
        "operators": [{ "key_id": OPS.0, "secret": OPS.1 }],
        "accounts": []
    })
    .to_string()
}

/// The address a started `rtgs serve` (stderr piped) listens on; its stderr is drained from
/// then on. Kills it and panics if it exits first.
pub fn serve_address(serve: &mut Child) -> String {
    use std::io::BufRead;
    let stderr = serve.stderr.take().unwrap_or_else(|| panic!("no stderr"));
    let mut lines = std::io::BufReader::new(stderr).lines();
    let addr = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| l.strip_prefix("rtgs serve: listening on http://").map(str::to_string));
    std::thread::spawn(move || lines.for_each(drop));
    let Some(addr) = addr else {
        let _ = serve.kill();
        let _ = serve.wait();
        panic!("rtgs serve did not start");
    };
    addr
}
