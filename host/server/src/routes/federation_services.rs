//! Using what peers granted: the remote services `/v1` can call, managed
//! services on a peer (each mutation with the operation id the caller
//! chose), and the owner's receipt of an operation.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use switchyard_protocol::federation::{ManageCall, ManagedService, OperationRecord};

use crate::auth::{Authenticated, Authorized, FederationManage};
use crate::error::{FedResult, federation};
use crate::extract::{ApiJson, ApiPath, ApiQuery};
use crate::state::AppState;
use switchyard_protocol::lists::{ManagedServices, RemoteServices};

/// The remote services this cluster may call, as `/v1` names them
/// (`<peer label>/<service>`).
#[utoipa::path(get, path = "/api/federation/services", tag = "federation",
    security(("bearer" = [])),
    responses(
        (status = 200, body = RemoteServices, description = "The remote services the key may call"),
        (status = 403, description = "`forbidden`: the key lacks `federation:invoke`, `inference` or `federation:manage`"),
    ))]
pub async fn remote_services(
    Authenticated(caller): Authenticated,
    State(state): State<Arc<AppState>>,
) -> FedResult<Json<RemoteServices>> {
    caller
        .require("federation:invoke")
        .or_else(|_| caller.require("inference"))
        .or_else(|_| caller.require("federation:manage"))?;
    let services = federation(&state)?.remote_services().await?;
    Ok(Json(RemoteServices { services }))
}

/// One mutation of a managed service on a peer, under an
/// `inference:manage` grant: the owner's answer as it came (the recorded
/// one for an exact retry).
#[utoipa::path(post, path = "/api/federation/peers/{peer}/services", tag = "federation",
    security(("bearer" = [])),
    params(("peer" = String, Path, description = "the owner's id or label")),
    request_body = ManageCall,
    responses(
        (status = 200, description = "the service after the change", body = ManagedService),
        (status = 201, description = "created", body = ManagedService),
        (status = 403, description = "outside the grant: the evaluator's code"),
        (status = 404, description = "`not_found`: no such peer; `service_not_found`, `grant_not_found` on the owner"),
        (status = 409, description = "`operation_conflict`: the id was used for another request; `operation_in_progress`; `revision_changed`; `service_not_stopped`; `limit_reached`"),
        (status = 503, description = "`NODE_UNAVAILABLE`: the link is down, or broke (the outcome is uncertain: inspect the operation)"),
    ))]
pub async fn manage(
    _caller: Authorized<FederationManage>,
    State(state): State<Arc<AppState>>,
    ApiPath(peer): ApiPath<String>,
    ApiJson(call): ApiJson<ManageCall>,
) -> FedResult<Response> {
    let operation = call.operation_id.clone();
    let answer = federation(&state)?.manage(&peer, call).await?;
    tracing::info!(
        peer,
        operation,
        status = answer.status,
        "federated operation answered"
    );
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::BAD_GATEWAY);
    Ok((status, Json(answer.body)).into_response())
}

/// The grant whose services to list.
#[derive(Debug, Deserialize)]
pub struct ServicesQuery {
    /// The grant.
    grant: String,
}

/// The managed services a grant made on a peer, as the owner says.
#[utoipa::path(get, path = "/api/federation/peers/{peer}/services", tag = "federation",
    security(("bearer" = [])),
    params(("peer" = String, Path, description = "the owner's id or label"),
           ("grant" = String, Query, description = "the grant")),
    responses(
        (status = 200, description = "`{services: [...]}`"),
        (status = 404, description = "`not_found`: no such peer; `grant_not_found`: the owner has no such grant for this cluster"),
        (status = 503, description = "`NODE_UNAVAILABLE`"),
    ))]
pub async fn peer_services(
    _caller: Authorized<FederationManage>,
    State(state): State<Arc<AppState>>,
    ApiPath(peer): ApiPath<String>,
    ApiQuery(query): ApiQuery<ServicesQuery>,
) -> FedResult<Json<ManagedServices>> {
    let services = federation(&state)?
        .peer_services(&peer, &query.grant)
        .await?;
    Ok(Json(ManagedServices { services }))
}

/// The owner's receipt of an operation: inspect an uncertain outcome here
/// before acting again.
#[utoipa::path(get, path = "/api/federation/peers/{peer}/operations/{id}", tag = "federation",
    security(("bearer" = [])),
    params(("peer" = String, Path, description = "the owner's id or label"),
           ("id" = String, Path, description = "the operation id")),
    responses(
        (status = 200, body = OperationRecord),
        (status = 404, description = "`operation_not_found`: the owner never received it"),
        (status = 503, description = "`NODE_UNAVAILABLE`"),
    ))]
pub async fn operation(
    _caller: Authorized<FederationManage>,
    State(state): State<Arc<AppState>>,
    ApiPath((peer, id)): ApiPath<(String, String)>,
) -> FedResult<Json<OperationRecord>> {
    Ok(Json(federation(&state)?.inspect(&peer, &id).await?))
}
