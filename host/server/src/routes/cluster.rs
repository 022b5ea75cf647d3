//! The connect endpoint a worker dials with its own credential, and the
//! cluster's carrier.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use std::time::Duration;
use switchyard_carrier::SetName;
use switchyard_carrier::set::SideKind;
use switchyard_carrier::stream_seam::Lane;

use switchyard_protocol::admin::ErrorDetail;
use switchyard_protocol::carrier::{
    Blocked, CarrierChange, CarrierStatus, ChangeMoved, Pin, Pins, Preflight, SetKey,
};
use switchyard_protocol::state::CarrierRowState;
use switchyard_store::carrier_switch::NewChange;
use switchyard_store::cluster::ClusterCarrier;

use crate::auth::{Admin, Authorized, authenticate_node};
use crate::carriers::report;
use crate::carriers::session;
use crate::carriers::upgrade::{NotAnUpgrade, WebsocketUpgrade};
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiJson, ApiQuery};
use crate::state::AppState;
use switchyard_carrier_set::start::newest_pins;

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
    connection: crate::edge::ThisConnection,
    headers: HeaderMap,
    upgrade: Result<WebsocketUpgrade, NotAnUpgrade>,
) -> ApiResult<Response> {
    let node_id = approved_node(&state, &headers).await?;
    connection.prove();
    let lane_name = params.lane.as_deref().unwrap_or("inference");
    let lane = Lane::parse(lane_name).ok_or_else(|| {
        ApiError::invalid_request(format!(
            "lane must be 'inference' or 'bulk', got '{lane_name}'"
        ))
    })?;
    let Some(registry) = state
        .carriers
        .as_ref()
        .filter(|c| c.tunnel.load().is_some())
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
    Ok(upgrade.on_upgrade(move |socket| session::hold(state, node_id, lane, socket)))
}

/// The cluster's carrier: the row (active set with its component
/// versions, epoch, state, target, draining set and the time the drain has
/// left), every live replica with what it built and can build, every
/// worker with what it is attached to and cannot follow, the work in
/// flight, the settings (passwords masked), and what this replica runs.
#[utoipa::path(get, path = "/api/cluster/carrier", tag = "cluster",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "the row (state `stable|prepare|commit`), live replicas, workers, work in flight, settings (masked), the last change, and what this replica runs", body = CarrierStatus),
        (status = 401, description = "`unauthorized`"),
        (status = 403, description = "`forbidden`: the key lacks `admin`"),
    ))]
pub async fn carrier(
    _caller: Authorized<Admin>,
    State(state): State<Arc<AppState>>,
) -> ApiResult<Json<CarrierStatus>> {
    Ok(Json(report::status(&state).await?))
}

/// Starts a change of the cluster's carrier set (or of its component
/// versions), tries one (`dry_run`), or aborts one in prepare.
#[utoipa::path(post, path = "/api/cluster/carrier", tag = "cluster",
    security(("bearer" = [])),
    request_body = CarrierChange,
    responses(
        (status = 200, description = "a dry run: `Preflight` `{ok, blockers, report}` (every live replica refreshed its report first); or an abort: `{epoch, state}` (the epoch grew)", body = Preflight),
        (status = 202, description = "started: `{epoch, state: prepare}`; the replicas carry it out and one of them leads it", body = ChangeMoved),
        (status = 400, description = "`unknown_target`: not a set this build runs, or a component version the registry does not hold; `invalid_request`"),
        (status = 401, description = "`unauthorized`"),
        (status = 403, description = "`forbidden`: the key lacks `admin`"),
        (status = 409, description = "`change_under_way`; `nothing_to_abort`"),
        (status = 422, description = "`blocked`: `{error, blockers: [{code, message}], report}` (`already_active`, `replica_cannot_build`, `replica_silent`, `worker_cannot_follow`; `force` overrides only the last); where carriers require signatures (`require_signed`), `signature_required` or `untrusted_signature` for a target component unsigned or signed by a key not (or no longer) trusted", body = Blocked),
        (status = 503, description = "`carrier_unavailable`: this replica runs no carrier set"),
    ))]
