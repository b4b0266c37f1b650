//! The HTTP server: routes, request checks in a fixed order, and the threads that connect it to
//! an engine through the neutral seam of [`EngineLink`] (either engine implements it).
//!
//! A write is checked in this order, and the first failure answers: the head's size (414 / 431,
//! [`crate::edge`]) → body size and time (413 / 408) → signature, each credential header once
//! (401) → JSON shape, objects only (400) → field values (400) → ownership (403) → for a `bmi` not
//! seen before, both accounts known and open (422 `unknown_account` / `account_closed`) →
//! idempotency by `bmi` (422 `bmi_conflict`) → submit. Nothing reaches the engine unless every
//! check passed. A participant's `bmi` is journaled under its scoped key ([`crate::scope`]):
//! every look-up, answer and error stays inside that participant's namespace.

use crate::auth::{
    AuthError, Keyring, Participant, SignedHeaders, HEADER_KEY, HEADER_SIGNATURE, HEADER_TIMESTAMP,
};
use crate::checks::{parse_account_id, parse_amount, parse_bmi, parse_currency, parse_json};
use crate::config::{AccountSetup, Credentials};
pub use crate::edge::EdgeLimits;
use crate::edge::Path;
use crate::error::ApiError;
use crate::iso20022;
use crate::limits::{
    BATCH_BODY_BYTES_MAX, BATCH_TRANSFERS_MAX, BODY_BYTES_MAX, BODY_READ_TIMEOUT, LONG_POLL_S_MAX,
    READ_MODEL_POLL, READ_MODEL_WAIT, SEQ_WAIT, STATEMENT_PAGE_DEFAULT, STATEMENT_PAGE_MAX,
};
use crate::metrics::Metrics;
use crate::money;
use crate::operator;
use crate::read_model::ReadModel;
use crate::tracker::{Admit, Answer, Status, Tracker};
use axum::body::{to_bytes, Body, Bytes};
use axum::extract::{ConnectInfo, MatchedPath, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use rtgs_core::client::{ClientEvent, EngineSubmit, EntryFeed};
use rtgs_core::entry::{AccountId, Bmi, CenterId, Command, Outcome, Payload, Seq, Transfer};
use rtgs_core::ledger::Account;
use rtgs_core::sequencer::Admission;
use serde::Deserialize;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A transfer as a participant submits it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TransferRequest {
    bmi: String,
    debtor: u64,
    creditor: u64,
    /// Major units as a decimal string, e.g. `"12.34"`; never a JSON number (no floats).
    amount: String,
    currency: String,
}

pub(crate) struct AppState {
    pub(crate) keyring: Keyring,
    pub(crate) operators: Keyring,
    /// Customers' PII of the matching orders submitted here (this center's, never journaled).
    pub(crate) matching_pii: crate::pii::PiiStore,
    pub(crate) tracker: Arc<Tracker>,
    pub(crate) read_model: Arc<ReadModel>,
    metrics: Arc<Metrics>,
    /// Taken at shutdown, so that the cluster can drain even while a connection lingers.
    submitter: RwLock<Option<Arc<dyn EngineSubmit>>>,
    /// Set when the server stops accepting: a request waiting (a status long-poll, a write
    /// waiting for its seq) answers at once with what it knows, so that in-flight requests
    /// finish within the shutdown grace.
    draining: tokio::sync::watch::Sender<bool>,
    pub(crate) origin: CenterId,
    /// Every center's `/status` listener, in center order (the console's cluster report).
    pub(crate) cluster_status: std::sync::OnceLock<Vec<SocketAddr>>,
    pub(crate) console: crate::console::ReportCache,
    /// The engine's own series, appended to `/metrics` (see [`Api::set_engine_metrics`]).
    engine_metrics: std::sync::OnceLock<EngineMetrics>,
}

/// Prometheus text of an engine's own series (complete lines with their `# HELP`/`# TYPE`),
/// rendered at each scrape.
pub type EngineMetrics = Arc<dyn Fn() -> String + Send + Sync>;

impl AppState {
    /// The participants' keyring (plugin routes authenticate participants too).
    pub(crate) fn participants(&self) -> &Keyring {
        &self.keyring
    }
}

pub use crate::read_model::FinalThrough;

/// An engine as the API sees it (the seam both engines implement).
pub struct EngineLink {
    pub submit: Arc<dyn EngineSubmit>,
    /// Final notices and refusals of the entries this API submitted (others are ignored).
    pub events: crossbeam_channel::Receiver<ClientEvent>,
    /// The read model to start from (a fresh one, or one holding the engine's ledger at start).
    pub read_model: ReadModel,
    /// The journal's entries in seq order, for the read model.
    pub feed: Box<dyn EntryFeed>,
    /// The engine's highest seq known final (the read model applies up to it).
    pub final_through: FinalThrough,
}

/// The API's dispatcher after [`Api::shutdown`]: join it once the engine has stopped.
pub struct ApiStopped {
    dispatcher: Option<JoinHandle<()>>,
}

impl ApiStopped {
    pub fn join(mut self) {
        if let Some(h) = self.dispatcher.take() {
            let _ = h.join();
        }
    }
}

/// The API over a running engine.
pub struct Api {
    state: Arc<AppState>,
    stop: Arc<AtomicBool>,
    dispatcher: Option<JoinHandle<()>>,
    reader: Option<JoinHandle<()>>,
}

#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("{bmi}: {reason}")]
    Refused { bmi: String, reason: String },
    #[error("{0}: no final status within the wait")]
    Timeout(String),
}

impl Api {
    /// The API over an engine — the embedded cluster (`rtgs serve`) or one center of the
    /// production engine (`rtgs node --api-config`) — which hands over its submission path, its
    /// client events and the entries its read model applies; submissions enter through center
    /// `origin`. The API must be the engine's only consumer of those events: it routes every
    /// final notice and refusal to the request waiting for it.
    pub fn start_linked(link: EngineLink, credentials: Credentials, origin: CenterId) -> Api {
        Api::start_linked_with_pii(link, credentials, origin, crate::pii::PiiStore::in_memory())
    }

