//! Deployments: create, list, show (with replicas), scale, delete.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};
use switchyard_store::deployments::Deployment;
use switchyard_store::keys::random_id;

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// A new deployment.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct NewDeployment {
    /// The model's id in the library.
    pub model: String,
    /// Its revision.
    pub revision: String,
    /// `reference`, `llama-cpp` or `vllm`.
    pub engine: String,
    /// The model id clients use on `/v1` [default: the model's id].
    pub served_model_name: Option<String>,
    /// Replicas [default: 1].
    pub replicas: Option<i32>,
    /// GPUs per replica, on one node [default: 0].
    pub gpus_per_replica: Option<i32>,
    /// Memory each GPU must have, overriding the estimate (the files' size
    /// spread over the GPUs, plus a fifth for the KV cache).
    pub gpu_memory_bytes: Option<i64>,
    /// Requests one replica serves at once [default: 8].
    pub max_concurrency: Option<i32>,
    /// The reference engine's delay per token, in ms [default: 0].
    pub token_delay_ms: Option<i32>,
    /// `binpack` (fill the fullest node that fits) or `spread` [default: binpack].
    pub strategy: Option<String>,
    /// Labels a node must have, every pair, to hold a replica [default: none].
    #[schema(example = json!({"gpu": "h100"}))]
    pub node_selector: Option<BTreeMap<String, String>>,
}

/// A new replica count.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct Scale {
    /// Replicas wanted.
    pub replicas: i32,
}

const ENGINES: [&str; 3] = ["reference", "llama-cpp", "vllm"];

/// Creates a deployment; the scheduler places its replicas.
#[utoipa::path(post, path = "/api/deployments", tag = "deployments", request_body = NewDeployment,
    responses(
        (status = 201, description = "the deployment"),
        (status = 400, description = "`invalid_request`"),
        (status = 404, description = "`not_found`: no such model revision"),
        (status = 409, description = "`name_taken`: another deployment serves that name"),
    ))]
pub async fn create(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    Json(body): Json<NewDeployment>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    caller.require("models:manage")?;
    if !ENGINES.contains(&body.engine.as_str()) {
        return Err(ApiError::invalid_request(format!(
            "engine must be one of {}",
            ENGINES.join(", ")
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
    if gpus < 0 || replicas < 0 || concurrency < 1 || body.token_delay_ms.is_some_and(|d| d < 0) {
        return Err(ApiError::invalid_request(
            "replicas and gpus_per_replica are >= 0, max_concurrency >= 1",
        ));
    }
    let node_selector = crate::labels::validate(body.node_selector.unwrap_or_default())
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
    };
    if !["binpack", "spread"].contains(&deployment.strategy.as_str()) {
        return Err(ApiError::invalid_request("strategy is binpack or spread"));
    }
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
    Ok((StatusCode::CREATED, Json(json!(deployment))))
}

/// Every deployment with its replicas.
#[utoipa::path(get, path = "/api/deployments", tag = "deployments",
    responses((status = 200, description = "`{deployments: [{..., replicas_status: [...]}]}`")))]
pub async fn list(caller: Caller, State(state): State<Arc<AppState>>) -> ApiResult<Json<Value>> {
    caller.require("models:manage")?;
    let replicas = state.store.replicas().await?;
    let deployments: Vec<Value> = state
        .store
        .deployments()
        .await?
        .into_iter()
        .map(|d| {
            let mine: Vec<_> = replicas
                .iter()
                .filter(|r| r.deployment_id == d.id)
                .collect();
            json!({"deployment": d, "replicas_status": mine})
        })
        .collect();
    Ok(Json(json!({"deployments": deployments})))
}

/// One deployment with its replicas (state, node, GPUs, staging progress).
///
/// A staging replica has `staged_bytes` of `staging_total_bytes` on its
/// node; `deployment.pending_reason` says why a wanted replica is not
/// placed (no node matches the selector, none has the GPUs, the deploy
/// chain refused).
#[utoipa::path(get, path = "/api/deployments/{id}", tag = "deployments",
    params(("id" = String, Path)),
    responses((status = 200, description = "`{deployment, replicas_status}`"), (status = 404, description = "`not_found`")))]
pub async fn show(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    caller.require("models:manage")?;
    let deployment = state
        .store
        .deployment(&id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("deployment {id}")))?;
    let replicas: Vec<_> = state
        .store
        .replicas()
        .await?
        .into_iter()
        .filter(|r| r.deployment_id == id)
        .collect();
    Ok(Json(
        json!({"deployment": deployment, "replicas_status": replicas}),
    ))
}

/// Changes the replica count.
#[utoipa::path(put, path = "/api/deployments/{id}/replicas", tag = "deployments",
    params(("id" = String, Path)), request_body = Scale,
    responses((status = 204, description = "scaled"), (status = 404, description = "`not_found`")))]
pub async fn scale(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    Json(body): Json<Scale>,
) -> ApiResult<StatusCode> {
    caller.require("models:manage")?;
    if body.replicas < 0 {
        return Err(ApiError::invalid_request("replicas >= 0"));
    }
    if !state.store.scale_deployment(&id, body.replicas).await? {
        return Err(ApiError::not_found(format!("deployment {id}")));
    }
    Ok(StatusCode::NO_CONTENT)
}

/// Deletes a deployment (its engines are stopped by the workers' next
/// reconcile: they are no longer wanted).
#[utoipa::path(delete, path = "/api/deployments/{id}", tag = "deployments",
    params(("id" = String, Path)),
    responses((status = 204, description = "deleted"), (status = 404, description = "`not_found`")))]
pub async fn delete(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    caller.require("models:manage")?;
    // Scale to zero first so the engines drain, then forget the deployment.
    if !state.store.scale_deployment(&id, 0).await? {
        return Err(ApiError::not_found(format!("deployment {id}")));
    }
    state.store.delete_deployment(&id).await?;
    Ok(StatusCode::NO_CONTENT)
}
