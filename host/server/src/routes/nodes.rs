//! Workers: registration tokens, registration, heartbeats, approval.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};
use subtle::ConstantTimeEq;
use switchyard_store::keys::token_digest;
use switchyard_store::nodes::{HeartbeatReport, Registration};

use crate::auth::{Caller, authenticate_node, bearer};
use crate::error::{ApiError, ApiResult};
use crate::labels::{self, Labels};
use crate::library::valid_digest;
use crate::state::AppState;
use switchyard_store::nodes::Schedule;

/// A new registration token.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct NewRegistrationToken {
    /// A label.
    pub name: String,
}

/// Creates a registration token (shown once). It registers workers and nothing else.
#[utoipa::path(post, path = "/api/nodes/registration-tokens", tag = "nodes", request_body = NewRegistrationToken, responses(
    (status = 201, description = "`{token: {id, name, created_at}, value}`; the value is shown once"),
))]
pub async fn create_registration_token(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    Json(body): Json<NewRegistrationToken>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    caller.require("nodes:manage")?;
    let (record, value) = state
        .store
        .create_registration_token(&body.name, &caller.key_id)
        .await?;
    tracing::info!(token = %record.id, by = %caller.key_id, "registration token created");
    Ok((
        StatusCode::CREATED,
        Json(json!({"token": record, "value": value})),
    ))
}

/// What a worker registers with.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct RegisterNode {
    /// The worker's name, unique in the cluster.
    pub name: String,
    /// An address frontends may dial, if the worker has one.
    pub address: Option<String>,
    /// Machine, GPUs, disk.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub inventory: Value,
    /// The worker's labels (`--label key=value`), e.g. `{"zone": "eu-west-1a"}`.
    #[serde(default)]
    #[schema(example = json!({"zone": "eu-west-1a", "gpu": "h100"}))]
    pub labels: BTreeMap<String, String>,
}

/// Longest node name.
const MAX_NODE_NAME: usize = 128;
/// Most files a heartbeat may report as held: far more than the models a
/// node caches (a model is one to a few dozen files), and it keeps a
/// heartbeat that carries them under 300 KB.
pub const MAX_FILES_HELD: usize = 4096;

fn valid_labels(raw: BTreeMap<String, String>) -> ApiResult<Labels> {
    labels::validate(raw).map_err(|e| ApiError::invalid_request(e.to_string()))
}

/// Registers a worker with the registration token; answers its own credential, once.
#[utoipa::path(post, path = "/api/nodes/register", tag = "nodes", request_body = RegisterNode,
    security(("registration_token" = [])),
    responses(
        (status = 201, description = "`{node, credential}`: the node's own credential, shown once; the node is `pending` until approved"),
        (status = 401, description = "`unauthorized`: no or unknown registration token"),
    ))]
pub async fn register(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Json(body): Json<RegisterNode>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let unauthorized = || {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "a valid registration token is required",
        )
    };
    let token = bearer(&headers).ok_or_else(unauthorized)?;
    let digest = token_digest(token);
    match state.store.registration_token(&digest).await? {
        Some(stored) if bool::from(stored.as_slice().ct_eq(&digest)) => {}
        _ => return Err(unauthorized()),
    }
    let name = body.name.trim();
    if name.is_empty() || name.len() > MAX_NODE_NAME || name.chars().any(char::is_whitespace) {
        return Err(ApiError::invalid_request(
            "name must be 1-128 characters without spaces",
        ));
    }
    let inventory = if body.inventory.is_null() {
        json!({})
    } else {
        body.inventory
    };
    let labels = valid_labels(body.labels)?;
    let (node, credential) = state
        .store
        .register_node(Registration {
            name,
            address: body.address.as_deref(),
            inventory: &inventory,
            labels: &labels,
            auto_approve: state.auto_approve,
        })
        .await?;
    tracing::info!(node = %node.id, name = %node.name, state = %node.state, "node registered");
    Ok((
        StatusCode::CREATED,
        Json(json!({"node": node, "credential": credential})),
    ))
}

/// A heartbeat's body.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct Heartbeat {
    /// The worker's current inventory.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub inventory: Value,
    /// The worker's labels; absent: unchanged.
    #[serde(default)]
    #[schema(example = json!({"zone": "eu-west-1a"}))]
    pub labels: Option<BTreeMap<String, String>>,
    /// SHA-256s (lowercase hex) of the complete, verified files in the
    /// worker's placement cache, at most 4096; absent: unchanged since the
    /// last heartbeat that carried them.
    #[serde(default)]
    pub files_held: Option<Vec<String>>,
}

