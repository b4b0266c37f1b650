//! Every center of a production cluster, as its own node reports it: each `rtgs node` serves its
//! status JSON at `GET /status` on its loopback `/metrics` listener; [`ask`] asks every center at
//! once, each with a short timeout, and [`summarize`] turns the answers into one [`Report`].
//! `rtgs status` prints it; the operator console (`crate::console`) serves it to the browser.
//!
//! A node that does not answer in time (or answers something that is not its status) is
//! `up: false` with the reason in `error` — one down node is a row of the report, never an error.
//!
//! Lag is in entries, behind the most advanced figure any answering node reports: the highest
//! `seq_committed`, or the sequencer leader's `seq_sequenced` when that is higher. A center
//! that does not answer is placed by what the others last heard of its acks (`seq_acked`).

use serde::Serialize;
use serde_json::Value;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The largest status answer read (a node's status is a few KiB).
const STATUS_BYTES_MAX: u64 = 1 << 20;

/// One center's row.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct CenterRow {
    pub id: String,
    pub address: String,
    pub up: bool,
    pub leader: bool,
    /// The leader's lease epoch; a follower's is the epoch of the newest journal entry it read
    /// (`journal_epoch` of its status).
    pub epoch: Option<u64>,
    pub seq_applied: Option<u64>,
    pub seq_committed: Option<u64>,
    /// Every seq up to here is final at this center.
    pub seq_final: Option<u64>,
    /// Entries behind the report's `seq_highest` (a down center: by the acks the others heard).
    pub lag_entries: Option<u64>,
    /// A divergence halted finality at this center (an operator must intervene).
    pub halted: Option<bool>,
    /// Why (`divergence`, or the broker lost data).
    pub halted_reason: Option<String>,
    pub divergences: Option<u64>,
    pub gap_pulls: Option<u64>,
    pub gap_entries_pulled: Option<u64>,
    /// The center that executes the plugins' effects, as this center's plugin host knows it
    /// (`null`: no plugins, or down).
    pub plugin_owner: Option<String>,
    pub plugin_owner_term: Option<u64>,
    /// Open alerts this node reports: its plugins' (replicated state: the same on every center).
    pub alerts: Vec<Value>,
    /// The node's last minute of finality (`finalized_per_s`, `finality_per_s`, `final_p99_ms`),
    /// sampled by the node once a second.
    pub last_minute: Option<Value>,
    /// The node's last claim of the sequencer lease (`epoch`, `at_unix_ms`, `previous_leader`,
    /// `leader_silent_ms`, `rebuild_ms`, `took_ms`); null if it never led since it started.
    pub last_takeover: Option<Value>,
    /// The node's plugin figures (`plugins` of its status: owner, term, each plugin's counts —
    /// `matching_sessions_*`, ...); replicated state, the same on every center at one seq.
    pub plugins: Option<Value>,
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
    /// The latest lease claim any answering node reports (the highest epoch), with `center`.
    pub last_takeover: Option<Value>,
}

/// `GET /status` of every node at once, each within `timeout`; the report.
pub async fn ask(addrs: &[SocketAddr], timeout: Duration) -> Report {
    let answers = futures_join(addrs.iter().map(|&a| fetch(a, timeout))).await;
    summarize(addrs, answers)
}

/// Runs the futures concurrently, answers in order (a handful: no executor needed).
async fn futures_join<F: std::future::Future<Output = Result<Value, String>> + Send + 'static>(
    futures: impl Iterator<Item = F>,
) -> Vec<Result<Value, String>> {
    let handles: Vec<_> = futures.map(tokio::spawn).collect();
    let mut answers = Vec::with_capacity(handles.len());
    for h in handles {
        answers.push(h.await.unwrap_or_else(|e| Err(format!("the request failed: {e}"))));
    }
    answers
}

