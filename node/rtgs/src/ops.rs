//! `rtgs ops`: plugin operations from the command line — the operator routes of a node's API
//! (`rtgs serve`, or `rtgs node --api-config`), as signed operator requests.
//!
//! Every subcommand is one request: it names a route and a body, signs it with the operator's
//! credentials (`--key`/`RTGS_OPS_KEY`, and the secret from `--secret-file` or `RTGS_OPS_SECRET`;
//! the secret is never printed) the way every API client does (`rtgs_api::auth::sign`), and
//! prints the answer as JSON, or a list answer as a small table with `--table`. A write carries a
//! `bmi` (`--bmi`, or `OPS-<unix ms>`): run the same command with the same `--bmi` again and it
//! is journaled once. Whether the plugin accepts a journaled command is its own answer, in its
//! state: the API refuses what it can see is wrong first (unknown batch, wrong status, ...).
//!
//! Exit status: 0 when the API answered 2xx; 1 when it refused (its `code` and `message` on
//! stderr); 2 on a usage error or when the API could not be reached.

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// The example config's operator secret (`node/api/participants.example.json`), as `rtgs
/// http-load` defaults to the example's participant secret.
const SECRET_EXAMPLE: &str = "change-me-operator-0123456789";

/// How long one request may take (connect, send, answer).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Args, Debug)]
pub struct OpsArgs {
    /// The node's API: `http://HOST:PORT` (or `HOST:PORT`).
    #[arg(long, env = "RTGS_API", default_value = "http://127.0.0.1:8080")]
    pub api: String,
    /// The operator's key id.
    #[arg(long, env = "RTGS_OPS_KEY", default_value = "ops")]
    pub key: String,
    /// The operator's secret (default: the example config's). Prefer `--secret-file`: a flag is
    /// visible to other users in the process list.
    #[arg(long, env = "RTGS_OPS_SECRET", hide_env_values = true, hide_default_value = true,
          default_value = SECRET_EXAMPLE)]
    pub secret: String,
    /// A file whose first line is the operator's secret (wins over `--secret`).
    #[arg(long)]
    pub secret_file: Option<PathBuf>,
    /// The `bmi` of a write (idempotency key); default `OPS-<unix ms>`.
    #[arg(long, global = true)]
    pub bmi: Option<String>,
    /// Print a list answer as a table instead of JSON.
    #[arg(long, global = true)]
    pub table: bool,
    #[command(subcommand)]
    pub command: OpsCommand,
}

#[derive(Subcommand, Debug)]
pub enum OpsCommand {
    /// The collection plugin's operations.
    #[command(subcommand)]
    Collection(CollectionOp),
    /// The withdrawal plugin's operator reads and operations.
    #[command(subcommand)]
    Withdrawal(WithdrawalOp),
    /// The matching plugin's operator reads.
    #[command(subcommand)]
    Matching(MatchingOp),
    /// Every plugin's owner and term; with `--plugin P --center N`, move P's ownership to
    /// center N (the core's `SetOwner`, through the journal).
    Owner {
        #[arg(long, requires = "center")]
        plugin: Option<String>,
        #[arg(long, requires = "plugin")]
        center: Option<u64>,
    },
    /// Any operator route: `rtgs ops request GET /v1/operator/...` [`--body JSON`].
    Request {
        method: String,
        path: String,
        #[arg(long)]
        body: Option<String>,
    },
}

