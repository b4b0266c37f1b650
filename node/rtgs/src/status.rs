//! `rtgs status`: every center of a production cluster, as its own node reports it.
//!
//! Each `rtgs node` serves its status JSON at `GET /status` on its `/metrics` listener
//! (loopback callers only; `127.0.0.1:(9100 + PORT_OFFSET)` by default, the addresses of
//! `scripts/run-dc1.sh..3` and of `deploy/prometheus.yml`). This command asks every center at
//! once, each with a short timeout; a node that does not answer in time (or answers something
//! that is not its status) is `up: false` with the reason in `error` — one down node is a row of
//! the report, never an error of the command.
//!
//! Lag is in entries, behind the most advanced figure any answering node reports: the highest
//! `seq_committed`, or the sequencer leader's `seq_sequenced` when that is higher. A center
//! that does not answer is placed by what the others last heard of its acks (`seq_acked`).
//!
//! Exit status: 0 when every center answered and none halted finality; 1 otherwise (a center
//! down, or a divergence halted finality somewhere); 2 on a usage error. With `--watch` the
//! report repeats until interrupted, and the exit status is that of the last report.

use anyhow::Context;
use clap::Args;
use serde::Serialize;
use serde_json::Value;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// Default `/metrics` port of center 1 (`rtgs_engine::metrics::METRICS_PORT_BASE`); center N
/// listens on this + N − 1 (its `PORT_OFFSET` in `scripts/run-dcN.sh`).
const PORT_BASE: u16 = rtgs_engine::metrics::METRICS_PORT_BASE;

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// Number of centers; their default addresses are 127.0.0.1:(9100 + N − 1).
    #[arg(long, default_value_t = 3)]
    pub centers: usize,
    /// Each center's /metrics listener, in center order (repeat the flag or separate by commas;
    /// `RTGS_STATUS_ADDRS`). Default: 127.0.0.1:9100, :9101, :9102 (scripts/run-dc1.sh..3).
    #[arg(long = "addr", env = "RTGS_STATUS_ADDRS", value_delimiter = ',', value_name = "ADDR")]
    pub addrs: Vec<SocketAddr>,
    /// A node that has not answered within this many milliseconds is reported down.
    #[arg(long, default_value_t = 500)]
    pub timeout_ms: u64,
    /// Print the report as JSON: {"centers": [{"id", "up", "leader", "epoch", "seq_applied",
    /// "seq_committed", "seq_final", "lag_entries", "halted", ...}], "leader", "ok", ...}.
    #[arg(long)]
    pub json: bool,
    /// Repeat every SECS seconds (default 1) until interrupted (with --json: one report per
    /// line); the exit status is the last report's.
    #[arg(long, num_args = 0..=1, default_missing_value = "1", value_name = "SECS")]
    pub watch: Option<f64>,
}

/// One center's row.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct CenterRow {
    pub id: String,
    pub address: String,
    pub up: bool,
    pub leader: bool,
    pub epoch: Option<u64>,
    pub seq_applied: Option<u64>,
    pub seq_committed: Option<u64>,
    /// Every seq up to here is final at this center.
    pub seq_final: Option<u64>,
    /// Entries behind the report's `seq_highest` (a down center: by the acks the others heard).
    pub lag_entries: Option<u64>,
    /// A divergence halted finality at this center (an operator must intervene).
    pub halted: Option<bool>,
    pub divergences: Option<u64>,
    pub gap_pulls: Option<u64>,
    pub gap_entries_pulled: Option<u64>,
    /// The center that executes the plugins' effects, as this center's plugin host knows it
    /// (`null`: no plugins, or down).
    pub plugin_owner: Option<String>,
    pub plugin_owner_term: Option<u64>,
    /// Open alerts this node reports: its plugins' (replicated state: the same on every center).
    pub alerts: Vec<Value>,
    /// Why the center counts as down.
    pub error: Option<String>,
}

