//! One mapping from errors to HTTP status and a stable code; bodies are
//! `{"error":{"code":..., "message":...}}` and never carry a secret.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use switchyard_runtime::LoadError;
use switchyard_store::StoreError;

/// An error answered to an API client.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Stable machine-readable code.
    pub code: &'static str,
    /// What happened, for a person.
    pub message: String,
}

impl ApiError {
    /// An error with any status and code.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    /// 400 `invalid_request`.
    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }

    /// 404 `not_found`.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 500 `internal`; the detail goes to the log, not to the client.
    pub fn internal(detail: impl std::fmt::Display) -> Self {
        tracing::error!(error = %detail, "internal error");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "internal error; see the server log",
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({"error": {"code": self.code, "message": self.message}});
        (self.status, Json(body)).into_response()
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Pool(_) => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "database_unavailable",
                "the database is unavailable",
            ),
            StoreError::NotFound(what) => Self::not_found(format!("{what} not found")),
            other => Self::internal(other),
        }
    }
}

impl From<LoadError> for ApiError {
    fn from(e: LoadError) -> Self {
        let message = e.to_string();
        match e {
            LoadError::InvalidComponent(_) => {
                Self::new(StatusCode::BAD_REQUEST, "invalid_component", message)
            }
            LoadError::UnsupportedWorld { .. } => {
                Self::new(StatusCode::BAD_REQUEST, "unsupported_world", message)
            }
            LoadError::DigestMismatch { .. } => {
                Self::new(StatusCode::UNPROCESSABLE_ENTITY, "digest_mismatch", message)
            }
            LoadError::WrongKind(_) => {
                Self::new(StatusCode::UNPROCESSABLE_ENTITY, "wrong_kind", message)
            }
            LoadError::InvalidSettings(_) => Self::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_settings",
                message,
            ),
            LoadError::Instantiate(_) => {
                Self::new(StatusCode::UNPROCESSABLE_ENTITY, "plugin_failed", message)
            }
            LoadError::Compile(_) => {
                Self::new(StatusCode::UNPROCESSABLE_ENTITY, "compile_failed", message)
            }
        }
    }
}

impl From<crate::fetch::FetchError> for ApiError {
    fn from(e: crate::fetch::FetchError) -> Self {
        use crate::fetch::FetchError;
        use crate::library::LibraryError;
        let message = e.to_string();
        let (status, code) = match e {
            FetchError::InvalidUrl(_) => (StatusCode::BAD_REQUEST, "invalid_url"),
            FetchError::Unreachable { .. } => (StatusCode::BAD_GATEWAY, "source_unreachable"),
            FetchError::Status { .. } => (StatusCode::BAD_GATEWAY, "source_status"),
            FetchError::Interrupted { .. } | FetchError::Library(LibraryError::Upload(_)) => {
                (StatusCode::BAD_GATEWAY, "source_interrupted")
            }
            FetchError::Timeout { .. } => (StatusCode::GATEWAY_TIMEOUT, "source_timeout"),
            FetchError::TooLarge { .. } => (StatusCode::UNPROCESSABLE_ENTITY, "too_large"),
            FetchError::Library(LibraryError::DigestMismatch { .. }) => {
                (StatusCode::UNPROCESSABLE_ENTITY, "digest_mismatch")
            }
            FetchError::Library(LibraryError::Io(e)) => return Self::internal(e),
        };
        Self::new(status, code, message)
    }
}

/// Handlers' result type.
pub type ApiResult<T> = Result<T, ApiError>;
