//! The OpenAI Batch API: `/v1/files` and `/v1/batches`, for keys with the
//! `inference` scope (or `admin`). A thin shell over [`switchyard_batches`].
//! Each key sees only the files and batches it created (an `admin` key
//! sees all): another key's answer 404, as an id that does not exist.

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::multipart::{MultipartError, MultipartRejection};
use axum::extract::{Multipart, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use switchyard_protocol::batch::{
    Batch, BatchList, CreateBatch, EXPIRES_ANCHOR, FileDeleted, FileObject, MAX_EXPIRES_SECONDS,
    MIN_EXPIRES_SECONDS,
};

use crate::auth::{Authorized, Caller, Inference};
use crate::error::FedResult;
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiJson, ApiPath, ApiQuery};
use crate::jobs;
use crate::state::AppState;
use switchyard_batches::{self as batches, MAX_FILE_BYTES, Upload, access};

/// The largest multipart body: the file and the form around it.
pub const MAX_UPLOAD_BODY: usize = MAX_FILE_BYTES + (64 << 10);
/// Longest text field of the upload form (`purpose`, `expires_after[…]`).
const MAX_FIELD: usize = 1024;

fn multipart_error(e: MultipartError) -> ApiError {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return batches::too_large().into();
    }
    ApiError::invalid_request(format!(
        "the upload is not a multipart form: {}",
        e.body_text()
    ))
}

/// A body that is no multipart form: 415 when it says it is something
/// else, 400 when its form is broken (axum's own answer is text).
fn not_a_form(rejection: MultipartRejection) -> ApiError {
    let message = format!(
        "the upload must be a multipart form: {}",
        rejection.body_text()
    );
    match rejection.status() {
        StatusCode::UNSUPPORTED_MEDIA_TYPE => ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            message,
        ),
        _ => ApiError::invalid_request(message),
    }
}

/// The upload form's fields, as they arrive; the file is written as it streams.
#[derive(Default)]
struct Form {
    purpose: Option<String>,
    anchor: Option<String>,
    seconds: Option<String>,
    upload: Option<Upload>,
}

/// A short text field of the form, read whole.
async fn text(mut field: axum::extract::multipart::Field<'_>) -> ApiResult<String> {
    let mut text = Vec::new();
    while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
        text.extend_from_slice(&chunk);
        if text.len() > MAX_FIELD {
            return Err(ApiError::invalid_request(format!(
                "a form field is at most {MAX_FIELD} bytes"
            )));
        }
    }
    Ok(String::from_utf8_lossy(&text).into_owned())
}

/// Reads the form, writing the file as its bytes arrive.
async fn read_form(state: &AppState, caller: &Caller, mut form: Multipart) -> ApiResult<Form> {
    let mut read = Form::default();
    while let Some(mut field) = form.next_field().await.map_err(multipart_error)? {
        match field.name() {
            Some("purpose") => {
                let purpose = text(field).await?;
                // Refused before a file that follows is read.
                batches::check_purpose(&purpose)?;
                read.purpose = Some(purpose);
            }
            Some("expires_after[anchor]") => read.anchor = Some(text(field).await?),
            Some("expires_after[seconds]") => read.seconds = Some(text(field).await?),
            Some("file") if read.upload.is_none() => {
                let name = field.file_name().unwrap_or("upload.jsonl").to_string();
                let upload = read
                    .upload
                    .insert(Upload::begin(&state.batches, access::owner(caller), &name).await?);
                while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
                    upload.push(&chunk).await?;
                }
            }
            Some("file") => return Err(ApiError::invalid_request("the form has two `file`s")),
            // OpenAI's clients send nothing else; anything else is skipped.
            _ => {}
        }
    }
    Ok(read)
}

/// `expires_after[seconds]` with its anchor, as OpenAI takes them; the
/// longest when the form names none.
fn expires_after(anchor: Option<&str>, seconds: Option<&str>) -> ApiResult<i64> {
    let refuse =
        |message: String| ApiError::new(StatusCode::BAD_REQUEST, "invalid_expires_after", message);
    if anchor.is_some_and(|a| a != EXPIRES_ANCHOR) {
        return Err(refuse(format!(
            "expires_after[anchor] must be `{EXPIRES_ANCHOR}`"
        )));
    }
    let Some(seconds) = seconds else {
        return match anchor {
            Some(_) => Err(refuse("expires_after[seconds] is missing".into())),
            None => Ok(MAX_EXPIRES_SECONDS),
        };
    };
    match seconds.trim().parse::<i64>() {
        Ok(s) if (MIN_EXPIRES_SECONDS..=MAX_EXPIRES_SECONDS).contains(&s) => Ok(s),
        _ => Err(refuse(format!(
            "expires_after[seconds] must be an integer from {MIN_EXPIRES_SECONDS} to {MAX_EXPIRES_SECONDS}"
        ))),
    }
}

