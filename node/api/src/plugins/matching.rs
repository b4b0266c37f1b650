//! Matching (P2P deposit matching, seed 002) over HTTP.
//!
//! * **The widget** (a participant, for its customers' orders): an order's matching status
//!   (`GET /v1/matching/orders/{id}`) and the user's decision once a window closed unmatched
//!   (`POST /v1/matching/orders/{id}/decision`: `retry`, `cancel` or `close`). A participant sees
//!   and decides only orders paid to an account it owns (the order's `credit_account`); anyone
//!   else's is 404 `unknown_order`, so ids cannot be probed.
//! * **Orders with PII** (`POST /v1/matching/orders`, participant): the order is journaled with
//!   an opaque customer reference (a digest of the submitter, the order and its `bmi`: nothing of
//!   the customer); the customer's name, phone and bank account stay at the origin center
//!   ([`crate::pii::PiiStore`]: bounded, in memory and, with a data directory, in a file beside
//!   the journal, synced before the order is acknowledged), readable by the participant that submitted the order
//!   (`GET /v1/matching/orders/{id}/customer`) and by operators
//!   (`GET /v1/operator/matching/orders/{id}/customer`). The journal is replicated and kept
//!   forever; PII never enters it.
//! * **Operators**: partners' settings (read and write), sessions, escalations and dead letters,
//!   and their resolution (`release`, `settle`, `retry`).
//! * **Internal** (loopback callers only, unsigned, like `/metrics`): the LP's trade-completion
//!   webhook and the payment rail's paid-leg callback, for an outside world that calls back over
//!   HTTP. Their `bmi`s are the ones the node's adapter gives the same results (`TW<escrow>`,
//!   `PAID<session>.<bundle>.<leg>`), so a callback and the adapter's result are one entry.
//!
//! Writes go through the journal like every other write (tracker, idempotency by `bmi`); whether
//! the plugin accepts them is its own answer, visible in its state (a decision on a session that
//! does not await one is refused there). Reads come from the read model's plugin replica, which
//! applies exactly what is final (`as_of_seq`). The order carries an opaque customer reference
//! only: no PII is read or written here. On a node that does not run the matching plugin every
//! route answers 404 `matching_disabled`.