/// A worker's heartbeat, with its own credential (`X-Switchyard-Node` names it).
/// Allowed while pending, so the worker learns of its approval.
#[utoipa::path(post, path = "/api/nodes/{id}/heartbeat", tag = "nodes", request_body = Heartbeat,
    params(("id" = String, Path, description = "Node id")),
    security(("node_credential" = [])),
    responses(
        (status = 200, description = "`{state, carrier}`: the node's state and the cluster's carrier `{carrier, epoch, state}`"),
        (status = 401, description = "`unauthorized`"),
    ))]
pub async fn heartbeat(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    mut headers: HeaderMap,
    Json(body): Json<Heartbeat>,
) -> ApiResult<Json<Value>> {
    // The path names the node; the header, if sent, must agree.
    if headers
        .get(crate::auth::NODE_HEADER)
        .is_some_and(|h| h.as_bytes() != id.as_bytes())
    {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "node id and credential do not match",
        ));
    }
    headers.insert(
        crate::auth::NODE_HEADER,
        id.parse()
            .map_err(|_| ApiError::invalid_request("bad node id"))?,
    );
    authenticate_node(&state, &headers).await?;
    let inventory = if body.inventory.is_null() {
        json!({})
    } else {
        body.inventory
    };
    let labels = body.labels.map(valid_labels).transpose()?;
    if let Some(files) = &body.files_held {
        if files.len() > MAX_FILES_HELD {
            return Err(ApiError::invalid_request(format!(
                "files_held lists at most {MAX_FILES_HELD} files, got {}",
                files.len()
            )));
        }
        if let Some(bad) = files.iter().find(|f| !valid_digest(f)) {
            return Err(ApiError::invalid_request(format!(
                "files_held: `{bad}` is not a lowercase hex SHA-256"
            )));
        }
    }
    let node = state
        .store
        .heartbeat_node(
            &id,
            HeartbeatReport {
                inventory: &inventory,
                labels: labels.as_ref(),
                files_held: body.files_held.as_deref(),
            },
        )
        .await?;
    let carrier = state.store.cluster_carrier().await?;
    Ok(Json(json!({"state": node.state, "carrier": carrier})))
}

/// Every node.
#[utoipa::path(get, path = "/api/nodes", tag = "nodes", responses((status = 200, description = "`{nodes: [...]}`")))]
pub async fn list(caller: Caller, State(state): State<Arc<AppState>>) -> ApiResult<Json<Value>> {
    caller.require("nodes:manage")?;
    Ok(Json(json!({"nodes": state.store.nodes().await?})))
}

/// One node.
#[utoipa::path(get, path = "/api/nodes/{id}", tag = "nodes", params(("id" = String, Path, description = "Node id")),
    responses((status = 200, description = "The node"), (status = 404, description = "`not_found`")))]
pub async fn show(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    caller.require("nodes:manage")?;
    let node = state
        .store
        .node(&id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no node '{id}'")))?;
    Ok(Json(json!(node)))
}

/// Approves a pending node.
#[utoipa::path(post, path = "/api/nodes/{id}/approve", tag = "nodes", params(("id" = String, Path, description = "Node id")),
    responses((status = 200, description = "The node"), (status = 404, description = "`not_found`")))]
pub async fn approve(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    caller.require("nodes:manage")?;
    let node = state
        .store
        .approve_node(&id, &caller.key_id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no node '{id}'")))?;
    tracing::info!(node = %id, by = %caller.key_id, "node approved");
    Ok(Json(json!(node)))
}

/// Drain: no new placements, and the node's replicas move to other nodes.
#[utoipa::path(post, path = "/api/nodes/{id}/drain", tag = "nodes", params(("id" = String, Path)),
    responses((status = 200, description = "the node"), (status = 404, description = "`not_found`")))]
pub async fn drain(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    schedule(caller, state, id, Schedule::Drain).await
}

/// Undrain: back to normal scheduling (ends maintenance too).
#[utoipa::path(post, path = "/api/nodes/{id}/undrain", tag = "nodes", params(("id" = String, Path)),
    responses((status = 200, description = "the node"), (status = 404, description = "`not_found`")))]
pub async fn undrain(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    schedule(caller, state, id, Schedule::Undrain).await
}

/// Maintenance: no new placements; the node's replicas stay.
#[utoipa::path(post, path = "/api/nodes/{id}/maintenance", tag = "nodes", params(("id" = String, Path)),
    responses((status = 200, description = "the node"), (status = 404, description = "`not_found`")))]
pub async fn maintenance(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    schedule(caller, state, id, Schedule::Maintenance).await
}

async fn schedule(
    caller: Caller,
    state: Arc<AppState>,
    id: String,
    action: Schedule,
) -> ApiResult<Json<Value>> {
    caller.require("nodes:manage")?;
    let node = state
        .store
        .schedule_node(&id, action)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("node {id}")))?;
    tracing::info!(node = %id, ?action, by = %caller.key_id, "node scheduling changed");
    Ok(Json(json!(node)))
}
