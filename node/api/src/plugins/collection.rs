//! Collection (wallet sweeping) over HTTP, for operators: journal a scheduled run, a relayer, a
//! setting, or an action on a stuck batch (fail a STALE batch, bump its gas); read the settings,
//! the STALE batches, the QUEUED rows per wallet, the skipped groups with their reasons and the
//! relayers; and audit both ways — deposit → batch → transaction hashes, batch → deposits, and
//! transaction hash → batch.
//!
//! An action on a batch is checked against the replica first (unknown batch, wrong status, a bump
//! below +10 %), so that an operator's mistake is a clear 4xx; the plugin decides again at the
//! entry's seq (the batch may have moved on meanwhile) and records a refusal in its state.
//!
//! Writes go through the journal like every other write (tracker, idempotency by `bmi`); whether
//! the plugin accepts them is its own answer, visible in its state. Reads come from the read
//! model's plugin replica, which applies exactly what is final (the answers carry `as_of_seq`).
//! On a node that does not run the collection plugin every route here answers 404
//! `collection_disabled`.

use super::{parse_id, with_seq};
use crate::checks::parse_json;
use crate::edge::Path;
use crate::error::ApiError;
use crate::limits::OPERATOR_LIST_ITEMS_MAX;
use crate::server::{authenticated, AppState};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use rtgs_collection::command::{
    BumpGas, CollectionCommand, FailStale, RegisterRelayer, ResetNonce, RunNow, SetSetting,
};
use rtgs_collection::limits::BUMP_GAS_PRICE_PERCENT_MIN;
use rtgs_collection::settings::{PartnerState, SettingKey, SettingScope, Settings};
use rtgs_collection::state::{Batch, BatchStatus, QueueRow, Relayer, RowStatus};
use rtgs_collection::types::{BatchId, ChainId, DepositId, PartnerId, RelayerId, TxHash, WalletId};
use rtgs_collection::CollectionPlugin;
use rtgs_core::entry::Seq;
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FailRequest {
    bmi: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BumpRequest {
    bmi: String,
    /// The replacement's gas price: at least +10 % over the batch's (`gas_price_wei` in its GET).
    gas_price_wei: u64,
}

/// This plugin's routes.
pub(crate) fn routes(router: Router<Arc<AppState>>) -> Router<Arc<AppState>> {
    router
        .route("/v1/operator/collection/run", post(run_now))
        .route("/v1/operator/collection/relayers", post(register_relayer).get(list_relayers))
        .route("/v1/operator/collection/settings", post(set_setting).get(get_settings))
        .route("/v1/operator/collection/deposits/{id}", get(get_deposit))
        .route("/v1/operator/collection/batches/{id}", get(get_batch))
        .route("/v1/operator/collection/batches/{id}/fail", post(fail_stale))
        .route("/v1/operator/collection/batches/{id}/bump-gas", post(bump_gas))
        .route("/v1/operator/collection/relayers/{id}/reset-nonce", post(reset_nonce))
        .route("/v1/operator/collection/stale", get(list_stale))
        .route("/v1/operator/collection/queued", get(list_queued))
        .route("/v1/operator/collection/wallets/{id}/queued", get(wallet_queued))
        .route("/v1/operator/collection/skipped", get(list_skipped))
        .route("/v1/operator/collection/transactions/{hash}", get(get_transaction))
}

async fn journal(
    state: &AppState,
    bmi_text: &str,
    owner: &Arc<str>,
    cmd: CollectionCommand,
) -> Result<Response, ApiError> {
    super::journal::<CollectionPlugin>(state, bmi_text, owner, cmd.to_plugin_command()).await
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

async fn with_plugin<R>(
    state: &AppState,
    f: impl Fn(&CollectionPlugin) -> Result<R, ApiError>,
) -> Result<(R, Seq), ApiError> {
    super::with_plugin(state, f).await
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
        "gas_price_wei": b.gas_price_wei,
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

fn unknown_batch(id: BatchId) -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "unknown_batch", format!("no batch {}", id.0))
}

/// Operator: give up a STALE batch (STALE → FAILED, its deposits stay QUEUED, its nonce is
/// cancelled). 409 `batch_not_stale` when the replica shows it in another status.
async fn fail_stale(
    State(state): State<Arc<AppState>>,
    Path(id_text): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    let (operator, body) = authenticated(&state.operators, request).await?;
    let id = BatchId(parse_id(&id_text, "batch")?);
    let req: FailRequest = parse_json(&body)?;
    with_plugin(&state, |p| {
        let b = p.batch(id).ok_or_else(|| unknown_batch(id))?;
        if b.status != BatchStatus::Stale {
            let message = format!("batch {} is {}, not STALE", id.0, status_name(b.status));
            return Err(ApiError::new(StatusCode::CONFLICT, "batch_not_stale", message));
        }
        Ok(())
    })
    .await?;
    journal(&state, &req.bmi, &operator.key_id, CollectionCommand::FailStale(FailStale { batch: id })).await
}

/// Operator: re-send a BROADCASTING or STALE batch with the same nonce at a higher gas price
/// (≥ +10 % over its current one). 409 `batch_not_in_flight`, 400 `bump_too_small`.
async fn bump_gas(
    State(state): State<Arc<AppState>>,
    Path(id_text): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    let (operator, body) = authenticated(&state.operators, request).await?;
    let id = BatchId(parse_id(&id_text, "batch")?);
    let req: BumpRequest = parse_json(&body)?;
    with_plugin(&state, |p| {
        let b = p.batch(id).ok_or_else(|| unknown_batch(id))?;
        if !matches!(b.status, BatchStatus::Broadcasting | BatchStatus::Stale) {
            let message = format!("batch {} is {}, not BROADCASTING or STALE", id.0, status_name(b.status));
            return Err(ApiError::new(StatusCode::CONFLICT, "batch_not_in_flight", message));
        }
        let floor = u128::from(b.gas_price_wei) * u128::from(BUMP_GAS_PRICE_PERCENT_MIN);
        if u128::from(req.gas_price_wei) * 100 < floor {
            let message = format!(
                "gas_price_wei {} is below {} % of the batch's {}",
                req.gas_price_wei, BUMP_GAS_PRICE_PERCENT_MIN, b.gas_price_wei
            );
            return Err(ApiError::bad_request("bump_too_small", message));
        }
        Ok(())
    })
    .await?;
    let cmd = CollectionCommand::BumpGas(BumpGas { batch: id, gas_price_wei: req.gas_price_wei });
    journal(&state, &req.bmi, &operator.key_id, cmd).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ResetNonceRequest {
    bmi: String,
    /// The relayer's nonce on the chain (its mined transaction count), as the operator read it.
    chain_nonce: u64,
}

/// Operator: move an idle relayer's next nonce forward to the chain's (the plugin's rule, see
/// `rtgs_collection`'s `reset`: it can skip nonces, never reuse one). 404 `unknown_relayer`,
/// 409 `relayer_busy` (a nonce LOCKED, a STALE batch or a given-up nonce), 400 `nonce_behind`.
async fn reset_nonce(
    State(state): State<Arc<AppState>>,
    Path(id_text): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    let (operator, body) = authenticated(&state.operators, request).await?;
    let relayer = RelayerId(parse_id(&id_text, "relayer")?);
    let req: ResetNonceRequest = parse_json(&body)?;
    with_plugin(&state, |p| {
        let r = p.relayer(relayer).ok_or_else(|| {
            ApiError::new(StatusCode::NOT_FOUND, "unknown_relayer", format!("no relayer {}", relayer.0))
        })?;
        if !p.relayer_available(relayer) {
            let message =
                format!("relayer {} has a nonce in flight, a STALE batch or a given-up nonce", relayer.0);
            return Err(ApiError::new(StatusCode::CONFLICT, "relayer_busy", message));
        }
        if req.chain_nonce < r.next_nonce {
            let message = format!(
                "chain_nonce {} is below relayer {}'s next nonce {}: a reset never reuses a nonce",
                req.chain_nonce, relayer.0, r.next_nonce
            );
            return Err(ApiError::bad_request("nonce_behind", message));
        }
        Ok(())
    })
    .await?;
    let cmd = CollectionCommand::ResetNonce(ResetNonce { relayer, chain_nonce: req.chain_nonce });
    journal(&state, &req.bmi, &operator.key_id, cmd).await
}

fn status_name(s: BatchStatus) -> String {
    format!("{s:?}").to_uppercase()
}

fn settings_json(s: &Settings) -> Value {
    json!({
        SettingKey::ScheduleIntervalHours.name(): s.schedule_interval_hours,
        SettingKey::GasThresholdRatioPpm.name(): s.gas_threshold_ratio_ppm,
        SettingKey::MinAmountUsdMicros.name(): s.min_amount_usd_micros,
        SettingKey::StaleCheckIntervalMinutes.name(): s.stale_check_interval_minutes,
        SettingKey::StaleThresholdMinutes.name(): s.stale_threshold_minutes,
    })
}

fn overrides_json(p: &PartnerState) -> Value {
    let mut o = serde_json::Map::new();
    let pairs = [
        (SettingKey::ScheduleIntervalHours, p.schedule_interval_hours.map(u64::from)),
        (SettingKey::GasThresholdRatioPpm, p.gas_threshold_ratio_ppm.map(u64::from)),
        (SettingKey::MinAmountUsdMicros, p.min_amount_usd_micros),
    ];
    for (key, value) in pairs {
        if let Some(v) = value {
            o.insert(key.name().into(), json!(v));
        }
    }
    Value::Object(o)
}

/// The global settings, every partner's overrides and next scheduled run, and each setting's
/// range (what `POST .../settings` accepts).
async fn get_settings(State(state): State<Arc<AppState>>, request: Request) -> Result<Response, ApiError> {
    authenticated(&state.operators, request).await?;
    let (answer, seq) = with_plugin(&state, |p| {
        let partners: Vec<Value> = p
            .partners()
            .take(OPERATOR_LIST_ITEMS_MAX)
            .map(|(id, ps)| json!({ "partner": id.0, "overrides": overrides_json(ps), "next_run_us": ps.next_run_us }))
            .collect();
        let ranges: serde_json::Map<String, Value> = SettingKey::ALL
            .iter()
            .map(|k| {
                let (lo, hi) = k.range();
                (k.name().to_string(), json!({ "min": lo, "max": hi, "per_partner": k.per_partner() }))
            })
            .collect();
        Ok(json!({
            "global": settings_json(p.settings()),
            "truncated": p.partners().count() > partners.len(),
            "partners": partners,
            "ranges": ranges,
        }))
    })
    .await?;
    Ok(Json(with_seq(answer, seq)).into_response())
}

/// Every STALE batch: what an operator resolves by a gas bump or by failing it.
async fn list_stale(State(state): State<Arc<AppState>>, request: Request) -> Result<Response, ApiError> {
    authenticated(&state.operators, request).await?;
    let (answer, seq) = with_plugin(&state, |p| {
        let batches: Vec<Value> = p.stale_batches().take(OPERATOR_LIST_ITEMS_MAX).map(batch_json).collect();
        Ok(json!({ "truncated": p.stale_batches().count() > batches.len(), "batches": batches }))
    })
    .await?;
    Ok(Json(with_seq(answer, seq)).into_response())
}

/// QUEUED rows per wallet and token, every wallet's.
async fn list_queued(State(state): State<Arc<AppState>>, request: Request) -> Result<Response, ApiError> {
    authenticated(&state.operators, request).await?;
    let (answer, seq) = with_plugin(&state, |p| Ok(queued_json(p, None))).await?;
    Ok(Json(with_seq(answer, seq)).into_response())
}

/// QUEUED rows of one wallet, per token.
async fn wallet_queued(
    State(state): State<Arc<AppState>>,
    Path(id_text): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    authenticated(&state.operators, request).await?;
    let wallet = WalletId(parse_id(&id_text, "wallet")?);
    let (answer, seq) = with_plugin(&state, |p| Ok(queued_json(p, Some(wallet)))).await?;
    Ok(Json(with_seq(answer, seq)).into_response())
}

/// At most [`OPERATOR_LIST_ITEMS_MAX`] rows in all (`truncated` says when more are QUEUED).
fn queued_json(p: &CollectionPlugin, wallet: Option<WalletId>) -> Value {
    let mut budget = OPERATOR_LIST_ITEMS_MAX;
    let mut truncated = false;
    let mut groups = Vec::new();
    for g in p.queued_by_group(wallet) {
        let shown = g.rows.len().min(budget);
        truncated |= shown < g.rows.len();
        budget -= shown;
        groups.push(json!({
            "wallet": g.key.wallet.0,
            "chain": g.key.chain.0,
            "token": g.key.token.0,
            "partner": g.partner.0,
            "queued_count": g.rows.len(),
            "amount_minor": g.amount_minor.to_string(),
            "deposits": g.rows[..shown].iter().map(|r| row_json(r)).collect::<Vec<_>>(),
        }));
        if budget == 0 {
            break;
        }
    }
    json!({ "truncated": truncated, "groups": groups })
}

/// Groups whose last scheduled run skipped them and that still have QUEUED rows, with the
/// reason and the figures it was based on.
async fn list_skipped(State(state): State<Arc<AppState>>, request: Request) -> Result<Response, ApiError> {
    authenticated(&state.operators, request).await?;
    let (answer, seq) = with_plugin(&state, |p| {
        let all = p.skipped_groups();
        let groups: Vec<Value> = all
            .iter()
            .take(OPERATOR_LIST_ITEMS_MAX)
            .map(|g| {
                json!({
                    "wallet": g.key.wallet.0,
                    "chain": g.key.chain.0,
                    "token": g.key.token.0,
                    "partner": g.group.partner.0,
                    "reason": format!("{:?}", g.skip.reason),
                    "at_us": g.skip.at_us,
                    "balance_minor": g.skip.balance_minor.to_string(),
                    "balance_usd_micros": g.skip.balance_usd_micros.to_string(),
                    "gas_estimate_usd_micros": g.skip.gas_estimate_usd_micros,
                    "block_height": g.skip.block_height,
                    "queued_count": g.queued_count,
                    "skips_total": g.group.skips_total,
                })
            })
            .collect();
        Ok(json!({ "truncated": all.len() > groups.len(), "groups": groups }))
    })
    .await?;
    Ok(Json(with_seq(answer, seq)).into_response())
}

fn relayer_json(p: &CollectionPlugin, r: &Relayer) -> Value {
    json!({
        "relayer": r.id.0,
        "chain": r.chain.0,
        "next_nonce": r.next_nonce,
        "locked_nonce": r.lock.map(|l| l.nonce),
        "locked_by_batch": r.lock.map(|l| l.batch.0),
        "available": p.relayer_available(r.id),
    })
}

/// Every relayer: its next nonce, the nonce it has LOCKED and whether it may get a new
/// transaction (not LOCKED, not paused by a STALE batch or a given-up nonce).
async fn list_relayers(State(state): State<Arc<AppState>>, request: Request) -> Result<Response, ApiError> {
    authenticated(&state.operators, request).await?;
    let (answer, seq) = with_plugin(&state, |p| {
        let relayers: Vec<Value> =
            p.relayers().take(OPERATOR_LIST_ITEMS_MAX).map(|r| relayer_json(p, r)).collect();
        Ok(json!({ "truncated": p.relayers().count() > relayers.len(), "relayers": relayers }))
    })
    .await?;
    Ok(Json(with_seq(answer, seq)).into_response())
}
