//! The model library: blobs uploaded by digest, revisions as manifests of
//! blobs, list, show, delete.

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::StatusCode;
use futures::StreamExt;
use switchyard_protocol::models::{Blob, Models};
use switchyard_store::models::{ModelRevision, RevisionInsert};

use crate::auth::{Authorized, ModelsManage};
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiJson, ApiPath};
use crate::state::AppState;
use switchyard_library::{LibraryError, Stored, valid_digest};

use switchyard_protocol::valid::MAX_NAME;

/// A model id or revision: the shared rule of [`switchyard_protocol::valid::is_name`].
pub(crate) fn valid_name(s: &str) -> bool {
    switchyard_protocol::valid::is_name(s)
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
        (status = 201, body = Blob, description = "stored"),
        (status = 200, description = "it was there already"),
        (status = 400, description = "`invalid_request`: not a SHA-256"),
        (status = 408, description = "`body_timeout`: the body sent nothing for 30 s, or came slower than 16 KiB/s after its first 10 s (the defaults); nothing kept"),
        (status = 413, description = "`too_large`: more bytes than the library takes (`--max-blob-bytes`, 256 GiB by default); nothing kept"),
        (status = 422, description = "`digest_mismatch`: the bytes hash to something else; nothing kept"),
    ))]
pub async fn put_blob(
    _caller: Authorized<ModelsManage>,
    State(state): State<Arc<AppState>>,
    ApiPath(sha256): ApiPath<String>,
    headers: axum::http::HeaderMap,
    body: Body,
) -> ApiResult<(StatusCode, Json<Blob>)> {
    if !valid_digest(&sha256) {
        return Err(ApiError::invalid_request(
            "a blob is named by its SHA-256 in lowercase hex",
        ));
    }
    // A declared length over the limit is refused before a byte is read.
    let limit = state.library.max_bytes();
    let declared = headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(LibraryError::TooLarge { limit }.into());
    }
    // Whether the body timed out (the edge's clocks); the library sees
    // only that the upload failed.
    let stalled = std::sync::atomic::AtomicBool::new(false);
    let body = body.into_data_stream().map(|chunk| {
        chunk.inspect_err(|e| {
            if crate::edge::BodyTimeout::is(e) {
                stalled.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        })
    });
    let (stored, size) = state
        .library
        .put(&sha256, body)
        .await
        .map_err(|e| match e {
            // The edge's body clocks, not the client's bytes.
            LibraryError::Upload(_) if stalled.load(std::sync::atomic::Ordering::Relaxed) => {
                ApiError::new(StatusCode::REQUEST_TIMEOUT, "body_timeout", e.to_string())
            }
            e => e.into(),
        })?;
    let status = match stored {
        Stored::New => StatusCode::CREATED,
        Stored::AlreadyPresent => StatusCode::OK,
    };
    Ok((status, Json(Blob { sha256, size })))
}

/// Whether the library holds a blob, and its size.
#[utoipa::path(get, path = "/api/library/blobs/{sha256}", tag = "models",
    params(("sha256" = String, Path, description = "lowercase hex")),
    responses(
        (status = 200, body = Blob, description = "The blob; one a manifest names but this replica lacks is fetched from another replica first"),
        (status = 404, description = "`not_found`"),
        (status = 503, description = "`blob_unavailable`: a manifest names it, but no replica could provide it now"),
    ))]
pub async fn blob(
    _caller: Authorized<ModelsManage>,
    State(state): State<Arc<AppState>>,
    ApiPath(sha256): ApiPath<String>,
) -> ApiResult<Json<Blob>> {
    // A blob a manifest names is served by every replica: one that lacks it
    // (the model was imported through another) fetches it from the others.
    if state.library.size(&sha256).is_none()
        && valid_digest(&sha256)
        && let Some(declared) = state.store.manifest_blob_size(&sha256).await?
    {
        let size = declared.max(0) as u64;
        switchyard_library::ensure_blob(
            &state.library,
            &state.store,
            &state.instance_id,
            &sha256,
            size,
        )
        .await?;
    }
    let size = state
        .library
        .size(&sha256)
        .ok_or_else(|| ApiError::not_found(format!("blob {sha256}")))?;
    Ok(Json(Blob { sha256, size }))
}

