//! `deploy/` against Debian's real Prometheus (installed through `scripts/infra-up.sh
//! prometheus`; the tests fail, never skip, if it cannot be): `promtool` accepts the scrape
//! config and the alert rules and passes their unit tests (`deploy/alerts_test.yml`);
//!
//! * a Prometheus loading those same rules and scraping a running `rtgs serve` reports a
//!   non-zero finality rate after signed transfers, and every API panel of the provisioned
//!   Grafana dashboard is valid PromQL there and reads a metric the server exposes;
//! * three real `rtgs node` (PostgreSQL and the broker from `scripts/infra-up.sh`) under `rtgs
//!   load`, scraped by a Prometheus with the deployed rules, show a non-zero finality rate, a
//!   quorum latency p99, one sequencer leader and a lag for every center, and every node panel
//!   of the dashboard (those selecting `job="rtgs-node"`) reads a metric the nodes expose;
//! * (no servers needed) a node's `/metrics` names every series from the start and answers
//!   loopback callers only;
//! * an alert from real state travels the whole way: three `rtgs node` with the collection
//!   plugin sweep for a chain that has no relayer registered, the plugin opens its `no_relayer`
//!   alert in its replicated state, every node shows it (`/metrics`, status), a real Prometheus
//!   with the deployed rules fires `RtgsPluginAlert`, and Debian's real Alertmanager, with the
//!   deployed `alertmanager.yml` (`amtool check-config` accepts it), posts it to a webhook
//!   receiver in the test.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::BIN;

const DEPLOY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy");
const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../api/participants.example.json");
const SECRET_A: &str = "change-me-bank-a-0123456789";

/// Every series a node exports from its start (node/engine/src/metrics.rs).
const NODE_METRICS: [&str; 21] = [
    "rtgs_sequencer_batch_entries_bucket",
    "rtgs_sequencer_record_seconds_bucket",
    "rtgs_sequencer_entries_total",
    "rtgs_sequencer_leader",
    "rtgs_sequencer_epoch",
    "rtgs_sequencer_leader_changes_total",
    "rtgs_journal_lag_entries",
    "rtgs_journal_applied_seq",
    "rtgs_journal_committed_seq",
    "rtgs_gap_timeouts_total",
    "rtgs_gap_entries_pulled_total",
    "rtgs_apply_latency_seconds_bucket",
    "rtgs_commit_batch_seconds_bucket",
    "rtgs_quorum_latency_seconds_bucket",
    "rtgs_api_submit_seconds_bucket",
    "rtgs_finality_total",
    "rtgs_divergence_total",
    "rtgs_finality_halted",
    "rtgs_pg_retries_total",
    "rtgs_notices_total",
    "rtgs_quorum_latency_seconds_count",
];

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn promtool(args: &[&str]) {
    let out = Command::new("promtool").args(args).output().unwrap_or_else(|e| panic!("promtool: {e}"));
    assert!(
        out.status.success(),
        "promtool {args:?} refused it:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn serve(dir: &Path) -> (Killed, SocketAddr) {
    let mut child = Killed(
        Command::new(env!("CARGO_BIN_EXE_rtgs"))
            .args(["serve", "--listen", "127.0.0.1:0", "--config", EXAMPLE, "--data-dir"])
            .arg(dir)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{e}")),
    );
    let stderr = child.0.stderr.take().unwrap_or_else(|| panic!("no stderr"));
    let mut reader = BufReader::new(stderr).lines();
    for line in reader.by_ref() {
        let line = line.unwrap_or_default();
        if let Some(addr) = line.strip_prefix("rtgs serve: listening on http://") {
            std::thread::spawn(move || reader.for_each(drop));
            return (child, addr.parse().unwrap_or_else(|e| panic!("{addr}: {e}")));
        }
    }
    panic!("rtgs serve did not start");
}

/// One HTTP/1.1 request; (status, body), status 0 if nothing listens.
fn http(addr: SocketAddr, method: &str, path: &str, headers: &str, body: &str) -> (u16, String) {
    // Not listening (yet): status 0.
    let Ok(mut stream) = TcpStream::connect(addr) else { return (0, String::new()) };
    let request = format!(
        "{method} {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\ncontent-length: {}\r\n{headers}\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    let status = response.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let body = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        dechunk(body)
    } else {
        body.to_string()
    };
    (status, body)
}

/// A chunked body's data (Prometheus chunks its larger answers).
fn dechunk(mut rest: &str) -> String {
    let mut body = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16).unwrap_or(0);
        if size == 0 || after.len() < size {
            break;
        }
        body.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    body
}

