//! Pairing's routes: the grantee requests operations, the owner approves
//! exact resources (or shares unprompted), the grantee completes, the
//! owner revokes; either side retires what is no longer active. Approving
//! or sharing delegates resources, so it needs each operation's own scope
//! as well as `federation:manage`.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use switchyard_protocol::federation::{
    AccessRequest, GrantRecord, GrantSpec, NewAccessRequest, Revoked,
};

use crate::auth::{Authorized, FederationManage};
use crate::error::{FedResult, federation};
use crate::extract::{ApiJson, ApiPath};
use crate::state::AppState;
use switchyard_protocol::lists::{AccessRequests, Grants};

/// Asks a peer for operations; the peer's operator reviews the request.
#[utoipa::path(post, path = "/api/federation/peers/{peer}/requests", tag = "federation",
    security(("bearer" = [])),
    params(("peer" = String, Path, description = "the peer's id or label")),
    request_body = NewAccessRequest,
    responses(
        (status = 201, body = AccessRequest),
        (status = 404, description = "`not_found`: no such peer"),
        (status = 503, description = "`NODE_UNAVAILABLE`: the link is down; nothing was sent"),
    ))]
pub async fn request(
    _caller: Authorized<FederationManage>,
    State(state): State<Arc<AppState>>,
    ApiPath(peer): ApiPath<String>,
    ApiJson(request): ApiJson<NewAccessRequest>,
) -> FedResult<(StatusCode, Json<AccessRequest>)> {
    let made = federation(&state)?.request_access(&peer, request).await?;
    Ok((StatusCode::CREATED, Json(made)))
}

/// Every request, both directions.
#[utoipa::path(get, path = "/api/federation/requests", tag = "federation",
    security(("bearer" = [])),
    responses((status = 200, body = AccessRequests, description = "Every request, both directions")))]
pub async fn requests(
    _caller: Authorized<FederationManage>,
    State(state): State<Arc<AppState>>,
) -> FedResult<Json<AccessRequests>> {
    let requests = federation(&state)?.requests().await?;
    Ok(Json(AccessRequests { requests }))
}

/// Discards a request that no grant answered.
#[utoipa::path(delete, path = "/api/federation/requests/{id}", tag = "federation",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "the request")),
    responses((status = 204, description = "discarded"), (status = 404, description = "`not_found`")))]
pub async fn discard(
    _caller: Authorized<FederationManage>,
    State(state): State<Arc<AppState>>,
    ApiPath(id): ApiPath<String>,
) -> FedResult<StatusCode> {
    federation(&state)?.discard_request(&id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Approves a peer's request with exact resources: the grant is signed
/// by this cluster's key and offered to the peer.
#[utoipa::path(post, path = "/api/federation/requests/{id}/approve", tag = "federation",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "the request")),
    request_body = GrantSpec,
    responses(
        (status = 201, body = GrantRecord),
        (status = 400, description = "`invalid_request`: a resource this cluster does not offer"),
        (status = 403, description = "`forbidden`: delegating an operation needs its scope"),
        (status = 404, description = "`not_found`: no such request"),
        (status = 409, description = "`request_not_pending`; `limit_reached` (256 grants)"),
        (status = 503, description = "`NODE_UNAVAILABLE`: the peer could not be told; nothing is kept"),
    ))]
pub async fn approve(
    caller: Authorized<FederationManage>,
    State(state): State<Arc<AppState>>,
    ApiPath(id): ApiPath<String>,
    ApiJson(spec): ApiJson<GrantSpec>,
) -> FedResult<(StatusCode, Json<GrantRecord>)> {
    let grant = federation(&state)?
        .approve(&id, spec, &caller.scopes)
        .await?;
    tracing::info!(grant = %grant.id, peer = %grant.peer, by = %caller.key_id, "federation grant offered");
    Ok((StatusCode::CREATED, Json(grant)))
}

/// Shares resources with a peer unprompted (reverse sharing is a grant of
/// its own).
#[utoipa::path(post, path = "/api/federation/grants", tag = "federation",
    security(("bearer" = [])),
    request_body = GrantSpec,
    responses(
        (status = 201, body = GrantRecord),
        (status = 400, description = "`invalid_request`"),
        (status = 403, description = "`forbidden`: delegating an operation needs its scope"),
        (status = 404, description = "`not_found`: no such peer"),
        (status = 409, description = "`limit_reached` (256 grants)"),
        (status = 503, description = "`NODE_UNAVAILABLE`"),
    ))]