#[derive(Subcommand, Debug)]
pub enum CollectionOp {
    /// STALE → FAILED by the operator (its deposits stay QUEUED, its nonce is cancelled).
    FailStale {
        #[arg(long)]
        batch: u64,
    },
    /// Re-send a BROADCASTING or STALE batch at a higher gas price (≥ +10 %).
    BumpGas {
        #[arg(long)]
        batch: u64,
        #[arg(long)]
        gas_price_wei: u64,
    },
    /// Move an idle relayer's next nonce forward to the chain's (its mined transaction count).
    ResetNonce {
        #[arg(long)]
        relayer: u64,
        #[arg(long)]
        chain_nonce: u64,
    },
    /// The settings (global, partners' overrides, ranges); `--set NAME=VALUE` changes one
    /// (`--partner P` for a partner's override; `NAME=` clears a partner's override).
    Settings {
        #[arg(long, value_name = "NAME=VALUE")]
        set: Option<String>,
        #[arg(long, requires = "set")]
        partner: Option<u64>,
    },
    /// Every STALE batch.
    Stale,
    /// QUEUED rows per wallet and token (`--wallet W`: one wallet's).
    Queued {
        #[arg(long)]
        wallet: Option<u64>,
    },
    /// Groups whose last run was skipped, with the reason.
    Skipped,
    /// Every relayer: next nonce, lock, availability.
    Relayers,
    /// A batch and its deposits.
    Batch { id: u64 },
    /// A deposit traced to its batch and transaction hashes.
    Deposit { id: u64 },
    /// Run the schedule now (one partner's, or every partner's).
    Run {
        #[arg(long)]
        partner: Option<u64>,
    },
}

#[derive(Subcommand, Debug)]
pub enum WithdrawalOp {
    /// Every withdrawal (the operator's list).
    List,
    /// One withdrawal.
    Show { id: u64 },
    /// An operation on a withdrawal: `--op` is the route's JSON body without `bmi` (e.g.
    /// `{"operation":"retry"}`, `{"operation":"boost","fee":2000}`; see the OpenAPI of
    /// `/v1/operator/withdrawals/{id}/operations`).
    Operate {
        id: u64,
        #[arg(long)]
        op: String,
    },
}

#[derive(Subcommand, Debug)]
pub enum MatchingOp {
    /// Sessions escalated to an operator.
    Escalations,
    /// Effects given up after their retries.
    DeadLetters,
    /// One session.
    Session { id: u64 },
    /// A partner's matching settings.
    Settings { partner: u64 },
}

/// One request: method, path and body (`None`: no body).
struct Call {
    method: &'static str,
    path: String,
    body: Option<Value>,
}

impl Call {
    fn get(path: impl Into<String>) -> Call {
        Call { method: "GET", path: path.into(), body: None }
    }
    fn post(path: impl Into<String>, body: Value) -> Call {
        Call { method: "POST", path: path.into(), body: Some(body) }
    }
}

pub fn run(args: OpsArgs) -> anyhow::Result<ExitCode> {
    let addr = api_address(&args.api)?;
    let secret = match &args.secret_file {
        Some(path) => std::fs::read_to_string(path)
            .with_context(|| format!("reading the secret file {}", path.display()))?
            .lines()
            .next()
            .unwrap_or_default()
            .to_string(),
        None => args.secret.clone(),
    };
    anyhow::ensure!(!secret.is_empty(), "the operator secret is empty");
    let bmi = args.bmi.clone().unwrap_or_else(default_bmi);
    let call = call_of(&args.command, &bmi)?;
    let body = call.body.as_ref().map(|b| b.to_string()).unwrap_or_default();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let (status, answer) = runtime.block_on(async {
        tokio::time::timeout(REQUEST_TIMEOUT, send(addr, &args.key, &secret, &call, body.as_bytes()))
            .await
            .map_err(|_| anyhow::anyhow!("no answer from {addr} within {} s", REQUEST_TIMEOUT.as_secs()))?
    })?;
    let value: Value = serde_json::from_slice(&answer).with_context(|| {
        format!("HTTP {status}: the answer is not JSON: {}", String::from_utf8_lossy(&answer))
    })?;
    if !(200..300).contains(&status) {
        let code = value["code"].as_str().unwrap_or("?");
        let message = value["message"].as_str().unwrap_or("");
        eprintln!("rtgs ops: refused: HTTP {status} {code}: {message}");
        return Ok(ExitCode::from(1));
    }
    if args.table {
        print!("{}", table(&value));
    } else {
        println!("{}", serde_json::to_string_pretty(&value)?);
    }
    Ok(ExitCode::SUCCESS)
}