    /// [`Api::start_linked`] keeping the matching orders' customer PII in `pii` (opened on a
    /// file in the origin center's data directory, it survives a restart).
    pub fn start_linked_with_pii(
        link: EngineLink,
        credentials: Credentials,
        origin: CenterId,
        pii: crate::pii::PiiStore,
    ) -> Api {
        Api::start_linked_with(link, credentials, origin, pii, crate::limits::TRACKED_TRANSFERS_MAX)
    }

    /// [`Api::start_linked_with_pii`] with a tracker of `tracked_entries_max` records (tests
    /// shrink it to show that a retry the tracker forgot is still answered by the engine).
    pub fn start_linked_with(
        link: EngineLink,
        credentials: Credentials,
        origin: CenterId,
        pii: crate::pii::PiiStore,
        tracked_entries_max: usize,
    ) -> Api {
        let EngineLink { submit, events, read_model, feed, final_through } = link;
        // What is final (or durable) at start must be applied before any read is answered.
        read_model.advance_to(final_through());
        let state = Arc::new(AppState {
            keyring: Keyring::new(credentials.participants),
            operators: Keyring::new(credentials.operators),
            matching_pii: pii,
            tracker: Arc::new(Tracker::with_capacity(tracked_entries_max)),
            read_model: Arc::new(read_model),
            metrics: Arc::new(Metrics::default()),
            submitter: RwLock::new(Some(submit)),
            draining: tokio::sync::watch::Sender::new(false),
            origin,
            cluster_status: std::sync::OnceLock::new(),
            engine_metrics: std::sync::OnceLock::new(),
            console: Default::default(),
        });
        let stop = Arc::new(AtomicBool::new(false));
        let (tracker, model) = (Arc::clone(&state.tracker), Arc::clone(&state.read_model));
        let metrics = Arc::clone(&state.metrics);
        let dispatcher = std::thread::spawn(move || {
            // Ends when the cluster shuts down (every event sender dropped).
            while let Ok(event) = events.recv() {
                match event {
                    ClientEvent::Final(notices) => {
                        // Target first, then wake the requests: a read after a write's answer
                        // then waits for that write (read-your-writes).
                        model.advance_to(notices.iter().map(|n| n.seq).max().unwrap_or(0));
                        tracker.on_final(&notices);
                        let accepted = notices.iter().filter(|n| n.outcome == Outcome::Accepted).count();
                        metrics.finals(accepted as u64, (notices.len() - accepted) as u64);
                    }
                    ClientEvent::Refused(refusals) => {
                        tracker.on_refused(&refusals);
                        let conflicts =
                            refusals.iter().filter(|r| matches!(r.admission, Admission::Conflict(_))).count();
                        metrics.refusals((refusals.len() - conflicts) as u64, conflicts as u64);
                    }
                    ClientEvent::Divergence(reason) => {
                        metrics.divergence();
                        eprintln!("rtgs-api: finality halted: {reason}");
                    }
                }
            }
        });
        {
            // The exporter keeps histogram samples until they are folded in: without a scrape
            // they would pile up (8 bytes per request), so fold them in every few seconds.
            let (metrics, stop) = (Arc::clone(&state.metrics), Arc::clone(&stop));
            std::thread::spawn(move || {
                while !stop.load(Ordering::Acquire) {
                    std::thread::sleep(crate::limits::METRICS_UPKEEP / 10);
                    metrics.upkeep_if_due();
                }
            });
        }
        let (model, reader_stop) = (Arc::clone(&state.read_model), Arc::clone(&stop));
        let reader = std::thread::spawn(move || model.run(feed, final_through, &reader_stop));
        Api { state, stop, dispatcher: Some(dispatcher), reader: Some(reader) }
    }

    /// Where every center's `/status` listener is (in center order): the operator console's
    /// cluster report asks them. Without it the console's cluster endpoint answers 404
    /// `cluster_status_unavailable` (`rtgs serve`). Set once; later calls are ignored.
    pub fn set_cluster_status(&self, addrs: Vec<SocketAddr>) {
        let _ = self.state.cluster_status.set(addrs);
    }

    /// Series of the engine itself that `/metrics` serves after the API's own (`rtgs serve`:
    /// the embedded journal's sync times). Set once; later calls are ignored.
    pub fn set_engine_metrics(&self, render: EngineMetrics) {
        let _ = self.state.engine_metrics.set(render);
    }

    pub fn router(&self) -> Router {
        let router = Router::new()
            .route("/v1/transfers", post(post_transfer))
            .route("/v1/transfers/batch", post(post_transfer_batch))
            .route("/v1/transfers/{bmi}", get(get_transfer))
            .route("/v1/iso20022/pacs008", post(post_pacs008))
            .route("/v1/iso20022/pacs002/{bmi}", get(get_pacs002))
            .route("/v1/accounts/{id}", get(get_account))
            .route("/v1/accounts/{id}/statement", get(get_statement))
            .route("/v1/operator/accounts", post(operator::open_account))
            .route("/v1/operator/accounts/{id}/fund", post(operator::fund_account))
            .route("/v1/operator/accounts/{id}/close", post(operator::close_account))
            .route("/v1/operator/entries/{bmi}", get(operator::get_entry))
            .route("/v1/operator/accounts/{id}", get(operator::get_account))
            .route("/v1/operator/accounts/{id}/statement", get(operator::get_statement));
        crate::console::routes(crate::plugins::routes(router))
            .route("/metrics", get(get_metrics))
            .route("/v1/openapi.json", get(get_openapi))
            .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such endpoint") })
            // Every answer, the framework's own too, keeps the error contract; `track` around it
            // counts what was answered.
            .layer(middleware::from_fn(crate::console::refuse_cross_site))
            .layer(middleware::from_fn(crate::edge::contract))
            .layer(middleware::from_fn_with_state(Arc::clone(&self.state), track))
            .with_state(Arc::clone(&self.state))
    }

    /// Serves the API on `listener` until `shutdown` completes, then closes idle connections and
    /// lets requests in flight finish within [`crate::limits::SHUTDOWN_GRACE`] (see
    /// [`crate::edge`]); returns once every connection is closed.
    pub async fn serve(
        &self,
        listener: tokio::net::TcpListener,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        self.serve_with(listener, EdgeLimits::default(), shutdown).await
    }

