//! `deploy/` against Debian's real Prometheus (installed through `scripts/infra-up.sh
//! prometheus`; the test fails, never skips, if it cannot be): `promtool` accepts the scrape
//! config and the alert rules, and a Prometheus loading those same rules and scraping a running
//! `rtgs serve` reports a non-zero finality rate after signed transfers; every panel of the
//! provisioned Grafana dashboard is valid PromQL there and reads a metric the server exposes.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const DEPLOY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy");
const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../api/participants.example.json");
const SECRET_A: &str = "change-me-bank-a-0123456789";

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
    (status, response.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_string())
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

/// The value of a one-sample instant query, if any.
fn query(prometheus: SocketAddr, expr: &str) -> Option<f64> {
    let encoded: String = expr
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"_-.".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    let (status, body) = http(prometheus, "GET", &format!("/api/v1/query?query={encoded}"), "", "");
    if status != 200 {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(body.trim()).ok()?;
    v["data"]["result"][0]["value"][1].as_str()?.parse().ok()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map_or(0, |a| a.port())
}

#[test]
fn deploy_config_and_rules_pass_promtool_and_prometheus_sees_finality() {
    if let Err(e) = rtgs_pg::dev::start_infra("prometheus") {
        panic!("prometheus could not be installed, so this test cannot run: {e}");
    }
    promtool(&["check", "config", &format!("{DEPLOY}/prometheus.yml")]);
    promtool(&["check", "rules", &format!("{DEPLOY}/alerts.yml")]);

    let dir: PathBuf = std::env::temp_dir().join(format!("rtgs-prometheus-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let (_serve, addr) = serve(&dir.join("data"));
    // The deployed rules, with a scrape target that is this test's server.
    let config = format!(
        "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\nrule_files: [\"{DEPLOY}/alerts.yml\"]\n\
         scrape_configs:\n  - job_name: rtgs\n    static_configs:\n      - targets: [\"{addr}\"]\n"
    );
    std::fs::write(dir.join("prometheus.yml"), config).unwrap_or_else(|e| panic!("{e}"));
    let web: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap_or_else(|e| panic!("{e}"));
    let _prometheus = Killed(
        Command::new("prometheus")
            .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("tsdb").display()))
            .arg(format!("--web.listen-address={web}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start prometheus: {e}")),
    );
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
    for name in ["RtgsDivergence", "RtgsFinalityStalled", "RtgsRejectionsHigh", "RtgsNodeDown"] {
        assert!(rules.contains(name), "rule {name} not loaded: {rules}");
    }
    // Every panel of the provisioned dashboard is valid PromQL to this Prometheus and reads
    // metrics the server really exposes.
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{DEPLOY}/grafana/dashboards/rtgs-overview.json"))
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .unwrap_or_else(|e| panic!("dashboard JSON: {e}"));
    let (_, exposition) = http(addr, "GET", "/metrics", "", "");
    let panels = dashboard["panels"].as_array().cloned().unwrap_or_default();
    assert!(panels.len() >= 6, "dashboard has {} panels", panels.len());
    for panel in &panels {
        let targets = panel["targets"].as_array().cloned().unwrap_or_default();
        assert!(!targets.is_empty(), "panel without a query: {panel}");
        for t in targets {
            let expr = t["expr"].as_str().unwrap_or_else(|| panic!("panel without expr: {panel}"));
            let encoded: String = expr
                .bytes()
                .map(
                    |b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") },
                )
                .collect();
            let (status, body) = http(web, "GET", &format!("/api/v1/query?query={encoded}"), "", "");
            assert_eq!(status, 200, "{expr}: {body}");
            let metric = expr
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .find(|w| w.starts_with("rtgs_"))
                .unwrap_or_else(|| panic!("{expr} reads no rtgs_ metric"));
            let base = metric.trim_end_matches("_bucket");
            assert!(
                exposition.contains(base),
                "{base} (panel {}) is not exposed by the server",
                panel["title"]
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
