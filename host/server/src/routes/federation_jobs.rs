//! Whether peers may choose this cluster as the owner of new jobs:
//! maintenance and drain make it ineligible (running jobs go on and stay
//! here; nothing moves), undrain makes it eligible again.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use switchyard_protocol::jobs::{OwnerEligibility, SetEligibility};

use crate::auth::{Authorized, FederationManage};
use crate::error::ApiError;
use crate::error::{FedResult, federation};
use crate::extract::ApiJson;
use crate::state::AppState;

/// The longest reason kept.
const MAX_REASON: usize = 256;

/// Whether peers may choose this cluster as a job's owner, and its jobs
/// not ended (what a drain waits for).
#[utoipa::path(get, path = "/api/federation/eligibility", tag = "federation",
    security(("bearer" = [])),
    responses((status = 200, body = OwnerEligibility)))]
pub async fn show(
    _caller: Authorized<FederationManage>,
    State(state): State<Arc<AppState>>,
) -> FedResult<Json<OwnerEligibility>> {
    federation(&state)?;
    Ok(Json(
        state.store.eligibility().await.map_err(ApiError::from)?,
    ))
}

/// Says whether peers may choose this cluster as a job's owner:
/// `maintenance` or `draining` refuses their new jobs (409
/// `owner_not_eligible` on their side), `eligible` takes them again.
#[utoipa::path(put, path = "/api/federation/eligibility", tag = "federation",
    security(("bearer" = [])),
    request_body = SetEligibility,
    responses(
        (status = 200, body = OwnerEligibility),
        (status = 400, description = "`invalid_request`: an unknown state, or a reason over 256 characters or with control characters"),
    ))]
pub async fn set(
    caller: Authorized<FederationManage>,
    State(state): State<Arc<AppState>>,
    ApiJson(body): ApiJson<SetEligibility>,
) -> FedResult<Json<OwnerEligibility>> {
    federation(&state)?;
    if body.reason.chars().count() > MAX_REASON || body.reason.chars().any(char::is_control) {
        return Err(ApiError::invalid_request(format!(
            "a reason is at most {MAX_REASON} characters, none of them control characters"
        ))
        .into());
    }
    state
        .store
        .set_eligibility(body.state, &body.reason)
        .await
        .map_err(ApiError::from)?;
    tracing::info!(state = %body.state, reason = %body.reason, by = %caller.key_id, "job owner eligibility changed");
    Ok(Json(
        state.store.eligibility().await.map_err(ApiError::from)?,
    ))
}
