//! Withdrawals over HTTP. Participants create, read and cancel their own withdrawals (a
//! withdrawal's id is the seq of the request that created it; idempotent by `bmi` like every
//! write); operators run every operation, read any withdrawal and list them by state; the
//! outside world's answers and webhooks (signer, screener, policy engine, chains) enter through
//! one operator-authenticated route as journal entries whose `bmi` is derived from their content
//! (the same report twice is one entry); operators register chains, assets and vaults, take a
//! vault out of the rotation and set the timers.
//!
//! Writes go through the journal (tracker, idempotency by `bmi`); whether the plugin accepts them
//! is its own answer, visible in its state (a refused request: `GET` shows the refusal; a refused
//! operation: the withdrawal's `operations` record it with its code). Reads come from the read
//! model's plugin replica, which applies exactly what is final (answers carry `as_of_seq`). A
//! participant sees only withdrawals from its own accounts: another's is 404 as if unknown. On a
//! node that does not run the withdrawal plugin every route answers 404 `withdrawal_disabled`.

use super::{with_seq, ApiPlugin};
use crate::checks::parse_json;
use crate::edge::Path;
use crate::error::ApiError;
use crate::server::{authenticated, AppState};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use rtgs_core::entry::{AccountId, Seq};
use rtgs_withdrawal::chain::{AssetParams, ChainFamily, ChainParams, VaultParams};
use rtgs_withdrawal::command::{
    CreateWithdrawal, DestinationType, Operate, RequestKind, SetSetting, SetVaultEnabled, WithdrawalCommand,
};
use rtgs_withdrawal::limits::NODE_NAME_BYTES_MAX;
use rtgs_withdrawal::limits::{DESTINATION_BYTES_MAX, MEMO_BYTES_MAX, NOTES_BYTES_MAX};
use rtgs_withdrawal::operation::{Actor, ActorKind, OpParams, OperationKind};
use rtgs_withdrawal::settings::SettingKey;
use rtgs_withdrawal::types::{
    ActorId, AssetId, ChainId, CurrencyCode, Digest, LedgerAccount, Text, TokenId, VaultId, WithdrawalId,
};
use rtgs_withdrawal::{Status, Withdrawal, WithdrawalPlugin};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