use super::{parse_id, with_seq, ApiPlugin};
use crate::auth::Participant;
use crate::checks::{parse_bmi, parse_json};
use crate::edge::Path;
use crate::error::ApiError;
use crate::pii::{Customer, PII_FIELD_CHARS_MAX};
use crate::server::{authenticated, AppState};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use rtgs_core::entry::Seq;
use rtgs_matching::command::{
    Decide, Decision, LegPaid, LpTradeCompleted, MatchingCommand, Resolution, Resolve, SetPartnerSettings,
};
use rtgs_matching::settings::PartnerSettings;
use rtgs_matching::state::{Bundle, DeadLetter, Escalation, Order, Session};
use rtgs_matching::types::{EscrowId, OrderId, PartnerId, SessionId, TradeId};
use rtgs_matching::MatchingPlugin;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DecisionRequest {
    bmi: String,
    /// `retry`, `cancel` or `close`.
    decision: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SettingsRequest {
    bmi: String,
    /// `null` (or absent): back to the defaults.
    settings: Option<SettingsBody>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SettingsBody {
    use_p2p: bool,
    p2p_phase_s: u32,
    lp_phase_s: u32,
    decision_grace_s: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ResolveRequest {
    bmi: String,
    /// `release`, `settle` or `retry`.
    resolution: String,
}

fn disabled() -> ApiError {
    <MatchingPlugin as ApiPlugin>::disabled()
}

/// This plugin's routes.
pub(crate) fn routes(router: Router<Arc<AppState>>) -> Router<Arc<AppState>> {
    router
        .route("/v1/matching/orders/{id}", get(get_order))
        .route("/v1/matching/orders/{id}/decision", post(decide))
        .route("/v1/operator/matching/partners/{id}/settings", get(get_settings).post(set_settings))
        .route("/v1/operator/matching/sessions/{id}", get(get_session))
        .route("/v1/operator/matching/sessions/{id}/resolve", post(resolve))
        .route("/v1/operator/matching/escalations", get(get_escalations))
        .route("/v1/operator/matching/dead-letters", get(get_dead_letters))
        .route("/v1/matching/orders", post(submit_order))
        .route("/v1/matching/orders/{id}/customer", get(get_customer))
        .route("/v1/operator/matching/orders/{id}/customer", get(get_customer_as_operator))
        .route("/internal/matching/lp/trade-completed", post(lp_trade_completed))
        .route("/internal/matching/market/leg-paid", post(leg_paid))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TradeCompletedRequest {
    escrow: u64,
    trade: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LegPaidRequest {
    session: u64,
    bundle: u32,
    leg: u8,
}

/// The journal's name of internal callbacks' submitter.
const INTERNAL: &str = "internal";

/// An internal endpoint's caller must be on this host.
fn loopback_only(request: &Request) -> Result<(), ApiError> {
    use axum::extract::ConnectInfo;
    let peer = request.extensions().get::<ConnectInfo<std::net::SocketAddr>>().map(|c| c.0);
    if peer.is_some_and(crate::edge::is_loopback) {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "not_loopback",
            "internal endpoints answer loopback callers only",
        ))
    }
}

async fn internal_body(request: Request) -> Result<axum::body::Bytes, ApiError> {
    loopback_only(&request)?;
    crate::server::read_body(request.into_body(), crate::limits::BODY_BYTES_MAX).await
}

/// The LP's webhook: the buyer paid into the escrow and the trade completed.
async fn lp_trade_completed(
    State(state): State<Arc<AppState>>,
    request: Request,
) -> Result<Response, ApiError> {
    let body = internal_body(request).await?;
    let req: TradeCompletedRequest = parse_json(&body)?;
    let cmd = MatchingCommand::LpTradeCompleted(LpTradeCompleted {
        escrow: EscrowId(req.escrow),
        trade: TradeId(req.trade),
    });
    let bmi = rtgs_matching::adapter::lp_result_bmi(&cmd)
        .map_err(|e| ApiError::bad_request("invalid_field", e.to_string()))?;
    journal(&state, bmi.as_str(), &Arc::from(INTERNAL), cmd).await
}

/// The payment rail's callback: the buyer paid a P2P leg.
async fn leg_paid(State(state): State<Arc<AppState>>, request: Request) -> Result<Response, ApiError> {
    let body = internal_body(request).await?;
    let req: LegPaidRequest = parse_json(&body)?;
    let bmi = format!("PAID{}.{}.{}", req.session, req.bundle, req.leg);
    let cmd = MatchingCommand::LegPaid(LegPaid {
        session: SessionId(req.session),
        bundle: req.bundle,
        leg: req.leg,
    });
    journal(&state, &bmi, &Arc::from(INTERNAL), cmd).await
}

fn enabled(state: &AppState) -> bool {
    super::enabled::<MatchingPlugin>(state)
}

async fn journal(
    state: &AppState,
    bmi_text: &str,
    owner: &Arc<str>,
    cmd: MatchingCommand,
) -> Result<Response, ApiError> {
    super::journal::<MatchingPlugin>(state, bmi_text, owner, cmd.to_plugin_command()).await
}

async fn with_plugin<R>(
    state: &AppState,
    f: impl Fn(&MatchingPlugin) -> Result<R, ApiError>,
) -> Result<(R, Seq), ApiError> {
    super::with_plugin(state, f).await
}

fn unknown_order(id: OrderId) -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "unknown_order", format!("no order {}", id.0))
}

/// The order, if `participant` owns its credit account (anyone else's is unknown to it).
fn owned_order<'a>(
    p: &'a MatchingPlugin,
    id: OrderId,
    participant: &Participant,
) -> Result<&'a Order, ApiError> {
    p.order(id).filter(|o| participant.owns(o.credit_account.0)).ok_or_else(|| unknown_order(id))
}