/// Uploads a batch's input: a multipart form with `purpose` (`batch`),
/// `file` (JSONL, one request a line) and optionally OpenAI's
/// `expires_after[anchor]` (`created_at`) and `expires_after[seconds]`.
/// The file is checked and stored as it streams in; it belongs to the
/// caller's key.
#[utoipa::path(post, path = "/v1/files", tag = "batches",
    request_body(content_type = "multipart/form-data", description = "`purpose`: `batch`; `file`: the JSONL, each line `{custom_id, method: POST, url, body}` (at most 50,000 lines, each at most 2 MiB); `expires_after[anchor]`: `created_at`; `expires_after[seconds]`: 3600 to 2592000 (default 2592000, 30 days)"),
    responses(
        (status = 200, description = "The file, with its `expires_at`", body = FileObject),
        (status = 400, description = "`invalid_purpose`, `invalid_expires_after`, `invalid_jsonl`, `missing_custom_id`, `invalid_custom_id`, `duplicate_custom_id`, `invalid_method`, `invalid_url`, `invalid_body`, `line_too_large` (a line longer than a `/v1` request body, 2 MiB), `too_many_lines`, `empty_file` (the message names the line), or `invalid_request`"),
        (status = 413, description = "`file_too_large`: over 64 MiB; `quota_exceeded`: the key's files would hold more than its quota (`--batch-storage-quota-bytes`, 512 MiB by default)"),
    ))]
pub async fn upload(
    caller: Authorized<Inference>,
    State(state): State<Arc<AppState>>,
    form: Result<Multipart, MultipartRejection>,
) -> ApiResult<Json<FileObject>> {
    let form = read_form(&state, &caller, form.map_err(not_a_form)?).await?;
    let purpose = form
        .purpose
        .ok_or_else(|| ApiError::invalid_request("the form has no `purpose`"))?;
    let expires = expires_after(form.anchor.as_deref(), form.seconds.as_deref())?;
    let upload = form
        .upload
        .ok_or_else(|| ApiError::invalid_request("the form has no `file`"))?;
    let created = upload.finish(&purpose, expires).await?;
    tracing::info!(file = %created.id, key = %caller.key_id, bytes = created.bytes, "batch file uploaded");
    Ok(Json(created))
}

/// Deletes a file of the caller's (an `admin` key: anyone's). A batch
/// created from it keeps its lines; its output stays readable from the
/// lines until its own file is deleted.
#[utoipa::path(delete, path = "/v1/files/{id}", tag = "batches",
    params(("id" = String, Path, description = "`file-…`")),
    responses(
        (status = 200, description = "Deleted", body = FileDeleted),
        (status = 404, description = "`file_not_found`: no such file, or another key's"),
    ))]
pub async fn delete_file(
    caller: Authorized<Inference>,
    State(state): State<Arc<AppState>>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<FileDeleted>> {
    let deleted = batches::delete_file(&state.batches, access::visible(&caller), &id).await?;
    tracing::info!(file = %id, key = %caller.key_id, "batch file deleted");
    Ok(Json(deleted))
}

/// A file's record.
#[utoipa::path(get, path = "/v1/files/{id}", tag = "batches",
    params(("id" = String, Path, description = "`file-…`")),
    responses(
        (status = 200, description = "The file", body = FileObject),
        (status = 404, description = "`file_not_found`: no such file, expired, or another key's"),
        (status = 503, description = "`NODE_UNAVAILABLE`: the file's job is a peer's that cannot be reached"),
    ))]
pub async fn show_file(
    caller: Authorized<Inference>,
    State(state): State<Arc<AppState>>,
    ApiPath(id): ApiPath<String>,
) -> FedResult<Json<FileObject>> {
    Ok(Json(jobs::file(&state, &caller, &id).await?))
}

/// A file's content: an upload as sent, or a batch's output or error file
/// (`{id, custom_id, response: {status_code, request_id, body}, error}` a line).
#[utoipa::path(get, path = "/v1/files/{id}/content", tag = "batches",
    params(("id" = String, Path, description = "`file-…`")),
    responses(
        (status = 200, description = "The JSONL", content_type = "application/jsonl"),
        (status = 404, description = "`file_not_found`: no such file, expired, or another key's"),
        (status = 503, description = "`NODE_UNAVAILABLE`: the file's job is a peer's that cannot be reached"),
    ))]