pub async fn change(
    caller: Authorized<Admin>,
    State(state): State<Arc<AppState>>,
    ApiJson(body): ApiJson<CarrierChange>,
) -> ApiResult<Response> {
    if state.carriers.is_none() {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "carrier_unavailable",
            "this replica runs no carrier set",
        ));
    }
    let store = &state.store;
    let row = store.cluster_carrier().await?.ok_or_else(|| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "carrier_unavailable",
            "the cluster's carrier row is not seeded yet",
        )
    })?;
    if body.abort {
        return abort(&caller.key_id, store, &row, &body).await;
    }
    let (target, pins) = target_pins(&state, &body).await?;
    switchyard_binding::signing::check_pins(&state.store, &pins).await?;
    if !body.dry_run && row.state() != CarrierRowState::Stable {
        return Err(under_way(&row));
    }
    let blockers = report::preflight(&state, &row, target, &pins, body.force).await?;
    if body.dry_run {
        return Ok(Json(Preflight {
            ok: blockers.is_empty(),
            blockers,
            report: report::status(&state).await?,
        })
        .into_response());
    }
    if !blockers.is_empty() {
        let message = blockers
            .iter()
            .map(|b| b.message.as_str())
            .collect::<Vec<_>>()
            .join("; ");
        let body = Blocked {
            error: ErrorDetail {
                code: "blocked".into(),
                message,
            },
            blockers,
            report: report::status(&state).await?,
        };
        return Ok((StatusCode::UNPROCESSABLE_ENTITY, Json(body)).into_response());
    }
    let settings = store.cluster_settings().await?;
    let started = store
        .begin_change(
            row.epoch,
            NewChange {
                target: &SetKey::new(target.as_str(), pins),
                forced: body.force,
                requested_by: &caller.key_id,
                prepare_timeout: Duration::from_millis(settings.prepare_timeout_ms),
            },
        )
        .await?;
    let Some(started) = started else {
        return Err(under_way(&row));
    };
    tracing::info!(key = %caller.key_id, from = %row.active.carrier, to = %target, epoch = started.epoch, forced = body.force, "carrier change started");
    Ok((
        StatusCode::ACCEPTED,
        Json(ChangeMoved {
            epoch: started.epoch,
            state: started.state(),
        }),
    )
        .into_response())
}

/// `{"abort": true}`: a change in prepare goes back to stable.
async fn abort(
    key_id: &str,
    store: &switchyard_store::Store,
    row: &ClusterCarrier,
    body: &CarrierChange,
) -> ApiResult<Response> {
    if body.target.is_some() || body.dry_run || body.force || !body.plugins.is_empty() {
        return Err(ApiError::invalid_request("`abort` takes nothing else"));
    }
    let moved = match row.state() {
        CarrierRowState::Prepare => {
            let reason = format!("aborted by key {key_id}");
            store.abort_change(row.epoch, &reason).await?
        }
        _ => None,
    };
    let Some(moved) = moved else {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "nothing_to_abort",
            format!("no change is in prepare (the row is `{}`)", row.state()),
        ));
    };
    tracing::info!(key = %key_id, epoch = moved.epoch, "carrier change aborted");
    Ok(Json(ChangeMoved {
        epoch: moved.epoch,
        state: moved.state(),
    })
    .into_response())
}

fn under_way(row: &ClusterCarrier) -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "change_under_way",
        format!(
            "a carrier change is under way (`{}`, epoch {}); abort it or wait until it settles",
            row.state(),
            row.epoch
        ),
    )
}

/// The target set and the components it would run: the newest registered
/// version of each, or the version the request names.
async fn target_pins(state: &AppState, body: &CarrierChange) -> ApiResult<(SetName, Pins)> {
    let unknown =
        |message: String| ApiError::new(StatusCode::BAD_REQUEST, "unknown_target", message);
    let target = body
        .target
        .as_deref()
        .ok_or_else(|| unknown(format!("give a `target`: {}", SetName::names())))?;
    let set = SetName::parse(target).ok_or_else(|| {
        unknown(format!(
            "`{}` is not a carrier set; this build runs {}",
            target.chars().take(64).collect::<String>(),
            SetName::names()
        ))
    })?;
    let mut pins = newest_pins(&state.store, set)
        .await
        .map_err(|e| ApiError::internal(format!("{e:#}")))?;
    let needed = set.entry().components(SideKind::Frontend);
    for (name, version) in &body.plugins {
        if !needed.iter().any(|n| n.name == name) {
            return Err(unknown(format!(
                "the `{set}` set runs no `{}` component",
                name.chars().take(64).collect::<String>()
            )));
        }
        let record = state.store.plugin(name, version).await?.ok_or_else(|| {
            unknown(format!(
                "the plugin registry holds no {name}@{}",
                version.chars().take(64).collect::<String>()
            ))
        })?;
        pins.insert(
            name.clone(),
            Pin {
                version: record.version,
                sha256: record.sha256,
            },
        );
    }
    for needed in needed {
        if !pins.contains_key(needed.name) {
            return Err(unknown(format!(
                "the plugin registry holds no `{}` component, which the `{set}` set runs",
                needed.name
            )));
        }
    }
    Ok((set, pins))
}