/// `AwaitingUserDecision` → `AWAITING_USER_DECISION` (the seed's names).
fn screaming(debug: impl std::fmt::Debug) -> String {
    let mut out = String::new();
    for (i, ch) in format!("{debug:?}").chars().enumerate() {
        if ch.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(ch.to_ascii_uppercase());
    }
    out
}

fn order_json(o: &Order) -> Value {
    json!({
        "order": o.id.0,
        "partner": o.partner.0,
        "currency": o.currency.0.as_str(),
        "amount_minor": o.amount_minor.to_string(),
        "credit_account": o.credit_account.0 .0,
        "status": screaming(o.status),
        "session": o.session.map(|s| s.0),
        "created_at_us": o.created_at_us,
        "expires_at_us": o.expires_at_us,
        "ended_at_us": o.ended_at_us,
    })
}

fn bundle_json(b: &Bundle) -> Value {
    json!({
        "number": b.number,
        "committed_at_us": b.committed_at_us,
        "amount_minor": b.amount_minor().to_string(),
        "legs": b.legs.iter().map(|l| json!({
            "kind": screaming(l.kind),
            "account": l.account.0 .0,
            "seller": l.seller.map(|s| s.0),
            "amount_minor": l.amount_minor.to_string(),
            "deadline_us": l.deadline_us,
            "status": screaming(l.status),
            "reservation": l.reservation.map(|r| r.0),
            "escrow": l.escrow.map(|e| e.0),
            "trade": l.trade.map(|t| t.0),
        })).collect::<Vec<_>>(),
    })
}

/// What the widget shows: the session's state and window, not the sellers or the LP's ids.
fn widget_session_json(s: &Session) -> Value {
    json!({
        "session": s.id.0,
        "status": screaming(s.status),
        "window_opened_at_us": s.window_opened_at_us,
        "p2p_phase_ends_at_us": s.p2p_phase_ends_at_us,
        "window_ends_at_us": s.window_ends_at_us,
        "expires_at_us": s.expires_at_us,
        "windows": s.windows,
        "matched_minor": s.bundle.as_ref().map(|b| b.amount_minor().to_string()),
    })
}

fn session_json(s: &Session) -> Value {
    let mut v = widget_session_json(s);
    if let Some(o) = v.as_object_mut() {
        o.insert("order".into(), json!(s.order.0));
        o.insert("partner".into(), json!(s.partner.0));
        o.insert("amount_minor".into(), json!(s.amount_minor.to_string()));
        o.insert("opened_at_us".into(), json!(s.opened_at_us));
        o.insert("window_closes".into(), json!(s.window_closes));
        o.insert(
            "p2p_anchors".into(),
            json!(s
                .p2p
                .iter()
                .map(|r| json!({
                    "seller": r.seller.0,
                    "amount_minor": r.amount_minor.to_string(),
                    "expires_at_us": r.expires_at_us,
                }))
                .collect::<Vec<_>>()),
        );
        o.insert(
            "lp".into(),
            json!({
                "attempt": s.lp.attempt,
                "amount_minor": s.lp.amount_minor.to_string(),
                "held": s.lp.held.is_some(),
                "awaiting": s.lp.awaiting.is_some(),
                "retries": s.lp.retries,
            }),
        );
        o.insert("bundle".into(), s.bundle.as_ref().map_or(Value::Null, bundle_json));
    }
    v
}

fn escalation_json(e: &Escalation) -> Value {
    json!({
        "case": e.id,
        "session": e.session.0,
        "order": e.order.0,
        "reason": screaming(e.reason),
        "reservation": e.reservation.map(|r| r.0),
        "escrow": e.escrow.map(|x| x.0),
        "at_us": e.at_us,
        "resolved": e.resolved.map(screaming),
        "resolved_at_us": e.resolved_at_us,
    })
}

fn dead_letter_json(d: &DeadLetter) -> Value {
    json!({
        "letter": d.id,
        "session": d.session.0,
        "kind": screaming(d.kind),
        "reason_code": d.reason_code,
        "escrow_recorded": d.escrow_recorded.map(|x| x.0),
        "escrow_offered": d.escrow_offered.map(|x| x.0),
        "at_us": d.at_us,
        "retries": d.retries,
        "resolved_at_us": d.resolved_at_us,
    })
}

