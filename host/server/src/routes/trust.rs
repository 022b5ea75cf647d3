//! The keys this cluster trusts to sign plugins: list, add, remove (admin
//! only). Removing a key unloads nothing: running generations keep their
//! components, which the registry and the chains' status then show as
//! signed by a key no longer trusted; a new binding of them is refused
//! where their kind requires signatures.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use switchyard_protocol::signing::{
    MAX_KEY_COMMENT, MAX_KEY_NAME, MAX_TRUSTED_KEYS, NewTrustedKey, TrustedKey,
};
use switchyard_store::trust::Added;

use crate::auth::{Admin, Authorized};
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiJson, ApiPath};
use crate::state::AppState;
use switchyard_protocol::lists::TrustedKeys;

/// A trust request parsed: the key's canonical form, id, name and comment.
struct ValidKey {
    public_key: String,
    id: String,
    name: String,
    comment: Option<String>,
}

impl ValidKey {
    fn parse(new: NewTrustedKey) -> Result<Self, ApiError> {
        // Not echoed: a client that pasted the wrong file may have pasted a secret.
        // Lowercase hex only: the parsed text is the key's one textual form.
        let public_key = new.public_key.trim().to_string();
        let key = switchyard_signing::parse_public_key(&public_key).ok_or_else(|| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_public_key",
                "public_key must be 64 lowercase hex characters of an ed25519 public key (the FILE.pub that `switchyard trust keygen` writes)",
            )
        })?;
        let id = switchyard_signing::key_id(&key);
        let name = new.name.unwrap_or_else(|| id.clone());
        if !switchyard_protocol::valid::is_name(&name) || name.len() > MAX_KEY_NAME {
            return Err(ApiError::invalid_request(format!(
                "name must be 1 to {MAX_KEY_NAME} letters, digits, '-', '_', '.' or ':', not starting with '.'"
            )));
        }
        let comment = new.comment.filter(|c| !c.is_empty());
        if let Some(comment) = &comment
            && (comment.chars().count() > MAX_KEY_COMMENT || comment.chars().any(char::is_control))
        {
            return Err(ApiError::invalid_request(format!(
                "comment must be at most {MAX_KEY_COMMENT} characters without control characters"
            )));
        }
        Ok(Self {
            public_key,
            id,
            name,
            comment,
        })
    }
}

/// Every trusted key.
#[utoipa::path(get, path = "/api/trust/keys", tag = "trust",
    responses((status = 200, body = TrustedKeys, description = "Every trusted key",
        example = json!({"keys": [{"id": "5e1d0c9a7b3f2e41", "name": "release-2026", "public_key": "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "comment": "CI release key", "added_by": "k_admin", "added_at": "2026-05-01T10:00:00.000Z"}]}))))]
pub async fn list(
    _caller: Authorized<Admin>,
    State(state): State<Arc<AppState>>,
) -> ApiResult<Json<TrustedKeys>> {
    Ok(Json(TrustedKeys {
        keys: state.store.trusted_keys().await?,
    }))
}

/// Trusts a public key to sign plugins. Its id is the first 16 hex of the
/// SHA-256 of the key; adding a key trusted already answers it unchanged.
#[utoipa::path(post, path = "/api/trust/keys", tag = "trust", request_body = NewTrustedKey,
    responses(
        (status = 201, body = TrustedKey, description = "Trusted now"),
        (status = 200, body = TrustedKey, description = "Trusted already; unchanged"),
        (status = 400, description = "`invalid_public_key`: not 64 lowercase hex of an ed25519 key (nor a weak one); `invalid_request`: a name or comment out of bounds"),
        (status = 409, description = "`trust_set_full`: the cluster trusts 64 keys already"),
    ))]
pub async fn add(
    caller: Authorized<Admin>,
    State(state): State<Arc<AppState>>,
    ApiJson(new): ApiJson<NewTrustedKey>,
) -> ApiResult<(StatusCode, Json<TrustedKey>)> {
    let valid = ValidKey::parse(new)?;
    let key = TrustedKey {
        id: valid.id,
        name: valid.name,
        public_key: valid.public_key,
        comment: valid.comment,
        added_by: caller.key_id.clone(),
        added_at: String::new(),
    };
    match state.store.add_trusted_key(&key).await? {
        Added::Created(key) => {
            tracing::info!(key = %key.id, name = %key.name, by = %caller.key_id, "signing key trusted");
            Ok((StatusCode::CREATED, Json(key)))
        }
        Added::Existing(key) => Ok((StatusCode::OK, Json(key))),
        Added::Full => Err(ApiError::new(
            StatusCode::CONFLICT,
            "trust_set_full",
            format!("the cluster trusts {MAX_TRUSTED_KEYS} keys already; remove one first"),
        )),
    }
}

/// Stops trusting a key. Nothing running is unloaded: what it signed shows
/// as signed by a key no longer trusted.
#[utoipa::path(delete, path = "/api/trust/keys/{id}", tag = "trust",
    params(("id" = String, Path, description = "The key's id (16 hex)")),
    responses(
        (status = 200, body = TrustedKey, description = "Removed; the key as it was"),
        (status = 404, description = "`not_found`: no trusted key has this id"),
    ))]
pub async fn remove(
    caller: Authorized<Admin>,
    State(state): State<Arc<AppState>>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<TrustedKey>> {
    let removed = state
        .store
        .remove_trusted_key(&id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no trusted key '{id}'")))?;
    tracing::info!(key = %removed.id, name = %removed.name, by = %caller.key_id, "signing key no longer trusted");
    Ok(Json(removed))
}