#[derive(Serialize, Debug)]
pub struct Report {
    pub centers: Vec<CenterRow>,
    /// The center leading the sequencer (the highest epoch if two say so during a takeover).
    pub leader: Option<String>,
    pub epoch: Option<u64>,
    /// The most advanced seq any answering node reports (lag is measured from here).
    pub seq_highest: u64,
    pub centers_up: usize,
    /// Every center up and none halted (the exit status).
    pub ok: bool,
}

pub fn run(args: StatusArgs) -> anyhow::Result<ExitCode> {
    let addrs = addresses(&args)?;
    let every = match args.watch {
        Some(s) if !(s.is_finite() && s > 0.0) => anyhow::bail!("--watch takes a positive number of seconds"),
        Some(s) => Some(Duration::from_secs_f64(s)),
        None => None,
    };
    let timeout = Duration::from_millis(args.timeout_ms.max(1));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        let mut ok = once(&addrs, timeout, args.json).await?;
        let Some(every) = every else { return Ok(exit(ok)) };
        // One listener for the whole watch: a Ctrl-C while the nodes are being asked counts too.
        let interrupted = tokio::signal::ctrl_c();
        tokio::pin!(interrupted);
        loop {
            tokio::select! {
                _ = tokio::time::sleep(every) => {}
                _ = &mut interrupted => return Ok(exit(ok)),
            }
            if !args.json {
                println!();
            }
            tokio::select! {
                report = once(&addrs, timeout, args.json) => ok = report?,
                _ = &mut interrupted => return Ok(exit(ok)),
            }
        }
    })
}

fn exit(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn addresses(args: &StatusArgs) -> anyhow::Result<Vec<SocketAddr>> {
    if !args.addrs.is_empty() {
        return Ok(args.addrs.clone());
    }
    if args.centers == 0 || args.centers > rtgs_core::limits::CENTER_COUNT_MAX {
        anyhow::bail!("--centers must be 1..={}", rtgs_core::limits::CENTER_COUNT_MAX);
    }
    (0..args.centers)
        .map(|i| {
            let port = PORT_BASE.checked_add(i as u16).context("port out of range")?;
            Ok(SocketAddr::from(([127, 0, 0, 1], port)))
        })
        .collect()
}

/// One report, printed; whether it is OK.
async fn once(addrs: &[SocketAddr], timeout: Duration, json: bool) -> anyhow::Result<bool> {
    let answers = futures_util::future::join_all(addrs.iter().map(|&a| fetch(a, timeout))).await;
    let report = summarize(addrs, answers);
    if json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", table(&report));
    }
    Ok(report.ok)
}

/// `GET /status` of one node, within `timeout`.
async fn fetch(addr: SocketAddr, timeout: Duration) -> Result<Value, String> {
    let ask = async {
        let stream = TcpStream::connect(addr).await.context("connecting")?;
        let mut stream = BufReader::new(stream);
        let request = format!("GET /status HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n");
        stream.get_mut().write_all(request.as_bytes()).await.context("sending the request")?;
        let mut body = Vec::new();
        let status = crate::http_load::read_response(&mut stream, &mut body).await?;
        if status != 200 {
            anyhow::bail!("answered HTTP {status}: {}", String::from_utf8_lossy(&body).trim());
        }
        let v: Value = serde_json::from_slice(&body).context("the answer is not JSON")?;
        anyhow::ensure!(v.is_object() && v["center"].is_string(), "the answer is not a node's status");
        Ok(v)
    };
    match tokio::time::timeout(timeout, ask).await {
        Ok(answer) => answer.map_err(|e: anyhow::Error| format!("{e:#}")),
        Err(_) => Err(format!("no answer within {} ms", timeout.as_millis())),
    }
}