fn settings_json(s: PartnerSettings, own: bool) -> Value {
    json!({
        "use_p2p": s.use_p2p,
        "p2p_phase_s": s.p2p_phase_s,
        "lp_phase_s": s.lp_phase_s,
        "decision_grace_s": s.decision_grace_s,
        "own": own,
    })
}

/// The widget: the order, its session's state and window (`AWAITING_USER_DECISION` is when the
/// user is asked to retry, cancel or close).
async fn get_order(
    State(state): State<Arc<AppState>>,
    Path(id_text): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    let (participant, _) = authenticated(&state.keyring, request).await?;
    let id = OrderId(parse_id(&id_text, "order")?);
    let (answer, seq) = with_plugin(&state, |p| {
        let o = owned_order(p, id, participant)?;
        let session = p.session_of(id);
        Ok(json!({
            "order": order_json(o),
            "session": session.map(widget_session_json),
            "awaiting_decision": session.is_some_and(|s| {
                s.status == rtgs_matching::state::SessionStatus::AwaitingUserDecision
            }),
        }))
    })
    .await?;
    Ok(Json(with_seq(answer, seq)).into_response())
}

/// The user's decision, journaled for the plugin to judge (it refuses one on a session that
/// does not await a decision: the answer is in the order's state).
async fn decide(
    State(state): State<Arc<AppState>>,
    Path(id_text): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    let (participant, body) = authenticated(&state.keyring, request).await?;
    let id = OrderId(parse_id(&id_text, "order")?);
    let req: DecisionRequest = parse_json(&body)?;
    let decision = match req.decision.as_str() {
        "retry" => Decision::Retry,
        "cancel" => Decision::Cancel,
        "close" => Decision::Close,
        other => {
            let message = format!("decision {other:?} is not retry, cancel or close");
            return Err(ApiError::bad_request("invalid_decision", message));
        }
    };
    with_plugin(&state, |p| owned_order(p, id, participant).map(|_| ())).await?;
    let cmd = MatchingCommand::Decide(Decide { order: id, decision });
    journal(&state, &req.bmi, &participant.key_id, cmd).await
}

async fn get_settings(
    State(state): State<Arc<AppState>>,
    Path(id_text): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    authenticated(&state.operators, request).await?;
    let partner = PartnerId(parse_id(&id_text, "partner")?);
    let (answer, seq) = with_plugin(&state, |p| {
        Ok(json!({
            "partner": partner.0,
            "settings": settings_json(p.settings_of(partner), p.has_own_settings(partner)),
        }))
    })
    .await?;
    Ok(Json(with_seq(answer, seq)).into_response())
}

/// A partner's windows, checked here too (1 ..= 3,600 s each), so that a typo is a 400, not a
/// rejection to look for in the plugin's state.
async fn set_settings(
    State(state): State<Arc<AppState>>,
    Path(id_text): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    let (operator, body) = authenticated(&state.operators, request).await?;
    let partner = PartnerId(parse_id(&id_text, "partner")?);
    let req: SettingsRequest = parse_json(&body)?;
    let settings = req.settings.map(|s| PartnerSettings {
        use_p2p: s.use_p2p,
        p2p_phase_s: s.p2p_phase_s,
        lp_phase_s: s.lp_phase_s,
        decision_grace_s: s.decision_grace_s,
    });
    if let Some(s) = &settings {
        s.validate().map_err(|e| ApiError::bad_request("setting_out_of_range", e.to_string()))?;
    }
    let cmd = MatchingCommand::SetPartnerSettings(SetPartnerSettings { partner, settings });
    journal(&state, &req.bmi, &operator.key_id, cmd).await
}

