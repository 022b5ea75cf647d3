//! Copying peers' models into this cluster's library: a granted
//! revision's manifest, and copy records (start or resume, list, show,
//! pause, resume, delete). Every route needs `models:manage`; the peer's
//! `models:transfer` grant is checked by the peer.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use switchyard_protocol::copies::{CopyRecord, ModelManifest, NewCopy};

use crate::auth::{Authorized, ModelsManage};
use crate::error::{FedResult, federation};
use crate::extract::{ApiJson, ApiPath};
use crate::state::AppState;
use switchyard_protocol::lists::Copies;

/// The manifest of a revision a peer granted this cluster: its licence,
/// files, sizes and SHA-256 digests (never an upstream URL).
#[utoipa::path(get, path = "/api/federation/peers/{peer}/models/{model}/{revision}", tag = "federation",
    security(("bearer" = [])),
    params(("peer" = String, Path, description = "the owner's id or label"),
           ("model" = String, Path, description = "the model"),
           ("revision" = String, Path, description = "the revision")),
    responses(
        (status = 200, body = ModelManifest),
        (status = 403, description = "`forbidden`: the key lacks `models:manage`; `no_grant`: no active `models:transfer` grant from the peer lists the revision; the owner's `grant_revoked`, `grant_expired`, `model_not_granted`"),
        (status = 404, description = "`not_found`: no such peer; `model_not_offered`: the owner offers no such revision"),
        (status = 503, description = "`NODE_UNAVAILABLE`: the link is down"),
    ))]
pub async fn manifest(
    _caller: Authorized<ModelsManage>,
    State(state): State<Arc<AppState>>,
    ApiPath((peer, model, revision)): ApiPath<(String, String, String)>,
) -> FedResult<Json<ModelManifest>> {
    let manifest = federation(&state)?
        .inspect_model(&peer, &model, &revision)
        .await?;
    Ok(Json(manifest))
}

/// Copies a revision a peer granted into the library, or resumes the copy
/// of it not yet complete. The copy runs in the background: poll it.
#[utoipa::path(post, path = "/api/federation/copies", tag = "federation",
    security(("bearer" = [])),
    request_body = NewCopy,
    responses(
        (status = 202, description = "a new copy, running; `Location` names it", body = CopyRecord),
        (status = 200, description = "the copy not yet complete, resumed; or the revision is in the library already (`complete`)", body = CopyRecord),
        (status = 400, description = "`invalid_request`"),
        (status = 403, description = "`forbidden`; `no_grant`; a `transfer` policy's denial code (the copy is `stopped` with it)"),
        (status = 404, description = "`not_found`: no such peer; the owner's `model_not_offered`"),
        (status = 409, description = "`limit_reached`: 256 copies are kept"),
        (status = 503, description = "`NODE_UNAVAILABLE`: the link is down"),
        (status = 507, description = "`insufficient_storage`: the library's disk lacks the bytes still to come beside its reserve"),
    ))]
pub async fn start(
    caller: Authorized<ModelsManage>,
    State(state): State<Arc<AppState>>,
    ApiJson(new): ApiJson<NewCopy>,
) -> FedResult<Response> {
    let started = federation(&state)?.start_copy(new, &caller.key_id).await?;
    let record = started.record;
    tracing::info!(copy = %record.id, peer = %record.peer, model = %record.model,
        revision = %record.revision, state = %record.state, by = %caller.key_id, "model copy started");
    if !started.created {
        return Ok((StatusCode::OK, Json(record)).into_response());
    }
    let location = HeaderValue::from_str(&format!("/api/federation/copies/{}", record.id))
        .unwrap_or_else(|_| HeaderValue::from_static("/api/federation/copies"));
    Ok((
        StatusCode::ACCEPTED,
        [(header::LOCATION, location)],
        Json(record),
    )
        .into_response())
}

/// Every copy, oldest first.
#[utoipa::path(get, path = "/api/federation/copies", tag = "federation",
    security(("bearer" = [])),
    responses(
        (status = 200, body = Copies, description = "Every copy, oldest first"),
        (status = 403, description = "`forbidden`: the key lacks `models:manage`"),
    ))]
pub async fn list(
    _caller: Authorized<ModelsManage>,
    State(state): State<Arc<AppState>>,
) -> FedResult<Json<Copies>> {
    let copies = federation(&state)?.copies().await?;
    Ok(Json(Copies { copies }))
}

/// One copy: its state, bytes held of total, files with their durable
/// offsets, and the current acquisition's reconnects.
#[utoipa::path(get, path = "/api/federation/copies/{id}", tag = "federation",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "the copy")),
    responses(
        (status = 200, body = CopyRecord),
        (status = 404, description = "`copy_not_found`"),
    ))]
pub async fn show(
    _caller: Authorized<ModelsManage>,
    State(state): State<Arc<AppState>>,
    ApiPath(id): ApiPath<String>,
) -> FedResult<Json<CopyRecord>> {
    Ok(Json(federation(&state)?.copy(&id).await?))
}

/// Pauses a running or waiting copy (a reconnect wait ends at once); its
/// partial bytes stay.
#[utoipa::path(post, path = "/api/federation/copies/{id}/pause", tag = "federation",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "the copy")),
    responses(
        (status = 200, description = "paused", body = CopyRecord),
        (status = 404, description = "`copy_not_found`"),
        (status = 409, description = "`copy_not_running`: it is interrupted, stopped or complete"),
    ))]
pub async fn pause(
    caller: Authorized<ModelsManage>,
    State(state): State<Arc<AppState>>,
    ApiPath(id): ApiPath<String>,
) -> FedResult<Json<CopyRecord>> {
    let record = federation(&state)?.pause_copy(&id).await?;
    tracing::info!(copy = %id, by = %caller.key_id, "model copy paused");
    Ok(Json(record))
}

/// Resumes a paused, interrupted or stopped copy from its durable offsets:
/// a new acquisition, with three automatic reconnects again.
#[utoipa::path(post, path = "/api/federation/copies/{id}/resume", tag = "federation",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "the copy")),
    responses(
        (status = 200, description = "running (or as it was, when running or complete)", body = CopyRecord),
        (status = 403, description = "a `transfer` policy's denial code (the copy is `stopped` with it)"),
        (status = 404, description = "`copy_not_found`"),
        (status = 507, description = "`insufficient_storage`"),
    ))]
pub async fn resume(
    caller: Authorized<ModelsManage>,
    State(state): State<Arc<AppState>>,
    ApiPath(id): ApiPath<String>,
) -> FedResult<Json<CopyRecord>> {
    let record = federation(&state)?.resume_copy(&id, &caller.key_id).await?;
    tracing::info!(copy = %id, by = %caller.key_id, "model copy resumed");
    Ok(Json(record))
}

/// Deletes a copy that is not running, discarding its partial bytes (files
/// it moved into the library, and a registered revision, stay).
#[utoipa::path(delete, path = "/api/federation/copies/{id}", tag = "federation",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "the copy")),
    responses(
        (status = 204, description = "deleted"),
        (status = 404, description = "`copy_not_found`"),
        (status = 409, description = "`copy_running`: pause it first"),
    ))]
pub async fn delete(
    caller: Authorized<ModelsManage>,
    State(state): State<Arc<AppState>>,
    ApiPath(id): ApiPath<String>,
) -> FedResult<StatusCode> {
    federation(&state)?.delete_copy(&id).await?;
    tracing::info!(copy = %id, by = %caller.key_id, "model copy deleted");
    Ok(StatusCode::NO_CONTENT)
}
