//! Deployments: create, list, show (with replicas), scale, delete.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use switchyard_protocol::admin::{NewDeployment, Scale};
use switchyard_protocol::deployments::{Deployment, DeploymentStatus, Deployments};
use switchyard_protocol::engines::EngineKind;
use switchyard_store::keys::random_id;
use switchyard_store::models::ModelRevision;

use crate::auth::{Authorized, ModelsManage};
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiJson, ApiPath};
use crate::state::AppState;

/// Most replicas of one deployment: each is an engine process the
/// scheduler places, stages and watches, and a bigger number is a typo
/// (`replicas: 10000`) that would occupy every node; larger fleets are
/// several deployments.
pub const MAX_REPLICAS: i32 = 256;
/// Most requests one replica serves at once: the frontend keeps a lease per
/// request, and engines batch in the hundreds, not the millions.
pub const MAX_CONCURRENCY: i32 = 4096;
/// Most GPUs one replica asks for: no node holds more (an 8- or 16-GPU box
/// is the largest sold), so more can never be placed.
pub const MAX_GPUS_PER_REPLICA: i32 = 64;
/// Longest reference-engine delay per token: one minute, far beyond any
/// test of slow streaming.
pub const MAX_TOKEN_DELAY_MS: i32 = 60_000;

/// `replicas` within `0..=MAX_REPLICAS`, or a 400 that says so.
fn check_replicas(replicas: i32) -> ApiResult<()> {
    if (0..=MAX_REPLICAS).contains(&replicas) {
        return Ok(());
    }
    Err(ApiError::invalid_request(format!(
        "replicas must be between 0 and {MAX_REPLICAS}, got {replicas}"
    )))
}

/// The sizes of a new deployment within their caps, or a 400 naming the first
/// that is not.
fn check_sizes(body: &NewDeployment) -> ApiResult<()> {
    check_replicas(body.replicas.unwrap_or(1))?;
    let bounded = [
        (
            "gpus_per_replica",
            body.gpus_per_replica.map(i64::from),
            0,
            i64::from(MAX_GPUS_PER_REPLICA),
        ),
        (
            "max_concurrency",
            body.max_concurrency.map(i64::from),
            1,
            i64::from(MAX_CONCURRENCY),
        ),
        (
            "token_delay_ms",
            body.token_delay_ms.map(i64::from),
            0,
            i64::from(MAX_TOKEN_DELAY_MS),
        ),
        ("gpu_memory_bytes", body.gpu_memory_bytes, 0, i64::MAX),
    ];
    for (field, value, min, max) in bounded {
        if let Some(value) = value
            && !(min..=max).contains(&value)
        {
            let bound = if max == i64::MAX {
                format!("at least {min}")
            } else {
                format!("between {min} and {max}")
            };
            return Err(ApiError::invalid_request(format!(
                "{field} must be {bound}, got {value}"
            )));
        }
    }
    Ok(())
}

/// The deployment `body` asks for, checked as create checks it (a 400 for
/// a bad field, a 404 for an unknown revision), and its revision; nothing
/// is written. Create and the placement preview share it.
pub(crate) async fn valid_deployment(
    state: &AppState,
    body: NewDeployment,
) -> ApiResult<(Deployment, ModelRevision)> {
    switchyard_protocol::valid::name("model", &body.model)?;
    switchyard_protocol::valid::name("revision", &body.revision)?;
    if let Some(served) = &body.served_model_name {
        switchyard_protocol::valid::served_name("served_model_name", served)?;
    }
    check_sizes(&body)?;
    if body.engine.parse::<EngineKind>().is_err() {
        let kinds: Vec<&str> = EngineKind::ALL.iter().map(|k| k.as_str()).collect();
        return Err(ApiError::invalid_request(format!(
            "engine must be one of {}",
            kinds.join(", ")
        )));
    }
    let revision = state
        .store
        .model_revision(&body.model, &body.revision)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("model {}@{}", body.model, body.revision)))?;
    let gpus = body.gpus_per_replica.unwrap_or(0);
    let replicas = body.replicas.unwrap_or(1);
    let concurrency = body.max_concurrency.unwrap_or(8);
    let node_selector =
        switchyard_protocol::labels::validate(body.node_selector.unwrap_or_default())
            .map_err(|e| ApiError::invalid_request(format!("node_selector: {e}")))?;
    let estimate = if gpus == 0 {
        0
    } else {
        revision.size() / i64::from(gpus) * 6 / 5
    };
    let deployment = Deployment {
        id: random_id("dep"),
        model_id: body.model.clone(),
        revision: body.revision.clone(),
        engine: body.engine.clone(),
        served_model_name: body.served_model_name.unwrap_or(body.model),
        replicas,
        gpus_per_replica: gpus,
        gpu_memory_bytes: body.gpu_memory_bytes.unwrap_or(estimate),
        max_concurrency: concurrency,
        token_delay_ms: body.token_delay_ms.unwrap_or(0),
        strategy: body.strategy.unwrap_or_else(|| "binpack".into()),
        node_selector,
        pending_reason: None,
        nodes: Vec::new(),
    };
    if !["binpack", "spread"].contains(&deployment.strategy.as_str()) {
        return Err(ApiError::invalid_request("strategy is binpack or spread"));
    }
    Ok((deployment, revision))
}

