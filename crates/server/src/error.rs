//! Errors as the API answers them: an HTTP status and `{"error": {"code", "message", "field"}}`
//! with a `code` that never changes once published, so clients can branch on it.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// The stable error codes.
pub mod code {
    pub const UNAUTHORIZED: &str = "unauthorized";
    pub const BODY_TOO_LARGE: &str = "body_too_large";
    pub const BODY_TIMEOUT: &str = "body_timeout";
    pub const MALFORMED_JSON: &str = "malformed_json";
    pub const UNKNOWN_FIELD: &str = "unknown_field";
    pub const MISSING_FIELD: &str = "missing_field";
    pub const INVALID_FIELD: &str = "invalid_field";
    pub const OUT_OF_RANGE: &str = "out_of_range";
    pub const ACCESS_IN_REQUEST: &str = "access_in_request";
    pub const INVALID_KEYWORDS: &str = "invalid_keywords";
    pub const INVALID_QUESTION: &str = "invalid_question";
    pub const INVALID_RUN_ID: &str = "invalid_run_id";
    pub const NOT_FOUND: &str = "not_found";
    pub const ACCESS_MISMATCH: &str = "access_mismatch";
    pub const INTEGRITY_FAILURE: &str = "integrity_failure";
    pub const NOT_READY: &str = "not_ready";
    pub const HOST_NOT_ALLOWED: &str = "host_not_allowed";
    pub const SETUP_ERROR: &str = "setup_error";
    pub const INTERNAL: &str = "internal";
}

/// One error answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    /// The request field at fault, as a JSON path (`topK`, `keywords[2]`).
    pub field: Option<String>,
}

/// An error answer: `{"error": {"code", "message", "field"}}`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    error: ErrorDetail,
}

/// One error; `code` never changes once published.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ErrorDetail {
    /// A stable code: unauthorized, body_too_large, body_timeout, malformed_json,
    /// unknown_field, missing_field, invalid_field, out_of_range, access_in_request,
    /// invalid_keywords, invalid_question, invalid_run_id, not_found, access_mismatch,
    /// integrity_failure, not_ready, host_not_allowed, setup_error, internal.
    #[schema(value_type = String)]
    code: &'static str,
    message: String,
    /// The request field at fault, as a JSON path (`topK`, `keywords[2]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<String>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            field: None,
        }
    }

    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    pub fn with_field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    pub fn not_found(what: &str) -> Self {
        Self::new(StatusCode::NOT_FOUND, code::NOT_FOUND, format!("no {what}"))
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, code::UNAUTHORIZED, message)
    }

    /// A run the server's setup stopped (an index embedded with another model, an embeddings
    /// or chat server that does not answer, a missing model): 503 with the cause, which the
    /// run's trace records too, so the caller may read it there anyway (a search: the cause).
    pub fn setup(message: String) -> Self {
        tracing::error!("the setup failed: {message}");
        Self::new(StatusCode::SERVICE_UNAVAILABLE, code::SETUP_ERROR, message)
    }

    /// A failure on our side: logged in full, answered without internals.
    pub fn internal(err: impl std::fmt::Display) -> Self {
        tracing::error!("request failed: {err}");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            code::INTERNAL,
            "the server failed to handle the request; its log says why",
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code,
                message: self.message,
                field: self.field,
            },
        };
        let mut response = (self.status, axum::Json(body)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer"),
            );
        }
        response
    }
}
