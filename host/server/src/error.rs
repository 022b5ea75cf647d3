//! One mapping from errors to HTTP status and a stable code; bodies are
//! `{"error":{"code":..., "message":...}}` and never carry a secret.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use switchyard_runtime::LoadError;
use switchyard_store::StoreError;

mod federated;
pub use federated::{FedError, FedResult, federation};

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
        Self::internal_response()
    }

    /// 500 `internal` for an error whose causes matter: the log gets the
    /// whole chain (a driver's "db error" alone says nothing).
    pub fn internal_error(error: &(dyn std::error::Error + 'static)) -> Self {
        tracing::error!(error = %chain(error), "internal error");
        Self::internal_response()
    }

    fn internal_response() -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            switchyard_protocol::openai::INTERNAL_MESSAGE,
        )
    }
}

/// An error and its sources, `outer: inner: ...`, each said once (a
/// wrapper that prints its source already is not repeated).
pub fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let said = cause.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        source = cause.source();
    }
    text
}

/// SQLSTATEs a client's input can cause, and what the client is told. The
/// schema's constraints are the last line behind the API's own checks: a
/// request that slips past those is still the client's fault, never a 500.
/// (PostgreSQL's own classes: 23 integrity, 22 data.)
fn client_fault(sqlstate: &str) -> Option<(StatusCode, &'static str, &'static str)> {
    Some(match sqlstate {
        // unique_violation
        "23505" => (
            StatusCode::CONFLICT,
            "conflict",
            "a record with the same key exists already",
        ),
        // foreign_key_violation: still in use, or names something missing.
        "23503" => (
            StatusCode::CONFLICT,
            "conflict",
            "the record is still in use, or refers to one that does not exist",
        ),
        // check_violation, not_null_violation
        "23514" | "23502" => (
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "a value is outside what is allowed",
        ),
        // untranslatable_character, character_not_in_repertoire (a NUL)
        "22P05" | "22021" => (
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "text may not contain NUL characters or invalid Unicode",
        ),
        // numeric_value_out_of_range
        "22003" => (
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "a number is out of range",
        ),
        // string_data_right_truncation
        "22001" => (
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "a value is too long",
        ),
        _ => return None,
    })
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
            other => match other.sqlstate().and_then(client_fault) {
                Some((status, code, message)) => {
                    tracing::info!(error = %chain(&other), "the database refused a request");
                    let message = match other.constraint() {
                        Some(constraint) => format!("{message} (constraint `{constraint}`)"),
                        None => message.to_string(),
                    };
                    Self::new(status, code, message)
                }
                None => Self::internal_error(&other),
            },
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
            LoadError::UnsupportedWorld { .. } | LoadError::WorldMismatch { .. } => {
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

/// A blob upload's failure (a fetch's has its own mapping: there the bytes
/// come from the source, not the client).
impl From<switchyard_library::LibraryError> for ApiError {
    fn from(e: switchyard_library::LibraryError) -> Self {
        use switchyard_library::LibraryError;
        let message = e.to_string();
        let (status, code) = match e {
            LibraryError::DigestMismatch { .. } => {
                (StatusCode::UNPROCESSABLE_ENTITY, "digest_mismatch")
            }
            LibraryError::Upload(_) => (StatusCode::BAD_REQUEST, "invalid_request"),
            LibraryError::TooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "too_large"),
            LibraryError::Io(e) => return Self::internal(e),
        };
        Self::new(status, code, message)
    }
}

/// A blob no replica could provide now: the client may try again.
impl From<switchyard_library::PeerFetchError> for ApiError {
    fn from(e: switchyard_library::PeerFetchError) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "blob_unavailable",
            e.to_string(),
        )
    }
}

impl From<switchyard_library::fetch::FetchError> for ApiError {
    fn from(e: switchyard_library::fetch::FetchError) -> Self {
        use switchyard_library::LibraryError;
        use switchyard_library::fetch::FetchError;
        let message = e.to_string();
        let (status, code) = match e {
            FetchError::InvalidUrl(_) => (StatusCode::BAD_REQUEST, "invalid_url"),
            FetchError::NotAllowed { .. } => (StatusCode::BAD_REQUEST, "address_not_allowed"),
            FetchError::Unreachable { .. } => (StatusCode::BAD_GATEWAY, "source_unreachable"),
            FetchError::Status { .. } => (StatusCode::BAD_GATEWAY, "source_status"),
            FetchError::Interrupted { .. } | FetchError::Library(LibraryError::Upload(_)) => {
                (StatusCode::BAD_GATEWAY, "source_interrupted")
            }
            FetchError::Timeout { .. } => (StatusCode::GATEWAY_TIMEOUT, "source_timeout"),
            FetchError::TooLarge { .. } | FetchError::Library(LibraryError::TooLarge { .. }) => {
                (StatusCode::UNPROCESSABLE_ENTITY, "too_large")
            }
            FetchError::Library(LibraryError::DigestMismatch { .. }) => {
                (StatusCode::UNPROCESSABLE_ENTITY, "digest_mismatch")
            }
            FetchError::Library(LibraryError::Io(e)) => return Self::internal(e),
        };
        Self::new(status, code, message)
    }
}

impl From<switchyard_protocol::valid::ValidError> for ApiError {
    fn from(e: switchyard_protocol::valid::ValidError) -> Self {
        Self::invalid_request(e.to_string())
    }
}

