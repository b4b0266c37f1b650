//! The HTTP/1 edge: the accept loop and each connection, run on hyper's connection builder
//! directly (axum's `serve` sets no timeouts and, at shutdown, waits for every connection however
//! long its client takes), and the error contract of every answer the router gives.
//!
//! * **Timeouts** ([`crate::limits`]): a request head must be complete within
//!   [`REQUEST_HEAD_TIMEOUT`] of the connection being ready for one (hyper's header read timeout,
//!   which is also the keep-alive idle timeout); a body within [`crate::limits::BODY_READ_TIMEOUT`]
//!   (`server::read_body`, 408 `body_timeout`).
//! * **Bounded connections**: at most [`CONNECTIONS_MAX`] at once; beyond it the listener is not
//!   accepted from (back-pressure: the kernel's backlog holds the rest; see the constant).
//! * **Graceful shutdown**: no new connection is accepted; idle ones close at once; requests in
//!   flight finish (long-polls and waits for a seq answer at once: see `AppState::draining`);
//!   after [`SHUTDOWN_GRACE`] every connection still open is dropped, so a half-sent request
//!   cannot hold the process.
//! * **One error contract**: every 4xx/5xx the router gives carries `{code, message}`, the
//!   framework's own too (404, 405, path rejections) — [`contract`] rewrites any error answer not
//!   made by [`ApiError`]. Heads beyond the API's bounds are 414 `uri_too_long` / 431
//!   `headers_too_large` with the body. Bodies are read by `checks::parse_json`, not by axum's
//!   `Json` extractor: their codes are the API's (`malformed_json`, `missing_field`,
//!   `not_an_object`, ...) and the content type is not checked (the signed bytes are the request;
//!   there is no 415). Were an extractor's rejection ever to reach the edge, it would be rewritten
//!   here too, its status kept.
//!
//! **What cannot carry the body.** hyper answers a few requests itself, before any request
//! exists for the router to see: a head that is not HTTP/1 (bad method token, bytes not allowed
//! in a header or the target, a bad version, conflicting `content-length` / `transfer-encoding`)
//! gets a bare `400`, and a head larger than [`HTTP1_HEAD_BYTES_MAX`] or with more than
//! [`crate::limits::HTTP1_HEADERS_COUNT_MAX`] headers a bare `431`, each with `content-length: 0`, and the
//! connection is closed: hyper's `http1` server offers no hook to write those answers. Those
//! limits are set above the API's own ([`URI_BYTES_MAX`], [`HEADERS_BYTES_MAX`],
//! [`HEADERS_COUNT_MAX`]), so every well-formed head a client would send reaches the API and its
//! contract; hyper's own 414 cannot happen (a longer target overflows the head buffer first). A
//! head that times out is closed without an answer.

use crate::error::{ApiError, ErrorContract};
use crate::limits::{
    CONNECTIONS_MAX, HEADERS_BYTES_MAX, HEADERS_COUNT_MAX, HTTP1_HEAD_BYTES_MAX, REQUEST_HEAD_TIMEOUT,
    SHUTDOWN_GRACE, URI_BYTES_MAX,
};
use axum::body::Body;
use axum::extract::{ConnectInfo, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{watch, Semaphore};
use tower_service::Service;

/// The edge's bounds ([`Default`]: those of [`crate::limits`]; tests shorten them).
#[derive(Clone, Copy, Debug)]
pub struct EdgeLimits {
    pub connections_max: usize,
    pub request_head_timeout: Duration,
    pub shutdown_grace: Duration,
}

impl Default for EdgeLimits {
    fn default() -> Self {
        EdgeLimits {
            connections_max: CONNECTIONS_MAX,
            request_head_timeout: REQUEST_HEAD_TIMEOUT,
            shutdown_grace: SHUTDOWN_GRACE,
        }
    }
}

/// Serves `router` on `listener` until `shutdown` completes; then sets `draining` (the router's
/// waits answer at once), closes idle connections, lets requests in flight finish within the
/// grace and drops whatever is still open. Returns once every connection is gone.
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    limits: EdgeLimits,
    draining: &watch::Sender<bool>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    assert!(limits.connections_max > 0 && limits.connections_max <= Semaphore::MAX_PERMITS);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.request_head_timeout)
        // Both: the buffer bound refuses a head still incomplete beyond it, the header size bound
        // one that arrived whole in a single large read.
        .max_buf_size(HTTP1_HEAD_BYTES_MAX)
        .max_header_size(HTTP1_HEAD_BYTES_MAX)
        .keep_alive(true);
    let builder = Arc::new(builder);
    let slots = Arc::new(Semaphore::new(limits.connections_max));
    tokio::pin!(shutdown);
    loop {
        // A slot first: beyond the bound nothing is accepted (back-pressure).
        let slot = tokio::select! {
            () = &mut shutdown => break,
            slot = Arc::clone(&slots).acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => unreachable!("the slots are never closed"),
            },
        };
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // A connection that failed before it was accepted is the client's problem;
                    // anything else (out of file descriptors) passes: wait, then try again.
                    if !is_connection_error(&e) {
                        eprintln!("rtgs-api: accepting: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let (router, builder, draining) = (router.clone(), Arc::clone(&builder), draining.subscribe());
        tokio::spawn(async move {
            connection(stream, peer, router, &builder, draining, limits.shutdown_grace).await;
            drop(slot);
        });
    }
    drop(listener);
    draining.send_replace(true);
    // Every slot back: every connection task has ended.
    let all = u32::try_from(limits.connections_max).unwrap_or(u32::MAX);
    let _ = slots.acquire_many(all).await;
    Ok(())
}

fn is_connection_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    matches!(e.kind(), ConnectionRefused | ConnectionAborted | ConnectionReset)
}