pub async fn share(
    caller: Authorized<FederationManage>,
    State(state): State<Arc<AppState>>,
    ApiJson(spec): ApiJson<GrantSpec>,
) -> FedResult<(StatusCode, Json<GrantRecord>)> {
    let grant = federation(&state)?.share(spec, &caller.scopes).await?;
    tracing::info!(grant = %grant.id, peer = %grant.peer, by = %caller.key_id, "federation grant shared");
    Ok((StatusCode::CREATED, Json(grant)))
}

/// Every grant, both directions, with its terms, signatures and usage.
#[utoipa::path(get, path = "/api/federation/grants", tag = "federation",
    security(("bearer" = [])),
    responses((status = 200, body = Grants, description = "Every grant, both directions")))]
pub async fn grants(
    _caller: Authorized<FederationManage>,
    State(state): State<Arc<AppState>>,
) -> FedResult<Json<Grants>> {
    let grants = federation(&state)?.grants().await?;
    Ok(Json(Grants { grants }))
}

/// One grant: its terms and both signatures (the acceptance receipt).
#[utoipa::path(get, path = "/api/federation/grants/{id}", tag = "federation",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "the grant")),
    responses((status = 200, body = GrantRecord), (status = 404, description = "`not_found`")))]
pub async fn grant(
    _caller: Authorized<FederationManage>,
    State(state): State<Arc<AppState>>,
    ApiPath(id): ApiPath<String>,
) -> FedResult<Json<GrantRecord>> {
    Ok(Json(federation(&state)?.grant(&id).await?))
}

/// Completes a grant a peer offered: this cluster's key signs the same
/// terms and both sides keep both signatures.
#[utoipa::path(post, path = "/api/federation/grants/{id}/complete", tag = "federation",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "the grant")),
    responses(
        (status = 200, body = GrantRecord),
        (status = 403, description = "`bad_signature`: the owner's signature does not verify"),
        (status = 404, description = "`not_found`"),
        (status = 409, description = "`grant_not_offered`"),
        (status = 503, description = "`NODE_UNAVAILABLE`"),
    ))]
pub async fn complete(
    _caller: Authorized<FederationManage>,
    State(state): State<Arc<AppState>>,
    ApiPath(id): ApiPath<String>,
) -> FedResult<Json<GrantRecord>> {
    Ok(Json(federation(&state)?.complete(&id).await?))
}

/// Revokes a grant this cluster owns: new calls are refused at once.
#[utoipa::path(post, path = "/api/federation/grants/{id}/revoke", tag = "federation",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "the grant")),
    responses(
        (status = 200, body = Revoked),
        (status = 404, description = "`not_found`"),
        (status = 409, description = "`not_owner`"),
    ))]
pub async fn revoke(
    caller: Authorized<FederationManage>,
    State(state): State<Arc<AppState>>,
    ApiPath(id): ApiPath<String>,
) -> FedResult<Json<Revoked>> {
    let revoked = federation(&state)?.revoke(&id).await?;
    tracing::info!(grant = %id, by = %caller.key_id, "federation grant revoked");
    Ok(Json(revoked))
}

/// Asks the owner for a grant's state and usage; keeps what it says.
#[utoipa::path(post, path = "/api/federation/grants/{id}/refresh", tag = "federation",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "the grant")),
    responses(
        (status = 200, body = GrantRecord),
        (status = 404, description = "`not_found`; `grant_not_found`: the owner no longer has it"),
        (status = 503, description = "`NODE_UNAVAILABLE`"),
    ))]
pub async fn refresh(
    _caller: Authorized<FederationManage>,
    State(state): State<Arc<AppState>>,
    ApiPath(id): ApiPath<String>,
) -> FedResult<Json<GrantRecord>> {
    Ok(Json(federation(&state)?.refresh(&id).await?))
}

/// Retires a grant that is revoked, expired or never completed, with its
/// operation receipts.
#[utoipa::path(delete, path = "/api/federation/grants/{id}", tag = "federation",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "the grant")),
    responses(
        (status = 204, description = "retired"),
        (status = 404, description = "`not_found`"),
        (status = 409, description = "`grant_active`: an active grant and its replay protection stay"),
    ))]
pub async fn retire(
    _caller: Authorized<FederationManage>,
    State(state): State<Arc<AppState>>,
    ApiPath(id): ApiPath<String>,
) -> FedResult<StatusCode> {
    federation(&state)?.retire(&id).await?;
    Ok(StatusCode::NO_CONTENT)
}
