//! # rtgs-api: the participant HTTP API over either engine
//!
//! # Layout
//! * [`server`] — [`server::Api`]: the axum router (`POST /v1/transfers`, `GET /v1/transfers/{bmi}`,
//!   `GET /v1/accounts/{id}`), the order of request checks, and the threads that connect it to an
//!   engine through [`server::EngineLink`] (the engine-neutral seam: `rtgs_core::client`'s
//!   `EngineSubmit`, `EntryFeed` and `ClientEvent`; this crate names no engine).
//! * `plugins` — each plugin's routes in a module of its own (`plugins/collection.rs`: the
//!   collection plugin's operator commands and two-way audit queries; `plugins/matching.rs`: the
//!   widget's orders (PII kept apart from the journal), their status and the user's decision, operators' partner settings, sessions,
//!   resolutions, escalations and dead letters).
//! * [`pii`] — the matching orders' customer PII at the origin center, apart from the journal:
//!   in memory and, opened on a file beside the journal, synced before an order is acknowledged.
//! * [`edge`] — the HTTP/1 edge: the accept loop on hyper's connection builder, header, body
//!   and idle timeouts, bounded connections, graceful shutdown, and the error contract of every
//!   answer (the framework's own too).
//! * [`json`] — JSON request bodies: a struct is read from a JSON object only, never from a
//!   positional array (serde's default).
//! * [`cluster`] — every center's `/status`, asked at once and summarized (`rtgs status` and
//!   the console).
//! * [`console`] — the operator console: a static page under `/console` (compiled in), its
//!   operator-signed cluster report, its security headers, and the cross-site refusal.
//! * [`operator`] — operator endpoints (`/v1/operator/...`): open, fund, close accounts; any
//!   entry's status. Separate credentials.
//! * [`auth`] — API key + HMAC-SHA256 request signatures, ±300 s window, constant-time compare.
//! * [`checks`] — field checks shared by the endpoints, each failure a 400 with its code.
//! * [`iso20022`] — pacs.008.001.08 in (quick-xml's `NsReader`: read as XML says or refused,
//!   fields by exact schema path and namespace), pacs.002.001.10 out with a head.001 header.
//! * [`money`] — decimal text ⇄ integer minor units, per-currency exponents (`rust_decimal` values
//!   the checked text). No floating point.
//! * [`tracker`] — per `bmi`: content, owner, seq, status; idempotent retries; bounded.
//! * [`read_model`] — a ledger replayed from the journal files for balance queries.
//! * [`scope`] — participants' `bmi`s in their own namespaces: the scoped key a participant's
//!   text is journaled under, and the text shown back.
//! * [`config`] — participants and setup accounts (JSON, validated).
//! * [`error`] — error answers: status + machine-readable `code`.
//! * [`metrics`] — Prometheus metrics (`/metrics`, loopback only), one recorder per API.
//! * [`limits`] — every bound of the API.

pub mod auth;
pub mod checks;
pub mod cluster;
pub mod config;
pub mod console;
pub mod edge;
pub mod error;
pub mod iso20022;
pub mod json;
pub mod limits;
pub mod metrics;
pub mod money;
pub mod operator;
pub mod pii;
mod plugins;
pub mod read_model;
pub mod scope;
pub mod server;
pub mod tracker;
