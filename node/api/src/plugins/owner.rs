//! The plugin host's operator routes: who executes each plugin's effects (its owner and term),
//! and `SetOwner` to move a plugin's ownership to a named center through the journal.
//!
//! `POST /v1/operator/plugins/{plugin}/owner {"center": N}` journals the core's `SetOwner` with
//! the replica's term + 1 under the `bmi` every proposer of that term uses (`SetOwner::bmi`), so
//! it races fairly with the owner failure detector's proposals: the sequencer keeps the first,
//! and the host refuses a stale term. Whether it took effect is the host's answer, visible in
//! `GET /v1/operator/plugins`. The same on both engines: it only needs the read model's replica.

use crate::checks::parse_json;
use crate::edge::Path;
use crate::error::ApiError;
use crate::server::{authenticated, submit, AppState};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use rtgs_core::entry::{CenterId, Payload, PluginKind};
use rtgs_core::limits::CENTER_COUNT_MAX;
use rtgs_core::plugin_host::SetOwner;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OwnerRequest {
    /// The center that is to execute the plugin's effects (1-based).
    center: u64,
}

pub(crate) fn routes(router: Router<Arc<AppState>>) -> Router<Arc<AppState>> {
    router
        .route("/v1/operator/plugins", get(list))
        .route("/v1/operator/plugins/{plugin}/owner", post(set_owner))
}

async fn read<R>(
    state: &AppState,
    f: impl FnOnce(&rtgs_core::plugin_host::PluginHost) -> Result<R, ApiError>,
) -> Result<(R, u64), ApiError> {
    crate::server::read_model_caught_up(&state.read_model).await?;
    state
        .read_model
        .plugins(|host, seq| Ok((f(host)?, seq)))
        .map_err(|e| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "read_model_failed", e))?
}

/// Every plugin this node runs, with its owner and term.
async fn list(State(state): State<Arc<AppState>>, request: Request) -> Result<Response, ApiError> {
    authenticated(&state.operators, request).await?;
    let (plugins, seq) = read(&state, |host| {
        Ok(host
            .kinds()
            .filter_map(|k| host.owner(k).map(|(owner, term)| (k, owner, term)))
            .map(|(k, owner, term)| json!({ "plugin": k.name(), "owner": owner.0, "term": term }))
            .collect::<Vec<Value>>())
    })
    .await?;
    Ok(Json(json!({ "plugins": plugins, "as_of_seq": seq })).into_response())
}

/// Moves a plugin's ownership (see the module docs): 404 `unknown_plugin` / `plugin_disabled`,
/// 400 `invalid_center`, 409 `already_owner`; 202 with the term proposed.
async fn set_owner(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    let (operator, body) = authenticated(&state.operators, request).await?;
    let kind = PluginKind::from_name(&name).ok_or_else(|| {
        ApiError::new(StatusCode::NOT_FOUND, "unknown_plugin", format!("no plugin named {name:?}"))
    })?;
    let req: OwnerRequest = parse_json(&body)?;
    let center = u8::try_from(req.center)
        .ok()
        .filter(|c| (1..=CENTER_COUNT_MAX as u64).contains(&u64::from(*c)))
        .map(CenterId)
        .ok_or_else(|| {
            let message = format!("center {} is not in 1..={CENTER_COUNT_MAX}", req.center);
            ApiError::bad_request("invalid_center", message)
        })?;
    let (term, _) = read(&state, |host| {
        let (owner, term) = host.owner(kind).ok_or_else(|| {
            let message = format!("{name} is not enabled on this node");
            ApiError::new(StatusCode::NOT_FOUND, "plugin_disabled", message)
        })?;
        if owner == center {
            let message = format!("center {} already owns {name} (term {term})", center.0);
            return Err(ApiError::new(StatusCode::CONFLICT, "already_owner", message));
        }
        term.checked_add(1).ok_or_else(|| {
            ApiError::new(StatusCode::CONFLICT, "term_exhausted", format!("{name}'s term cannot grow"))
        })
    })
    .await?;
    let invalid = |e: rtgs_core::entry::InputError| ApiError::bad_request("invalid_field", e.to_string());
    let bmi = SetOwner::bmi(kind, term).map_err(invalid)?;
    let command = SetOwner { term, owner: center }.to_command(kind).map_err(invalid)?;
    let seq = submit(&state, bmi, &operator.key_id, Payload::Plugin(command)).await?;
    let answer = json!({
        "bmi": bmi.as_str(), "seq": seq, "status": "ACSP",
        "plugin": kind.name(), "center": center.0, "term": term,
    });
    Ok((StatusCode::ACCEPTED, Json(answer)).into_response())
}