/// `http://HOST:PORT[/]` or `HOST:PORT`.
fn api_address(api: &str) -> anyhow::Result<SocketAddr> {
    let bare = api.strip_prefix("http://").unwrap_or(api).trim_end_matches('/');
    anyhow::ensure!(
        !api.starts_with("https://"),
        "--api {api}: the API speaks plain HTTP (put TLS in front)"
    );
    bare.parse().with_context(|| format!("--api {api:?} is not http://IP:PORT"))
}

fn default_bmi() -> String {
    let ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
    format!("OPS-{ms}")
}

/// The request of a subcommand (pure: unit-tested below).
fn call_of(command: &OpsCommand, bmi: &str) -> anyhow::Result<Call> {
    Ok(match command {
        OpsCommand::Collection(op) => collection_call(op, bmi)?,
        OpsCommand::Withdrawal(WithdrawalOp::List) => Call::get("/v1/operator/withdrawals"),
        OpsCommand::Withdrawal(WithdrawalOp::Show { id }) => {
            Call::get(format!("/v1/operator/withdrawals/{id}"))
        }
        OpsCommand::Withdrawal(WithdrawalOp::Operate { id, op }) => {
            let mut body: Value = serde_json::from_str(op).context("--op is not JSON")?;
            let object = body.as_object_mut().context("--op is not a JSON object")?;
            object.insert("bmi".into(), json!(bmi));
            Call::post(format!("/v1/operator/withdrawals/{id}/operations"), body)
        }
        OpsCommand::Matching(MatchingOp::Escalations) => Call::get("/v1/operator/matching/escalations"),
        OpsCommand::Matching(MatchingOp::DeadLetters) => Call::get("/v1/operator/matching/dead-letters"),
        OpsCommand::Matching(MatchingOp::Session { id }) => {
            Call::get(format!("/v1/operator/matching/sessions/{id}"))
        }
        OpsCommand::Matching(MatchingOp::Settings { partner }) => {
            Call::get(format!("/v1/operator/matching/partners/{partner}/settings"))
        }
        OpsCommand::Owner { plugin: Some(p), center: Some(c) } => {
            Call::post(format!("/v1/operator/plugins/{p}/owner"), json!({ "center": c }))
        }
        OpsCommand::Owner { .. } => Call::get("/v1/operator/plugins"),
        OpsCommand::Request { method, path, body } => {
            let method = match method.to_ascii_uppercase().as_str() {
                "GET" => "GET",
                "POST" => "POST",
                other => anyhow::bail!("method {other}: the API has GET and POST routes only"),
            };
            anyhow::ensure!(path.starts_with('/'), "path {path:?} does not start with /");
            let body = body.as_deref().map(serde_json::from_str).transpose().context("--body is not JSON")?;
            Call { method, path: path.clone(), body }
        }
    })
}