/// The report from each address's answer (pure: unit-tested below).
pub fn summarize(addrs: &[SocketAddr], answers: Vec<Result<Value, String>>) -> Report {
    let up: Vec<&Value> = answers.iter().filter_map(|a| a.as_ref().ok()).collect();
    let num = |v: &Value, k: &str| v[k].as_u64();
    let leaders = || up.iter().filter(|s| s["leader"] == true);
    let leader = leaders().max_by_key(|s| num(s, "epoch").unwrap_or(0));
    let seq_highest = up
        .iter()
        .filter_map(|s| num(s, "seq_committed"))
        .chain(leader.and_then(|s| num(s, "seq_sequenced")))
        .max()
        .unwrap_or(0);
    let centers = addrs
        .iter()
        .zip(answers.iter())
        .enumerate()
        .map(|(i, (addr, answer))| match answer {
            Ok(s) => up_row(*addr, s, seq_highest),
            Err(error) => {
                // Placed by what the answering nodes last heard of its acks.
                let acked = up.iter().filter_map(|s| s["seq_acked"].get(i).and_then(Value::as_u64)).max();
                CenterRow {
                    id: format!("DC{}", i + 1),
                    address: addr.to_string(),
                    lag_entries: acked.map(|a| seq_highest.saturating_sub(a)),
                    error: Some(error.clone()),
                    ..down_row()
                }
            }
        })
        .collect::<Vec<_>>();
    let centers_up = up.len();
    let ok = centers_up == centers.len() && centers.iter().all(|c| c.halted == Some(false));
    Report {
        leader: leader.and_then(|s| s["center"].as_str().map(String::from)),
        epoch: leader.and_then(|s| num(s, "epoch")),
        centers,
        seq_highest,
        centers_up,
        ok,
    }
}

fn up_row(addr: SocketAddr, s: &Value, seq_highest: u64) -> CenterRow {
    let num = |k: &str| s[k].as_u64();
    let plugins = &s["plugins"];
    let owner = plugins["owner_center"].as_u64().filter(|&o| o > 0);
    CenterRow {
        id: s["center"].as_str().unwrap_or("?").to_string(),
        address: addr.to_string(),
        up: true,
        leader: s["leader"] == true,
        epoch: num("epoch"),
        seq_applied: num("seq_applied"),
        seq_committed: num("seq_committed"),
        // Older nodes have no seq_final: every seq below the first unfinal one is final.
        seq_final: num("seq_final").or_else(|| num("seq_unfinal_first").map(|s| s.saturating_sub(1))),
        lag_entries: num("seq_committed").map(|c| seq_highest.saturating_sub(c)),
        halted: s["halted"].as_bool(),
        divergences: num("divergences"),
        gap_pulls: num("gap_pulls"),
        gap_entries_pulled: num("gap_entries_pulled"),
        plugin_owner: owner.map(|o| format!("DC{o}")),
        plugin_owner_term: owner.and(plugins["owner_term"].as_u64()),
        alerts: s["alerts"].as_array().cloned().unwrap_or_default(),
        error: None,
    }
}

fn down_row() -> CenterRow {
    CenterRow {
        id: String::new(),
        address: String::new(),
        up: false,
        leader: false,
        epoch: None,
        seq_applied: None,
        seq_committed: None,
        seq_final: None,
        lag_entries: None,
        halted: None,
        divergences: None,
        gap_pulls: None,
        gap_entries_pulled: None,
        plugin_owner: None,
        plugin_owner_term: None,
        alerts: Vec::new(),
        error: None,
    }
}

