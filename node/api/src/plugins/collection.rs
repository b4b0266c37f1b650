//! Collection (wallet sweeping) over HTTP, for operators: journal a scheduled run, a relayer or a
//! setting, and audit both ways — deposit → batch → transaction hashes, batch → deposits, and
//! transaction hash → batch.
//!
//! Writes go through the journal like every other write (tracker, idempotency by `bmi`); whether
//! the plugin accepts them is its own answer, visible in its state. Reads come from the read
//! model's plugin replica, which applies exactly what is final (the answers carry `as_of_seq`).
//! On a node that does not run the collection plugin every route here answers 404
//! `collection_disabled`.

use crate::checks::{parse_bmi, parse_json};
use crate::edge::Path;
use crate::error::ApiError;
use crate::server::{accepted, authenticated, submit, AppState};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use rtgs_collection::command::{CollectionCommand, RegisterRelayer, RunNow, SetSetting};
use rtgs_collection::settings::{SettingKey, SettingScope};
use rtgs_collection::state::{Batch, QueueRow, RowStatus};
use rtgs_collection::types::{BatchId, ChainId, DepositId, PartnerId, RelayerId, TxHash};
use rtgs_collection::CollectionPlugin;
use rtgs_core::entry::{Payload, Seq};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RunRequest {
    bmi: String,
    /// Only this partner's groups; all partners when absent.
    partner: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RelayerRequest {
    bmi: String,
    chain: u32,
    relayer: u64,
    next_nonce: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SettingRequest {
    bmi: String,
    /// `collection.schedule_interval_hours`, `collection.gas_threshold_ratio`, ...
    name: String,
    /// In the setting's unit (see [`SettingKey`]); `null` clears a partner's override.
    value: Option<u64>,
    /// A partner's override; the global value when absent.
    partner: Option<u64>,
}

fn disabled() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "collection_disabled", "collection is not enabled on this node")
}

/// This plugin's routes.
pub(crate) fn routes(router: Router<Arc<AppState>>) -> Router<Arc<AppState>> {
    router
        .route("/v1/operator/collection/run", post(run_now))
        .route("/v1/operator/collection/relayers", post(register_relayer))
        .route("/v1/operator/collection/settings", post(set_setting))
        .route("/v1/operator/collection/deposits/{id}", get(get_deposit))
        .route("/v1/operator/collection/batches/{id}", get(get_batch))
        .route("/v1/operator/collection/transactions/{hash}", get(get_transaction))
}

fn enabled(state: &AppState) -> bool {
    state.read_model.plugins(|host, _| rtgs_plugins::collection(host).is_some()).unwrap_or(false)
}

async fn journal(
    state: &AppState,
    bmi_text: &str,
    owner: &Arc<str>,
    cmd: CollectionCommand,
) -> Result<Response, ApiError> {
    if !enabled(state) {
        return Err(disabled());
    }
    let bmi = parse_bmi(bmi_text)?;
    let command =
        cmd.to_plugin_command().map_err(|e| ApiError::bad_request("invalid_field", e.to_string()))?;
    let seq = submit(state, bmi, owner, Payload::Plugin(command)).await?;
    Ok(accepted(bmi, seq))
}

async fn run_now(State(state): State<Arc<AppState>>, request: Request) -> Result<Response, ApiError> {
    let (operator, body) = authenticated(&state.operators, request).await?;
    let req: RunRequest = parse_json(&body)?;
    let cmd = CollectionCommand::RunNow(RunNow { partner: req.partner.map(PartnerId) });
    journal(&state, &req.bmi, &operator.key_id, cmd).await
}

async fn register_relayer(
    State(state): State<Arc<AppState>>,
    request: Request,
) -> Result<Response, ApiError> {
    let (operator, body) = authenticated(&state.operators, request).await?;
    let req: RelayerRequest = parse_json(&body)?;
    let cmd = CollectionCommand::RegisterRelayer(RegisterRelayer {
        chain: ChainId(req.chain),
        relayer: RelayerId(req.relayer),
        next_nonce: req.next_nonce,
    });
    journal(&state, &req.bmi, &operator.key_id, cmd).await
}

