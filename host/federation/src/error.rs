//! What a federation action answers when it does not go ahead: an HTTP
//! status, a stable code and a message for the operator (never a secret).

use switchyard_store::StoreError;

/// A refused or failed federation action.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct FederationError {
    /// The HTTP status the API answers with.
    pub status: u16,
    /// A stable code.
    pub code: String,
    /// For the operator.
    pub message: String,
}

impl FederationError {
    /// An error with `status`, `code` and `message`.
    pub fn new(status: u16, code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            status,
            code: code.into(),
            message: message.into(),
        }
    }

    /// 400 `invalid_request`.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(400, "invalid_request", message)
    }

    /// 404 `not_found`.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(404, "not_found", message)
    }

    /// 409 `limit_reached`, naming the bound.
    pub fn limit(bound: switchyard_store::federation::Bounded) -> Self {
        Self::new(
            409,
            "limit_reached",
            format!(
                "the {} bound is reached ({} kept); discard, retire or forget some to make room",
                bound.name(),
                bound.max()
            ),
        )
    }

    /// 503 `NODE_UNAVAILABLE`: the peer cannot be reached now; nothing is
    /// queued.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(503, "NODE_UNAVAILABLE", message)
    }

    /// 500 `internal`, for a fault of this system (its detail is logged).
    pub fn internal(what: impl std::fmt::Display) -> Self {
        tracing::error!(error = %what, "federation failed");
        Self::new(
            500,
            "internal",
            "an internal error occurred; see the server log",
        )
    }
}

impl From<StoreError> for FederationError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Pool(_) => {
                Self::new(503, "database_unavailable", "the database is unavailable")
            }
            other => Self::internal(other),
        }
    }
}

/// A federation result.
pub type FedResult<T> = Result<T, FederationError>;
