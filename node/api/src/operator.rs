//! Operator endpoints: open, fund and close accounts; read any entry's status, and any
//! account's balance and statement (the console's search). Signed like
//! participant requests but with operator credentials (a participant's key is unknown here, and
//! an operator's key is unknown to the participant endpoints). Every write goes through the
//! journal; whether it succeeds is the ledger's answer (RJCT RT01 account exists, RT02 balance
//! not zero, AC01 unknown account, AC04 closed).

use crate::checks::{
    parse_account_id, parse_amount, parse_currency, parse_journaled_bmi, parse_json, parse_operator_bmi,
};
use crate::edge::Path;
use crate::error::ApiError;
use crate::server::{accepted, authenticated, status_json, submit, visible_account, AppState};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use rtgs_core::entry::{AccountId, Payload};
use serde::Deserialize;
use std::sync::Arc;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OpenRequest {
    bmi: String,
    account: u64,
    currency: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FundRequest {
    bmi: String,
    /// Major units, in `currency`, which must be the account's.
    amount: String,
    currency: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CloseRequest {
    bmi: String,
}

pub(crate) async fn open_account(
    State(state): State<Arc<AppState>>,
    request: Request,
) -> Result<Response, ApiError> {
    let (operator, body) = authenticated(&state.operators, request).await?;
    let req: OpenRequest = parse_json(&body)?;
    let bmi = parse_operator_bmi(&req.bmi)?;
    let (currency, _) = parse_currency(&req.currency)?;
    let payload = Payload::AccountOpen { account: AccountId(req.account), currency };
    let seq = submit(&state, bmi, &operator.key_id, payload).await?;
    Ok(accepted(bmi, seq))
}

/// Funding names its currency so that an amount is never scaled with the wrong exponent: it must
/// match the account's as the read model sees it once caught up with everything already final.
pub(crate) async fn fund_account(
    State(state): State<Arc<AppState>>,
    Path(id_text): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    let (operator, body) = authenticated(&state.operators, request).await?;
    let id = parse_account_id(&id_text)?;
    let req: FundRequest = parse_json(&body)?;
    let bmi = parse_operator_bmi(&req.bmi)?;
    let (currency, exponent) = parse_currency(&req.currency)?;
    let amount_minor = parse_amount(&req.amount, exponent)?;
    let (account, _) = visible_account(&state.read_model, id).await?;
    if account.currency != currency {
        let message = format!("account {} holds {}, not {}", id.0, account.currency.as_str(), req.currency);
        return Err(ApiError::bad_request("currency_mismatch", message));
    }
    let seq =
        submit(&state, bmi, &operator.key_id, Payload::AccountFund { account: id, amount_minor }).await?;
    Ok(accepted(bmi, seq))
}

pub(crate) async fn close_account(
    State(state): State<Arc<AppState>>,
    Path(id_text): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    let (operator, body) = authenticated(&state.operators, request).await?;
    let id = parse_account_id(&id_text)?;
    let req: CloseRequest = parse_json(&body)?;
    let bmi = parse_operator_bmi(&req.bmi)?;
    let seq = submit(&state, bmi, &operator.key_id, Payload::AccountClose { account: id }).await?;
    Ok(accepted(bmi, seq))
}

/// Any entry's status — tracked here, or (the production engine) any ever sequenced
/// ([`crate::server::entry_status`]) — operators see every participant's, under its journaled
/// `bmi`: a participant's scoped key, [`crate::scope`].
pub(crate) async fn get_entry(
    State(state): State<Arc<AppState>>,
    Path(bmi_text): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    let (operator, _) = authenticated(&state.operators, request).await?;
    let bmi = parse_journaled_bmi(&bmi_text)?;
    let (status, _) = crate::server::entry_status(&state, bmi, &operator.key_id)
        .await?
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "unknown_transfer", format!("no entry {bmi}")))?;
    let status = crate::server::with_outcome(&state, status).await;
    let mut answer = status_json(bmi, &status);
    answer["bmi"] = serde_json::json!(bmi.as_str());
    Ok(Json(answer).into_response())
}

/// Any account's balance (as a participant reads its own).
pub(crate) async fn get_account(
    State(state): State<Arc<AppState>>,
    Path(id_text): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    authenticated(&state.operators, request).await?;
    let id = parse_account_id(&id_text)?;
    Ok(Json(crate::server::account_answer(&state, id).await?).into_response())
}

/// Any account's statement (`?from_seq=&limit=`, as a participant reads its own).
pub(crate) async fn get_statement(
    State(state): State<Arc<AppState>>,
    Path(id_text): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    let uri = request.uri().clone();
    authenticated(&state.operators, request).await?;
    let (from_seq, limit) = crate::server::statement_query(&uri)?;
    let id = parse_account_id(&id_text)?;
    Ok(Json(crate::server::statement_answer(&state, id, from_seq, limit).await?).into_response())
}