async fn get_session(
    State(state): State<Arc<AppState>>,
    Path(id_text): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    authenticated(&state.operators, request).await?;
    let id = SessionId(parse_id(&id_text, "session")?);
    let (answer, seq) = with_plugin(&state, |p| {
        let s = p.session(id).ok_or_else(|| {
            ApiError::new(StatusCode::NOT_FOUND, "unknown_session", format!("no session {}", id.0))
        })?;
        Ok(json!({
            "session": session_json(s),
            "escalations": p.escalations().filter(|e| e.session == id).map(escalation_json).collect::<Vec<_>>(),
            "dead_letters": p.dead_letters().filter(|d| d.session == id).map(dead_letter_json).collect::<Vec<_>>(),
        }))
    })
    .await?;
    Ok(Json(with_seq(answer, seq)).into_response())
}

/// An operator's resolution of an escalated or dead-lettered session (the plugin refuses one on
/// a session that is neither).
async fn resolve(
    State(state): State<Arc<AppState>>,
    Path(id_text): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    let (operator, body) = authenticated(&state.operators, request).await?;
    let session = SessionId(parse_id(&id_text, "session")?);
    let req: ResolveRequest = parse_json(&body)?;
    let resolution = match req.resolution.as_str() {
        "release" => Resolution::Release,
        "settle" => Resolution::Settle,
        "retry" => Resolution::Retry,
        other => {
            let message = format!("resolution {other:?} is not release, settle or retry");
            return Err(ApiError::bad_request("invalid_resolution", message));
        }
    };
    with_plugin(&state, |p| {
        p.session(session).map(|_| ()).ok_or_else(|| {
            ApiError::new(StatusCode::NOT_FOUND, "unknown_session", format!("no session {}", session.0))
        })
    })
    .await?;
    let cmd = MatchingCommand::Resolve(Resolve { session, resolution });
    journal(&state, &req.bmi, &operator.key_id, cmd).await
}

/// Escalations (irreversible states handed to an operator), open ones first.
async fn get_escalations(State(state): State<Arc<AppState>>, request: Request) -> Result<Response, ApiError> {
    authenticated(&state.operators, request).await?;
    let (answer, seq) = with_plugin(&state, |p| {
        let mut cases: Vec<&Escalation> = p.escalations().collect();
        cases.sort_by_key(|e| (e.resolved.is_some(), e.id));
        let open = cases.iter().filter(|e| e.resolved.is_none()).count();
        Ok(json!({ "open": open, "escalations": cases.into_iter().map(escalation_json).collect::<Vec<_>>() }))
    })
    .await?;
    Ok(Json(with_seq(answer, seq)).into_response())
}

