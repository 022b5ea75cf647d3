//! `GET /api/cluster/library/blobs/{sha256}`: another replica of this
//! cluster (holding its relay secret) fetches a blob this replica's library
//! holds, to stage a model that was imported here (see
//! [`switchyard_library::Library::fetch_from_peers`]). Answers only from the
//! local library: a replica never asks a third one on another's behalf.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, header};
use axum::response::Response;

use crate::auth::require_replica;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use switchyard_library::valid_digest;

/// A blob's bytes, for another replica.
#[utoipa::path(get, path = "/api/cluster/library/blobs/{sha256}", tag = "cluster",
    params(("sha256" = String, Path, description = "lowercase hex")),
    responses(
        (status = 200, description = "the blob's bytes", content_type = "application/octet-stream"),
        (status = 401, description = "`unauthorized`: only replicas of this cluster (the relay secret) may ask"),
        (status = 404, description = "`not_found`: this replica's library lacks the blob"),
    ))]
pub async fn blob(
    State(state): State<Arc<AppState>>,
    Path(sha256): Path<String>,
    connection: crate::edge::ThisConnection,
    headers: HeaderMap,
) -> ApiResult<Response> {
    require_replica(
        &state.store,
        &headers,
        "library blobs are served to replicas of this cluster",
    )
    .await?;
    connection.prove();
    if !valid_digest(&sha256) {
        return Err(ApiError::invalid_request(
            "a blob is named by its SHA-256 in lowercase hex",
        ));
    }
    let (size, bytes) = state
        .library
        .read(&sha256)
        .await
        .ok_or_else(|| ApiError::not_found(format!("blob {sha256}")))?;
    Response::builder()
        .header(header::CONTENT_TYPE, "application/octet-stream")
        .header(header::CONTENT_LENGTH, size)
        .body(Body::from_stream(bytes))
        .map_err(ApiError::internal)
}