    /// [`Api::serve`] with other edge bounds (tests shorten them).
    pub async fn serve_with(
        &self,
        listener: tokio::net::TcpListener,
        limits: EdgeLimits,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        crate::edge::serve(listener, self.router(), limits, &self.state.draining, shutdown).await
    }

    /// Opens and funds accounts (operator setup, not signed) and waits until each is final.
    pub async fn setup_accounts(&self, accounts: &[AccountSetup]) -> Result<(), SetupError> {
        for a in accounts {
            let open = Payload::AccountOpen { account: a.id, currency: a.currency };
            self.setup_one(&format!("SETUP-OPEN-{}", a.id.0), open).await?;
            if a.fund_minor > 0 {
                let fund = Payload::AccountFund { account: a.id, amount_minor: a.fund_minor };
                self.setup_one(&format!("SETUP-FUND-{}", a.id.0), fund).await?;
            }
        }
        Ok(())
    }

    /// Journals plain commands with their `bmi`s (a plugin workload's accounts, opened and
    /// funded) and waits until each is final; a rejection is an error.
    pub async fn setup_payloads(&self, payloads: Vec<(Bmi, Payload)>) -> Result<(), SetupError> {
        for (bmi, payload) in payloads {
            self.setup_one(bmi.as_str(), payload).await?;
        }
        Ok(())
    }

    /// Journals plugin commands (operator setup, e.g. the collection's relayers) and waits until
    /// each is final; whether the plugin accepted them shows in its state.
    pub async fn setup_plugin_commands(
        &self,
        commands: Vec<(Bmi, rtgs_core::entry::PluginCommand)>,
    ) -> Result<(), SetupError> {
        for (bmi, command) in commands {
            self.setup_one(bmi.as_str(), Payload::Plugin(command)).await?;
        }
        Ok(())
    }

    async fn setup_one(&self, bmi: &str, payload: Payload) -> Result<(), SetupError> {
        let refused = |reason: String| SetupError::Refused { bmi: bmi.to_string(), reason };
        let bmi_value = Bmi::new(bmi.as_bytes()).map_err(|e| refused(e.to_string()))?;
        let answer = submit(&self.state, bmi_value, &Arc::from(OPERATOR), payload)
            .await
            .map_err(|e| refused(e.message))?;
        if answer.is_none() {
            return Err(SetupError::Timeout(bmi.to_string()));
        }
        // The answer comes with the final notice; a retry of an older setup may only know its seq.
        match self.state.tracker.status(bmi_value).and_then(|s| s.outcome) {
            Some(Outcome::Rejected(r)) => Err(refused(format!("rejected {}", r.iso_code()))),
            _ => Ok(()),
        }
    }

    /// Stops the API's threads; call after the HTTP server has stopped and before the engine
    /// shuts down; the dispatcher ends once the engine's event senders are gone, and
    /// [`Api::join`] waits for it.
    pub fn shutdown(mut self) -> ApiStopped {
        self.stop_reading();
        ApiStopped { dispatcher: self.dispatcher.take() }
    }

    /// Refuses new submissions and stops the read model; the dispatcher ends when the engine's
    /// event senders are gone.
    pub fn stop_reading(&mut self) {
        if let Ok(mut s) = self.state.submitter.write() {
            s.take();
        }
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.reader.take() {
            let _ = h.join();
        }
    }
}

/// The owner recorded for setup entries; never a participant's key id (the config refuses it).
pub const OPERATOR: &str = "operator";

fn now_s() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

fn authenticate<'a>(
    keyring: &'a Keyring,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<&'a Participant, ApiError> {
    let unauthorized = |e: AuthError| ApiError::new(StatusCode::UNAUTHORIZED, e.code(), e.to_string());
    // A credential header given twice is refused, never first-wins: which copy a proxy or a
    // library keeps differs, so a request that means two things means neither.
    let header = |name: &'static str| {
        let mut values = headers.get_all(name).iter();
        let first = values.next();
        match values.next() {
            Some(_) => Err(unauthorized(AuthError::DuplicateHeader(name))),
            None => Ok(first.and_then(|v| v.to_str().ok())),
        }
    };
    let signed = SignedHeaders {
        key: header(HEADER_KEY)?,
        timestamp: header(HEADER_TIMESTAMP)?,
        signature: header(HEADER_SIGNATURE)?,
    };
    let path = uri.path_and_query().map_or(uri.path(), |p| p.as_str());
    keyring.verify(method.as_str(), path, signed, body, now_s()).map_err(unauthorized)
}

/// Reads the body (bounded) and checks the request's signature over it with `keyring`.
pub(crate) async fn authenticated(
    keyring: &Keyring,
    request: Request,
) -> Result<(&Participant, Bytes), ApiError> {
    authenticated_up_to(keyring, request, BODY_BYTES_MAX).await
}

/// [`authenticated`] with another body limit (batches).
async fn authenticated_up_to(
    keyring: &Keyring,
    request: Request,
    body_bytes_max: usize,
) -> Result<(&Participant, Bytes), ApiError> {
    let (parts, body) = request.into_parts();
    let body = read_body(body, body_bytes_max).await?;
    let participant = authenticate(keyring, &parts.method, &parts.uri, &parts.headers, &body)?;
    Ok((participant, body))
}

/// Counts every request by route and status, and times it.
async fn track(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let started = std::time::Instant::now();
    let endpoint = request.extensions().get::<MatchedPath>().cloned();
    let response = next.run(request).await;
    let endpoint = endpoint.as_ref().map_or("unmatched", |p| p.as_str());
    state.metrics.request(endpoint, response.status().as_u16(), started.elapsed());
    response
}

/// The OpenAPI document of these endpoints (`node/api/openapi.json`), unsigned.
pub const OPENAPI_JSON: &str = include_str!("../openapi.json");

async fn get_openapi() -> Response {
    ([(axum::http::header::CONTENT_TYPE, "application/json")], OPENAPI_JSON).into_response()
}