fn transfer(addr: SocketAddr, i: u32) {
    let body = format!(r#"{{"bmi":"PROM-{i}","debtor":1,"creditor":3,"amount":"1.00","currency":"EUR"}}"#);
    let ts = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let ts = ts.to_string();
    let signature = rtgs_api::auth::sign(SECRET_A.as_bytes(), "POST", "/v1/transfers", &ts, body.as_bytes());
    let headers = format!(
        "content-type: application/json\r\nx-rtgs-key: bank-a\r\nx-rtgs-timestamp: {ts}\r\nx-rtgs-signature: {signature}\r\n"
    );
    let (status, answer) = http(addr, "POST", "/v1/transfers", &headers, &body);
    assert_eq!(status, 202, "{answer}");
}

fn url_encode(expr: &str) -> String {
    expr.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"_-.".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Every sample of an instant query: (labels, value); empty if it failed.
fn query_all(prometheus: SocketAddr, expr: &str) -> Vec<(serde_json::Value, f64)> {
    let (status, body) =
        http(prometheus, "GET", &format!("/api/v1/query?query={}", url_encode(expr)), "", "");
    let v: serde_json::Value = match serde_json::from_str(body.trim()) {
        Ok(v) if status == 200 => v,
        _ => return Vec::new(),
    };
    v["data"]["result"]
        .as_array()
        .map(|r| {
            r.iter()
                .filter_map(|s| Some((s["metric"].clone(), s["value"][1].as_str()?.parse().ok()?)))
                .collect()
        })
        .unwrap_or_default()
}

/// The value of a one-sample instant query, if any.
fn query(prometheus: SocketAddr, expr: &str) -> Option<f64> {
    query_all(prometheus, expr).first().map(|(_, v)| *v)
}

/// `promtool` accepts the deployed config and rules, and the rules pass their unit tests.
fn promtool_checks() {
    if let Err(e) = rtgs_pg::dev::start_infra("prometheus") {
        panic!("prometheus could not be installed, so this test cannot run: {e}");
    }
    promtool(&["check", "config", &format!("{DEPLOY}/prometheus.yml")]);
    promtool(&["check", "rules", &format!("{DEPLOY}/alerts.yml")]);
    promtool(&["test", "rules", &format!("{DEPLOY}/alerts_test.yml")]);
}

/// `amtool` accepts the deployed Alertmanager config.
fn amtool_checks() {
    if let Err(e) = rtgs_pg::dev::start_infra("alertmanager") {
        panic!("alertmanager could not be installed, so this test cannot run: {e}");
    }
    let out = Command::new("amtool")
        .args(["check-config", &format!("{DEPLOY}/alertmanager.yml")])
        .output()
        .unwrap_or_else(|e| panic!("amtool: {e}"));
    assert!(
        out.status.success(),
        "amtool refused deploy/alertmanager.yml:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// A Prometheus on a free port with the deployed rules, scraping `targets` as job `job` every
/// second.
fn prometheus(dir: &Path, job: &str, targets: &[SocketAddr]) -> (Killed, SocketAddr) {
    prometheus_alerting(dir, job, targets, None)
}

/// [`prometheus`], sending what fires to `alertmanager` if given.
fn prometheus_alerting(
    dir: &Path,
    job: &str,
    targets: &[SocketAddr],
    alertmanager: Option<SocketAddr>,
) -> (Killed, SocketAddr) {
    let targets: Vec<String> = targets.iter().map(|t| format!("\"{t}\"")).collect();
    let mut config = format!(
        "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\nrule_files: [\"{DEPLOY}/alerts.yml\"]\n\
         scrape_configs:\n  - job_name: {job}\n    static_configs:\n      - targets: [{}]\n",
        targets.join(", ")
    );
    if let Some(am) = alertmanager {
        config.push_str(&format!(
            "alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: [\"{am}\"]\n"
        ));
    }
    std::fs::write(dir.join("prometheus.yml"), config).unwrap_or_else(|e| panic!("{e}"));
    let web: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap_or_else(|e| panic!("{e}"));
    let child = Killed(
        Command::new("prometheus")
            .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("tsdb").display()))
            .arg(format!("--web.listen-address={web}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start prometheus: {e}")),
    );
    (child, web)
}

/// Every panel of the provisioned dashboard whose query selects `job="rtgs-node"` (`node`) or
/// not (the API's) is valid PromQL to this Prometheus and reads a metric in `exposition`.
fn check_dashboard(web: SocketAddr, exposition: &str, node: bool) -> usize {
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{DEPLOY}/grafana/dashboards/rtgs-overview.json"))
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .unwrap_or_else(|e| panic!("dashboard JSON: {e}"));
    let panels = dashboard["panels"].as_array().cloned().unwrap_or_default();
    let mut checked = 0;
    for panel in &panels {
        let targets = panel["targets"].as_array().cloned().unwrap_or_default();
        assert!(!targets.is_empty(), "panel without a query: {panel}");
        for t in targets {
            let expr = t["expr"].as_str().unwrap_or_else(|| panic!("panel without expr: {panel}"));
            if expr.contains("job=\"rtgs-node\"") != node {
                continue;
            }
            checked += 1;
            let path = format!("/api/v1/query?query={}", url_encode(expr));
            let (status, body) = http(web, "GET", &path, "", "");
            assert_eq!(status, 200, "{expr}: {body}");
            for metric in expr
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .filter(|w| w.starts_with("rtgs_"))
            {
                let base = metric.trim_end_matches("_bucket");
                assert!(
                    exposition.contains(base),
                    "{base} (panel {}) is not exposed by the server",
                    panel["title"]
                );
            }
        }
    }
    checked
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map_or(0, |a| a.port())
}

#[test]
fn deploy_config_and_rules_pass_promtool_and_prometheus_sees_finality() {
    // One Prometheus (and cluster) at a time: they share two cores with the servers.
    let _one = common::lock();
    promtool_checks();
    let dir: PathBuf = std::env::temp_dir().join(format!("rtgs-prometheus-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let (_serve, addr) = serve(&dir.join("data"));
    // The deployed rules, with a scrape target that is this test's server.
    let (_prometheus, web) = prometheus(&dir, "rtgs", &[addr]);
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut i = 0;
    let rate = loop {
        // Keep transfers flowing so that the rate window always holds an increase.
        for _ in 0..5 {
            transfer(addr, i);
            i += 1;
        }
        if let Some(r) =
            query(web, "sum(rate(rtgs_finality_total{status=\"ACCC\"}[10s]))").filter(|r| *r > 0.0)
        {
            break r;
        }
        assert!(Instant::now() < deadline, "prometheus never saw a finality rate ({i} transfers sent)");
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(rate > 0.0);
    assert_eq!(query(web, "up{job=\"rtgs\"}"), Some(1.0), "the target is not up");
    // The rules loaded are the deployed ones.
    let (_, rules) = http(web, "GET", "/api/v1/rules", "", "");
    for name in [
        "RtgsDivergence",
        "RtgsFinalityStalled",
        "RtgsRejectionsHigh",
        "RtgsNodeDown",
        "RtgsQuorumLost",
        "RtgsJournalSyncSlow",
    ] {
        assert!(rules.contains(name), "rule {name} not loaded: {rules}");
    }
    // The embedded journal's syncs reach Prometheus (every transfer above was synced twice).
    let syncs = query(web, "max(rtgs_journal_sync_seconds_count{job=\"rtgs\"})").unwrap_or(0.0);
    assert!(syncs >= 1.0, "no journal sync in Prometheus: {syncs}");
    // The API's panels read metrics the server really exposes.
    let (_, exposition) = http(addr, "GET", "/metrics", "", "");
    assert!(exposition.contains("rtgs_journal_sync_slow_total "), "{exposition}");
    let checked = check_dashboard(web, &exposition, false);
    assert!(checked >= 8, "only {checked} API queries in the dashboard");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn three_nodes_under_load_export_finality_rate_and_quorum_latency_to_prometheus() {
    // One Prometheus (and cluster) at a time: they share two cores with the servers.
    let _one = common::lock();
    promtool_checks();
    let dir: PathBuf = std::env::temp_dir().join(format!("rtgs-node-metrics-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let mut nodes = common::Cluster::new("metrics");
    nodes.start_all();
    let addrs = metrics_addresses(&mut nodes);
    let (_prometheus, web) = prometheus(&dir, "rtgs-node", &addrs);
    let load = nodes.load_spawn(
        "M",
        &["--transfers", "40000", "--accounts", "500", "--rate", "4000", "--timeout-s", "60"],
    );
    let finality = "sum(rate(rtgs_finality_total{job=\"rtgs-node\",status=\"ACCC\"}[5s]))";
    let quorum_p99 = "histogram_quantile(0.99, sum by (le) (rate(rtgs_quorum_latency_seconds_bucket{job=\"rtgs-node\"}[5s])))";
    let deadline = Instant::now() + Duration::from_secs(45);
    let (rate, p99) = loop {
        let rate = query(web, finality).filter(|r| *r > 0.0);
        let p99 = query(web, quorum_p99).filter(|q| q.is_finite() && *q > 0.0);
        if let (Some(rate), Some(p99)) = (rate, p99) {
            break (rate, p99);
        }
        assert!(
            Instant::now() < deadline,
            "prometheus never saw finality ({rate:?}/s) and a quorum latency p99 ({p99:?} s)\n{}\n{}\n{}",
            nodes.log(1),
            nodes.log(2),
            nodes.log(3)
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    eprintln!("prometheus: {rate:.0} entries final/s (sum of three centers), quorum latency p99 {p99:.3} s");
    assert_eq!(query(web, "count(up{job=\"rtgs-node\"} == 1)"), Some(3.0), "not every node is scraped");
    // Exactly one leader (leadership may still move once while the group forms).
    let leaders = "sum(rtgs_sequencer_leader)";
    while query(web, leaders) != Some(1.0) {
        assert!(Instant::now() < deadline, "not exactly one sequencer leader: {:?}", query(web, leaders));
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(query(web, "sum(rtgs_sequencer_entries_total)").is_some_and(|n| n > 0.0), "nothing sequenced");
    let apply_p99 = "histogram_quantile(0.99, sum by (le) (rate(rtgs_apply_latency_seconds_bucket[5s])))";
    assert!(query(web, apply_p99).is_some_and(|q| q.is_finite() && q > 0.0), "no apply latency");
    // Every node reports a lag for every center.
    assert_eq!(query_all(web, "rtgs_journal_lag_entries").len(), 9, "lag series");
    let report = nodes.load_finish(load);
    assert_eq!(report["ok"], true, "the load did not finish: {report}");
    // The rules loaded are the deployed ones, and every one evaluates without error over the
    // nodes' real series (a label-matching mistake in a rule shows up only here).
    let (_, rules) = http(web, "GET", "/api/v1/rules", "", "");
    for name in ["RtgsQuorumLost", "RtgsNoSequencerLeader", "RtgsGapTimeouts", "RtgsJournalLag"] {
        assert!(rules.contains(name), "rule {name} not loaded: {rules}");
    }
    let rules: serde_json::Value =
        serde_json::from_str(rules.trim()).unwrap_or_else(|e| panic!("rules: {e}"));
    let evaluated: Vec<&serde_json::Value> = rules["data"]["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["rules"].as_array().into_iter().flatten())
        .collect();
    // Every rule of the deployed file is loaded (counted from the file: adding a rule needs no
    // edit here).
    let in_file = std::fs::read_to_string(format!("{DEPLOY}/alerts.yml"))
        .unwrap_or_else(|e| panic!("alerts.yml: {e}"))
        .lines()
        .filter(|l| l.trim_start().starts_with("- alert:"))
        .count();
    assert!(in_file >= 10, "alerts.yml has only {in_file} rules");
    assert_eq!(evaluated.len(), in_file, "rules loaded: {rules}");
    for rule in evaluated {
        assert_eq!(rule["health"], "ok", "rule {} does not evaluate: {}", rule["name"], rule["lastError"]);
    }
    let (_, exposition) = http(addrs[0], "GET", "/metrics", "", "");
    let checked = check_dashboard(web, &exposition, true);
    assert!(checked >= 10, "only {checked} node queries in the dashboard");
    drop(nodes);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A non-loopback address of this host (the source address of a route out), if it has one.
fn non_loopback_ip() -> Option<std::net::IpAddr> {
    ["192.0.2.1:9", "10.255.255.1:9", "8.8.8.8:53"].iter().find_map(|to| {
        let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
        socket.connect(to).ok()?;
        let ip = socket.local_addr().ok()?.ip();
        (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
    })
}

#[test]
fn node_metrics_name_every_series_from_the_start_and_answer_loopback_only() {
    // No servers: the node waits for PostgreSQL (on a port nothing listens on) and /metrics
    // answers meanwhile. Listening on every address so that a non-loopback caller can try.
    let port = free_port();
    let nothing = free_port();
    let mut node = Killed(
        Command::new(BIN)
            .arg("node")
            .env("CENTER_ID", "2")
            .env("CENTER_COUNT", "3")
            .env("RTGS_METRICS_LISTEN", format!("0.0.0.0:{port}"))
            .env("PGPORT", nothing.to_string())
            .env("RTGS_BOOTSTRAP", format!("127.0.0.1:{nothing}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {BIN} node: {e}")),
    );
    let loopback: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap_or_else(|e| panic!("{e}"));
    let deadline = Instant::now() + Duration::from_secs(30);
    let exposition = loop {
        let (status, body) = http(loopback, "GET", "/metrics", "", "");
        if status == 200 {
            break body;
        }
        if let Ok(Some(exit)) = node.0.try_wait() {
            panic!("the node exited ({exit}) before /metrics answered");
        }
        assert!(Instant::now() < deadline, "/metrics never answered on {loopback} (status {status})");
        std::thread::sleep(Duration::from_millis(100));
    };
    for name in NODE_METRICS {
        assert!(exposition.contains(&format!("\n{name}{{")), "{name} is missing:\n{exposition}");
    }
    for line in [
        "rtgs_sequencer_entries_total{center=\"DC2\"} 0",
        "rtgs_finality_total{center=\"DC2\",status=\"RJCT\"} 0",
    ] {
        assert!(exposition.contains(line), "{line} is missing (counters start at 0):\n{exposition}");
    }
    for c in 1..=3 {
        let lag = format!("rtgs_journal_lag_entries{{center=\"DC{c}\"}}");
        assert!(exposition.contains(&lag), "{lag} is missing:\n{exposition}");
    }
    let ip =
        non_loopback_ip().unwrap_or_else(|| panic!("this host has no non-loopback address to call from"));
    let (status, body) = http(SocketAddr::new(ip, port), "GET", "/metrics", "", "");
    assert_eq!(status, 403, "a caller from {ip} got: {body}");
    assert!(!body.contains("rtgs_"), "metrics leaked to {ip}");
}

/// A webhook receiver: every POST body it gets, in order, through the channel.
fn webhook_receiver() -> (SocketAddr, std::sync::mpsc::Receiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            if let Some(body) = read_post(stream) {
                if tx.send(body).is_err() {
                    return;
                }
            }
        }
    });
    (addr, rx)
}

/// Reads one HTTP/1.1 request (headers, then `content-length` bytes), answers 200, returns the body.
fn read_post(mut stream: TcpStream) -> Option<String> {
    stream.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().ok()?;
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
    String::from_utf8(body).ok()
}

/// Debian's Alertmanager with the deployed config, its receiver pointed at `webhook` and its
/// waits shortened to a second (and clustering off: one instance, no gossip port).
fn alertmanager(dir: &Path, webhook: SocketAddr) -> (Killed, SocketAddr) {
    let deployed =
        std::fs::read_to_string(format!("{DEPLOY}/alertmanager.yml")).unwrap_or_else(|e| panic!("{e}"));
    let mut config = deployed.clone();
    for (from, to) in [
        ("http://127.0.0.1:9099/alerts".to_string(), format!("http://{webhook}/alerts")),
        ("group_wait: 10s".to_string(), "group_wait: 1s".to_string()),
        ("group_interval: 1m".to_string(), "group_interval: 1s".to_string()),
    ] {
        assert!(config.contains(&from), "deploy/alertmanager.yml no longer has {from:?}");
        config = config.replace(&from, &to);
    }
    std::fs::write(dir.join("alertmanager.yml"), config).unwrap_or_else(|e| panic!("{e}"));
    let web: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap_or_else(|e| panic!("{e}"));
    let child = Killed(
        Command::new("prometheus-alertmanager")
            .arg(format!("--config.file={}", dir.join("alertmanager.yml").display()))
            .arg(format!("--storage.path={}", dir.join("alertmanager").display()))
            .arg(format!("--web.listen-address={web}"))
            .arg("--cluster.listen-address=")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start prometheus-alertmanager: {e}")),
    );
    (child, web)
}

#[test]
fn a_plugin_alert_from_real_nodes_reaches_a_webhook_through_prometheus_and_alertmanager() {
    let _one = common::lock();
    promtool_checks();
    amtool_checks();
    let dir: PathBuf = std::env::temp_dir().join(format!("rtgs-alerting-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let (webhook, posts) = webhook_receiver();
    let (_alertmanager, am) = alertmanager(&dir, webhook);
    // Three nodes sweeping 20 wallets; their chains have a relayer, but nobody registers it with
    // the plugin (`rtgs collect --relayers 0`): the sweep's batches fail for want of one, and
    // the plugin opens `no_relayer` for the chain until one registers.
    let wallets = "20";
    let mut nodes = common::Cluster::new("alerting");
    for env in &mut nodes.extra_env {
        env.push(("RTGS_COLLECTION".into(), "true".into()));
        env.push(("RTGS_COLLECTION_WALLETS".into(), wallets.into()));
        env.push(("RTGS_COLLECTION_RELAYERS".into(), "1".into()));
    }
    nodes.start_all();
    let addrs = metrics_addresses(&mut nodes);
    let (_prometheus, web) = prometheus_alerting(&dir, "rtgs-node", &addrs, Some(am));
    // Waits for every deposit, sweeps, then waits for a collection that cannot happen: killed
    // once the alert is through.
    let mut collect = Command::new(BIN);
    collect
        .args(["collect", "--topic-prefix", &nodes.prefix, "--timeout-s", "60"])
        .args(["--wallets", wallets, "--relayers", "0", "--round", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for c in 1..=3 {
        collect.arg("--status-file").arg(nodes.status_path(c));
    }
    let _collect = Killed(collect.spawn().unwrap_or_else(|e| panic!("cannot run rtgs collect: {e}")));
    let deadline = Instant::now() + Duration::from_secs(60);
    let alert = loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        assert!(
            !remaining.is_zero(),
            "no RtgsPluginAlert reached the webhook; firing in Prometheus: {}\nDC1:\n{}",
            http(web, "GET", "/api/v1/alerts", "", "").1,
            nodes.log(1)
        );
        let Ok(body) = posts.recv_timeout(remaining.min(Duration::from_secs(1))) else { continue };
        let v: serde_json::Value =
            serde_json::from_str(&body).unwrap_or_else(|e| panic!("webhook body is not JSON ({e}): {body}"));
        let found =
            v["alerts"].as_array().into_iter().flatten().find(|a| {
                a["labels"]["alertname"] == "RtgsPluginAlert" && a["labels"]["kind"] == "no_relayer"
            });
        if let Some(a) = found {
            break a.clone();
        }
    };
    eprintln!("webhook got: {alert}");
    assert_eq!(alert["status"], "firing");
    let labels = &alert["labels"];
    assert_eq!(
        (&labels["plugin"], &labels["subject"], &labels["severity"]),
        (&"collection".into(), &"chain:1".into(), &"warning".into())
    );
    assert_eq!(
        alert["annotations"]["summary"],
        format!("collection: no_relayer on chain:1 (alert {})", labels["alert_id"].as_str().unwrap_or("?"))
    );
    // Every center holds the same open alert (same id): it is replicated state, not a message.
    let statuses = nodes.statuses();
    for (c, s) in statuses.iter().enumerate() {
        let alerts = s.as_ref().map(|s| s["alerts"].clone()).unwrap_or_default();
        let open: Vec<&serde_json::Value> =
            alerts.as_array().into_iter().flatten().filter(|a| a["kind"] == "no_relayer").collect();
        assert_eq!(open.len(), 1, "DC{}: {alerts}", c + 1);
        assert_eq!(open[0]["id"].to_string(), labels["alert_id"].as_str().unwrap_or("?"), "DC{}", c + 1);
        assert_eq!((&open[0]["plugin"], &open[0]["subject"]), (&"collection".into(), &"chain:1".into()));
    }
    for addr in &addrs {
        let (_, exposition) = http(*addr, "GET", "/metrics", "", "");
        let line = "plugin=\"collection\",kind=\"no_relayer\"} 1\n";
        assert!(exposition.contains(line), "{addr}: {line} missing:\n{exposition}");
    }
    drop(nodes);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Each node's `/metrics` address (on a free port: the harness sets
/// `RTGS_METRICS_LISTEN=127.0.0.1:0` and the status says which).
fn metrics_addresses(nodes: &mut common::Cluster) -> Vec<SocketAddr> {
    nodes
        .statuses()
        .iter()
        .map(|s| {
            let listen = s.as_ref().and_then(|s| s["metrics_listen"].as_str()).unwrap_or_default();
            listen.parse().unwrap_or_else(|e| panic!("metrics_listen {listen:?}: {e}"))
        })
        .collect()
}
