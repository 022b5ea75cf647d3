//! The connect endpoint a worker dials with its own credential, and the
//! cluster's carrier.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::Deserialize;
use serde_json::{Value, json};
use switchyard_carrier::stream_seam::Lane;
use switchyard_carrier::tunnel::WEBSOCKET_BUFFER;

use crate::auth::{Authorized, NodesManage, authenticate_node};
use crate::carriers::session;
use crate::error::{ApiError, ApiResult};
use crate::extract::ApiQuery;
use crate::state::AppState;

/// Which session the worker opens.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
pub struct ConnectParams {
    /// `inference` or `bulk`.
    pub lane: Option<String>,
}

/// [`authenticate_node`] for a node an admin approved: a pending node is
/// 403 `node_pending`. Returns the node's id.
pub(crate) async fn approved_node(state: &AppState, headers: &HeaderMap) -> ApiResult<String> {
    let (node_id, credential) = authenticate_node(state, headers).await?;
    if credential.state == switchyard_protocol::state::NodeState::Pending {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "node_pending",
            "this node waits for an admin's approval",
        ));
    }
    Ok(node_id)
}

/// A worker's session: a websocket on which the tunnel carrier runs.
/// Answers, in order: no token 401; unknown node 401 (never 404: the
/// endpoint does not reveal which nodes exist); wrong token 401; lookup
/// failure 500; pending node 403; a frontend without a tunnel component
/// 503; not a websocket upgrade 400; a bulk lane on a replica that does not
/// hold the node's inference lane 409. The registration token is never
/// accepted here.
#[utoipa::path(get, path = "/api/cluster/connect", tag = "cluster", params(ConnectParams),
    security(("node_credential" = [])),
    responses(
        (status = 101, description = "the websocket; the tunnel session runs on it"),
        (status = 400, description = "`invalid_request`: lane is not inference or bulk, or not a websocket upgrade"),
        (status = 401, description = "`unauthorized`: no token, unknown node or wrong token"),
        (status = 403, description = "`node_pending`: the node waits for approval"),
        (status = 409, description = "`lane_elsewhere`: the node's inference lane is held by another replica; dial that one"),
        (status = 500, description = "`internal`: the node could not be looked up"),
        (status = 503, description = "`carrier_unavailable`: this frontend runs no tunnel component"),
    ))]
pub async fn connect(
    State(state): State<Arc<AppState>>,
    ApiQuery(params): ApiQuery<ConnectParams>,
    headers: HeaderMap,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> ApiResult<Response> {
    let node_id = approved_node(&state, &headers).await?;
    let lane_name = params.lane.as_deref().unwrap_or("inference");
    let lane = Lane::parse(lane_name).ok_or_else(|| {
        ApiError::invalid_request(format!(
            "lane must be 'inference' or 'bulk', got '{lane_name}'"
        ))
    })?;
    let Some(registry) = state
        .carriers
        .as_ref()
        .filter(|c| c.tunnel.is_some())
        .map(|c| c.sessions.clone())
    else {
        tracing::debug!(node = %node_id, lane = lane_name, "connect refused: no tunnel component");
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "carrier_unavailable",
            "this frontend runs no tunnel component; it cannot hold worker sessions",
        ));
    };
    let upgrade = upgrade
        .map_err(|_| ApiError::invalid_request("the connect endpoint takes a websocket upgrade"))?;
    if lane == Lane::Bulk && registry.local(&node_id, Lane::Inference).is_none() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "lane_elsewhere",
            "this replica does not hold the node's inference lane; dial the bulk lane where the inference lane is",
        ));
    }
    Ok(upgrade
        .write_buffer_size(WEBSOCKET_BUFFER)
        .max_write_buffer_size(8 * WEBSOCKET_BUFFER)
        .max_message_size(WEBSOCKET_BUFFER)
        .max_frame_size(WEBSOCKET_BUFFER)
        .on_upgrade(move |socket| session::hold(state, node_id, lane, socket)))
}

/// The cluster's active carrier, its epoch and state, and the worker
/// sessions this replica holds.
#[utoipa::path(get, path = "/api/cluster/carrier", tag = "cluster",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "`{carrier, epoch, state, running, connected, plugin, sessions}`: the row, the set this replica runs, whether its fan-out carrier is connected, its plugin's state (`{state: running|rebuilding, failed_rebuilds, last_error, next_retry_unix_ms}`: a failed rebuild is retried after 1 s, doubling up to 30 s), and the worker sessions it holds"),
        (status = 401, description = "`unauthorized`"),
        (status = 403, description = "`forbidden`: the key lacks `nodes:manage` (the sessions name every connected node)"),
    ))]
pub async fn carrier(
    _caller: Authorized<NodesManage>,
    State(state): State<Arc<AppState>>,
) -> ApiResult<Json<Value>> {
    let row = state.store.cluster_carrier().await?;
    let sessions: Vec<Value> = state
        .carriers
        .as_ref()
        .map(|c| {
            c.sessions
                .held()
                .into_iter()
                .map(|(node, lane)| json!({"node": node, "lane": lane.as_str()}))
                .collect()
        })
        .unwrap_or_default();
    Ok(Json(json!({
        "carrier": row.as_ref().map(|r| r.carrier.clone()),
        "epoch": row.as_ref().map(|r| r.epoch),
        "state": row.as_ref().map(|r| r.state),
        "running": state.carriers.as_ref().map(|c| c.row.carrier.clone()),
        "connected": state.carriers.as_ref().is_some_and(|c| c.fanout.active().is_ready()),
        "plugin": state.carriers.as_ref().map(|c| {
            let plugin = c.fanout.active().plugin_state();
            json!({
                "state": plugin.state,
                "failed_rebuilds": plugin.failed_rebuilds,
                "last_error": plugin.last_error,
                "next_retry_unix_ms": plugin.next_retry_unix_ms,
            })
        }),
        "sessions": sessions,
    })))
}