/// Prometheus text format; loopback callers only (an internal endpoint: no signature).
async fn get_metrics(State(state): State<Arc<AppState>>, request: Request) -> Result<Response, ApiError> {
    let peer = request.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0);
    if !peer.is_some_and(crate::edge::is_loopback) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "not_loopback",
            "metrics answer loopback callers only",
        ));
    }
    let mut text = state.metrics.render(state.read_model.seq_applied(), state.tracker.len());
    if let Some(engine) = state.engine_metrics.get() {
        text.push_str(&engine());
    }
    Ok(([(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response())
}

/// An account as of everything already final (404 `unknown_account` if there is none, concluded
/// by [`read_model_conclusive`]), with the seq the read model is at.
pub(crate) async fn visible_account(model: &ReadModel, id: AccountId) -> Result<(Account, Seq), ApiError> {
    let read = || model.account(id).map(|(account, seq)| account.map(|a| (a, seq)));
    found_or_conclusive(model, read).await?.ok_or_else(|| {
        ApiError::new(StatusCode::NOT_FOUND, "unknown_account", format!("no account {}", id.0))
    })
}

/// `read` once the read model has caught up ([`read_model_caught_up`]); if it finds nothing,
/// once more when the model is [`read_model_conclusive`] — `None` then means "does not exist".
/// A read that fails is 503 `read_model_failed`.
async fn found_or_conclusive<T>(
    model: &ReadModel,
    read: impl Fn() -> Result<Option<T>, String>,
) -> Result<Option<T>, ApiError> {
    let read = || read().map_err(|e| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "read_model_failed", e));
    read_model_caught_up(model).await?;
    if let Some(found) = read()? {
        return Ok(Some(found));
    }
    read_model_conclusive(model).await?;
    read()
}

/// Read-your-writes: waits until the read model has applied everything seen final so far (so
/// every write answered before this request is visible), at most [`READ_MODEL_WAIT`].
pub(crate) async fn read_model_caught_up(model: &ReadModel) -> Result<(), ApiError> {
    applied_through(model, model.seq_target()).await
}

/// Before "it does not exist" is answered: waits until the read model holds everything sequenced
/// before this call — where the engine tells its journal's end (`ReadModel::with_journal_end`,
/// the production engine), up to that end; else as [`read_model_caught_up`]. A node whose center
/// lags (it missed the journal's pushes, its database was slow) sees finality late and does not
/// know it: without this it would call an account unknown that another center opened and
/// answered final a moment ago. At most [`READ_MODEL_WAIT`]; 503 `read_model_behind` (try again)
/// if the model cannot get there, never a wrong "unknown".
pub(crate) async fn read_model_conclusive(model: &ReadModel) -> Result<(), ApiError> {
    let target = match model.journal_end().await {
        None => model.seq_target(),
        Some(Ok(end)) => end.max(model.seq_target()),
        Some(Err(e)) => {
            let message = format!("how far the journal reaches is not known now ({e}); try again");
            return Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "read_model_behind", message));
        }
    };
    applied_through(model, target).await
}

/// Waits until the read model has applied through `target`, at most [`READ_MODEL_WAIT`] (503
/// `read_model_behind`).
async fn applied_through(model: &ReadModel, target: Seq) -> Result<(), ApiError> {
    let started = tokio::time::Instant::now();
    while model.seq_applied() < target {
        if started.elapsed() > READ_MODEL_WAIT {
            let message = format!("balances are behind seq {target}; try again");
            return Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "read_model_behind", message));
        }
        tokio::time::sleep(READ_MODEL_POLL).await;
    }
    Ok(())
}

/// The whole body, at most `bytes_max` bytes (413 `body_too_large`), within
/// [`BODY_READ_TIMEOUT`] (408 `body_timeout`); a body that breaks off or is not valid HTTP framing
/// is 400 `malformed_body`.
pub(crate) async fn read_body(body: Body, bytes_max: usize) -> Result<Bytes, ApiError> {
    let read = match tokio::time::timeout(BODY_READ_TIMEOUT, to_bytes(body, bytes_max)).await {
        Ok(read) => read,
        Err(_) => {
            let message = format!("the request body did not arrive within {} s", BODY_READ_TIMEOUT.as_secs());
            return Err(ApiError::new(StatusCode::REQUEST_TIMEOUT, "body_timeout", message));
        }
    };
    read.map_err(|e| {
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&e);
        while let Some(s) = source {
            if s.is::<http_body_util::LengthLimitError>() {
                let message = format!("request body larger than {bytes_max} bytes");
                return ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "body_too_large", message);
            }
            source = s.source();
        }
        ApiError::bad_request("malformed_body", format!("the request body could not be read: {e}"))
    })
}

/// Field values → a core transfer, or the first problem found.
fn validate(req: &TransferRequest) -> Result<(Bmi, Transfer), ApiError> {
    let bmi = parse_bmi(&req.bmi)?;
    let (currency, exponent) = parse_currency(&req.currency)?;
    let amount_minor = parse_amount(&req.amount, exponent)?;
    let transfer =
        Transfer { debtor: AccountId(req.debtor), creditor: AccountId(req.creditor), amount_minor, currency };
    Ok((bmi, transfer))
}

/// A transfer request checked as far as it can be without the engine's state: its field
/// values, and its debtor one of the participant's accounts; with the `bmi` the participant
/// wrote turned into its scoped key ([`crate::scope`]).
fn admissible(participant: &Participant, req: &TransferRequest) -> Result<(Bmi, Transfer), ApiError> {
    let (text, transfer) = validate(req)?;
    if !participant.owns(transfer.debtor) {
        let message = format!("account {} is not one of this participant's accounts", transfer.debtor.0);
        return Err(ApiError::new(StatusCode::FORBIDDEN, "debtor_not_owned", message));
    }
    Ok((participant.scope.key(text), transfer))
}

