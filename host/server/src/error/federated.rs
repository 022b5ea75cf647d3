//! A federation route's error: the API's own refusal, or federation's
//! (whose status and code may come from the peer), both answered as the
//! API's usual `{"error":{"code","message"}}`.

use std::sync::Arc;

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use switchyard_federation::{Federation, FederationError};

use super::ApiError;
use crate::state::AppState;

/// What a federation route answers when it does not go ahead: the API's
/// usual `{"error":{"code","message"}}`, with federation's codes (some
/// come from the peer).
#[derive(Debug)]
pub enum FedError {
    /// This server's own refusal.
    Api(ApiError),
    /// Federation's.
    Fed(FederationError),
}

impl From<ApiError> for FedError {
    fn from(e: ApiError) -> Self {
        Self::Api(e)
    }
}

impl From<FederationError> for FedError {
    fn from(e: FederationError) -> Self {
        Self::Fed(e)
    }
}

impl From<switchyard_batches::BatchesError> for FedError {
    fn from(e: switchyard_batches::BatchesError) -> Self {
        Self::Api(e.into())
    }
}

impl From<crate::auth::MissingScope> for FedError {
    fn from(e: crate::auth::MissingScope) -> Self {
        crate::auth::AuthError::from(e).into()
    }
}

impl From<crate::auth::AuthError> for FedError {
    fn from(e: crate::auth::AuthError) -> Self {
        Self::Api(e.into())
    }
}

impl IntoResponse for FedError {
    fn into_response(self) -> Response {
        match self {
            Self::Api(e) => e.into_response(),
            Self::Fed(e) => {
                let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_GATEWAY);
                let body = serde_json::json!({"error": {"code": e.code, "message": e.message}});
                (status, Json(body)).into_response()
            }
        }
    }
}

/// A federation route's result.
pub type FedResult<T> = Result<T, FedError>;

/// This replica's federation, or 503 (a router without a database).
pub fn federation(state: &AppState) -> FedResult<&Arc<Federation>> {
    state.federation.as_ref().ok_or_else(|| {
        FedError::Api(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "federation_unavailable",
            "this replica runs no federation",
        ))
    })
}