/// A setting is checked against its range here too, so that a typo is a 400, not a rejection
/// the operator has to look for in the plugin's state.
async fn set_setting(State(state): State<Arc<AppState>>, request: Request) -> Result<Response, ApiError> {
    let (operator, body) = authenticated(&state.operators, request).await?;
    let req: SettingRequest = parse_json(&body)?;
    let key = SettingKey::from_name(&req.name).ok_or_else(|| {
        ApiError::bad_request("unknown_setting", format!("no setting named {:?}", req.name))
    })?;
    let scope = match req.partner {
        Some(_) if !key.per_partner() => {
            let message = format!("{} has no per-partner override", req.name);
            return Err(ApiError::bad_request("setting_out_of_range", message));
        }
        Some(p) => SettingScope::Partner(PartnerId(p)),
        None => SettingScope::Global,
    };
    match req.value {
        Some(v) => {
            key.validate(v).map_err(|e| ApiError::bad_request("setting_out_of_range", format!("{e:?}")))?
        }
        None if scope == SettingScope::Global => {
            return Err(ApiError::bad_request("setting_out_of_range", "a global setting cannot be cleared"))
        }
        None => {}
    }
    let cmd = CollectionCommand::SetSetting(SetSetting { scope, key, value: req.value });
    journal(&state, &req.bmi, &operator.key_id, cmd).await
}

/// Runs `f` over the replica's collection plugin once the read model has applied everything
/// already final (read-your-writes).
async fn with_plugin<R>(
    state: &AppState,
    f: impl FnOnce(&CollectionPlugin) -> Result<R, ApiError>,
) -> Result<(R, Seq), ApiError> {
    if !enabled(state) {
        return Err(disabled());
    }
    crate::server::read_model_caught_up(&state.read_model).await?;
    state
        .read_model
        .plugins(|host, seq| {
            let plugin = rtgs_plugins::collection(host).ok_or_else(disabled)?;
            Ok((f(plugin)?, seq))
        })
        .map_err(|e| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "read_model_failed", e))?
}

fn parse_id(text: &str, what: &str) -> Result<u64, ApiError> {
    text.parse()
        .map_err(|_| ApiError::bad_request("invalid_id", format!("{what} id {text:?} is not a number")))
}

