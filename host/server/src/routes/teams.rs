//! Teams: created, listed and deleted by an admin; a key joins one when it
//! is created (`team` on `POST /api/keys`).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use switchyard_protocol::teams::{NewTeam, Team, Teams};
use switchyard_store::teams::TeamDeletion;

use crate::auth::{Admin, Authorized};
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiJson, ApiPath};
use crate::state::AppState;

/// Creates a team.
#[utoipa::path(post, path = "/api/teams", tag = "keys", request_body = NewTeam, responses(
    (status = 201, description = "The team", body = Team),
    (status = 400, description = "`invalid_request`: a name that is empty, over 128 characters or has a control character"),
    (status = 409, description = "`team_exists`"),
))]
pub async fn create(
    caller: Authorized<Admin>,
    State(state): State<Arc<AppState>>,
    ApiJson(new): ApiJson<NewTeam>,
) -> ApiResult<(StatusCode, Json<Team>)> {
    switchyard_protocol::valid::label("name", &new.name)?;
    let Some(team) = state.store.create_team(&new.name).await? else {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "team_exists",
            format!("a team named '{}' exists", new.name),
        ));
    };
    tracing::info!(team = %team.name, by = %caller.key_id, "team created");
    Ok((StatusCode::CREATED, Json(team)))
}

/// Lists teams with their live keys.
#[utoipa::path(get, path = "/api/teams", tag = "keys", responses((status = 200, description = "Every team", body = Teams)))]
pub async fn list(
    _caller: Authorized<Admin>,
    State(state): State<Arc<AppState>>,
) -> ApiResult<Json<Teams>> {
    Ok(Json(Teams {
        teams: state.store.teams().await?,
    }))
}

/// Deletes a team that no live key is in.
#[utoipa::path(delete, path = "/api/teams/{name}", tag = "keys", params(("name" = String, Path, description = "Team name")), responses(
    (status = 204, description = "Deleted (its revoked keys no longer name it)"),
    (status = 404, description = "`not_found`"),
    (status = 409, description = "`team_in_use`: live keys are in it; revoke them first"),
))]
pub async fn delete(
    caller: Authorized<Admin>,
    State(state): State<Arc<AppState>>,
    ApiPath(name): ApiPath<String>,
) -> ApiResult<StatusCode> {
    match state.store.delete_team(&name).await? {
        TeamDeletion::Deleted => {
            tracing::info!(team = %name, by = %caller.key_id, "team deleted");
            Ok(StatusCode::NO_CONTENT)
        }
        TeamDeletion::Missing => Err(ApiError::not_found(format!("no team '{name}'"))),
        TeamDeletion::InUse(keys) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "team_in_use",
            format!("{keys} live key(s) are in team '{name}'; revoke them first"),
        )),
    }
}
