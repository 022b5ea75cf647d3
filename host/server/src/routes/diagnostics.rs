//! Operators' checks of the carrier set: a control call to a node, a
//! stream to one of its services, and the probe of fan-out and the work
//! queue. Each goes through the seams, as the engines' code does.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use switchyard_carrier::stream_seam::Lane;
use switchyard_carrier::{ControlError, Refusal, Stream};
use switchyard_protocol::control::verbs;

use crate::auth::Authenticated;
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiJson, ApiQuery};
use crate::state::AppState;
use switchyard_carrier_set::Carriers;
use switchyard_carrier_set::probe::{PROBE_KIND, PROBE_SUBJECT};
use switchyard_protocol::lists::Probes;

/// The most a diagnostic stream returns.
const MAX_STREAM_ANSWER: usize = 64 * 1024 * 1024;
/// The default deadline of a control call.
const DEFAULT_DEADLINE_MS: u64 = 10_000;

/// The control verbs an operator may call on a node: checks and read-only
/// status. Everything that changes a node (`engine.start`, `engine.stop`,
/// `files.delete`, ...) is the scheduler's, from its own records: a
/// `nodes:manage` key must not run code on workers. (Kubernetes draws the
/// same line: `nodes/proxy` and `exec` are separate, rarely granted rights,
/// not part of managing nodes.)
pub const DIAGNOSTIC_VERBS: &[&str] = &[
    verbs::PING,
    verbs::ECHO,
    verbs::ENGINE_LIST,
    verbs::FILES_STATUS,
];

/// The stream services an operator may open: the carrier checks, which
/// touch neither engines nor files. `control` is left out: it carries any
/// verb, and the control route above already serves the allowed ones;
/// `inference` goes through `/v1/...` and its admission chain; `blob`
/// writes into the placement cache.
pub const DIAGNOSTIC_SERVICES: &[&str] = &["echo", "sink", "source"];

fn cluster(state: &AppState) -> Result<&Arc<Carriers>, ApiError> {
    state.carriers.as_ref().ok_or_else(|| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "carrier_unavailable",
            "this frontend runs no carrier set",
        )
    })
}

/// A control call's deadline.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
pub struct ControlParams {
    /// Milliseconds (default 10000).
    pub deadline_ms: Option<u64>,
}

/// Calls a control verb on a node; the body is the verb's payload, the
/// answer its result.
#[utoipa::path(post, path = "/api/cluster/nodes/{id}/control/{verb}", tag = "cluster",
    params(("id" = String, Path), ("verb" = String, Path), ControlParams),
    request_body(content = Vec<u8>, content_type = "application/octet-stream", description = "the verb's payload"),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "the verb's answer (bytes)"),
        (status = 403, description = "`verb_not_allowed`: only `ping`, `echo`, `engine.list` and `files.status` may be called here"),
        (status = 422, description = "`control_refused`: the worker refused (its code and message)"),
        (status = 502, description = "`control_failed`: the answer was lost or garbled"),
        (status = 503, description = "`node_unreachable`: the call never reached the node"),
        (status = 504, description = "`control_timeout`: no answer before the deadline"),
    ))]
pub async fn control(
    Authenticated(caller): Authenticated,
    State(state): State<Arc<AppState>>,
    Path((node, verb)): Path<(String, String)>,
    ApiQuery(params): ApiQuery<ControlParams>,
    payload: Bytes,
) -> ApiResult<Bytes> {
    caller.require("nodes:manage")?;
    if !DIAGNOSTIC_VERBS.contains(&verb.as_str()) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "verb_not_allowed",
            format!(
                "control verb `{verb:.64}` is not a diagnostic; allowed: {}",
                DIAGNOSTIC_VERBS.join(", ")
            ),
        ));
    }
    let deadline = Duration::from_millis(params.deadline_ms.unwrap_or(DEFAULT_DEADLINE_MS));
    let control = cluster(&state)?.control.active();
    control
        .call(&node, &verb, payload, deadline)
        .await
        .map_err(|e| match e {
            ControlError::Refused(refusal) => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "control_refused",
                refusal.to_string(),
            ),
            ControlError::Timeout => ApiError::new(
                StatusCode::GATEWAY_TIMEOUT,
                "control_timeout",
                e.to_string(),
            ),
            ControlError::NotDelivered(_) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "node_unreachable",
                e.to_string(),
            ),
            ControlError::NoRoute(_) => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "no_route", e.to_string())
            }
            ControlError::Failed(_) => {
                ApiError::new(StatusCode::BAD_GATEWAY, "control_failed", e.to_string())
            }
        })
}

/// The lane of a diagnostic stream.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
pub struct StreamParams {
    /// `inference` (default) or `bulk`.
    pub lane: Option<String>,
}

