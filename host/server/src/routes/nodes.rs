//! Workers: registration tokens, registration, heartbeats, approval.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use switchyard_protocol::admin::NewRegistrationToken;
use switchyard_protocol::carrier::Attachment;
use switchyard_protocol::limits::MAX_FILES_REPORTED;
use switchyard_protocol::node::{Heartbeat, HeartbeatAnswer, RegisterNode, Registered};
use switchyard_protocol::nodes::{
    CreatedRegistrationToken, Node, Nodes, RegistrationToken, RegistrationTokens,
};
use switchyard_protocol::state::NodeState;
use switchyard_store::keys::token_digest;
use switchyard_store::nodes::{HeartbeatReport, Registration, RegistrationRefused, TokenLimits};

use crate::auth::{Authenticated, authenticate_node, bearer};
use crate::error::{ApiError, ApiResult};
use crate::extract::ApiJson;
use crate::state::AppState;
use switchyard_carrier_set::news;
use switchyard_library::valid_digest;
use switchyard_protocol::labels::{self, Labels};
use switchyard_store::nodes::Schedule;

/// The longest a registration token may live: a token for a fleet's
/// bootstrap, not a standing secret.
const MAX_TOKEN_TTL_SECONDS: i64 = 366 * 24 * 3600;
/// The most registrations one token may be allowed.
const MAX_TOKEN_USES: i32 = 1_000_000;

/// Creates a registration token (shown once, and never again). It registers
/// workers and nothing else.
#[utoipa::path(post, path = "/api/nodes/registration-tokens", tag = "nodes", request_body = NewRegistrationToken,
    security(("bearer" = [])),
    responses(
        (status = 201, body = CreatedRegistrationToken, description = "The token, and its value, shown once",
            example = json!({"token": {"id": "reg_0a1b2c3d4e5f6071", "name": "rack-4", "created_at": "2026-01-01T00:00:00Z", "revoked_at": null, "expires_at": "2026-01-02T00:00:00Z", "max_uses": 8, "uses": 0, "last_used_at": null}, "value": "sy_..."})),
        (status = 400, description = "`invalid_request`: a ttl or a use count out of range"),
    ))]
pub async fn create_registration_token(
    Authenticated(caller): Authenticated,
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> ApiResult<(StatusCode, Json<CreatedRegistrationToken>)> {
    caller.require("nodes:manage")?;
    // Parsed after the scope check: a key without it learns nothing of the schema.
    let ApiJson(body) = ApiJson::<NewRegistrationToken>::parse(&headers, &body)?;
    if let Some(ttl) = body.ttl_seconds
        && !(1..=MAX_TOKEN_TTL_SECONDS).contains(&ttl)
    {
        return Err(ApiError::invalid_request(format!(
            "ttl_seconds must be 1-{MAX_TOKEN_TTL_SECONDS}, got {ttl}"
        )));
    }
    if let Some(uses) = body.max_uses
        && !(1..=MAX_TOKEN_USES).contains(&uses)
    {
        return Err(ApiError::invalid_request(format!(
            "max_uses must be 1-{MAX_TOKEN_USES}, got {uses}"
        )));
    }
    let limits = TokenLimits {
        ttl_seconds: body.ttl_seconds,
        max_uses: body.max_uses,
    };
    let (record, value) = state
        .store
        .create_registration_token(&body.name, &caller.key_id, limits)
        .await?;
    tracing::info!(token = %record.id, by = %caller.key_id, "registration token created");
    Ok((
        StatusCode::CREATED,
        Json(CreatedRegistrationToken {
            token: record,
            value,
        }),
    ))
}

/// Every registration token, with its limits and uses; never a token's value.
#[utoipa::path(get, path = "/api/nodes/registration-tokens", tag = "nodes",
    security(("bearer" = [])),
    responses((status = 200, body = RegistrationTokens, description = "Every token, with its limits and uses")))]
pub async fn registration_tokens(
    Authenticated(caller): Authenticated,
    State(state): State<Arc<AppState>>,
) -> ApiResult<Json<RegistrationTokens>> {
    caller.require("nodes:manage")?;
    Ok(Json(RegistrationTokens {
        tokens: state.store.registration_tokens().await?,
    }))
}

