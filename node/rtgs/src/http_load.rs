//! `rtgs http-load`: a native HTTP load generator for `rtgs serve` — signed requests like a real
//! participant, over keep-alive HTTP/1.1 connections, reporting requests/s, transfers/s, HTTP
//! latency percentiles and every non-2xx answer by status.
//!
//! Closed loop: `--connections` connections each send a request as soon as the previous answer
//! arrived, for `--duration-s` seconds. Open loop with `--rate R`: R requests a second in all,
//! each on a fixed schedule (connection c sends its k-th request at `(k × connections + c) / R`
//! seconds), and its latency counted from when it was *due*, not when it went out — a
//! connection still waiting for an earlier answer makes the next one late, and the lateness is
//! in the figures (no coordinated omission); give it connections ≥ R × the latency you expect. With `--batch N` (1 ..= 1,000) each request is a
//! `POST /v1/transfers/batch` of N transfers; without it, a single `POST /v1/transfers`. Every
//! transfer has a new `bmi` (`--run-id` prefix), from `--debtor` to `--creditor`, of `--amount`.
//! The HTTP client is a minimal one written here (request out, status + `content-length` body
//! in), so that the generator's own cost stays small next to the server's on a shared host.

use anyhow::Context;
use clap::Args;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

#[derive(Args, Debug)]
pub struct HttpLoadArgs {
    /// The API's address.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub addr: SocketAddr,
    /// Participant key id.
    #[arg(long, default_value = "bank-a")]
    pub key: String,
    /// The participant's secret (default: the example config's).
    #[arg(long, env = "RTGS_SECRET", default_value = "change-me-bank-a-0123456789", hide_env_values = true)]
    pub secret: String,
    #[arg(long, default_value_t = 1)]
    pub debtor: u64,
    #[arg(long, default_value_t = 2)]
    pub creditor: u64,
    /// Amount of each transfer, major units of EUR.
    #[arg(long, default_value = "0.01")]
    pub amount: String,
    /// Concurrent keep-alive connections.
    #[arg(long, default_value_t = 64)]
    pub connections: usize,
    #[arg(long, default_value_t = 10)]
    pub duration_s: u64,
    /// Transfers per request through `POST /v1/transfers/batch` (0: single transfers).
    #[arg(long, default_value_t = 0)]
    pub batch: usize,
    /// Prefix of every bmi (default: derived from the clock).
    #[arg(long)]
    pub run_id: Option<String>,
    /// Open loop: this many requests a second in all, on a fixed schedule (0: closed loop).
    #[arg(long, default_value_t = 0)]
    pub rate: u64,
    /// Worker threads of the generator (it shares the machine with the server under test).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Report {
    requests: u64,
    transfers: u64,
    errors: BTreeMap<String, u64>,
    elapsed_s: f64,
    requests_per_s: f64,
    transfers_per_s: f64,
    latency_ms_p50: f64,
    latency_ms_p90: f64,
    latency_ms_p99: f64,
    latency_ms_max: f64,
    ok: bool,
}