/// Opens a stream to a node's service, sends the body, finishes, and
/// answers with everything the service sent back.
#[utoipa::path(post, path = "/api/cluster/nodes/{id}/streams/{service}", tag = "cluster",
    params(("id" = String, Path), ("service" = String, Path), StreamParams),
    request_body(content = Vec<u8>, content_type = "application/octet-stream", description = "what to send before finishing"),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "what the service sent (bytes)"),
        (status = 403, description = "`service_not_allowed`: only `echo`, `sink` and `source` may be opened here"),
        (status = 404, description = "`unknown_service`"),
        (status = 422, description = "`service_refused`"),
        (status = 429, description = "`worker_overloaded`"),
        (status = 502, description = "`stream_reset`: the stream ended early"),
        (status = 503, description = "`node_unreachable`: the open never reached the node"),
    ))]
pub async fn stream(
    Authenticated(caller): Authenticated,
    State(state): State<Arc<AppState>>,
    Path((node, service)): Path<(String, String)>,
    ApiQuery(params): ApiQuery<StreamParams>,
    body: Bytes,
) -> ApiResult<Bytes> {
    caller.require("nodes:manage")?;
    if !DIAGNOSTIC_SERVICES.contains(&service.as_str()) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "service_not_allowed",
            format!(
                "stream service `{service:.64}` is not a diagnostic; allowed: {}",
                DIAGNOSTIC_SERVICES.join(", ")
            ),
        ));
    }
    let lane_name = params.lane.as_deref().unwrap_or("inference");
    let lane = Lane::parse(lane_name)
        .ok_or_else(|| ApiError::invalid_request("lane must be 'inference' or 'bulk'"))?;
    let streams = cluster(&state)?.streams.active();
    let Stream {
        mut reader,
        mut writer,
    } = streams
        .open(&node, lane, &service)
        .await
        .map_err(|refusal| match refusal {
            Refusal::UnknownService => ApiError::new(
                StatusCode::NOT_FOUND,
                "unknown_service",
                refusal.to_string(),
            ),
            Refusal::ServiceRefused(_) => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "service_refused",
                refusal.to_string(),
            ),
            Refusal::Overloaded => ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "worker_overloaded",
                refusal.to_string(),
            ),
            Refusal::NotDelivered(_) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "node_unreachable",
                refusal.to_string(),
            ),
            Refusal::NoRoute(_) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "no_route",
                refusal.to_string(),
            ),
        })?;
    let reset = |e: switchyard_carrier::StreamError| {
        ApiError::new(StatusCode::BAD_GATEWAY, "stream_reset", e.to_string())
    };
    let writing = async move {
        writer.write(body).await?;
        writer.finish();
        Ok(())
    };
    let (written, answer) = tokio::join!(writing, reader.read_to_end(MAX_STREAM_ANSWER));
    written.map_err(reset)?;
    Ok(Bytes::from(answer.map_err(reset)?))
}

/// A probe's id.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct ProbeRequest {
    /// Names the broadcast and the unit.
    pub id: String,
}

/// Publishes a probe broadcast (every replica hears it) and submits a probe
/// unit (one replica handles it).
#[utoipa::path(post, path = "/api/cluster/probe", tag = "cluster", request_body = ProbeRequest,
    security(("bearer" = [])),
    responses(
        (status = 202, description = "published and queued"),
        (status = 400, description = "`invalid_request`: the id is not 1 to 128 letters, digits, '-', '_', '.' or ':'"),
        (status = 502, description = "`carrier_failed`: the carrier refused"),
    ))]
pub async fn probe(
    Authenticated(caller): Authenticated,
    State(state): State<Arc<AppState>>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> ApiResult<StatusCode> {
    caller.require("nodes:manage")?;
    // Parsed after the scope check; the id is bounded (it is kept in lists).
    let ApiJson(request) = ApiJson::<ProbeRequest>::parse(&headers, &body)?;
    if !switchyard_carrier_set::probe::valid_probe_id(&request.id) {
        return Err(ApiError::invalid_request(format!(
            "id must be 1 to {} letters, digits, '-', '_', '.' or ':'",
            switchyard_carrier_set::probe::MAX_PROBE_ID
        )));
    }
    let cluster = cluster(&state)?;
    let failed = |e: switchyard_carrier::SendError| {
        ApiError::new(StatusCode::BAD_GATEWAY, "carrier_failed", e.to_string())
    };
    cluster
        .fanout
        .publish(PROBE_SUBJECT, Bytes::from(request.id.clone()))
        .await
        .map_err(failed)?;
    cluster
        .queue
        .submit(PROBE_KIND, &request.id, Bytes::from(request.id.clone()))
        .await
        .map_err(failed)?;
    Ok(StatusCode::ACCEPTED)
}

/// The probes this replica heard (broadcasts) and handled (units).
#[utoipa::path(get, path = "/api/cluster/probe", tag = "cluster",
    security(("bearer" = [])),
    responses((status = 200, body = Probes, description = "The probes this replica heard and handled")))]
pub async fn probes(
    Authenticated(caller): Authenticated,
    State(state): State<Arc<AppState>>,
) -> ApiResult<Json<Probes>> {
    caller.require("nodes:manage")?;
    let cluster = cluster(&state)?;
    Ok(Json(Probes {
        heard: cluster.probe.heard(),
        handled: cluster.probe.handled(),
    }))
}