/// Both accounts of every transfer exist and are open, as of everything already final: an
/// unknown or closed account is bad input (422, nothing journaled); the error names the index of
/// the first transfer at fault (`None`: not one transfer's fault). The ledger stays the judge —
/// an account closed after this check is still rejected at apply (RJCT AC04) — so this only keeps
/// plainly wrong requests out of the journal. One look-up of all of them without waiting; if an
/// account is not found, a second once the read model holds everything sequenced so far
/// ([`read_model_conclusive`]: it may have been opened just now, through another center). A
/// `bmi` the tracker knows is not checked: a retry gets its original answer, whatever happened
/// to the accounts since.
async fn check_accounts(
    state: &AppState,
    transfers: &[(Bmi, Transfer)],
) -> Result<(), (Option<usize>, ApiError)> {
    let known = state.tracker.known(transfers.iter().map(|(bmi, _)| *bmi));
    let to_check: Vec<(usize, &Transfer)> =
        transfers.iter().enumerate().filter(|(i, _)| !known[*i]).map(|(i, (_, t))| (i, t)).collect();
    if to_check.is_empty() {
        return Ok(());
    }
    let model = &state.read_model;
    for caught_up in [false, true] {
        if caught_up {
            read_model_conclusive(model).await.map_err(|e| (None, e))?;
        }
        let ids = to_check.iter().flat_map(|(_, t)| [t.debtor, t.creditor]);
        let standing = model
            .standing(ids)
            .map_err(|e| (None, ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "read_model_failed", e)))?;
        let mut unknown = None;
        for (k, &(i, t)) in to_check.iter().enumerate() {
            for (role, id, closed) in
                [("debtor", t.debtor, standing[2 * k]), ("creditor", t.creditor, standing[2 * k + 1])]
            {
                match closed {
                    None => unknown = unknown.or(Some((i, role, id))),
                    Some(true) => {
                        let message = format!("{role} account {} is closed", id.0);
                        return Err((
                            Some(i),
                            ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "account_closed", message),
                        ));
                    }
                    Some(false) => {}
                }
            }
        }
        match unknown {
            None => return Ok(()),
            Some((i, role, id)) if caught_up => {
                let message = format!("{role} account {} does not exist", id.0);
                return Err((
                    Some(i),
                    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "unknown_account", message),
                ));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// [`admissible`] and [`check_accounts`] for one transfer.
async fn checked(
    state: &AppState,
    participant: &Participant,
    req: &TransferRequest,
) -> Result<(Bmi, Transfer), ApiError> {
    let (bmi, transfer) = admissible(participant, req)?;
    let one = [(bmi, transfer)];
    check_accounts(state, &one).await.map_err(|(_, e)| e)?;
    Ok(one[0])
}

fn unavailable() -> ApiError {
    ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", "the engine is stopped")
}

/// A `bmi` used again for other content. Only ever about the requester's own entry: a
/// participant's `bmi` is in its own namespace, so the seq named is its own.
fn conflict_error(bmi: Bmi, seq: Option<Seq>) -> ApiError {
    let at = seq.map_or(String::new(), |s| format!(" (seq {s})"));
    ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "bmi_conflict",
        format!("bmi {} was already used for a different request{at}", crate::scope::shown(&bmi)),
    )
}

/// One submission after the tracker's verdict: answered already, or waiting for the engine.
enum Pending {
    Done(Result<Option<Seq>, ApiError>),
    Waiting(tokio::sync::oneshot::Receiver<Answer>),
}

/// The tracker's verdict on one command; a new one is appended to `to_send`.
fn admit(
    state: &AppState,
    bmi: Bmi,
    owner: &Arc<str>,
    payload: Payload,
    to_send: &mut Vec<Command>,
) -> Pending {
    let verdict = state.tracker.admit(bmi, owner, &payload);
    pending(state, bmi, payload, verdict, to_send)
}

fn pending(
    state: &AppState,
    bmi: Bmi,
    payload: Payload,
    verdict: Admit,
    to_send: &mut Vec<Command>,
) -> Pending {
    match verdict {
        Admit::Known(seq) => Pending::Done(Ok(Some(seq))),
        Admit::Conflict(seq) => Pending::Done(Err(conflict_error(bmi, seq))),
        Admit::Wait(rx) => Pending::Waiting(rx),
        Admit::Submit(rx) => {
            to_send.push(Command { origin: state.origin, bmi, payload });
            Pending::Waiting(rx)
        }
    }
}

/// Hands `commands` to the engine in one submission; if it is stopped, the tracker forgets them
/// (their waiters are told `Unavailable`).
async fn send(state: &AppState, commands: Vec<Command>) {
    if commands.is_empty() {
        return;
    }
    let bmis: Vec<Bmi> = commands.iter().map(|c| c.bmi).collect();
    let submitter = state.submitter.read().ok().and_then(|s| s.clone());
    let sent = match submitter {
        // Usually there is room in the engine's queue: no thread hand-off. When it is full,
        // `submit` blocks (back-pressure), so that waits off the runtime's workers.
        Some(s) => match s.try_submit(commands) {
            Ok(()) => true,
            Err(Some(commands)) => {
                tokio::task::spawn_blocking(move || s.submit(commands)).await.unwrap_or(false)
            }
            Err(None) => false,
        },
        None => false,
    };
    if !sent {
        for bmi in bmis {
            state.tracker.forget(bmi);
        }
    }
}

/// The answer of one submission, waiting at most until `deadline` for its seq (or until the
/// server drains: then, as at the deadline, accepted without a seq).
async fn resolve(
    state: &AppState,
    bmi: Bmi,
    pending: Pending,
    deadline: tokio::time::Instant,
) -> Result<Option<Seq>, ApiError> {
    let rx = match pending {
        Pending::Done(answer) => return answer,
        Pending::Waiting(rx) => rx,
    };
    let mut draining = state.draining.subscribe();
    let answer = tokio::select! {
        answer = tokio::time::timeout_at(deadline, rx) => answer,
        _ = draining.wait_for(|d| *d) => return Ok(None),
    };
    match answer {
        Ok(Ok(Answer::Accepted(seq))) => Ok(Some(seq)),
        Ok(Ok(Answer::Conflict(seq))) => Err(conflict_error(bmi, Some(seq))),
        Ok(Ok(Answer::Unavailable)) => Err(unavailable()),
        // Timed out, or the record was evicted while waiting: accepted, seq not known yet.
        Ok(Err(_)) | Err(_) => Ok(None),
    }
}