impl From<switchyard_batches::BatchesError> for ApiError {
    fn from(e: switchyard_batches::BatchesError) -> Self {
        use switchyard_batches::BatchesError;
        let message = e.to_string();
        let (status, code) = match e {
            BatchesError::Invalid { code, .. } => (StatusCode::BAD_REQUEST, code),
            BatchesError::FileNotFound(_) => (StatusCode::NOT_FOUND, "file_not_found"),
            BatchesError::BatchNotFound(_) => (StatusCode::NOT_FOUND, "batch_not_found"),
            BatchesError::NotCancellable(_) => (StatusCode::CONFLICT, "batch_not_cancellable"),
            BatchesError::FileTooLarge => (StatusCode::PAYLOAD_TOO_LARGE, "file_too_large"),
            BatchesError::QuotaExceeded { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "quota_exceeded"),
            BatchesError::Store(e) => return e.into(),
            BatchesError::Internal(detail) => return Self::internal(detail),
        };
        Self::new(status, code, message)
    }
}

impl From<crate::auth::MissingScope> for ApiError {
    fn from(e: crate::auth::MissingScope) -> Self {
        crate::auth::AuthError::from(e).into()
    }
}

impl From<crate::auth::AuthError> for ApiError {
    fn from(e: crate::auth::AuthError) -> Self {
        use crate::auth::AuthError;
        let message = e.to_string();
        let (status, code) = match e {
            AuthError::MissingKey
            | AuthError::UnknownKey
            | AuthError::NodeUnauthorized
            | AuthError::NotAReplica(_) => (StatusCode::UNAUTHORIZED, "unauthorized"),
            AuthError::MissingScope(_) => (StatusCode::FORBIDDEN, "forbidden"),
            AuthError::Lookup(e) => return e.into(),
            // As before this type: a failed node lookup is a 500, its cause logged.
            AuthError::NodeLookup(e) => return Self::internal_error(&e),
        };
        Self::new(status, code, message)
    }
}

impl From<switchyard_binding::signing::SignatureRefusal> for ApiError {
    fn from(refusal: switchyard_binding::signing::SignatureRefusal) -> Self {
        use switchyard_binding::signing::SignatureRefusal;
        let status = match refusal {
            SignatureRefusal::Malformed(_) => StatusCode::BAD_REQUEST,
            _ => StatusCode::UNPROCESSABLE_ENTITY,
        };
        ApiError::new(status, refusal.code(), refusal.to_string())
    }
}

impl From<switchyard_binding::signing::SigningError> for ApiError {
    fn from(e: switchyard_binding::signing::SigningError) -> Self {
        use switchyard_binding::signing::SigningError;
        match e {
            SigningError::Refused(refusal) => refusal.into(),
            SigningError::Store(e) => e.into(),
        }
    }
}

impl From<switchyard_binding::bound::BindError> for ApiError {
    fn from(e: switchyard_binding::bound::BindError) -> Self {
        use switchyard_binding::bound::BindError;
        let message = e.to_string();
        let (status, code) = match e {
            BindError::PluginNotFound { .. } => (StatusCode::NOT_FOUND, "plugin_not_found"),
            BindError::WrongKind { .. } => (StatusCode::UNPROCESSABLE_ENTITY, "wrong_kind"),
            BindError::NotOlder { .. } => (StatusCode::BAD_REQUEST, "invalid_request"),
            BindError::UnknownGeneration { .. } => (StatusCode::NOT_FOUND, "not_found"),
            // The load error's own status and code, with the plugin named.
            BindError::Load { source, .. } => {
                return Self {
                    message,
                    ..source.into()
                };
            }
            BindError::Signature(e) => return e.into(),
            BindError::Store(e) => return e.into(),
            BindError::Task(_) => return Self::internal(message),
        };
        Self::new(status, code, message)
    }
}

impl From<switchyard_binding::admission::AdmissionError> for ApiError {
    fn from(e: switchyard_binding::admission::AdmissionError) -> Self {
        use switchyard_binding::admission::AdmissionError;
        let message = e.to_string();
        let (status, code) = match e {
            AdmissionError::UnknownPoint(_) => (StatusCode::NOT_FOUND, "unknown_point"),
            AdmissionError::PointNotSupported { .. } => {
                (StatusCode::UNPROCESSABLE_ENTITY, "point_not_supported")
            }
            AdmissionError::NoGeneration(_) | AdmissionError::EmptyChainActive(_) => {
                (StatusCode::CONFLICT, "nothing_to_rollback")
            }
            AdmissionError::Bind(e) => return e.into(),
        };
        Self::new(status, code, message)
    }
}

impl From<switchyard_binding::grant_evaluator::EvaluatorError> for ApiError {
    fn from(e: switchyard_binding::grant_evaluator::EvaluatorError) -> Self {
        use switchyard_binding::grant_evaluator::EvaluatorError;
        let message = e.to_string();
        let (status, code) = match e {
            EvaluatorError::NoShipped => (StatusCode::CONFLICT, "no_evaluator"),
            EvaluatorError::NothingToRollback(_) => (StatusCode::CONFLICT, "nothing_to_rollback"),
            EvaluatorError::Bind(e) => return e.into(),
        };
        Self::new(status, code, message)
    }
}

/// A domain error answered as the [`ApiError`] it maps to, for handlers
/// that return a `Response`.
macro_rules! respond_as_api_error {
    ($($error:ty),*) => {$(
        impl IntoResponse for $error {
            fn into_response(self) -> Response {
                ApiError::from(self).into_response()
            }
        }
    )*};
}

respond_as_api_error!(crate::auth::AuthError);

/// Handlers' result type.
pub type ApiResult<T> = Result<T, ApiError>;

#[cfg(test)]
mod tests;
