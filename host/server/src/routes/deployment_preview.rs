//! `POST /api/deployments/preview`: where the scheduler would place a new
//! deployment's replicas now and why nodes refuse one, without creating it.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use switchyard_protocol::admin::{DeploymentPreview, NewDeployment};

use super::deployments::valid_deployment;
use crate::auth::{Authorized, ModelsManage};
use crate::error::{ApiError, ApiResult};
use crate::extract::ApiJson;
use crate::state::AppState;
use switchyard_scheduler::PassError;

/// Previews a deployment's placement: the body is checked as create checks
/// it, then the scheduler's own placement (node filter, scoring, the
/// `deploy` admission chain) runs on the cluster as it is, writing nothing.
#[utoipa::path(post, path = "/api/deployments/preview", tag = "deployments", request_body = NewDeployment,
    responses(
        (status = 200, description = "where each replica would go, the nodes that refuse one and why, and whether every replica fits",
            body = DeploymentPreview,
            example = json!({"placements": [{"replica": 0, "node": "node_0a1b2c3d4e5f6071", "node_name": "gpu-a", "gpus": [0]}],
                "refused": [{"node": "node_9f8e7d6c5b4a3921", "node_name": "gpu-b", "reason": "pending an admin's approval"}],
                "placeable": true})),
        (status = 400, description = "`invalid_request`: as for create"),
        (status = 404, description = "`not_found`: no such model revision"),
        (status = 503, description = "`deploy_chain_unavailable`: the deploy chain could not judge a placement"),
    ))]
pub async fn preview(
    _caller: Authorized<ModelsManage>,
    State(state): State<Arc<AppState>>,
    ApiJson(body): ApiJson<NewDeployment>,
) -> ApiResult<Json<DeploymentPreview>> {
    let (deployment, revision) = valid_deployment(&state, body).await?;
    let nodes = state.store.nodes().await?;
    let replicas = state.store.replicas().await?;
    let preview = switchyard_scheduler::preview::preview(
        &state.admission,
        &deployment,
        &revision,
        &nodes,
        &replicas,
    )
    .await
    .map_err(|e| match e {
        PassError::Store(e) => ApiError::from(e),
        other => ApiError::new(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "deploy_chain_unavailable",
            other.to_string(),
        ),
    })?;
    Ok(Json(preview))
}