fn collection_call(op: &CollectionOp, bmi: &str) -> anyhow::Result<Call> {
    const BASE: &str = "/v1/operator/collection";
    Ok(match op {
        CollectionOp::FailStale { batch } => {
            Call::post(format!("{BASE}/batches/{batch}/fail"), json!({ "bmi": bmi }))
        }
        CollectionOp::BumpGas { batch, gas_price_wei } => Call::post(
            format!("{BASE}/batches/{batch}/bump-gas"),
            json!({ "bmi": bmi, "gas_price_wei": gas_price_wei }),
        ),
        CollectionOp::ResetNonce { relayer, chain_nonce } => Call::post(
            format!("{BASE}/relayers/{relayer}/reset-nonce"),
            json!({ "bmi": bmi, "chain_nonce": chain_nonce }),
        ),
        CollectionOp::Settings { set: None, .. } => Call::get(format!("{BASE}/settings")),
        CollectionOp::Settings { set: Some(kv), partner } => {
            let (name, value) = kv.split_once('=').context("--set takes NAME=VALUE")?;
            let value: Option<u64> = match value.trim() {
                "" => None,
                v => Some(v.parse().with_context(|| format!("--set {name}: {v:?} is not a whole number"))?),
            };
            Call::post(
                format!("{BASE}/settings"),
                json!({ "bmi": bmi, "name": name.trim(), "value": value, "partner": partner }),
            )
        }
        CollectionOp::Stale => Call::get(format!("{BASE}/stale")),
        CollectionOp::Queued { wallet: None } => Call::get(format!("{BASE}/queued")),
        CollectionOp::Queued { wallet: Some(w) } => Call::get(format!("{BASE}/wallets/{w}/queued")),
        CollectionOp::Skipped => Call::get(format!("{BASE}/skipped")),
        CollectionOp::Relayers => Call::get(format!("{BASE}/relayers")),
        CollectionOp::Batch { id } => Call::get(format!("{BASE}/batches/{id}")),
        CollectionOp::Deposit { id } => Call::get(format!("{BASE}/deposits/{id}")),
        CollectionOp::Run { partner } => {
            Call::post(format!("{BASE}/run"), json!({ "bmi": bmi, "partner": partner }))
        }
    })
}

/// One signed request on a fresh connection; the status and the body.
async fn send(
    addr: SocketAddr,
    key: &str,
    secret: &str,
    call: &Call,
    body: &[u8],
) -> anyhow::Result<(u16, Vec<u8>)> {
    let stream =
        TcpStream::connect(addr).await.with_context(|| format!("connecting to the API at {addr}"))?;
    let mut stream = BufReader::new(stream);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    // A nonce per request (a signed write is accepted once): this process and this instant.
    let ts = format!("{}.ops{}n{}", now.as_secs(), std::process::id(), now.subsec_nanos());
    let signature = rtgs_api::auth::sign(secret.as_bytes(), call.method, &call.path, &ts, body);
    let mut request = format!(
        "{} {} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\ncontent-length: {}\r\n\
         x-rtgs-key: {key}\r\nx-rtgs-timestamp: {ts}\r\nx-rtgs-signature: {signature}\r\n",
        call.method,
        call.path,
        body.len()
    );
    if call.body.is_some() {
        request.push_str("content-type: application/json\r\n");
    }
    request.push_str("\r\n");
    let mut bytes = request.into_bytes();
    bytes.extend_from_slice(body);
    stream.get_mut().write_all(&bytes).await.context("sending the request")?;
    let mut answer = Vec::new();
    let status = crate::http_load::read_response(&mut stream, &mut answer).await?;
    Ok((status, answer))
}