pub async fn file_content(
    caller: Authorized<Inference>,
    State(state): State<Arc<AppState>>,
    ApiPath(id): ApiPath<String>,
) -> FedResult<Response> {
    let content = jobs::file_content(&state, &caller, &id).await?;
    Ok((
        [(header::CONTENT_TYPE, "application/jsonl")],
        Body::from_stream(content),
    )
        .into_response())
}

/// Creates a batch from an uploaded file; its lines run as this caller, on
/// its one owner cluster: this one, the peer `metadata.owner` names, or
/// the peer whose service (`<peer>/<service>`) the first line names.
#[utoipa::path(post, path = "/v1/batches", tag = "batches", request_body = CreateBatch,
    responses(
        (status = 200, description = "The batch, `validating`", body = Batch),
        (status = 400, description = "`invalid_endpoint`, `invalid_completion_window` (only `24h`), `invalid_metadata` (at most 16 keys), `invalid_file`, `endpoint_mismatch` (a line calls another endpoint), `too_many_models`, or a line's code as at upload"),
        (status = 403, description = "The owner refused the job under its grant (`no_grant`, `requests_exhausted`, a policy's code)"),
        (status = 404, description = "`file_not_found` (no such file, or another key's), or `owner_not_found`: `metadata.owner` names no paired cluster"),
        (status = 409, description = "`owner_not_eligible`: the owner is in maintenance or draining"),
        (status = 503, description = "`NODE_UNAVAILABLE`: the owner cannot be reached; nothing was queued"),
    ))]
pub async fn create(
    caller: Authorized<Inference>,
    State(state): State<Arc<AppState>>,
    ApiJson(request): ApiJson<CreateBatch>,
) -> FedResult<Json<Batch>> {
    Ok(Json(jobs::create_batch(&state, request, &caller).await?))
}

/// A batch, with its progress (`request_counts`); `errors` says why a
/// batch whose key was revoked was cancelled (`key_revoked`).
#[utoipa::path(get, path = "/v1/batches/{id}", tag = "batches",
    params(("id" = String, Path, description = "`batch_…`")),
    responses(
        (status = 200, description = "The batch", body = Batch),
        (status = 404, description = "`batch_not_found`: no such batch, or another key's"),
        (status = 503, description = "`NODE_UNAVAILABLE`: not a job of this cluster nor one it projects, while a peer cannot be asked"),
    ))]
pub async fn show(
    caller: Authorized<Inference>,
    State(state): State<Arc<AppState>>,
    ApiPath(id): ApiPath<String>,
) -> FedResult<Json<Batch>> {
    Ok(Json(jobs::batch(&state, &caller, &id).await?))
}

/// A page of `GET /v1/batches`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
pub struct ListQuery {
    /// The last id of the previous page.
    after: Option<String>,
    /// Batches on this page, 1 to 100 [default: 20].
    limit: Option<i64>,
}

/// The caller's batches (an `admin` key: every key's), the newest first.
#[utoipa::path(get, path = "/v1/batches", tag = "batches", params(ListQuery),
    responses(
        (status = 200, description = "A page", body = BatchList),
        (status = 400, description = "`invalid_request`: a limit outside 1 to 100"),
    ))]
pub async fn list(
    caller: Authorized<Inference>,
    State(state): State<Arc<AppState>>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> FedResult<Json<BatchList>> {
    Ok(Json(
        jobs::list(&state, &caller, query.after.as_deref(), query.limit).await?,
    ))
}

/// Cancels a batch: `cancelling` at once, `cancelled` once the lines running finished.
#[utoipa::path(post, path = "/v1/batches/{id}/cancel", tag = "batches",
    params(("id" = String, Path, description = "`batch_…`")),
    responses(
        (status = 200, description = "The batch, `cancelling` (or already `cancelled`)", body = Batch),
        (status = 404, description = "`batch_not_found`: no such batch, or another key's"),
        (status = 409, description = "`batch_not_cancellable`: it ended already"),
        (status = 503, description = "`NODE_UNAVAILABLE`: the job's owner cannot be reached; nothing was queued"),
    ))]
pub async fn cancel(
    caller: Authorized<Inference>,
    State(state): State<Arc<AppState>>,
    ApiPath(id): ApiPath<String>,
) -> FedResult<Json<Batch>> {
    Ok(Json(jobs::cancel(&state, &caller, &id).await?))
}