/// Submits through the tracker: `Ok(Some(seq))` once the seq is known, `Ok(None)` if it was not
/// known within [`SEQ_WAIT`] (still accepted: ACSP).
pub(crate) async fn submit(
    state: &AppState,
    bmi: Bmi,
    owner: &Arc<str>,
    payload: Payload,
) -> Result<Option<Seq>, ApiError> {
    let mut to_send = Vec::with_capacity(1);
    let pending = admit(state, bmi, owner, payload, &mut to_send);
    send(state, to_send).await;
    resolve(state, bmi, pending, tokio::time::Instant::now() + SEQ_WAIT).await
}

/// Submits many in one engine submission; one answer per command, in order.
pub(crate) async fn submit_many(
    state: &AppState,
    owner: &Arc<str>,
    commands: Vec<(Bmi, Payload)>,
) -> Vec<(Bmi, Result<Option<Seq>, ApiError>)> {
    let mut to_send = Vec::with_capacity(commands.len());
    let verdicts = state.tracker.admit_many(owner, commands.iter().map(|(bmi, payload)| (*bmi, payload)));
    let pending: Vec<(Bmi, Pending)> = commands
        .into_iter()
        .zip(verdicts)
        .map(|((bmi, payload), verdict)| (bmi, pending(state, bmi, payload, verdict, &mut to_send)))
        .collect();
    send(state, to_send).await;
    let deadline = tokio::time::Instant::now() + SEQ_WAIT;
    let mut answers = Vec::with_capacity(pending.len());
    for (bmi, p) in pending {
        answers.push((bmi, resolve(state, bmi, p, deadline).await));
    }
    answers
}

async fn post_transfer(State(state): State<Arc<AppState>>, request: Request) -> Result<Response, ApiError> {
    let (participant, body) = authenticated(&state.keyring, request).await?;
    let request: TransferRequest = parse_json(&body)?;
    let (bmi, transfer) = checked(&state, participant, &request).await?;
    let seq = submit(&state, bmi, &participant.key_id, Payload::Transfer(transfer)).await?;
    Ok(accepted(bmi, seq))
}

/// Up to [`BATCH_TRANSFERS_MAX`] transfers of one participant in one request: every one is
/// checked first (field values, ownership, no `bmi` twice in the batch) and the first problem
/// refuses the whole batch with its index, nothing journaled; then they enter the engine as one
/// submission. Each gets its own answer, in order: accepted (ACSP, with its seq once known) or
/// its own `bmi_conflict`.
async fn post_transfer_batch(
    State(state): State<Arc<AppState>>,
    request: Request,
) -> Result<Response, ApiError> {
    let (participant, body) = authenticated_up_to(&state.keyring, request, BATCH_BODY_BYTES_MAX).await?;
    let request: BatchRequest = parse_json(&body)?;
    let n = request.transfers.len();
    if n == 0 || n > BATCH_TRANSFERS_MAX {
        let message = format!("a batch holds 1 to {BATCH_TRANSFERS_MAX} transfers, not {n}");
        return Err(ApiError::bad_request("batch_size", message));
    }
    let at = |i: usize, e: ApiError| ApiError { message: format!("transfers[{i}]: {}", e.message), ..e };
    let mut transfers = Vec::with_capacity(n);
    let mut seen = std::collections::HashSet::with_capacity(n);
    for (i, t) in request.transfers.iter().enumerate() {
        let (bmi, transfer) = admissible(participant, t).map_err(|e| at(i, e))?;
        if !seen.insert(bmi) {
            let message = format!("bmi {} appears twice in the batch", crate::scope::shown(&bmi));
            return Err(at(i, ApiError::bad_request("duplicate_bmi", message)));
        }
        transfers.push((bmi, transfer));
    }
    check_accounts(&state, &transfers).await.map_err(|(i, e)| match i {
        Some(i) => at(i, e),
        None => e,
    })?;
    let commands = transfers.into_iter().map(|(bmi, t)| (bmi, Payload::Transfer(t))).collect();
    let answers = submit_many(&state, &participant.key_id, commands).await;
    let accepted = answers.iter().filter(|(_, a)| a.is_ok()).count();
    let results: Vec<serde_json::Value> = answers
        .into_iter()
        .map(|(bmi, answer)| match answer {
            Ok(seq) => serde_json::json!({ "bmi": crate::scope::shown(&bmi), "seq": seq, "status": "ACSP" }),
            Err(e) => {
                serde_json::json!({ "bmi": crate::scope::shown(&bmi), "code": e.code, "message": e.message })
            }
        })
        .collect();
    let answer = serde_json::json!({ "accepted": accepted, "transfers": results });
    Ok((StatusCode::ACCEPTED, Json(answer)).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchRequest {
    transfers: Vec<TransferRequest>,
}

/// The query's numeric parameters, each named in `allowed` with its inclusive range, in that
/// order (`None`: absent); anything else — an unknown name, not a number, out of range — is 400
/// `invalid_query`.
fn numeric_query<const N: usize>(
    uri: &Uri,
    allowed: [(&str, u64, u64); N],
) -> Result<[Option<u64>; N], ApiError> {
    let mut values = [None; N];
    for pair in uri.query().unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let bad = |what: String| ApiError::bad_request("invalid_query", format!("{pair:?}: {what}"));
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let k = allowed
            .iter()
            .position(|(n, _, _)| *n == name)
            .ok_or_else(|| bad("unknown query parameter".into()))?;
        let (_, lo, hi) = allowed[k];
        let v: u64 = value.parse().map_err(|_| bad("not a number".into()))?;
        if !(lo..=hi).contains(&v) {
            return Err(bad(format!("{name} is {lo} to {hi}")));
        }
        values[k] = Some(v);
    }
    Ok(values)
}

async fn get_transfer(
    State(state): State<Arc<AppState>>,
    Path(bmi_text): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    let (bmi, status) = status_of(&state, &bmi_text, request).await?;
    Ok(Json(status_json(bmi, &status)).into_response())
}

/// A transfer's status for its own participant, after the long-poll of `?wait_s=N` if asked.
/// The `bmi` is the participant's text, looked up under its scoped key: another participant's
/// entries are not in that namespace, so a `bmi` another participant used is answered exactly
/// like one nobody used (404 `unknown_transfer`).
async fn status_of(state: &AppState, bmi_text: &str, request: Request) -> Result<(Bmi, Status), ApiError> {
    let uri = request.uri().clone();
    let (participant, _) = authenticated(&state.keyring, request).await?;
    // `?wait_s=N`: a long-poll — the answer comes as soon as the transfer is final (ACCC or
    // RJCT), or after N seconds with its status then (ACSP).
    let [wait_s] = numeric_query(&uri, [("wait_s", 0, LONG_POLL_S_MAX)])?;
    let text = parse_bmi(bmi_text)?;
    let bmi = participant.scope.key(text);
    let unknown = || ApiError::new(StatusCode::NOT_FOUND, "unknown_transfer", format!("no transfer {text}"));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(wait_s.unwrap_or(0));
    loop {
        let changed = state.tracker.changed();
        let (status, tracked) = entry_status(state, bmi, &participant.key_id).await?.ok_or_else(unknown)?;
        // A scoped key is only ever tracked for its participant; anything else is not this
        // participant's and is answered as unknown (never "someone else's").
        if status.owner != participant.key_id {
            return Err(unknown());
        }
        let status = with_outcome(state, status).await;
        if status.outcome.is_some() || tokio::time::Instant::now() >= deadline {
            return Ok((bmi, status));
        }
        // Woken by the next notices (then checked again) — or, for an entry this API did not
        // submit (no notice comes for it here), by the read model's pace —, the deadline, or the
        // server draining (answered with the status now, as at the deadline).
        let mut draining = state.draining.subscribe();
        let poll = tokio::time::sleep_until(deadline.min(tokio::time::Instant::now() + READ_MODEL_POLL));
        tokio::select! {
            _ = tokio::time::timeout_at(deadline, changed), if tracked => {}
            () = poll, if !tracked => {}
            _ = draining.wait_for(|d| *d) => return Ok((bmi, status)),
        }
    }
}

/// What is known of the entry under (scoped) `bmi`, and whether this API tracks it: the
/// tracker's record, else — where the engine keeps every `bmi` it ever sequenced
/// ([`ReadModel::sequenced`], the production engine) — its seq from there, as `owner`'s (a
/// scoped key is only ever its participant's). A transfer submitted through another center, or
/// before this node started, or one the tracker forgot, is then answered, not called unknown.
/// The index not answering is 503 `read_model_behind` (try again), never a wrong "unknown".
pub(crate) async fn entry_status(
    state: &AppState,
    bmi: Bmi,
    owner: &Arc<str>,
) -> Result<Option<(Status, bool)>, ApiError> {
    if let Some(status) = state.tracker.status(bmi) {
        return Ok(Some((status, true)));
    }
    match state.read_model.sequenced(bmi).await {
        None | Some(Ok(None)) => Ok(None),
        Some(Ok(Some(seq))) => {
            Ok(Some((Status { owner: Arc::clone(owner), seq: Some(seq), outcome: None }, false)))
        }
        Some(Err(e)) => {
            let message = format!("the engine's index of transfers could not be read ({e}); try again");
            Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "read_model_behind", message))
        }
    }
}

