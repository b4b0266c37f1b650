//! Error answers: a status and a machine-readable `code`, as JSON `{"code", "message"}` — every
//! 4xx and 5xx of the API, the framework's own too (`edge::contract`).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError { status, code, message: message.into() }
    }
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }
}

/// Marks an answer made by [`ApiError`]: the edge rewrites any error answer without it (the
/// framework's own) to the same contract.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ErrorContract;

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "code": self.code, "message": self.message });
        let mut response = (self.status, Json(body)).into_response();
        response.extensions_mut().insert(ErrorContract);
        response
    }
}