/// Revokes a registration token: it registers no more workers (the nodes it
/// registered keep their own credentials).
#[utoipa::path(delete, path = "/api/nodes/registration-tokens/{id}", tag = "nodes",
    params(("id" = String, Path, description = "Token id (`reg_...`)")),
    security(("bearer" = [])),
    responses(
        (status = 200, body = RegistrationToken, description = "the token, revoked"),
        (status = 404, description = "`not_found`"),
    ))]
pub async fn revoke_registration_token(
    Authenticated(caller): Authenticated,
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> ApiResult<Json<RegistrationToken>> {
    caller.require("nodes:manage")?;
    let token = state
        .store
        .revoke_registration_token(&id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no registration token '{id}'")))?;
    tracing::info!(token = %id, by = %caller.key_id, "registration token revoked");
    Ok(Json(token))
}

/// Longest node name.
const MAX_NODE_NAME: usize = 128;
/// Longest node address: a DNS name (253) and a port.
const MAX_ADDRESS: usize = 260;

/// Checks a node's dialable address: `host:port` or `[v6]:port`, a port
/// that is not 0, and a host of name or IP characters only (no scheme,
/// path, user info or spaces: frontends connect to it as it is).
pub fn valid_address(address: &str) -> Result<(), String> {
    let bad = |why: &str| Err(format!("address `{address:.64}` {why}"));
    if address.is_empty() || address.len() > MAX_ADDRESS {
        return bad(&format!("must be 1-{MAX_ADDRESS} characters"));
    }
    let Some((host, port)) = address.rsplit_once(':') else {
        return bad("must be host:port");
    };
    if !matches!(port.parse::<u16>(), Ok(1..)) || port.starts_with('+') {
        return bad("has no valid port");
    }
    let host_ok = if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        v6.parse::<std::net::Ipv6Addr>().is_ok()
    } else {
        !host.is_empty()
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b'_')
    };
    if !host_ok {
        return bad("has no valid host");
    }
    Ok(())
}

fn valid_labels(raw: BTreeMap<String, String>) -> ApiResult<Labels> {
    labels::validate(raw).map_err(|e| ApiError::invalid_request(e.to_string()))
}

/// Registers a worker with the registration token; answers its own credential, once.
#[utoipa::path(post, path = "/api/nodes/register", tag = "nodes", request_body = RegisterNode,
    security(("registration_token" = [])),
    responses(
        (status = 201, description = "`{node, credential}`: the node's own credential, shown once; the node is `pending` until approved"),
        (status = 400, description = "`invalid_request`: a bad name, address or labels"),
        (status = 401, description = "`unauthorized`: no, unknown, revoked, expired or used-up registration token"),
        (status = 409, description = "`node_exists`: the name is taken; re-registering needs the node's credential or an admin's release"),
    ))]
pub async fn register(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> ApiResult<(StatusCode, Json<Registered<Node>>)> {
    let unauthorized = || {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "a valid registration token is required",
        )
    };
    let token = bearer(&headers).ok_or_else(unauthorized)?;
    let digest = token_digest(token);
    // Parsed once a usable token is there: a caller without one gets 401,
    // not the schema. The use itself is counted with the registration.
    if !state.store.registration_token_usable(&digest).await? {
        return Err(unauthorized());
    }
    let ApiJson(body) = ApiJson::<RegisterNode>::parse(&headers, &body)?;
    let name = body.name.trim();
    if name.is_empty() || name.len() > MAX_NODE_NAME || name.chars().any(char::is_whitespace) {
        return Err(ApiError::invalid_request(
            "name must be 1-128 characters without spaces",
        ));
    }
    let labels = valid_labels(body.labels)?;
    if let Some(address) = &body.address {
        valid_address(address).map_err(ApiError::invalid_request)?;
    }
    let credential_sent = body.credential.is_some();
    let registered = state
        .store
        .register_node(
            &digest,
            Registration {
                name,
                address: body.address.as_deref(),
                inventory: &body.inventory,
                labels: &labels,
                auto_approve: state.auto_approve,
                credential: body.credential.as_deref(),
            },
        )
        .await?;
    let (node, credential) = match registered {
        Ok(registered) => registered,
        Err(RegistrationRefused::Token) => return Err(unauthorized()),
        Err(RegistrationRefused::NameTaken) => {
            tracing::warn!(
                name,
                credential_sent,
                "a registration of a taken name was refused"
            );
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "node_exists",
                format!(
                    "a node named '{name}' exists: registering it again needs its credential, \
                     or an admin's `switchyard node release` first"
                ),
            ));
        }
    };
    tracing::info!(node = %node.id, name = %node.name, state = %node.state, "node registered");
    Ok((StatusCode::CREATED, Json(Registered { node, credential })))
}

