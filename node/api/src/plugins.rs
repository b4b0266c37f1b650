//! Each plugin's HTTP routes live in its own module here; [`routes`] adds every plugin's to the
//! router (a route of a plugin the node does not run answers 404 `<plugin>_disabled`).
//!
//! What every plugin's routes share is here, once: [`ApiPlugin`] (how a plugin is found in the
//! read model's replica and how its absence is answered), [`with_plugin`] (read-your-writes
//! reads), [`journal`] (operator route → plugin command → journal), [`parse_id`] and
//! [`with_seq`]; and the host's own operator routes ([`owner`]: who executes a plugin's effects,
//! and `SetOwner` to move it).

use crate::checks::{parse_bmi, parse_operator_bmi};
use crate::error::ApiError;
use crate::server::{accepted, submit, AppState};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Router;
use rtgs_core::entry::{InputError, Payload, PluginCommand, Seq};
use rtgs_core::plugin_host::PluginHost;
use serde_json::{json, Value};
use std::sync::Arc;

pub(crate) mod collection;
pub(crate) mod matching;
pub(crate) mod owner;
pub(crate) mod withdrawal;

/// Every plugin's routes.
pub(crate) fn routes(router: Router<Arc<AppState>>) -> Router<Arc<AppState>> {
    owner::routes(withdrawal::routes(matching::routes(collection::routes(router))))
}

/// A plugin as its routes see it.
pub(crate) trait ApiPlugin: 'static {
    /// The 404 answer of its routes on a node that does not run it.
    fn disabled() -> ApiError;
    /// The plugin in a host, if the host runs it.
    fn of(host: &PluginHost) -> Option<&Self>;
}

impl ApiPlugin for rtgs_collection::CollectionPlugin {
    fn disabled() -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "collection_disabled", "collection is not enabled on this node")
    }
    fn of(host: &PluginHost) -> Option<&Self> {
        rtgs_plugins::collection(host)
    }
}

impl ApiPlugin for rtgs_withdrawal::WithdrawalPlugin {
    fn disabled() -> ApiError {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "withdrawal_disabled",
            "withdrawals are not enabled on this node",
        )
    }
    fn of(host: &PluginHost) -> Option<&Self> {
        rtgs_plugins::withdrawal(host)
    }
}

impl ApiPlugin for rtgs_matching::MatchingPlugin {
    fn disabled() -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "matching_disabled", "matching is not enabled on this node")
    }
    fn of(host: &PluginHost) -> Option<&Self> {
        rtgs_plugins::matching(host)
    }
}

/// Whether this node's read model runs plugin `P`.
pub(crate) fn enabled<P: ApiPlugin>(state: &AppState) -> bool {
    state.read_model.plugins(|host, _| P::of(host).is_some()).unwrap_or(false)
}

/// Runs `f` over the replica's plugin `P` once the read model has applied everything already
/// final (read-your-writes); `f`'s answer comes with the seq it was read at. A 404 (an order,
/// withdrawal, deposit ... not found) is concluded as an unknown account is: `f` runs again once
/// the model holds everything sequenced before the request (`read_model_conclusive`), so a node
/// that lags never calls unknown what was submitted and answered through another center. Every
/// 404 takes that path, also one that hides another participant's object: the answer and its
/// wait are those of an object that does not exist, so neither tells that it does.
pub(crate) async fn with_plugin<P: ApiPlugin, R>(
    state: &AppState,
    f: impl Fn(&P) -> Result<R, ApiError>,
) -> Result<(R, Seq), ApiError> {
    if !enabled::<P>(state) {
        return Err(P::disabled());
    }
    let read = || -> Result<(R, Seq), ApiError> {
        state
            .read_model
            .plugins(|host, seq| {
                let plugin = P::of(host).ok_or_else(P::disabled)?;
                Ok((f(plugin)?, seq))
            })
            .map_err(|e| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "read_model_failed", e))?
    };
    crate::server::read_model_caught_up(&state.read_model).await?;
    match read() {
        Err(e) if e.status == StatusCode::NOT_FOUND => {
            crate::server::read_model_conclusive(&state.read_model).await?;
            read()
        }
        answered => answered,
    }
}

/// Operator (or participant) route → plugin command → journal: refused with `P::disabled` when
/// the node does not run `P`, otherwise submitted through the tracker under `bmi_text` (202).
/// Whether the plugin accepts the command is its own answer, visible in its state.
pub(crate) async fn journal<P: ApiPlugin>(
    state: &AppState,
    bmi_text: &str,
    owner: &Arc<str>,
    command: Result<PluginCommand, InputError>,
) -> Result<Response, ApiError> {
    if !enabled::<P>(state) {
        return Err(P::disabled());
    }
    // A participant's bmi is journaled under its scoped key; an operator's or an internal
    // route's as written (key ids are unique across participants and operators).
    let bmi = match state.participants().get(owner) {
        Some(participant) => participant.scope.key(parse_bmi(bmi_text)?),
        None => parse_operator_bmi(bmi_text)?,
    };
    let command = command.map_err(|e| ApiError::bad_request("invalid_field", e.to_string()))?;
    let seq = submit(state, bmi, owner, Payload::Plugin(command)).await?;
    Ok(accepted(bmi, seq))
}

/// A numeric id in a path (`what` names it in the message).
pub(crate) fn parse_id(text: &str, what: &str) -> Result<u64, ApiError> {
    text.parse()
        .map_err(|_| ApiError::bad_request("invalid_id", format!("{what} id {text:?} is not a number")))
}

/// Adds `as_of_seq` (the read model's seq) to an object answer.
pub(crate) fn with_seq(mut v: Value, seq: Seq) -> Value {
    if let Some(o) = v.as_object_mut() {
        o.insert("as_of_seq".into(), json!(seq));
    }
    v
}