pub fn run(args: HttpLoadArgs) -> anyhow::Result<ExitCode> {
    if args.connections == 0 || args.batch > 1_000 || args.threads == 0 {
        anyhow::bail!("--connections and --threads must be ≥ 1 and --batch at most 1000");
    }
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(args.threads).enable_all().build()?;
    let report = rt.block_on(load(Arc::new(args)))?;
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(if report.ok { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

async fn load(args: Arc<HttpLoadArgs>) -> anyhow::Result<Report> {
    let run_id = args.run_id.clone().unwrap_or_else(|| {
        format!("H{:x}", SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64))
    });
    // The next transfer number: every connection takes its `bmi`s from here.
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let until = started + Duration::from_secs(args.duration_s);
    let mut tasks = Vec::with_capacity(args.connections);
    for c in 0..args.connections {
        let (args, next, run_id) = (Arc::clone(&args), Arc::clone(&next), run_id.clone());
        tasks.push(tokio::spawn(async move { connection(c, &args, &next, &run_id, started, until).await }));
    }
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    let (mut requests, mut transfers) = (0u64, 0u64);
    let mut errors = BTreeMap::new();
    for t in tasks {
        let r = t.await.context("a connection task panicked")??;
        hist.add(&r.hist)?;
        requests += r.requests;
        transfers += r.transfers;
        for (k, v) in r.errors {
            *errors.entry(k).or_insert(0) += v;
        }
    }
    let elapsed_s = started.elapsed().as_secs_f64();
    let ms = |q: f64| hist.value_at_quantile(q) as f64 / 1e3;
    Ok(Report {
        requests,
        transfers,
        elapsed_s,
        requests_per_s: requests as f64 / elapsed_s,
        transfers_per_s: transfers as f64 / elapsed_s,
        latency_ms_p50: ms(0.50),
        latency_ms_p90: ms(0.90),
        latency_ms_p99: ms(0.99),
        latency_ms_max: hist.max() as f64 / 1e3,
        ok: errors.is_empty() && requests > 0,
        errors,
    })
}

struct ConnectionReport {
    hist: Histogram<u64>,
    requests: u64,
    transfers: u64,
    errors: BTreeMap<String, u64>,
}

async fn connection(
    c: usize,
    args: &HttpLoadArgs,
    next: &AtomicU64,
    run_id: &str,
    started: Instant,
    until: Instant,
) -> anyhow::Result<ConnectionReport> {
    let stream =
        TcpStream::connect(args.addr).await.with_context(|| format!("connecting to {}", args.addr))?;
    stream.set_nodelay(true)?;
    let mut stream = BufReader::new(stream);
    let mut report = ConnectionReport {
        hist: Histogram::new_with_bounds(1, 60_000_000, 3)?,
        requests: 0,
        transfers: 0,
        errors: BTreeMap::new(),
    };
    let per_request = args.batch.max(1) as u64;
    let (path, mut body, mut request, mut response) = (
        if args.batch == 0 { "/v1/transfers" } else { "/v1/transfers/batch" },
        String::new(),
        Vec::new(),
        Vec::new(),
    );
    let mut sent = 0u64;
    while Instant::now() < until {
        // Open loop: when this request is due (its latency counts from then).
        let due = (args.rate > 0).then(|| {
            let k = sent * args.connections as u64 + c as u64;
            started + Duration::from_secs_f64(k as f64 / args.rate as f64)
        });
        if let Some(due) = due {
            if due >= until {
                break;
            }
            tokio::time::sleep_until(due.into()).await;
        }
        let first = next.fetch_add(per_request, Ordering::Relaxed);
        body.clear();
        let one = |i: u64| {
            format!(
                r#"{{"bmi":"{run_id}-{i}","debtor":{},"creditor":{},"amount":"{}","currency":"EUR"}}"#,
                args.debtor, args.creditor, args.amount
            )
        };
        if args.batch == 0 {
            body.push_str(&one(first));
        } else {
            body.push_str(r#"{"transfers":["#);
            for i in first..first + per_request {
                if i > first {
                    body.push(',');
                }
                body.push_str(&one(i));
            }
            body.push_str("]}");
        }
        sent += 1;
        let now_s = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let ts = format!("{now_s}.c{c}n{sent}");
        let signature = rtgs_api::auth::sign(args.secret.as_bytes(), "POST", path, &ts, body.as_bytes());
        request.clear();
        request.extend_from_slice(
            format!(
                "POST {path} HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
                 x-rtgs-key: {}\r\nx-rtgs-timestamp: {ts}\r\nx-rtgs-signature: {signature}\r\n\r\n",
                args.addr,
                body.len(),
                args.key
            )
            .as_bytes(),
        );
        request.extend_from_slice(body.as_bytes());
        let at = due.unwrap_or_else(Instant::now);
        stream.get_mut().write_all(&request).await.context("sending a request")?;
        let status = read_response(&mut stream, &mut response).await?;
        report.hist.record((at.elapsed().as_micros() as u64).max(1))?;
        report.requests += 1;
        if (200..300).contains(&status) {
            report.transfers += per_request;
        } else {
            let code = serde_json::from_slice::<serde_json::Value>(&response)
                .ok()
                .and_then(|v| v["code"].as_str().map(String::from))
                .unwrap_or_default();
            *report.errors.entry(format!("{status} {code}")).or_insert(0) += 1;
        }
    }
    Ok(report)
}

/// The largest response body read (a `content-length` is the server's word, not a promise).
const BODY_BYTES_MAX: usize = 64 << 20;

/// Reads one response: the status, and the body into `body` (by `content-length`). The head is
/// found in the connection's buffer, not byte by byte. (the HTTP load and its checks read their answers with it.)
pub(crate) async fn read_response(
    stream: &mut BufReader<TcpStream>,
    body: &mut Vec<u8>,
) -> anyhow::Result<u16> {
    let mut head: Vec<u8> = Vec::with_capacity(256);
    loop {
        let buf = stream.fill_buf().await.context("reading a response")?;
        if buf.is_empty() {
            anyhow::bail!("the server closed the connection");
        }
        // The end of the head may straddle two reads: look from 3 bytes back.
        let from = head.len().saturating_sub(3);
        head.extend_from_slice(buf);
        let n = buf.len();
        match head[from..].windows(4).position(|w| w == b"\r\n\r\n") {
            Some(at) => {
                let end = from + at + 4;
                // Give back what belongs to the body.
                let used = n - (head.len() - end);
                stream.consume(used);
                head.truncate(end);
                break;
            }
            None => stream.consume(n),
        }
        if head.len() > 16 * 1024 {
            anyhow::bail!("response head over 16 KiB");
        }
    }
    let text = String::from_utf8_lossy(&head);
    let status: u16 = text.get(9..12).and_then(|s| s.parse().ok()).context("no status in the response")?;
    let length: usize = text
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length").then(|| v.trim().parse().ok())?
        })
        .context("response without content-length")?;
    anyhow::ensure!(length <= BODY_BYTES_MAX, "response body of {length} bytes (at most {BODY_BYTES_MAX})");
    body.resize(length, 0);
    stream.read_exact(body).await.context("reading a response body")?;
    Ok(status)
}