/// `status` with its final outcome filled in when the tracker knows only its seq (a retry the
/// engine recognised, whose final notice went out long ago or before a restart): read from the
/// read model, or — for an entry final before it started — the engine's stored history.
pub(crate) async fn with_outcome(state: &AppState, mut status: Status) -> Status {
    if let (None, Some(seq)) = (status.outcome, status.seq) {
        // Known final here (at or below the read model's target): let the model apply it first
        // (read-your-writes; ≤ READ_MODEL_WAIT, then answered with what is known).
        if seq <= state.read_model.seq_target() {
            let _ = read_model_caught_up(&state.read_model).await;
        }
        status.outcome = state.read_model.outcome(seq).await;
    }
    status
}

/// ISO 20022 in: a pacs.008 with its head.001 header (see [`crate::iso20022`]); its
/// `BizMsgIdr` is the `bmi`. The same checks as the JSON endpoint, in the same order; the answer
/// is a pacs.002 (ACSP, with the seq as clearing-system reference once known).
async fn post_pacs008(State(state): State<Arc<AppState>>, request: Request) -> Result<Response, ApiError> {
    let (participant, body) = authenticated(&state.keyring, request).await?;
    let message =
        iso20022::parse_pacs008(&body).map_err(|e| ApiError::bad_request(e.code(), e.to_string()))?;
    let account = |text: &str, role: &str| {
        text.parse::<u64>().map_err(|_| {
            ApiError::bad_request(
                "invalid_account_id",
                format!("{role} account {text:?} is not an account number"),
            )
        })
    };
    let request = TransferRequest {
        bmi: message.bmi.clone(),
        debtor: account(&message.debtor_account, "debtor")?,
        creditor: account(&message.creditor_account, "creditor")?,
        amount: message.amount.clone(),
        currency: message.currency.clone(),
    };
    let (bmi, transfer) = checked(&state, participant, &request).await?;
    let seq = submit(&state, bmi, &participant.key_id, Payload::Transfer(transfer)).await?;
    Ok(xml(
        StatusCode::ACCEPTED,
        iso20022::pacs002(&participant.key_id, crate::scope::shown(&bmi), "ACSP", None, seq, now_s()),
    ))
}

/// ISO 20022 out: a transfer's status as a pacs.002 (`?wait_s=N` long-polls like the JSON one).
async fn get_pacs002(
    State(state): State<Arc<AppState>>,
    Path(bmi_text): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    let (bmi, status) = status_of(&state, &bmi_text, request).await?;
    let (code, reason) = iso_status(&status);
    let text = crate::scope::shown(&bmi);
    Ok(xml(StatusCode::OK, iso20022::pacs002(&status.owner, text, code, reason, status.seq, now_s())))
}