/// The human form: one aligned row per center, then a verdict line.
fn table(r: &Report) -> String {
    let head = [
        "CENTER",
        "UP",
        "LEADER",
        "EPOCH",
        "APPLIED",
        "COMMITTED",
        "FINAL",
        "LAG",
        "HALTED",
        "GAP_PULLS",
        "OWNER",
        "ALERTS",
    ];
    let opt = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
    let mut rows: Vec<Vec<String>> = vec![head.iter().map(|h| h.to_string()).collect()];
    for c in &r.centers {
        rows.push(vec![
            c.id.clone(),
            if c.up { "up" } else { "DOWN" }.into(),
            if c.leader { "leader" } else { "-" }.into(),
            opt(c.epoch),
            opt(c.seq_applied),
            opt(c.seq_committed),
            opt(c.seq_final),
            opt(c.lag_entries),
            c.halted.map_or("-", |h| if h { "HALTED" } else { "no" }).into(),
            opt(c.gap_pulls),
            c.plugin_owner.clone().unwrap_or_else(|| "-".into()),
            if c.up { c.alerts.len().to_string() } else { "-".into() },
        ]);
    }
    let widths: Vec<usize> =
        (0..head.len()).map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for row in &rows {
        let cells: Vec<String> = row.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    for c in r.centers.iter().filter(|c| !c.up) {
        out.push_str(&format!("{} at {}: {}\n", c.id, c.address, c.error.as_deref().unwrap_or("down")));
    }
    let halted: Vec<&str> =
        r.centers.iter().filter(|c| c.halted == Some(true)).map(|c| c.id.as_str()).collect();
    out.push_str(&if r.ok {
        format!("OK: {} of {} centers up, none halted", r.centers_up, r.centers.len())
    } else if halted.is_empty() {
        format!("NOT OK: {} of {} centers up", r.centers_up, r.centers.len())
    } else {
        format!(
            "NOT OK: {} of {} centers up; finality HALTED at {}",
            r.centers_up,
            r.centers.len(),
            halted.join(", ")
        )
    });
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn addrs() -> Vec<SocketAddr> {
        (0..3).map(|i| SocketAddr::from(([127, 0, 0, 1], 9100 + i))).collect()
    }

    fn node(n: u64, leader: bool, committed: u64, acked: [u64; 3]) -> Value {
        json!({
            "center": format!("DC{n}"), "leader": leader, "epoch": 4, "seq_sequenced": if leader { 120 } else { 7 },
            "seq_applied": committed + 1, "seq_committed": committed, "seq_final": committed - 2,
            "halted": false, "gap_pulls": 0, "seq_acked": acked, "alerts": [],
            "plugins": { "owner_center": 2, "owner_term": 3 }
        })
    }

    #[test]
    fn lag_counts_from_the_leader_and_a_down_center_is_placed_by_its_acks() {
        let answers = vec![
            Ok(node(1, true, 110, [110, 100, 60])),
            Ok(node(2, false, 100, [108, 100, 55])),
            Err("no".into()),
        ];
        let r = summarize(&addrs(), answers);
        assert!(!r.ok, "a center is down");
        assert_eq!(
            (r.leader.as_deref(), r.epoch, r.seq_highest, r.centers_up),
            (Some("DC1"), Some(4), 120, 2)
        );
        let lag: Vec<Option<u64>> = r.centers.iter().map(|c| c.lag_entries).collect();
        assert_eq!(lag, [Some(10), Some(20), Some(60)]);
        let dc3 = &r.centers[2];
        assert_eq!((dc3.id.as_str(), dc3.up, dc3.leader, dc3.halted), ("DC3", false, false, None));
        assert_eq!(r.centers[1].plugin_owner.as_deref(), Some("DC2"));
        let text = table(&r);
        assert!(
            text.contains("DC3 at 127.0.0.1:9102: no") && text.ends_with("NOT OK: 2 of 3 centers up\n"),
            "{text}"
        );
    }

    #[test]
    fn all_up_is_ok_and_a_halt_is_not() {
        let mut answers: Vec<Result<Value, String>> =
            (1..=3).map(|n| Ok(node(n, n == 2, 120, [120, 120, 120]))).collect();
        assert!(summarize(&addrs(), answers.clone()).ok);
        if let Some(Ok(v)) = answers.get_mut(2) {
            v["halted"] = json!(true);
        }
        let r = summarize(&addrs(), answers);
        assert!(!r.ok);
        assert!(table(&r).contains("finality HALTED at DC3"));
    }
}
