//! The connect endpoint a worker dials with its own credential.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use serde::Deserialize;

use crate::auth::authenticate_node;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// Which session the worker opens.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
pub struct ConnectParams {
    /// `inference` or `bulk`.
    pub lane: Option<String>,
}

/// A worker's session. Answers, in order: no token 401; unknown node 401
/// (never 404: the endpoint does not reveal which nodes exist); wrong token
/// 401; lookup failure 500; pending node 403; a frontend without a carrier
/// registry 503. The registration token is never accepted here.
#[utoipa::path(get, path = "/api/cluster/connect", tag = "cluster", params(ConnectParams),
    security(("node_credential" = [])),
    responses(
        (status = 400, description = "`invalid_request`: lane is not inference or bulk"),
        (status = 401, description = "`unauthorized`: no token, unknown node or wrong token"),
        (status = 403, description = "`node_pending`: the node waits for approval"),
        (status = 500, description = "`internal`: the node could not be looked up"),
        (status = 503, description = "`carrier_unavailable`: this frontend has no carrier registry"),
    ))]
pub async fn connect(
    State(state): State<Arc<AppState>>,
    Query(params): Query<ConnectParams>,
    headers: HeaderMap,
) -> ApiResult<StatusCode> {
    let (node_id, credential) = authenticate_node(&state, &headers).await?;
    if credential.state == "pending" {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "node_pending",
            "this node waits for an admin's approval",
        ));
    }
    let lane = params.lane.as_deref().unwrap_or("inference");
    if !["inference", "bulk"].contains(&lane) {
        return Err(ApiError::invalid_request(format!(
            "lane must be 'inference' or 'bulk', got '{lane}'"
        )));
    }
    tracing::debug!(node = %node_id, lane, "connect refused: no carrier registry");
    Err(ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "carrier_unavailable",
        "this frontend has no carrier registry; it cannot hold worker sessions",
    ))
}