/// A worker's heartbeat, with its own credential (`X-Switchyard-Node` names it).
/// Allowed while pending, so the worker learns of its approval.
#[utoipa::path(post, path = "/api/nodes/{id}/heartbeat", tag = "nodes", request_body = Heartbeat,
    params(("id" = String, Path, description = "Node id")),
    security(("node_credential" = [])),
    responses(
        (status = 200, description = "`{state, carrier, engines}`: the node's state, the cluster's carrier `{carrier, epoch, state}` and the ids of the engines the cluster knows on the node (the worker stops the others after a grace)"),
        (status = 401, description = "`unauthorized`"),
    ))]
pub async fn heartbeat(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    connection: crate::edge::ThisConnection,
    mut headers: HeaderMap,
    body: axum::body::Bytes,
) -> ApiResult<Json<HeartbeatAnswer>> {
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
    connection.prove();
    let ApiJson(body) = ApiJson::<Heartbeat>::parse(&headers, &body)?;
    let labels = body.labels.map(valid_labels).transpose()?;
    if let Some(files) = &body.files_held {
        if files.len() > MAX_FILES_REPORTED {
            return Err(ApiError::invalid_request(format!(
                "files_held lists at most {MAX_FILES_REPORTED} files, got {}",
                files.len()
            )));
        }
        if let Some(bad) = files.iter().find(|f| !valid_digest(f)) {
            return Err(ApiError::invalid_request(format!(
                "files_held: `{bad}` is not a lowercase hex SHA-256"
            )));
        }
    }
    if let Some(carriers) = &body.carriers {
        valid_attachment(carriers)?;
    }
    let node = state
        .store
        .heartbeat_node(
            &id,
            HeartbeatReport {
                inventory: &body.inventory,
                labels: labels.as_ref(),
                files_held: body.files_held.as_deref(),
                carriers: body.carriers.as_ref(),
            },
        )
        .await?;
    // The row's sets with the components a worker runs for each (the
    // worker fetches them by name and version); a pending node learns
    // nothing of the carriers (it may not connect yet).
    let carrier = match node.state {
        NodeState::Pending => None,
        _ => match &state.carriers {
            Some(carriers) => Some(carriers.news()),
            None => match state.store.cluster_carrier().await? {
                Some(row) => {
                    let workers = state.store.carrier_workers().await?.len();
                    let settings = state.store.cluster_settings().await?;
                    Some(news::news(&row, &settings, workers))
                }
                None => None,
            },
        },
    };
    // The engines the cluster knows on this node: the worker stops the
    // others (an engine whose replica was deleted or forgotten).
    let engines = state.store.replica_ids_on(&id).await?;
    Ok(Json(HeartbeatAnswer {
        state: node.state,
        carrier,
        engines: Some(engines),
    }))
}

/// Every node.
#[utoipa::path(get, path = "/api/nodes", tag = "nodes", responses((status = 200, body = Nodes, description = "Every node")))]
pub async fn list(
    Authenticated(caller): Authenticated,
    State(state): State<Arc<AppState>>,
) -> ApiResult<Json<Nodes>> {
    caller.require("nodes:manage")?;
    Ok(Json(Nodes {
        nodes: state.store.nodes().await?,
    }))
}

/// One node.
#[utoipa::path(get, path = "/api/nodes/{id}", tag = "nodes", params(("id" = String, Path, description = "Node id")),
    responses((status = 200, body = Node, description = "The node"), (status = 404, description = "`not_found`")))]
pub async fn show(
    Authenticated(caller): Authenticated,
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> ApiResult<Json<Node>> {
    caller.require("nodes:manage")?;
    let node = state
        .store
        .node(&id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no node '{id}'")))?;
    Ok(Json(node))
}

/// Approves a pending node.
#[utoipa::path(post, path = "/api/nodes/{id}/approve", tag = "nodes", params(("id" = String, Path, description = "Node id")),
    responses((status = 200, body = Node, description = "The node"), (status = 404, description = "`not_found`")))]
