//! The operator console: one web page, served by every node under `/console` on its API port,
//! that shows the three centers and calls the same operator routes as `rtgs ops`.
//!
//! * **Static files** (`console/index.html`, `console.js`, `console.css`), compiled into the
//!   binary (`include_str!`): no toolchain, no network, works offline. They hold no data and are
//!   served without credentials.
//! * **Data**: `GET /v1/operator/console/cluster` (operator-signed) is [`crate::cluster`]'s
//!   report of every center, asked by this node of the centers' loopback `/status` listeners
//!   (the addresses given with [`crate::server::Api::set_cluster_status`]). One report is reused
//!   for [`REPORT_REUSE`], so any number of open consoles cost the node at most two rounds of
//!   asking a second. Everything else the page shows or does goes through the existing signed
//!   routes (`/v1/operator/...`, `/v1/transfers`), signed in the browser with WebCrypto HMAC
//!   exactly as [`crate::auth`] requires; the secret is imported as a non-extractable key and
//!   kept in the page's memory only.
//! * **Headers** on every console answer: a content security policy allowing scripts from this
//!   origin only (no inline script, no `eval`) and styles from this origin plus the page's one
//!   inline stylesheet, by its hash ([`page`], [`csp`]), no framing (`frame-ancestors 'none'`,
//!   `X-Frame-Options: DENY`), `nosniff`, `no-referrer`, `no-store`. [`refuse_cross_site`]
//!   refuses, on every route of the API, a request a browser marks as sent by another site
//!   (`Sec-Fetch-Site: cross-site`/`same-site`): besides the signature (which a foreign page
//!   cannot make without the secret), a forged request is refused before it is read.

use crate::error::ApiError;
use crate::server::{authenticated, AppState};
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

pub const INDEX_HTML: &str = include_str!("console/index.html");
pub const CONSOLE_JS: &str = include_str!("console/console.js");
pub const CONSOLE_CSS: &str = include_str!("console/console.css");

/// A cluster report younger than this is answered again instead of asking the nodes.
pub const REPORT_REUSE: Duration = Duration::from_millis(500);
/// A node that has not answered within this is reported down.
pub const STATUS_TIMEOUT: Duration = Duration::from_millis(400);

/// The page's link to its stylesheet, which [`page`] replaces with the stylesheet itself.
pub const STYLESHEET_LINK: &str = r#"<link rel="stylesheet" href="/console/console.css">"#;

/// The page as served: [`INDEX_HTML`] with [`CONSOLE_CSS`] inline in one `<style>` element, so
/// the first paint waits for one request, not two (a render-blocking stylesheet is a second
/// round trip to a node that may be busy). The policy admits that one element by its SHA-256
/// ([`csp`]); `console.css` is still served for anyone who links it.
pub fn page() -> &'static str {
    static PAGE: OnceLock<String> = OnceLock::new();
    PAGE.get_or_init(|| INDEX_HTML.replacen(STYLESHEET_LINK, &format!("<style>{CONSOLE_CSS}</style>"), 1))
}

/// The content security policy of every console answer: scripts from this origin only (no
/// inline script, no `eval`); styles from this origin and the page's one inline stylesheet,
/// named by its hash.
pub fn csp() -> &'static str {
    static CSP: OnceLock<String> = OnceLock::new();
    CSP.get_or_init(|| {
        use base64::Engine as _;
        use sha2::Digest as _;
        let hash = base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(CONSOLE_CSS.as_bytes()));
        format!(
            "default-src 'self'; script-src 'self'; style-src 'self' 'sha256-{hash}'; img-src 'self' data:; \
             connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
        )
    })
}

/// The last report and when it was made.
#[derive(Default)]
pub(crate) struct ReportCache {
    last: tokio::sync::Mutex<Option<(Instant, serde_json::Value)>>,
}

pub(crate) fn routes(router: Router<Arc<AppState>>) -> Router<Arc<AppState>> {
    let console = Router::new()
        .route("/console", get(index))
        .route("/console/", get(index))
        .route("/console/console.js", get(script))
        .route("/console/console.css", get(style))
        .route("/v1/operator/console/cluster", get(cluster))
        .layer(axum::middleware::map_response(secure_headers));
    router.merge(console)
}

async fn index() -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], page()).into_response()
}

async fn script() -> Response {
    ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], CONSOLE_JS).into_response()
}

async fn style() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], CONSOLE_CSS).into_response()
}

async fn secure_headers(mut response: Response) -> Response {
    let h = response.headers_mut();
    if let Ok(policy) = HeaderValue::from_str(csp()) {
        h.insert(header::CONTENT_SECURITY_POLICY, policy);
    }
    for (name, value) in [
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, "no-store"),
    ] {
        h.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// Every center's status, as [`crate::cluster::Report`] (operator credentials).
async fn cluster(State(state): State<Arc<AppState>>, request: Request) -> Result<Response, ApiError> {
    authenticated(&state.operators, request).await?;
    let Some(addrs) = state.cluster_status.get() else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "cluster_status_unavailable",
            "this node has no cluster to report (rtgs serve: one process, no /status listeners)",
        ));
    };
    let mut last = state.console.last.lock().await;
    if let Some((at, report)) = last.as_ref() {
        if at.elapsed() < REPORT_REUSE {
            return Ok(Json(report.clone()).into_response());
        }
    }
    let report = crate::cluster::ask(addrs, STATUS_TIMEOUT).await;
    let mut v = serde_json::to_value(&report)
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "report_failed", e.to_string()))?;
    v["served_by"] = format!("DC{}", state.origin.0).into();
    v["unix_ms"] = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
        .into();
    *last = Some((Instant::now(), v.clone()));
    Ok(Json(v).into_response())
}

/// Refuses a request a browser says another site sent (`Sec-Fetch-Site`; absent for clients
/// that are not browsers, which are then judged by their signature alone).
pub(crate) async fn refuse_cross_site(request: Request, next: Next) -> Response {
    let site = request.headers().get("sec-fetch-site").and_then(|v| v.to_str().ok());
    if matches!(site, Some("cross-site" | "same-site")) {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "cross_site_request",
            "requests from other sites' pages are refused",
        )
        .into_response();
    }
    next.run(request).await
}