fn xml(status: StatusCode, body: String) -> Response {
    (status, [(axum::http::header::CONTENT_TYPE, "application/xml")], body).into_response()
}

/// ACSP until final, then ACCC or RJCT with the ISO reason.
fn iso_status(status: &Status) -> (&'static str, Option<&'static str>) {
    match status.outcome {
        None => ("ACSP", None),
        Some(Outcome::Accepted) => ("ACCC", None),
        Some(Outcome::Rejected(r)) => ("RJCT", Some(r.iso_code())),
    }
}

/// A tracked entry's status: ACSP until final, then ACCC or RJCT with the ISO reason.
pub(crate) fn status_json(bmi: Bmi, status: &Status) -> serde_json::Value {
    let (code, reason) = iso_status(status);
    serde_json::json!({ "bmi": crate::scope::shown(&bmi), "seq": status.seq, "status": code, "reason": reason })
}

/// The 202 answer of every accepted write (the same for a retry), naming the `bmi` as its
/// writer wrote it.
pub(crate) fn accepted(bmi: Bmi, seq: Option<Seq>) -> Response {
    let answer = serde_json::json!({ "bmi": crate::scope::shown(&bmi), "seq": seq, "status": "ACSP" });
    (StatusCode::ACCEPTED, Json(answer)).into_response()
}

/// The account of a read path, which must be one of the participant's (403 otherwise).
fn owned_account(participant: &Participant, id_text: &str) -> Result<AccountId, ApiError> {
    let id = parse_account_id(id_text)?;
    if !participant.owns(id) {
        let message = format!("account {} is not one of this participant's accounts", id.0);
        return Err(ApiError::new(StatusCode::FORBIDDEN, "account_not_owned", message));
    }
    Ok(id)
}

async fn get_account(
    State(state): State<Arc<AppState>>,
    Path(id_text): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    let (participant, _) = authenticated(&state.keyring, request).await?;
    let id = owned_account(participant, &id_text)?;
    Ok(Json(account_answer(&state, id).await?).into_response())
}

/// An account's balance as of everything already final (participants: their own; operators: any).
pub(crate) async fn account_answer(state: &AppState, id: AccountId) -> Result<serde_json::Value, ApiError> {
    let (account, seq_applied) = visible_account(&state.read_model, id).await?;
    let currency = account.currency.as_str();
    let exponent = money::exponent(currency).unwrap_or(0);
    Ok(serde_json::json!({
        "account": id.0,
        "currency": currency,
        "balance": money::format_minor(account.balance_minor, exponent),
        "balance_minor": account.balance_minor,
        "held": money::format_minor(account.held_minor, exponent),
        "held_minor": account.held_minor,
        "closed": account.closed,
        "as_of_seq": seq_applied,
    }))
}

/// An account's statement: the entries that moved it, oldest first, from `from_seq`, as of
/// everything already final; at most `limit` lines (more only when one entry's lines exceed it:
/// a page never ends inside one seq), and `next_from_seq` — present exactly when more lines
/// follow — is the `from_seq` of the next page.
async fn get_statement(
    State(state): State<Arc<AppState>>,
    Path(id_text): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    let uri = request.uri().clone();
    let (participant, _) = authenticated(&state.keyring, request).await?;
    let (from_seq, limit) = statement_query(&uri)?;
    let id = owned_account(participant, &id_text)?;
    Ok(Json(statement_answer(&state, id, from_seq, limit).await?).into_response())
}

/// A statement's `?from_seq=&limit=`.
pub(crate) fn statement_query(uri: &Uri) -> Result<(u64, usize), ApiError> {
    let [from_seq, limit] =
        numeric_query(uri, [("from_seq", 0, u64::MAX), ("limit", 1, STATEMENT_PAGE_MAX as u64)])?;
    Ok((from_seq.unwrap_or(0), limit.map_or(STATEMENT_PAGE_DEFAULT, |l| l as usize)))
}

/// An account's statement page (participants: their own; operators: any).
pub(crate) async fn statement_answer(
    state: &AppState,
    id: AccountId,
    from_seq: u64,
    limit: usize,
) -> Result<serde_json::Value, ApiError> {
    // An unknown account is concluded as `visible_account` does.
    let read = || {
        let (page, as_of_seq) = state.read_model.statement(id, from_seq, limit)?;
        Ok(page.map(|page| (page, as_of_seq)))
    };
    let found = found_or_conclusive(&state.read_model, read).await?;
    let unknown = || ApiError::new(StatusCode::NOT_FOUND, "unknown_account", format!("no account {}", id.0));
    let ((account, mut page), as_of_seq) = found.ok_or_else(unknown)?;
    // The whole history, where the engine keeps it (the production engine's database).
    if let Some(stored) = state.read_model.stored_page(id, from_seq, as_of_seq, limit).await {
        page = stored.map_err(|e| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "read_model_failed", e))?;
    }
    let currency = account.currency.as_str();
    let exponent = money::exponent(currency).unwrap_or(0);
    let (truncated, next_from_seq) = (page.truncated, page.next_from_seq);
    let lines: Vec<serde_json::Value> = page
        .lines
        .iter()
        .map(|l| {
            serde_json::json!({
                "seq": l.seq,
                "bmi": crate::scope::shown(&l.bmi),
                "type": l.kind.name(),
                "counterparty": l.counterparty.map(|c| c.0),
                "amount": money::format_minor(l.amount_minor, exponent),
                "amount_minor": l.amount_minor,
                "balance_after": money::format_minor(l.balance_after_minor, exponent),
                "balance_after_minor": l.balance_after_minor,
            })
        })
        .collect();
    let answer = serde_json::json!({
        "account": id.0,
        "currency": currency,
        "balance": money::format_minor(account.balance_minor, exponent),
        "balance_minor": account.balance_minor,
        "held": money::format_minor(account.held_minor, exponent),
        "held_minor": account.held_minor,
        "as_of_seq": as_of_seq,
        "truncated": truncated,
        "lines": lines,
        "next_from_seq": next_from_seq,
    });
    Ok(answer)
}