/// The first array of objects in an answer as a table (columns: the first row's scalar fields);
/// an answer without one prints as JSON.
fn table(v: &Value) -> String {
    let rows = v.as_object().and_then(|o| {
        o.values().find_map(|x| x.as_array().filter(|a| a.first().is_some_and(Value::is_object)))
    });
    let Some(rows) = rows else {
        return format!("{}\n", serde_json::to_string_pretty(v).unwrap_or_default());
    };
    let columns: Vec<&String> = rows[0]
        .as_object()
        .map(|o| o.iter().filter(|(_, x)| !x.is_array() && !x.is_object()).map(|(k, _)| k).collect())
        .unwrap_or_default();
    let cell = |r: &Value, c: &str| match &r[c] {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        x => x.to_string(),
    };
    let widths: Vec<usize> = columns
        .iter()
        .map(|c| rows.iter().map(|r| cell(r, c).len()).max().unwrap_or(0).max(c.len()))
        .collect();
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells.iter().zip(&widths).map(|(s, w)| format!("{s:<w$}")).collect();
        format!("{}\n", padded.join("  ").trim_end())
    };
    let mut out = line(columns.iter().map(|c| c.to_string()).collect());
    for r in rows {
        out.push_str(&line(columns.iter().map(|c| cell(r, c)).collect()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subcommands_name_their_routes_and_bodies() {
        let c = call_of(&OpsCommand::Collection(CollectionOp::FailStale { batch: 7 }), "B-1").ok();
        assert_eq!(
            c.map(|c| (c.method, c.path, c.body)),
            Some(("POST", "/v1/operator/collection/batches/7/fail".into(), Some(json!({ "bmi": "B-1" }))))
        );
        let set =
            CollectionOp::Settings { set: Some("collection.min_amount_usd=5".into()), partner: Some(3) };
        let c = call_of(&OpsCommand::Collection(set), "S").ok().and_then(|c| c.body);
        assert_eq!(
            c,
            Some(json!({ "bmi": "S", "name": "collection.min_amount_usd", "value": 5, "partner": 3 }))
        );
        let clear =
            CollectionOp::Settings { set: Some("collection.min_amount_usd=".into()), partner: Some(3) };
        let c = call_of(&OpsCommand::Collection(clear), "S").ok().and_then(|c| c.body);
        assert_eq!(c.map(|b| b["value"].clone()), Some(Value::Null));
        let owner = OpsCommand::Owner { plugin: Some("collection".into()), center: Some(2) };
        let c = call_of(&owner, "X").ok().map(|c| (c.path, c.body));
        assert_eq!(c, Some(("/v1/operator/plugins/collection/owner".into(), Some(json!({ "center": 2 })))));
    }

    #[test]
    fn withdrawal_and_matching_operations_name_their_routes() {
        let op =
            OpsCommand::Withdrawal(WithdrawalOp::Operate { id: 9, op: r#"{"operation":"retry"}"#.into() });
        let c = call_of(&op, "W-1").ok().map(|c| (c.method, c.path, c.body));
        let body = json!({ "operation": "retry", "bmi": "W-1" });
        assert_eq!(c, Some(("POST", "/v1/operator/withdrawals/9/operations".into(), Some(body))));
        let c = call_of(&OpsCommand::Matching(MatchingOp::Settings { partner: 4 }), "M").ok();
        assert_eq!(
            c.map(|c| (c.method, c.path)),
            Some(("GET", "/v1/operator/matching/partners/4/settings".into()))
        );
        let c = call_of(&OpsCommand::Owner { plugin: None, center: None }, "O").ok();
        assert_eq!(c.map(|c| (c.method, c.path)), Some(("GET", "/v1/operator/plugins".into())));
    }

    #[test]
    fn bad_arguments_are_errors() {
        let bad = CollectionOp::Settings { set: Some("collection.min_amount_usd".into()), partner: None };
        assert!(call_of(&OpsCommand::Collection(bad), "S").is_err(), "no =");
        let bad = CollectionOp::Settings { set: Some("x=-1".into()), partner: None };
        assert!(call_of(&OpsCommand::Collection(bad), "S").is_err(), "not a number");
        let bad = OpsCommand::Request { method: "DELETE".into(), path: "/v1/x".into(), body: None };
        assert!(call_of(&bad, "S").is_err());
        let bad = OpsCommand::Withdrawal(WithdrawalOp::Operate { id: 1, op: "[1]".into() });
        assert!(call_of(&bad, "S").is_err(), "not an object");
        assert!(api_address("https://127.0.0.1:8080").is_err());
        assert_eq!(api_address("http://127.0.0.1:8080/").ok(), "127.0.0.1:8080".parse().ok());
    }

    #[test]
    fn a_list_answer_prints_as_a_table() {
        let v = json!({ "truncated": false, "batches": [{ "batch": 1, "status": "STALE", "tx_hashes": [] }, { "batch": 12, "status": "STALE", "tx_hashes": [] }] });
        assert_eq!(table(&v), "batch  status\n1      STALE\n12     STALE\n");
    }
}