/// Registers a revision whose files are all in the library.
#[utoipa::path(post, path = "/api/models", tag = "models", request_body = ModelRevision,
    responses(
        (status = 201, body = ModelRevision, description = "registered; the manifest"),
        (status = 200, description = "the same manifest was registered already"),
        (status = 400, description = "`invalid_request`: a bad id, revision or path, or no files"),
        (status = 409, description = "`revision_exists`: another manifest has this id and revision"),
        (status = 422, description = "`blob_missing`: files whose bytes are not in the library (upload them first)"),
    ))]
pub async fn register(
    caller: Authorized<ModelsManage>,
    State(state): State<Arc<AppState>>,
    ApiJson(mut revision): ApiJson<ModelRevision>,
) -> ApiResult<(StatusCode, Json<ModelRevision>)> {
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
) -> ApiResult<(StatusCode, ModelRevision)> {
    let status = match state.store.insert_model_revision(revision, by).await? {
        RevisionInsert::Created => StatusCode::CREATED,
        RevisionInsert::Same => StatusCode::OK,
        RevisionInsert::Conflict => return Err(revision_exists(revision)),
    };
    let stored = state
        .store
        .model_revision(&revision.id, &revision.revision)
        .await?
        // Deleted between the insert and the read.
        .ok_or_else(|| {
            ApiError::not_found(format!("model {}@{}", revision.id, revision.revision))
        })?;
    tracing::info!(model = %revision.id, revision = %revision.revision, by, "model revision registered");
    Ok((status, stored))
}

/// Every revision (without its files).
#[utoipa::path(get, path = "/api/models", tag = "models",
    responses((status = 200, body = Models, description = "Every revision, without its files")))]
pub async fn list(
    _caller: Authorized<ModelsManage>,
    State(state): State<Arc<AppState>>,
) -> ApiResult<Json<Models>> {
    Ok(Json(Models {
        models: state.store.model_revisions().await?,
    }))
}

/// One revision's manifest.
#[utoipa::path(get, path = "/api/models/{id}/{revision}", tag = "models",
    params(("id" = String, Path), ("revision" = String, Path)),
    responses((status = 200, body = ModelRevision, description = "the manifest"), (status = 404, description = "`not_found`")))]
pub async fn show(
    _caller: Authorized<ModelsManage>,
    State(state): State<Arc<AppState>>,
    ApiPath((id, revision)): ApiPath<(String, String)>,
) -> ApiResult<Json<ModelRevision>> {
    let found = state.store.model_revision(&id, &revision).await?;
    let found = found.ok_or_else(|| ApiError::not_found(format!("model {id}@{revision}")))?;
    Ok(Json(found))
}

/// Deletes a revision, and the blobs no other revision uses.
#[utoipa::path(delete, path = "/api/models/{id}/{revision}", tag = "models",
    params(("id" = String, Path), ("revision" = String, Path)),
    responses((status = 204, description = "deleted"), (status = 404, description = "`not_found`"),
        (status = 409, description = "`model_in_use`: a deployment uses this revision")))]
pub async fn delete(
    _caller: Authorized<ModelsManage>,
    State(state): State<Arc<AppState>>,
    ApiPath((id, revision)): ApiPath<(String, String)>,
) -> ApiResult<StatusCode> {
    let unused = state
        .store
        .delete_model_revision(&id, &revision)
        .await
        .map_err(|e| match e.sqlstate() {
            // A deployment's foreign key: its engines run these files.
            Some("23503") => ApiError::new(
                StatusCode::CONFLICT,
                "model_in_use",
                format!("{id}@{revision} is used by a deployment; delete the deployment first"),
            ),
            _ => e.into(),
        })?
        .ok_or_else(|| ApiError::not_found(format!("model {id}@{revision}")))?;
    for digest in unused {
        if let Err(e) = state.library.remove(&digest).await {
            tracing::warn!(%digest, error = %e, "an unused blob was not removed");
        }
    }
    Ok(StatusCode::NO_CONTENT)
}