/// One connection until it ends, or until `draining` and then at most `grace`.
async fn connection(
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    router: Router,
    builder: &hyper::server::conn::http1::Builder,
    mut draining: watch::Receiver<bool>,
    grace: Duration,
) {
    let service = hyper::service::service_fn(move |mut request: Request<Incoming>| {
        request.extensions_mut().insert(ConnectInfo(peer));
        // The router is always ready (axum: `poll_ready` is `Ready(Ok)`), so no `poll_ready`.
        let mut router = router.clone();
        async move { router.call(request.map(Body::new)).await }
    });
    let connection = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(connection);
    tokio::select! {
        // A connection's own errors (a reset, a head that timed out) end it; nothing to report.
        _ = connection.as_mut() => return,
        _ = draining.wait_for(|d| *d) => {}
    }
    // Closes it now if idle; otherwise after the answer in flight (no keep-alive).
    connection.as_mut().graceful_shutdown();
    let _ = tokio::time::timeout(grace, connection).await;
}

/// A path parameter, as axum's `Path` reads it (percent-decoded), its rejection in the error
/// contract: a segment that does not decode (`%ff`: not UTF-8) is 400 `invalid_path`.
pub(crate) struct Path<T>(pub T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned + Send> FromRequestParts<S> for Path<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(value)) => Ok(Path(value)),
            Err(e) if e.status() == StatusCode::BAD_REQUEST => {
                Err(ApiError::bad_request("invalid_path", e.body_text()))
            }
            Err(e) => Err(ApiError::new(e.status(), "internal_error", e.body_text())),
        }
    }
}

/// True for a loopback caller, also one seen as IPv4-mapped IPv6 (`::ffff:127.0.0.1`, how a
/// dual-stack listener sees an IPv4 client).
pub fn is_loopback(peer: SocketAddr) -> bool {
    peer.ip().to_canonical().is_loopback()
}

/// The error contract, around the whole router: heads beyond the API's bounds are refused
/// (414 / 431 with the body) before anything else reads them, and an error answer not made by
/// [`ApiError`] — the framework's own: 405, a path it could not decode, any rejection — is
/// rewritten to `{code, message}` with its status kept.
pub(crate) async fn contract(request: Request, next: Next) -> Response {
    if let Err(e) = head_within_bounds(&request) {
        return e.into_response();
    }
    let response = next.run(request).await;
    if response.status().as_u16() < 400 || response.extensions().get::<ErrorContract>().is_some() {
        return response;
    }
    into_contract(response).await
}

fn head_within_bounds(request: &Request) -> Result<(), ApiError> {
    let target = request.uri().path_and_query().map_or(0, |p| p.as_str().len());
    if target > URI_BYTES_MAX {
        let message = format!("the request target is {target} bytes; at most {URI_BYTES_MAX}");
        return Err(ApiError::new(StatusCode::URI_TOO_LONG, "uri_too_long", message));
    }
    let headers = request.headers();
    let bytes: usize = headers.iter().map(|(n, v)| n.as_str().len() + v.len()).sum();
    if headers.len() > HEADERS_COUNT_MAX || bytes > HEADERS_BYTES_MAX {
        let message = format!(
            "{} headers of {bytes} bytes; at most {HEADERS_COUNT_MAX} headers of {HEADERS_BYTES_MAX} bytes",
            headers.len()
        );
        return Err(ApiError::new(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, "headers_too_large", message));
    }
    Ok(())
}

/// The code of a framework error answer, by its status.
fn framework_code(status: StatusCode) -> &'static str {
    match status {
        StatusCode::NOT_FOUND => "not_found",
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::PAYLOAD_TOO_LARGE => "body_too_large",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        s if s.is_server_error() => "internal_error",
        _ => "bad_request",
    }
}

/// Framework text kept as the message (its answers are one line).
const FRAMEWORK_TEXT_BYTES_MAX: usize = 1_024;

async fn into_contract(response: Response) -> Response {
    let (parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, FRAMEWORK_TEXT_BYTES_MAX).await.unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let message = match (text.trim(), parts.status.canonical_reason()) {
        ("", Some(reason)) => reason.to_lowercase(),
        ("", None) => parts.status.to_string(),
        (text, _) => text.to_string(),
    };
    let mut answer = ApiError::new(parts.status, framework_code(parts.status), message).into_response();
    // 405 names the methods allowed.
    if let Some(allow) = parts.headers.get(header::ALLOW) {
        answer.headers_mut().insert(header::ALLOW, allow.clone());
    }
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_includes_ipv4_mapped_and_nothing_else() {
        for a in ["127.0.0.1:1", "127.9.9.9:1", "[::1]:1", "[::ffff:127.0.0.1]:1", "[::ffff:127.1.2.3]:1"] {
            assert!(is_loopback(a.parse().unwrap_or_else(|e| panic!("{a}: {e}"))), "{a}");
        }
        for a in ["10.0.0.1:1", "[::ffff:10.0.0.1]:1", "[::2]:1", "[::127.0.0.1]:1", "0.0.0.0:1"] {
            assert!(!is_loopback(a.parse().unwrap_or_else(|e| panic!("{a}: {e}"))), "{a}");
        }
    }

    #[test]
    fn every_framework_status_gets_a_code() {
        assert_eq!(framework_code(StatusCode::METHOD_NOT_ALLOWED), "method_not_allowed");
        assert_eq!(framework_code(StatusCode::BAD_REQUEST), "bad_request");
        assert_eq!(framework_code(StatusCode::INTERNAL_SERVER_ERROR), "internal_error");
        assert_eq!(framework_code(StatusCode::IM_A_TEAPOT), "bad_request");
    }
}