pub async fn approve(
    Authenticated(caller): Authenticated,
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> ApiResult<Json<Node>> {
    caller.require("nodes:manage")?;
    let node = state
        .store
        .approve_node(&id, &caller.key_id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no node '{id}'")))?;
    tracing::info!(node = %id, by = %caller.key_id, "node approved");
    Ok(Json(node))
}

/// Releases a node's name: its credential is revoked at once, and the next
/// registration of the name (with a registration token) takes the node
/// over. For a worker that lost its identity, or one that must be cut off.
#[utoipa::path(post, path = "/api/nodes/{id}/release", tag = "nodes", params(("id" = String, Path, description = "Node id")),
    security(("bearer" = [])),
    responses((status = 200, body = Node, description = "The node"), (status = 404, description = "`not_found`")))]
pub async fn release(
    Authenticated(caller): Authenticated,
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> ApiResult<Json<Node>> {
    caller.require("nodes:manage")?;
    let node = state
        .store
        .release_node(&id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no node '{id}'")))?;
    tracing::info!(node = %id, by = %caller.key_id, "node released for registration");
    Ok(Json(node))
}

/// Drain: no new placements, and the node's replicas move to other nodes.
#[utoipa::path(post, path = "/api/nodes/{id}/drain", tag = "nodes", params(("id" = String, Path)),
    responses((status = 200, body = Node, description = "the node"), (status = 404, description = "`not_found`")))]
pub async fn drain(
    Authenticated(caller): Authenticated,
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> ApiResult<Json<Node>> {
    schedule(caller, state, id, Schedule::Drain).await
}

/// Undrain: back to normal scheduling (ends maintenance too).
#[utoipa::path(post, path = "/api/nodes/{id}/undrain", tag = "nodes", params(("id" = String, Path)),
    responses((status = 200, body = Node, description = "the node"), (status = 404, description = "`not_found`")))]
pub async fn undrain(
    Authenticated(caller): Authenticated,
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> ApiResult<Json<Node>> {
    schedule(caller, state, id, Schedule::Undrain).await
}

/// Maintenance: no new placements; the node's replicas stay.
#[utoipa::path(post, path = "/api/nodes/{id}/maintenance", tag = "nodes", params(("id" = String, Path)),
    responses((status = 200, body = Node, description = "the node"), (status = 404, description = "`not_found`")))]
pub async fn maintenance(
    Authenticated(caller): Authenticated,
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> ApiResult<Json<Node>> {
    schedule(caller, state, id, Schedule::Maintenance).await
}

async fn schedule(
    caller: crate::auth::Caller,
    state: Arc<AppState>,
    id: String,
    action: Schedule,
) -> ApiResult<Json<Node>> {
    caller.require("nodes:manage")?;
    let node = state
        .store
        .schedule_node(&id, action)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("node {id}")))?;
    tracing::info!(node = %id, ?action, by = %caller.key_id, "node scheduling changed");
    Ok(Json(node))
}

/// Sets a worker may name in a heartbeat, and the longest reason: what is
/// stored per node stays small whatever a worker sends.
const MAX_SETS_REPORTED: usize = 8;
const MAX_REASON: usize = 512;

fn valid_attachment(carriers: &Attachment) -> ApiResult<()> {
    let names = carriers
        .attached
        .iter()
        .chain(carriers.cannot_follow.keys());
    if carriers.attached.len() > MAX_SETS_REPORTED
        || carriers.cannot_follow.len() > MAX_SETS_REPORTED
    {
        return Err(ApiError::invalid_request(format!(
            "carriers: at most {MAX_SETS_REPORTED} sets attached and {MAX_SETS_REPORTED} it cannot follow"
        )));
    }
    if let Some(bad) = names
        .into_iter()
        .find(|n| n.is_empty() || n.len() > 64 || !switchyard_protocol::valid::is_name(n))
    {
        return Err(ApiError::invalid_request(format!(
            "carriers: `{}` is not a carrier set's name",
            bad.chars().take(64).collect::<String>()
        )));
    }
    if carriers
        .cannot_follow
        .values()
        .any(|r| r.len() > MAX_REASON)
    {
        return Err(ApiError::invalid_request(format!(
            "carriers: a reason is at most {MAX_REASON} bytes"
        )));
    }
    Ok(())
}
