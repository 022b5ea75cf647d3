//! API keys: created (the token shown once) and revoked by an admin.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use switchyard_protocol::admin::NewKey;
use switchyard_protocol::keys::{CreatedKey, Key, Keys};
use switchyard_store::keys::ApiKey;

use crate::auth::{Admin, Authorized, SCOPES};
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiJson, ApiPath};
use crate::state::AppState;

/// Creates a key; the token is in this answer and nowhere else.
#[utoipa::path(post, path = "/api/keys", tag = "keys", request_body = NewKey, responses(
    (status = 201, description = "The key and its token (shown once)", body = CreatedKey),
    (status = 400, description = "`invalid_request`: unknown scope, a team that does not exist, or a name that is empty, over 128 characters or has a control character"),
))]
pub async fn create(
    caller: Authorized<Admin>,
    State(state): State<Arc<AppState>>,
    ApiJson(new): ApiJson<NewKey>,
) -> ApiResult<(StatusCode, Json<CreatedKey>)> {
    switchyard_protocol::valid::label("name", &new.name)?;
    if let Some(bad) = new.scopes.iter().find(|s| !SCOPES.contains(&s.as_str())) {
        return Err(ApiError::invalid_request(format!(
            "unknown scope '{bad}'; known: {}",
            SCOPES.join(", ")
        )));
    }
    if new.scopes.is_empty() {
        return Err(ApiError::invalid_request("a key needs at least one scope"));
    }
    let team = new.team.as_deref();
    let Some((key, token)) = state.store.create_key(&new.name, &new.scopes, team).await? else {
        return Err(ApiError::invalid_request(format!(
            "no team '{}'; create it first (POST /api/teams)",
            team.unwrap_or_default()
        )));
    };
    tracing::info!(key = %key.id, by = %caller.key_id, "API key created");
    Ok((
        StatusCode::CREATED,
        Json(CreatedKey {
            key: answer(key),
            token,
        }),
    ))
}

/// Lists keys (never their tokens).
#[utoipa::path(get, path = "/api/keys", tag = "keys", responses((status = 200, description = "Every key", body = Keys)))]
pub async fn list(
    _caller: Authorized<Admin>,
    State(state): State<Arc<AppState>>,
) -> ApiResult<Json<Keys>> {
    let keys = state.store.keys().await?.into_iter().map(answer).collect();
    Ok(Json(Keys { keys }))
}

/// A key row as the API answers it.
fn answer(key: ApiKey) -> Key {
    Key {
        id: key.id,
        name: key.name,
        scopes: key.scopes,
        team: key.team,
        created_at: key.created_at,
        revoked_at: key.revoked_at,
    }
}

/// Revokes a key at once.
#[utoipa::path(delete, path = "/api/keys/{id}", tag = "keys", params(("id" = String, Path, description = "Key id")), responses(
    (status = 204, description = "Revoked"),
    (status = 404, description = "`not_found`"),
))]
pub async fn revoke(
    caller: Authorized<Admin>,
    State(state): State<Arc<AppState>>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<StatusCode> {
    let revoked = state.store.revoke_key(&id).await?;
    // This replica forgets it at once; others within the cache's TTL.
    state.keys.clear();
    match revoked {
        true => {
            tracing::info!(key = %id, by = %caller.key_id, "API key revoked");
            Ok(StatusCode::NO_CONTENT)
        }
        false => Err(ApiError::not_found(format!("no live key '{id}'"))),
    }
}