/// Most withdrawals one list answer holds.
const LIST_LIMIT_MAX: usize = 1_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateRequest {
    bmi: String,
    account: u64,
    asset: u32,
    /// Ledger minor units of the asset's currency (0 for raw signing).
    amount_minor: u64,
    /// `vault`, `exchange`, `whitelisted`, `one_time`, `network`.
    destination_type: String,
    /// Absent only for raw signing.
    destination: Option<String>,
    memo: Option<String>,
    /// `standard` (default), `sign_only`, `raw`.
    kind: Option<String>,
    /// Raw signing: the 32-byte digest to sign, hex.
    digest: Option<String>,
    /// Screened by AML before authorization.
    #[serde(default)]
    aml: bool,
    notes: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CancelRequest {
    bmi: String,
    reason: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OperationRequest {
    bmi: String,
    /// `cancel`, `retry`, `boost`, `drop`, `rescreen-aml`, `bypass-aml`, `dismiss`, `edit-notes`.
    operation: String,
    /// boost (required), drop (optional): the chain fee.
    fee: Option<u64>,
    /// bypass-aml (required); any operation may carry one.
    reason: Option<String>,
    /// edit-notes (absent: cleared).
    notes: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ResultRequest {
    /// The command's op code and its body in the plugin's codec, hex (what the world's adapter
    /// journals; a real integration's webhook receiver builds the same).
    op: u16,
    body_hex: String,
}

/// `?status=QUEUED&after=12&limit=100`.
struct ListQuery {
    status: String,
    after: Option<u64>,
    limit: Option<usize>,
}

impl ListQuery {
    fn parse(query: &str) -> Result<ListQuery, ApiError> {
        let bad = |m: String| ApiError::bad_request("invalid_query", m);
        let number = |k: &str, v: &str| v.parse::<u64>().map_err(|_| bad(format!("{k}: a number")));
        let (mut status, mut after, mut limit) = (None, None, None);
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            match k {
                "status" => status = Some(v.to_string()),
                "after" => after = Some(number(k, v)?),
                "limit" => limit = Some(usize::try_from(number(k, v)?).unwrap_or(usize::MAX)),
                _ => return Err(bad(format!("unknown query parameter {k:?}"))),
            }
        }
        Ok(ListQuery { status: status.ok_or_else(|| bad("status is required".into()))?, after, limit })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ChainRequest {
    bmi: String,
    chain: u32,
    /// `evm`, `utxo`, `solana`, `algorand`, `tezos`, `polkadot`.
    family: String,
    fee_initial: u64,
    /// The node the chain's transactions are sent to.
    node: String,
    /// The family's default when absent.
    confirmations: Option<u32>,
    validity_window_us: Option<u64>,
    vault_in_flight_max: Option<u32>,
    workspace_in_flight_max: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AssetRequest {
    bmi: String,
    asset: u32,
    chain: u32,
    token: u32,
    /// The ledger currency (ISO 4217).
    currency: String,
    /// Token units per ledger minor unit = 10^scale_exp.
    scale_exp: u8,
    settlement_account: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct VaultRequest {
    bmi: String,
    vault: u64,
    chain: u32,
    address: u64,
    next_slot: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct VaultEnabledRequest {
    bmi: String,
    enabled: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SettingRequest {
    bmi: String,
    /// `withdrawal.authorization_timeout_seconds`, `stale_tx.threshold_seconds`, ...
    name: String,
    value: u64,
}

fn disabled() -> ApiError {
    <WithdrawalPlugin as ApiPlugin>::disabled()
}

fn unknown(id: u64) -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "unknown_withdrawal", format!("no withdrawal {id}"))
}

/// This plugin's routes.
pub(crate) fn routes(router: Router<Arc<AppState>>) -> Router<Arc<AppState>> {
    router
        .route("/v1/withdrawals", post(create))
        .route("/v1/withdrawals/{id}", get(get_own))
        .route("/v1/withdrawals/{id}/cancel", post(cancel))
        .route("/v1/operator/withdrawals", get(list))
        .route("/v1/operator/withdrawals/{id}", get(get_any))
        .route("/v1/operator/withdrawals/{id}/operations", post(operate))
        .route("/v1/operator/withdrawal/results", post(result))
        .route("/v1/operator/withdrawal/chains", post(register_chain))
        .route("/v1/operator/withdrawal/assets", post(register_asset))
        .route("/v1/operator/withdrawal/vaults", post(register_vault))
        .route("/v1/operator/withdrawal/vaults/{id}/enabled", post(vault_enabled))
        .route("/v1/operator/withdrawal/settings", post(set_setting))
}

/// An operator's setup command, after the operator and the plugin were checked.
async fn operator_setup(
    state: &AppState,
    request: Request,
    build: impl FnOnce(&[u8]) -> Result<(String, WithdrawalCommand), ApiError>,
) -> Result<Response, ApiError> {
    let (operator, body) = authenticated(&state.operators, request).await?;
    if !enabled(state) {
        return Err(disabled());
    }
    let (bmi, cmd) = build(&body)?;
    journal(state, &bmi, &operator.key_id, cmd).await
}

/// A chain, with its family's defaults for what is not given; checked here as the plugin checks
/// it, so that a typo is a 400, not a refusal to look for.
async fn register_chain(State(state): State<Arc<AppState>>, request: Request) -> Result<Response, ApiError> {
    operator_setup(&state, request, |body| {
        let req: ChainRequest = parse_json(body)?;
        let family = ChainFamily::from_name(&req.family)
            .ok_or_else(|| ApiError::bad_request("invalid_field", format!("family {:?}", req.family)))?;
        let node = text("node", Some(&req.node), NODE_NAME_BYTES_MAX)?.unwrap_or_default();
        let mut p = ChainParams::defaults(ChainId(req.chain), family, req.fee_initial, node);
        p.confirmations = req.confirmations.unwrap_or(p.confirmations);
        p.validity_window_us = req.validity_window_us.unwrap_or(p.validity_window_us);
        p.vault_in_flight_max = req.vault_in_flight_max.unwrap_or(p.vault_in_flight_max);
        p.workspace_in_flight_max = req.workspace_in_flight_max.unwrap_or(p.workspace_in_flight_max);
        p.check().map_err(|e| ApiError::bad_request("invalid_field", e.to_string()))?;
        Ok((req.bmi, WithdrawalCommand::RegisterChain(p)))
    })
    .await
}

async fn register_asset(State(state): State<Arc<AppState>>, request: Request) -> Result<Response, ApiError> {
    operator_setup(&state, request, |body| {
        let req: AssetRequest = parse_json(body)?;
        let (currency, _) = crate::checks::parse_currency(&req.currency)?;
        let code: [u8; 3] = currency
            .as_str()
            .as_bytes()
            .try_into()
            .map_err(|_| ApiError::bad_request("unknown_currency", req.currency.clone()))?;
        let p = AssetParams {
            asset: AssetId(req.asset),
            chain: ChainId(req.chain),
            token: TokenId(req.token),
            currency: CurrencyCode(code),
            scale_exp: req.scale_exp,
            settlement_account: LedgerAccount(req.settlement_account),
        };
        Ok((req.bmi, WithdrawalCommand::RegisterAsset(p)))
    })
    .await
}

async fn register_vault(State(state): State<Arc<AppState>>, request: Request) -> Result<Response, ApiError> {
    operator_setup(&state, request, |body| {
        let req: VaultRequest = parse_json(body)?;
        let p = VaultParams {
            vault: VaultId(req.vault),
            chain: ChainId(req.chain),
            address: req.address,
            next_slot: req.next_slot,
        };
        Ok((req.bmi, WithdrawalCommand::RegisterVault(p)))
    })
    .await
}

async fn vault_enabled(
    State(state): State<Arc<AppState>>,
    Path(id_text): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    let id: u64 = id_text
        .parse()
        .map_err(|_| ApiError::bad_request("invalid_id", format!("vault id {id_text:?} is not a number")))?;
    operator_setup(&state, request, |body| {
        let req: VaultEnabledRequest = parse_json(body)?;
        let cmd =
            WithdrawalCommand::SetVaultEnabled(SetVaultEnabled { vault: VaultId(id), enabled: req.enabled });
        Ok((req.bmi, cmd))
    })
    .await
}

/// A timer, checked against its range here too.
async fn set_setting(State(state): State<Arc<AppState>>, request: Request) -> Result<Response, ApiError> {
    operator_setup(&state, request, |body| {
        let req: SettingRequest = parse_json(body)?;
        let key = SettingKey::from_name(&req.name).ok_or_else(|| {
            ApiError::bad_request("unknown_setting", format!("no setting named {:?}", req.name))
        })?;
        if !key.validate(req.value) {
            let message = format!("{} must be within {:?}", req.name, key.range());
            return Err(ApiError::bad_request("setting_out_of_range", message));
        }
        Ok((req.bmi, WithdrawalCommand::SetSetting(SetSetting { key, value: req.value })))
    })
    .await
}

fn enabled(state: &AppState) -> bool {
    super::enabled::<WithdrawalPlugin>(state)
}

async fn journal(
    state: &AppState,
    bmi_text: &str,
    owner: &Arc<str>,
    cmd: WithdrawalCommand,
) -> Result<Response, ApiError> {
    super::journal::<WithdrawalPlugin>(state, bmi_text, owner, cmd.to_plugin_command()).await
}

fn text(field: &str, value: Option<&str>, max: usize) -> Result<Option<Text>, ApiError> {
    value
        .map(|v| {
            Text::new(v, max).map_err(|_| {
                ApiError::bad_request(
                    "invalid_field",
                    format!("{field}: at most {max} bytes of printable text"),
                )
            })
        })
        .transpose()
}

fn destination_type(name: &str) -> Result<DestinationType, ApiError> {
    Ok(match name {
        "vault" => DestinationType::Vault,
        "exchange" => DestinationType::Exchange,
        "whitelisted" => DestinationType::Whitelisted,
        "one_time" => DestinationType::OneTime,
        "network" => DestinationType::Network,
        _ => return Err(ApiError::bad_request("invalid_field", format!("destination_type {name:?}"))),
    })
}

fn digest(hex_text: Option<&str>) -> Result<Digest, ApiError> {
    let bad = || ApiError::bad_request("invalid_field", "digest: 32 bytes, hex (raw signing)");
    let bytes = hex::decode(hex_text.ok_or_else(bad)?).map_err(|_| bad())?;
    Ok(Digest(bytes.try_into().map_err(|_| bad())?))
}

/// The request's shape (bounds, names, the raw-signing pairing); the plugin judges the rest.
fn create_command(account: AccountId, req: &CreateRequest) -> Result<CreateWithdrawal, ApiError> {
    let kind = match req.kind.as_deref().unwrap_or("standard") {
        "standard" => RequestKind::Standard,
        "sign_only" => RequestKind::SignOnly,
        "raw" => RequestKind::Raw(digest(req.digest.as_deref())?),
        other => return Err(ApiError::bad_request("invalid_field", format!("kind {other:?}"))),
    };
    if req.digest.is_some() && !matches!(kind, RequestKind::Raw(_)) {
        return Err(ApiError::bad_request("invalid_field", "digest: only for kind raw"));
    }
    Ok(CreateWithdrawal {
        account: LedgerAccount(account.0),
        asset: AssetId(req.asset),
        amount_minor: req.amount_minor,
        destination_type: destination_type(&req.destination_type)?,
        destination: text("destination", req.destination.as_deref(), DESTINATION_BYTES_MAX)?,
        memo: text("memo", req.memo.as_deref(), MEMO_BYTES_MAX)?,
        kind,
        aml: req.aml,
        notes: text("notes", req.notes.as_deref(), NOTES_BYTES_MAX)?,
        actor: Actor { kind: ActorKind::Participant, id: ActorId(account.0) },
    })
}

/// A participant's withdrawal request from one of its own accounts.
async fn create(State(state): State<Arc<AppState>>, request: Request) -> Result<Response, ApiError> {
    let (participant, body) = authenticated(state.participants(), request).await?;
    if !enabled(&state) {
        return Err(disabled());
    }
    let req: CreateRequest = parse_json(&body)?;
    let account = AccountId(req.account);
    if !participant.owns(account) {
        let message = format!("account {} is not one of this participant's accounts", req.account);
        return Err(ApiError::new(StatusCode::FORBIDDEN, "account_not_owned", message));
    }
    let cmd = WithdrawalCommand::Create(create_command(account, &req)?);
    journal(&state, &req.bmi, &participant.key_id, cmd).await
}

async fn with_plugin<R>(
    state: &AppState,
    f: impl Fn(&WithdrawalPlugin) -> Result<R, ApiError>,
) -> Result<(R, Seq), ApiError> {
    super::with_plugin(state, f).await
}

fn parse_id(text: &str) -> Result<u64, ApiError> {
    super::parse_id(text, "withdrawal")
}

/// A withdrawal, or the refusal of the request with that seq; `owned` decides who may see it.
fn answer(p: &WithdrawalPlugin, id: u64, owned: impl Fn(u64) -> bool) -> Result<Value, ApiError> {
    if let Some(w) = p.withdrawal(WithdrawalId(id)) {
        return if owned(w.account.0) { Ok(withdrawal_json(w)) } else { Err(unknown(id)) };
    }
    match p.refusal(WithdrawalId(id)) {
        // A refused request keeps no account: only an operator may see it.
        Some(r) if owned(u64::MAX) => Ok(json!({
            "withdrawal": id,
            "status": "REFUSED",
            "refuse_code": r.code.name(),
            "ledger_reason": r.ledger_reason,
        })),
        _ => Err(unknown(id)),
    }
}

async fn get_own(
    State(state): State<Arc<AppState>>,
    Path(id_text): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    let (participant, _) = authenticated(state.participants(), request).await?;
    let id = parse_id(&id_text)?;
    let (v, seq) = with_plugin(&state, |p| answer(p, id, |a| participant.owns(AccountId(a)))).await?;
    Ok(Json(with_seq(v, seq)).into_response())
}

async fn get_any(
    State(state): State<Arc<AppState>>,
    Path(id_text): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    authenticated(&state.operators, request).await?;
    let id = parse_id(&id_text)?;
    let (v, seq) = with_plugin(&state, |p| answer(p, id, |_| true)).await?;
    Ok(Json(with_seq(v, seq)).into_response())
}

/// A participant cancels its own withdrawal (allowed states are the plugin's to judge).
async fn cancel(
    State(state): State<Arc<AppState>>,
    Path(id_text): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    let (participant, body) = authenticated(state.participants(), request).await?;
    let id = parse_id(&id_text)?;
    let req: CancelRequest = parse_json(&body)?;
    let reason = text("reason", req.reason.as_deref(), NOTES_BYTES_MAX)?;
    let (account, _) = with_plugin(&state, |p| {
        let w = p.withdrawal(WithdrawalId(id)).filter(|w| participant.owns(AccountId(w.account.0)));
        w.map(|w| w.account.0).ok_or_else(|| unknown(id))
    })
    .await?;
    let cmd = WithdrawalCommand::Operate(Operate {
        withdrawal: WithdrawalId(id),
        operation: OperationKind::Cancel,
        actor: Actor { kind: ActorKind::Participant, id: ActorId(account) },
        params: OpParams { reason, ..OpParams::default() },
    });
    journal(&state, &req.bmi, &participant.key_id, cmd).await
}

/// An operator's operation; the operator is recorded by a stable number of its key id.
async fn operate(
    State(state): State<Arc<AppState>>,
    Path(id_text): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    let (operator, body) = authenticated(&state.operators, request).await?;
    if !enabled(&state) {
        return Err(disabled());
    }
    let id = parse_id(&id_text)?;
    let req: OperationRequest = parse_json(&body)?;
    let operation = OperationKind::from_name(&req.operation).ok_or_else(|| {
        ApiError::bad_request("unknown_operation", format!("no operation named {:?}", req.operation))
    })?;
    let params = OpParams {
        fee: req.fee,
        reason: text("reason", req.reason.as_deref(), NOTES_BYTES_MAX)?,
        notes: text("notes", req.notes.as_deref(), NOTES_BYTES_MAX)?,
    };
    let actor_id = rtgs_core::hash::bytes64(0x0A7E, operator.key_id.as_bytes());
    let cmd = WithdrawalCommand::Operate(Operate {
        withdrawal: WithdrawalId(id),
        operation,
        actor: Actor { kind: ActorKind::Operator, id: ActorId(actor_id) },
        params,
    });
    journal(&state, &req.bmi, &operator.key_id, cmd).await
}

/// Withdrawals in a state, by id, after `after`, at most `limit` (≤ 1,000).
async fn list(State(state): State<Arc<AppState>>, request: Request) -> Result<Response, ApiError> {
    let query = request.uri().query().unwrap_or("").to_string();
    authenticated(&state.operators, request).await?;
    let q = ListQuery::parse(&query)?;
    let status = Status::from_name(&q.status)
        .ok_or_else(|| ApiError::bad_request("invalid_field", format!("status {:?}", q.status)))?;
    let limit = q.limit.unwrap_or(100);
    if limit == 0 || limit > LIST_LIMIT_MAX {
        return Err(ApiError::bad_request("invalid_field", format!("limit: 1 to {LIST_LIMIT_MAX}")));
    }
    let (v, seq) = with_plugin(&state, |p| {
        let rows = p.list(status, q.after.map(WithdrawalId), limit);
        Ok(json!({
            "status": status.name(),
            "count": p.count_in(status),
            "withdrawals": rows.iter().map(|w| withdrawal_json(w)).collect::<Vec<_>>(),
        }))
    })
    .await?;
    Ok(Json(with_seq(v, seq)).into_response())
}

/// An answer or webhook of the outside world, journaled with the `bmi` its content gives.
async fn result(State(state): State<Arc<AppState>>, request: Request) -> Result<Response, ApiError> {
    let (operator, body) = authenticated(&state.operators, request).await?;
    if !enabled(&state) {
        return Err(disabled());
    }
    let req: ResultRequest = parse_json(&body)?;
    let bytes =
        hex::decode(&req.body_hex).map_err(|_| ApiError::bad_request("invalid_field", "body_hex: hex"))?;
    let cmd = WithdrawalCommand::decode(req.op, &bytes)
        .map_err(|e| ApiError::bad_request("invalid_field", format!("not a withdrawal command: {e:?}")))?;
    let from_world = matches!(
        cmd,
        WithdrawalCommand::Screened(_)
            | WithdrawalCommand::Decided(_)
            | WithdrawalCommand::SignatureResult(_)
            | WithdrawalCommand::BroadcastResult(_)
            | WithdrawalCommand::ReceiptsLooked(_)
            | WithdrawalCommand::ChainEvent(_)
    );
    if !from_world {
        return Err(ApiError::bad_request("invalid_field", "only answers and webhooks enter here"));
    }
    let bmi = rtgs_withdrawal::world::result_bmi(&cmd)
        .map_err(|e| ApiError::bad_request("invalid_field", e.to_string()))?;
    journal(&state, bmi.as_str(), &operator.key_id, cmd).await
}

fn hex32(b: &[u8; 32]) -> String {
    format!("0x{}", hex::encode(b))
}

fn withdrawal_json(w: &Withdrawal) -> Value {
    let kind = match w.kind {
        RequestKind::Standard => json!("standard"),
        RequestKind::SignOnly => json!("sign_only"),
        RequestKind::Raw(d) => json!({ "raw": hex32(&d.0) }),
    };
    json!({
        "withdrawal": w.id.0,
        "status": w.status.name(),
        "status_since_us": w.status_since_us,
        "account": w.account.0,
        "asset": w.asset.0,
        "chain": w.chain.0,
        "amount_minor": w.amount_minor,
        // u128 chain units: a string, never a JSON number a client could round.
        "amount_chain": w.amount_chain.to_string(),
        "destination": w.destination.as_ref().map(|t| t.as_str()),
        "memo": w.memo.as_ref().map(|t| t.as_str()),
        "notes": w.notes.as_ref().map(|t| t.as_str()),
        "kind": kind,
        "aml": w.aml,
        "money": format!("{:?}", w.money).to_uppercase(),
        "vault": w.vault.map(|v| v.0),
        "slot": w.slot,
        "fee": w.fee,
        "retry_count": w.retry_count,
        "fail_cause": w.fail_cause.map(|c| format!("{c:?}")),
        "reject_cause": w.reject_cause.map(|c| format!("{c:?}")),
        "blocked_by_rule": w.blocked_by_rule,
        "alert_open": w.alert_open,
        "created_at_us": w.created_at_us,
        "finished_at_us": w.finished_at_us,
        "transitions": w.transitions.iter().map(|t| json!({
            "seq": t.seq(), "at_us": t.at_us(), "from": (*t.from()).map(|s| s.name()), "to": t.to().name(),
            "cause": format!("{:?}", t.cause()),
        })).collect::<Vec<_>>(),
        "broadcast_attempts": w.attempts.iter().map(|a| json!({
            "number": a.number(), "round": a.round(), "purpose": format!("{:?}", a.purpose()),
            "vault": a.vault().0, "slot": a.slot(), "fee": a.fee(), "tx_hash": hex32(&a.tx_hash().0),
        })).collect::<Vec<_>>(),
        "operations": w.operations.iter().map(|o| json!({
            "seq": o.seq(), "at_us": o.at_us(), "operation": o.operation().name(),
            "actor": format!("{:?}", o.actor().kind), "actor_id": o.actor().id.0,
            "fee": o.parameters().fee, "reason": o.parameters().reason.as_ref().map(|t| t.as_str()),
            "refused": o.refused().as_ref().map(|r| r.code.name()),
        })).collect::<Vec<_>>(),
    })
}