/// `GET /status` of one node, within `timeout`.
pub async fn fetch(addr: SocketAddr, timeout: Duration) -> Result<Value, String> {
    let ask = async {
        let mut stream = TcpStream::connect(addr).await.map_err(|e| format!("connecting: {e}"))?;
        let request = format!("GET /status HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.map_err(|e| format!("sending the request: {e}"))?;
        let mut answer = Vec::new();
        stream
            .take(STATUS_BYTES_MAX)
            .read_to_end(&mut answer)
            .await
            .map_err(|e| format!("reading the answer: {e}"))?;
        let at = answer.windows(4).position(|w| w == b"\r\n\r\n").ok_or("no HTTP answer")?;
        let (head, body) = (String::from_utf8_lossy(&answer[..at]), &answer[at + 4..]);
        let status: u16 = head.get(9..12).and_then(|s| s.parse().ok()).ok_or("no HTTP status")?;
        if status != 200 {
            return Err(format!("answered HTTP {status}: {}", String::from_utf8_lossy(body).trim()));
        }
        let v: Value = serde_json::from_slice(body).map_err(|_| "the answer is not JSON".to_string())?;
        if !(v.is_object() && v["center"].is_string()) {
            return Err("the answer is not a node's status".into());
        }
        Ok(v)
    };
    match tokio::time::timeout(timeout, ask).await {
        Ok(answer) => answer,
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
    let last_takeover = up
        .iter()
        .filter(|s| s["last_takeover"].is_object())
        .max_by_key(|s| num(&s["last_takeover"], "epoch").unwrap_or(0))
        .map(|s| {
            let mut t = s["last_takeover"].clone();
            t["center"] = s["center"].clone();
            t
        });
    Report {
        last_takeover,
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
        // The leader's own lease epoch; a follower's is that of the newest entry it read.
        epoch: num("epoch").filter(|&e| e > 0).or_else(|| num("journal_epoch").filter(|&e| e > 0)),
        seq_applied: num("seq_applied"),
        seq_committed: num("seq_committed"),
        // Older nodes have no seq_final: every seq below the first unfinal one is final.
        seq_final: num("seq_final").or_else(|| num("seq_unfinal_first").map(|s| s.saturating_sub(1))),
        lag_entries: num("seq_committed").map(|c| seq_highest.saturating_sub(c)),
        halted: s["halted"].as_bool(),
        halted_reason: s["halted_reason"].as_str().map(String::from),
        divergences: num("divergences"),
        gap_pulls: num("gap_pulls"),
        gap_entries_pulled: num("gap_entries_pulled"),
        plugin_owner: owner.map(|o| format!("DC{o}")),
        plugin_owner_term: owner.and(plugins["owner_term"].as_u64()),
        alerts: s["alerts"].as_array().cloned().unwrap_or_default(),
        last_minute: s.get("last_minute").filter(|v| v.is_object()).cloned(),
        last_takeover: s.get("last_takeover").filter(|v| v.is_object()).cloned(),
        plugins: plugins.is_object().then(|| plugins.clone()),
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
        halted_reason: None,
        divergences: None,
        gap_pulls: None,
        gap_entries_pulled: None,
        plugin_owner: None,
        plugin_owner_term: None,
        alerts: Vec::new(),
        last_minute: None,
        last_takeover: None,
        plugins: None,
        error: None,
    }
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
        assert_eq!(dc3.error.as_deref(), Some("no"));
    }

    #[test]
    fn all_up_is_ok_and_a_halt_is_not() {
        let mut answers: Vec<Result<Value, String>> =
            (1..=3).map(|n| Ok(node(n, n == 2, 120, [120, 120, 120]))).collect();
        assert!(summarize(&addrs(), answers.clone()).ok);
        if let Some(Ok(v)) = answers.get_mut(2) {
            v["halted"] = json!(true);
            v["halted_reason"] = json!("divergence");
        }
        let r = summarize(&addrs(), answers);
        assert!(!r.ok);
        assert_eq!(r.centers[2].halted_reason.as_deref(), Some("divergence"));
    }

    #[test]
    fn a_follower_shows_the_epoch_of_the_journal_it_read() {
        let mut answers: Vec<Result<Value, String>> =
            (1..=3).map(|n| Ok(node(n, n == 1, 120, [120, 120, 120]))).collect();
        for (i, journal_epoch) in [(1, json!(4)), (2, json!(0))] {
            if let Some(Ok(v)) = answers.get_mut(i) {
                v["epoch"] = json!(0); // a follower's sequencer holds no lease
                v["journal_epoch"] = journal_epoch;
            }
        }
        let epochs: Vec<Option<u64>> = summarize(&addrs(), answers).centers.iter().map(|c| c.epoch).collect();
        // DC3 has read no entry yet: no epoch to show.
        assert_eq!(epochs, [Some(4), Some(4), None]);
    }

    #[test]
    fn the_last_takeover_is_the_highest_epochs() {
        let mut answers: Vec<Result<Value, String>> =
            (1..=3).map(|n| Ok(node(n, n == 2, 120, [120, 120, 120]))).collect();
        assert_eq!(summarize(&addrs(), answers.clone()).last_takeover, None);
        for (i, epoch) in [(0, 3), (1, 4)] {
            if let Some(Ok(v)) = answers.get_mut(i) {
                v["last_takeover"] = json!({ "epoch": epoch, "took_ms": 7000 });
            }
        }
        let t = summarize(&addrs(), answers).last_takeover;
        assert_eq!(t, Some(json!({ "epoch": 4, "took_ms": 7000, "center": "DC2" })));
    }
}