fn hex(hash: &TxHash) -> String {
    let mut s = String::with_capacity(66);
    s.push_str("0x");
    for b in hash.0 {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

fn parse_hash(text: &str) -> Result<TxHash, ApiError> {
    let bad =
        || ApiError::bad_request("invalid_id", format!("{text:?} is not a 0x-prefixed 32-byte hex hash"));
    let digits = text.strip_prefix("0x").ok_or_else(bad)?;
    if digits.len() != 64 || !digits.is_ascii() {
        return Err(bad());
    }
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&digits[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok(TxHash(out))
}

fn row_json(r: &QueueRow) -> Value {
    let (status, batch) = match r.status {
        RowStatus::Queued => ("QUEUED", None),
        RowStatus::Collected(b) => ("COLLECTED", Some(b.0)),
    };
    json!({
        "deposit": r.deposit.0,
        "partner": r.partner.0,
        "wallet": r.key.wallet.0,
        "chain": r.key.chain.0,
        "token": r.key.token.0,
        // u128 minor units: a string, never a JSON number that a client could round.
        "amount_minor": r.amount_minor.to_string(),
        "block_height": r.block_height,
        "status": status,
        "batch": batch,
        "queued_at_us": r.queued_at_us,
        "collected_at_us": r.collected_at_us,
    })
}

fn batch_json(b: &Batch) -> Value {
    json!({
        "batch": b.id.0,
        "partner": b.partner.0,
        "wallet": b.key.wallet.0,
        "chain": b.key.chain.0,
        "token": b.key.token.0,
        "status": format!("{:?}", b.status).to_uppercase(),
        "read_height": b.read_height,
        "amount_minor": b.amount_minor.to_string(),
        "relayer": b.relayer.map(|r| r.0),
        "nonce": b.nonce,
        "tx_hashes": b.tx_hashes.iter().map(hex).collect::<Vec<_>>(),
        "gas_used": b.receipt.map(|r| r.gas_used),
        "gas_cost_usd_micros": b.receipt.map(|r| r.gas_cost_usd_micros),
        "fail_reason": b.fail_reason.map(|f| format!("{f:?}")),
        "created_at_us": b.created_at_us,
        "broadcast_at_us": b.broadcast_at_us,
        "finished_at_us": b.finished_at_us,
    })
}

/// Audit, forward: the deposit's row, the batch that collected it and its transaction hashes
/// (or, while QUEUED, the open batch that may collect it and why its group was last skipped).
async fn get_deposit(
    State(state): State<Arc<AppState>>,
    Path(id_text): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    authenticated(&state.operators, request).await?;
    let id = DepositId(parse_id(&id_text, "deposit")?);
    let (answer, seq) = with_plugin(&state, |p| {
        let t = p.trace_deposit(id).ok_or_else(|| {
            ApiError::new(StatusCode::NOT_FOUND, "unknown_deposit", format!("no deposit {}", id.0))
        })?;
        Ok(json!({
            "deposit": row_json(t.row),
            "batch": t.batch.map(batch_json),
            "tx_hashes": t.tx_hashes().iter().map(hex).collect::<Vec<_>>(),
            "open_batch": t.open_batch.map(batch_json),
            "last_skip": t.last_skip.map(|s| json!({
                "reason": format!("{:?}", s.reason),
                "at_us": s.at_us,
                "balance_minor": s.balance_minor.to_string(),
                "block_height": s.block_height,
            })),
        }))
    })
    .await?;
    Ok(Json(with_seq(answer, seq)).into_response())
}

/// Audit, backward: the batch and the deposits it collected (empty until CONFIRMED).
async fn get_batch(
    State(state): State<Arc<AppState>>,
    Path(id_text): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    authenticated(&state.operators, request).await?;
    let id = BatchId(parse_id(&id_text, "batch")?);
    let (answer, seq) = with_plugin(&state, |p| batch_with_deposits(p, id)).await?;
    Ok(Json(with_seq(answer, seq)).into_response())
}

/// Audit from the chain's side: the batch that sent a transaction hash.
async fn get_transaction(
    State(state): State<Arc<AppState>>,
    Path(hash_text): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    authenticated(&state.operators, request).await?;
    let hash = parse_hash(&hash_text)?;
    let (answer, seq) = with_plugin(&state, |p| {
        let id = p.batch_of_tx(&hash).ok_or_else(|| {
            ApiError::new(StatusCode::NOT_FOUND, "unknown_transaction", format!("no batch sent {hash_text}"))
        })?;
        batch_with_deposits(p, id)
    })
    .await?;
    Ok(Json(with_seq(answer, seq)).into_response())
}

fn batch_with_deposits(p: &CollectionPlugin, id: BatchId) -> Result<Value, ApiError> {
    let unknown = || ApiError::new(StatusCode::NOT_FOUND, "unknown_batch", format!("no batch {}", id.0));
    let batch = p.batch(id).ok_or_else(unknown)?;
    let deposits = p.batch_deposits(id).ok_or_else(unknown)?;
    let total: u128 = deposits.iter().map(|r| r.amount_minor).sum();
    Ok(json!({
        "batch": batch_json(batch),
        "deposits": deposits.iter().map(|r| row_json(r)).collect::<Vec<_>>(),
        "deposits_amount_minor": total.to_string(),
    }))
}

fn with_seq(mut v: Value, seq: Seq) -> Value {
    if let Some(o) = v.as_object_mut() {
        o.insert("as_of_seq".into(), json!(seq));
    }
    v
}