/// Creates a deployment; the scheduler places its replicas.
#[utoipa::path(post, path = "/api/deployments", tag = "deployments", request_body = NewDeployment,
    responses(
        (status = 201, body = Deployment, description = "the deployment"),
        (status = 400, description = "`invalid_request`: a bad name, an unknown engine or strategy, or a size beyond its cap (replicas 0..=256, max_concurrency 1..=4096, gpus_per_replica 0..=64, token_delay_ms 0..=60000, gpu_memory_bytes >= 0)"),
        (status = 404, description = "`not_found`: no such model revision"),
        (status = 409, description = "`name_taken`: another deployment serves that name"),
    ))]
pub async fn create(
    caller: Authorized<ModelsManage>,
    State(state): State<Arc<AppState>>,
    ApiJson(body): ApiJson<NewDeployment>,
) -> ApiResult<(StatusCode, Json<Deployment>)> {
    let (deployment, _) = valid_deployment(&state, body).await?;
    if !state
        .store
        .insert_deployment(&deployment, &caller.key_id)
        .await?
    {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "name_taken",
            format!(
                "a deployment already serves `{}`",
                deployment.served_model_name
            ),
        ));
    }
    tracing::info!(deployment = %deployment.id, model = %deployment.served_model_name, by = %caller.key_id, "deployment created");
    Ok((StatusCode::CREATED, Json(deployment)))
}

/// Every deployment with its replicas.
#[utoipa::path(get, path = "/api/deployments", tag = "deployments",
    responses((status = 200, body = Deployments, description = "Every deployment with its replicas")))]
pub async fn list(
    _caller: Authorized<ModelsManage>,
    State(state): State<Arc<AppState>>,
) -> ApiResult<Json<Deployments>> {
    let replicas = state.store.replicas().await?;
    let deployments = state
        .store
        .deployments()
        .await?
        .into_iter()
        .map(|deployment| DeploymentStatus {
            replicas_status: replicas
                .iter()
                .filter(|r| r.deployment_id == deployment.id)
                .cloned()
                .collect(),
            deployment,
        })
        .collect();
    Ok(Json(Deployments { deployments }))
}

/// One deployment with its replicas (state, node, GPUs, staging progress).
///
/// A staging replica has `staged_bytes` of `staging_total_bytes` on its
/// node; `deployment.pending_reason` says why a wanted replica is not
/// placed (no node matches the selector, none has the GPUs, the deploy
/// chain refused).
#[utoipa::path(get, path = "/api/deployments/{id}", tag = "deployments",
    params(("id" = String, Path)),
    responses((status = 200, body = DeploymentStatus, description = "The deployment with its replicas"), (status = 404, description = "`not_found`")))]
pub async fn show(
    _caller: Authorized<ModelsManage>,
    State(state): State<Arc<AppState>>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<DeploymentStatus>> {
    let deployment = state
        .store
        .deployment(&id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("deployment {id}")))?;
    let replicas_status = state
        .store
        .replicas()
        .await?
        .into_iter()
        .filter(|r| r.deployment_id == id)
        .collect();
    Ok(Json(DeploymentStatus {
        deployment,
        replicas_status,
    }))
}

/// Changes the replica count.
#[utoipa::path(put, path = "/api/deployments/{id}/replicas", tag = "deployments",
    params(("id" = String, Path)), request_body = Scale,
    responses((status = 204, description = "scaled"), (status = 400, description = "`invalid_request`: replicas outside 0..=256"), (status = 404, description = "`not_found`")))]
pub async fn scale(
    _caller: Authorized<ModelsManage>,
    State(state): State<Arc<AppState>>,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<Scale>,
) -> ApiResult<StatusCode> {
    check_replicas(body.replicas)?;
    if !state.store.scale_deployment(&id, body.replicas).await? {
        return Err(ApiError::not_found(format!("deployment {id}")));
    }
    Ok(StatusCode::NO_CONTENT)
}

/// Deletes a deployment. Its replicas stay, `stopping`, until their
/// engines are drained (their GPUs count as used until the worker confirms).
#[utoipa::path(delete, path = "/api/deployments/{id}", tag = "deployments",
    params(("id" = String, Path)),
    responses((status = 204, description = "deleted"), (status = 404, description = "`not_found`")))]
pub async fn delete(
    _caller: Authorized<ModelsManage>,
    State(state): State<Arc<AppState>>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<StatusCode> {
    // Scale to zero first so the engines drain, then forget the deployment.
    if !state.store.scale_deployment(&id, 0).await? {
        return Err(ApiError::not_found(format!("deployment {id}")));
    }
    state.store.delete_deployment(&id).await?;
    Ok(StatusCode::NO_CONTENT)
}
