//! `/v1/files`: a batch's input uploaded (checked line by line, then
//! stored), a file's record, and its content (an upload's bytes, or a
//! batch's output written from its lines).

use axum::http::StatusCode;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use switchyard_protocol::batch::{BATCH_PURPOSE, FileObject};
use switchyard_store::StoreError;
use switchyard_store::batches::NewFile;

use super::output::{self, Part};
use super::valid::{self, MAX_FILE_BYTES, MAX_FILENAME};
use crate::error::ApiError;
use crate::state::AppState;

/// A file's bytes as they are served.
pub type Content = BoxStream<'static, Result<Bytes, std::io::Error>>;

/// 404 `file_not_found`.
fn not_found(id: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "file_not_found",
        format!("no file {id:.64}"),
    )
}

/// A store error, with a missing row as [`not_found`].
fn stored(id: &str) -> impl Fn(StoreError) -> ApiError + '_ {
    move |e| match e {
        StoreError::NotFound(_) => not_found(id),
        e => e.into(),
    }
}

/// 413 `file_too_large`.
pub fn too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "file_too_large",
        format!("a batch file is at most {MAX_FILE_BYTES} bytes"),
    )
}

/// Stores an uploaded batch input: `purpose` must be `batch`, the content
/// a batch file ([`valid::parse`]).
pub async fn create_file(
    state: &AppState,
    purpose: &str,
    filename: &str,
    content: Vec<u8>,
) -> Result<FileObject, ApiError> {
    if purpose != BATCH_PURPOSE {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_purpose",
            format!("purpose must be `{BATCH_PURPOSE}`"),
        ));
    }
    if filename.is_empty() || filename.len() > MAX_FILENAME || filename.contains('\0') {
        return Err(ApiError::invalid_request(format!(
            "the file's name must be 1 to {MAX_FILENAME} bytes without NUL"
        )));
    }
    if content.len() > MAX_FILE_BYTES {
        return Err(too_large());
    }
    valid::parse(&content)?;
    let new = NewFile {
        id: format!("file-{}", random_hex()),
        purpose: purpose.to_string(),
        filename: filename.to_string(),
        content,
    };
    Ok(state.store.insert_batch_file(&new).await?)
}

/// A file's record.
pub async fn file(state: &AppState, id: &str) -> Result<FileObject, ApiError> {
    Ok(state.store.batch_file(id).await.map_err(stored(id))?.file)
}

/// A file's content: an upload as it was stored, a batch's output or
/// error file from its lines.
pub async fn file_content(state: &AppState, id: &str) -> Result<Content, ApiError> {
    let stored_file = state.store.batch_file(id).await.map_err(stored(id))?;
    let part = match stored_file.kind.as_str() {
        "output" => Part::Output,
        "error" => Part::Errors,
        _ => {
            let content = state
                .store
                .batch_file_content(id)
                .await
                .map_err(stored(id))?
                .unwrap_or_default();
            return Ok(futures::stream::once(async move { Ok(Bytes::from(content)) }).boxed());
        }
    };
    let batch = stored_file.batch_id.ok_or_else(|| not_found(id))?;
    Ok(output::stream(state.store.clone(), batch, part))
}

/// 64 random bits in hex: the tail of a file's or a batch's id.
pub fn random_hex() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 8];
    rand::rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}
