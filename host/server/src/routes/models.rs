//! The model library: blobs uploaded by digest, revisions as manifests of
//! blobs, list, show, delete.

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde_json::{Value, json};
use switchyard_store::models::{ModelRevision, RevisionInsert};

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::library::{LibraryError, Stored, valid_digest};
use crate::state::AppState;

/// Longest model id, revision or file path.
const MAX_NAME: usize = 256;

/// A model id or revision: letters, digits, `-_.:`, not starting with a dot.
pub(crate) fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_NAME
        && !s.starts_with('.')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c))
}

/// A file path inside a model: relative, no `..`, no empty parts.
pub(crate) fn valid_path(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_NAME
        && s.split('/').all(|part| {
            !part.is_empty()
                && part != "."
                && part != ".."
                && part
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        })
}

/// Uploads one file's bytes under their SHA-256. The digest is computed
/// while the body streams to a temporary file; a mismatch keeps nothing.
#[utoipa::path(put, path = "/api/library/blobs/{sha256}", tag = "models",
    params(("sha256" = String, Path, description = "lowercase hex")),
    request_body(content = Vec<u8>, content_type = "application/octet-stream"),
    responses(
        (status = 201, description = "stored, `{sha256, size}`"),
        (status = 200, description = "it was there already"),
        (status = 400, description = "`invalid_request`: not a SHA-256"),
        (status = 422, description = "`digest_mismatch`: the bytes hash to something else; nothing kept"),
    ))]
pub async fn put_blob(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    Path(sha256): Path<String>,
    body: Body,
) -> ApiResult<(StatusCode, Json<Value>)> {
    caller.require("models:manage")?;
    if !valid_digest(&sha256) {
        return Err(ApiError::invalid_request(
            "a blob is named by its SHA-256 in lowercase hex",
        ));
    }
    let (stored, size) = state
        .library
        .put(&sha256, body.into_data_stream())
        .await
        .map_err(|e| match e {
            LibraryError::DigestMismatch { .. } => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "digest_mismatch",
                e.to_string(),
            ),
            LibraryError::Upload(_) => ApiError::invalid_request(e.to_string()),
            LibraryError::Io(e) => ApiError::internal(e),
        })?;
    let status = match stored {
        Stored::New => StatusCode::CREATED,
        Stored::AlreadyPresent => StatusCode::OK,
    };
    Ok((status, Json(json!({"sha256": sha256, "size": size}))))
}

/// Whether the library holds a blob, and its size.
#[utoipa::path(get, path = "/api/library/blobs/{sha256}", tag = "models",
    params(("sha256" = String, Path, description = "lowercase hex")),
    responses((status = 200, description = "`{sha256, size}`"), (status = 404, description = "`not_found`")))]
pub async fn blob(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    Path(sha256): Path<String>,
) -> ApiResult<Json<Value>> {
    caller.require("models:manage")?;
    let size = state
        .library
        .size(&sha256)
        .ok_or_else(|| ApiError::not_found(format!("blob {sha256}")))?;
    Ok(Json(json!({"sha256": sha256, "size": size})))
}

/// Registers a revision whose files are all in the library.
#[utoipa::path(post, path = "/api/models", tag = "models", request_body = ModelRevision,
    responses(
        (status = 201, description = "registered; the manifest"),
        (status = 200, description = "the same manifest was registered already"),
        (status = 400, description = "`invalid_request`: a bad id, revision or path, or no files"),
        (status = 409, description = "`revision_exists`: another manifest has this id and revision"),
        (status = 422, description = "`blob_missing`: files whose bytes are not in the library (upload them first)"),
    ))]
pub async fn register(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    Json(mut revision): Json<ModelRevision>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    caller.require("models:manage")?;
    if !valid_name(&revision.id) || !valid_name(&revision.revision) {
        return Err(ApiError::invalid_request(
            "id and revision are 1 to 256 letters, digits, '-', '_', '.' or ':'",
        ));
    }
    if revision.files.is_empty() {
        return Err(ApiError::invalid_request(
            "a revision has at least one file",
        ));
    }
    for file in &mut revision.files {
        file.sha256 = file.sha256.to_ascii_lowercase();
        if !valid_path(&file.path) || !valid_digest(&file.sha256) || file.size < 0 {
            return Err(ApiError::invalid_request(format!(
                "file `{}`: a relative path without `..`, a SHA-256 and a size are required",
                file.path
            )));
        }
    }
    let missing: Vec<&str> = revision
        .files
        .iter()
        .filter(|f| !state.library.has(&f.sha256, f.size as u64))
        .map(|f| f.path.as_str())
        .collect();
    if !missing.is_empty() {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "blob_missing",
            format!(
                "not in the library (upload them first): {}",
                missing.join(", ")
            ),
        ));
    }
    let (status, stored) = insert_revision(&state, &revision, &caller.key_id).await?;
    Ok((status, Json(stored)))
}

/// `409 revision_exists`: the id and revision name another manifest.
pub(crate) fn revision_exists(revision: &ModelRevision) -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "revision_exists",
        format!(
            "{}@{} is registered with other files; give a new revision",
            revision.id, revision.revision
        ),
    )
}

/// Stores a manifest whose files the library holds: 201 with the stored
/// manifest, 200 when the same one was there.
pub(crate) async fn insert_revision(
    state: &AppState,
    revision: &ModelRevision,
    by: &str,
) -> ApiResult<(StatusCode, Value)> {
    let status = match state.store.insert_model_revision(revision, by).await? {
        RevisionInsert::Created => StatusCode::CREATED,
        RevisionInsert::Same => StatusCode::OK,
        RevisionInsert::Conflict => return Err(revision_exists(revision)),
    };
    let stored = state
        .store
        .model_revision(&revision.id, &revision.revision)
        .await?;
    tracing::info!(model = %revision.id, revision = %revision.revision, by, "model revision registered");
    Ok((status, json!(stored)))
}

/// Every revision (without its files).
#[utoipa::path(get, path = "/api/models", tag = "models",
    responses((status = 200, description = "`{models: [{id, revision, licence, files, size, imported_at}]}`")))]
pub async fn list(caller: Caller, State(state): State<Arc<AppState>>) -> ApiResult<Json<Value>> {
    caller.require("models:manage")?;
    Ok(Json(
        json!({"models": state.store.model_revisions().await?}),
    ))
}

/// One revision's manifest.
#[utoipa::path(get, path = "/api/models/{id}/{revision}", tag = "models",
    params(("id" = String, Path), ("revision" = String, Path)),
    responses((status = 200, description = "the manifest"), (status = 404, description = "`not_found`")))]
pub async fn show(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    Path((id, revision)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    caller.require("models:manage")?;
    let found = state.store.model_revision(&id, &revision).await?;
    let found = found.ok_or_else(|| ApiError::not_found(format!("model {id}@{revision}")))?;
    Ok(Json(json!(found)))
}

/// Deletes a revision, and the blobs no other revision uses.
#[utoipa::path(delete, path = "/api/models/{id}/{revision}", tag = "models",
    params(("id" = String, Path), ("revision" = String, Path)),
    responses((status = 204, description = "deleted"), (status = 404, description = "`not_found`")))]
pub async fn delete(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    Path((id, revision)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    caller.require("models:manage")?;
    let unused = state
        .store
        .delete_model_revision(&id, &revision)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("model {id}@{revision}")))?;
    for digest in unused {
        if let Err(e) = state.library.remove(&digest).await {
            tracing::warn!(%digest, error = %e, "an unused blob was not removed");
        }
    }
    Ok(StatusCode::NO_CONTENT)
}