/// Dead letters (compensation or escrow record failed), open ones first.
async fn get_dead_letters(
    State(state): State<Arc<AppState>>,
    request: Request,
) -> Result<Response, ApiError> {
    authenticated(&state.operators, request).await?;
    let (answer, seq) = with_plugin(&state, |p| {
        let mut letters: Vec<&DeadLetter> = p.dead_letters().collect();
        letters.sort_by_key(|d| (d.resolved_at_us.is_some(), d.id));
        let open = letters.iter().filter(|d| d.resolved_at_us.is_none()).count();
        Ok(json!({ "open": open, "dead_letters": letters.into_iter().map(dead_letter_json).collect::<Vec<_>>() }))
    })
    .await?;
    Ok(Json(with_seq(answer, seq)).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OrderRequest {
    bmi: String,
    order: u64,
    partner: u64,
    currency: String,
    /// Integer minor units, as a string.
    amount_minor: String,
    /// The partner's account the deposit is paid to (owned by the caller).
    credit_account: u64,
    /// The order's life from now, in seconds (1 ..= 86,400).
    expires_in_s: u64,
    customer: Customer,
}

/// The widget submits an order: checked, its PII kept here, the order journaled with an opaque
/// reference.
async fn submit_order(State(state): State<Arc<AppState>>, request: Request) -> Result<Response, ApiError> {
    let (participant, body) = authenticated(&state.keyring, request).await?;
    if !enabled(&state) {
        return Err(disabled());
    }
    let req: OrderRequest = parse_json(&body)?;
    let bmi = parse_bmi(&req.bmi)?;
    let currency = rtgs_core::entry::Currency::new(req.currency.as_bytes()).map_err(|_| {
        ApiError::bad_request("unknown_currency", format!("{:?} is not a currency", req.currency))
    })?;
    let amount_minor: u64 = req
        .amount_minor
        .parse()
        .map_err(|_| ApiError::bad_request("invalid_amount", "amount_minor must be an integer string"))?;
    if amount_minor == 0 {
        return Err(ApiError::bad_request("amount_not_positive", "amount_minor must be positive"));
    }
    if !(1..=86_400).contains(&req.expires_in_s) {
        return Err(ApiError::bad_request("invalid_field", "expires_in_s must be 1 to 86400"));
    }
    let account = rtgs_core::entry::AccountId(req.credit_account);
    if !participant.owns(account) {
        let message = format!("account {} is not yours", req.credit_account);
        return Err(ApiError::new(StatusCode::FORBIDDEN, "account_not_owned", message));
    }
    let c = &req.customer;
    for (field, v) in [("name", &c.name), ("phone", &c.phone), ("bank_account", &c.bank_account)] {
        if v.is_empty() || v.chars().count() > PII_FIELD_CHARS_MAX {
            let message = format!("customer.{field} must be 1 to {PII_FIELD_CHARS_MAX} characters");
            return Err(ApiError::bad_request("invalid_field", message));
        }
    }
    // Opaque: a digest of who submitted which order under which bmi — nothing of the customer.
    let mut seed = Vec::new();
    seed.extend_from_slice(participant.key_id.as_bytes());
    seed.extend_from_slice(&req.order.to_le_bytes());
    seed.extend_from_slice(bmi.as_str().as_bytes());
    let mut customer = [0u8; 16];
    customer[..8].copy_from_slice(&rtgs_core::hash::bytes64(1, &seed).to_le_bytes());
    customer[8..].copy_from_slice(&rtgs_core::hash::bytes64(2, &seed).to_le_bytes());
    let now_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0);
    let cmd = MatchingCommand::SubmitOrder(rtgs_matching::command::SubmitOrder {
        order: OrderId(req.order),
        partner: PartnerId(req.partner),
        customer: rtgs_matching::types::CustomerRef(customer),
        currency: rtgs_matching::types::Ccy(currency),
        amount_minor,
        credit_account: rtgs_matching::types::Account(account),
        expires_at_us: now_us + req.expires_in_s * 1_000_000,
    });
    // Durable before the order is journaled and acknowledged.
    match state.matching_pii.put(req.order, &participant.key_id, &req.customer) {
        Ok(true) => {}
        Ok(false) => {
            let message = format!("order {} is another participant's", req.order);
            return Err(ApiError::bad_request("invalid_field", message));
        }
        Err(e) => return Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", e.to_string())),
    }
    journal(&state, &req.bmi, &participant.key_id, cmd).await
}

fn customer_of(state: &AppState, order: u64, owner: Option<&str>) -> Result<Response, ApiError> {
    let found = state
        .matching_pii
        .get(order)
        .map_err(|e| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", e.to_string()))?;
    match found {
        Some((key, c)) if owner.is_none_or(|o| o == &*key) => {
            Ok(Json(json!({ "order": order, "customer": c })).into_response())
        }
        _ => Err(unknown_order(OrderId(order))),
    }
}

/// The customer's PII, for the participant that submitted the order here.
async fn get_customer(
    State(state): State<Arc<AppState>>,
    Path(id_text): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    let (participant, _) = authenticated(&state.keyring, request).await?;
    if !enabled(&state) {
        return Err(disabled());
    }
    let id = parse_id(&id_text, "order")?;
    customer_of(&state, id, Some(&participant.key_id))
}

/// The customer's PII, for operators.
async fn get_customer_as_operator(
    State(state): State<Arc<AppState>>,
    Path(id_text): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    authenticated(&state.operators, request).await?;
    if !enabled(&state) {
        return Err(disabled());
    }
    let id = parse_id(&id_text, "order")?;
    customer_of(&state, id, None)
}
