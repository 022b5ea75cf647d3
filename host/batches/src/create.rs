//! `/v1/batches`: a batch created from an uploaded file (its lines become
//! rows the driver runs), read, listed and cancelled.

use std::collections::BTreeSet;
use std::time::Duration;

use futures::StreamExt;
use switchyard_protocol::batch::{
    BATCH_ENDPOINTS, BATCH_PURPOSE, Batch, BatchList, COMPLETION_WINDOW, CreateBatch,
};
use switchyard_store::StoreError;
use switchyard_store::batches::{NewBatch, Visible};

use super::access;
use super::files::{self, random_hex};
use super::valid::{self, Lines, MAX_MODELS, ValidLine};
use crate::Batches;
use crate::BatchesError;
use switchyard_protocol::keys::Caller;

/// The completion window, `24h`.
const WINDOW: Duration = Duration::from_secs(24 * 3600);
/// A page of `GET /v1/batches` when no `limit` is given, and the most.
pub const DEFAULT_LIMIT: i64 = 20;
/// The largest `limit`, as OpenAI allows.
pub const MAX_LIMIT: i64 = 100;

fn refuse(code: &'static str, message: impl Into<String>) -> BatchesError {
    BatchesError::invalid(code, message)
}

/// 404 `batch_not_found` for a missing row.
fn stored(id: &str) -> impl Fn(StoreError) -> BatchesError + '_ {
    move |e| match e {
        StoreError::NotFound(_) => BatchesError::BatchNotFound(id.to_string()),
        e => e.into(),
    }
}

/// The lines of the upload `id` that `visible` may see, read a chunk at a
/// time and checked as at upload.
async fn input_lines(
    batches: &Batches,
    visible: Visible<'_>,
    id: &str,
) -> Result<Vec<ValidLine>, BatchesError> {
    let stored_file = files::stored_file(batches, visible, id).await?;
    if stored_file.kind != "upload" || stored_file.file.purpose != BATCH_PURPOSE {
        return Err(refuse(
            "invalid_file",
            format!("file {id:.64} was not uploaded with purpose `{BATCH_PURPOSE}`"),
        ));
    }
    let mut lines = Lines::keeping();
    let mut read = 0;
    let mut chunks = files::chunks(batches.store.clone(), id.to_string());
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(BatchesError::internal)?;
        read += chunk.len() as i64;
        lines.push(&chunk)?;
    }
    // Deleted or expired while it was read.
    if read != stored_file.file.bytes {
        return Err(files::not_found(id));
    }
    lines.finish()
}

/// The request's own fields (endpoint, window, metadata), judged before
/// its input file is read, so that a bad field is named whatever the file.
pub fn check(request: &CreateBatch) -> Result<(), BatchesError> {
    if !BATCH_ENDPOINTS.contains(&request.endpoint.as_str()) {
        return Err(refuse(
            "invalid_endpoint",
            format!("endpoint must be one of {}", BATCH_ENDPOINTS.join(", ")),
        ));
    }
    if request.completion_window != COMPLETION_WINDOW {
        return Err(refuse(
            "invalid_completion_window",
            format!("completion_window must be `{COMPLETION_WINDOW}`"),
        ));
    }
    valid::metadata(&request.metadata)
}

/// Creates a batch from an uploaded file of `caller`'s, run as `caller`
/// (its lines pass the `inference` chain as this caller's key, while the
/// key is live). Every line must call `endpoint`. `peer`: a peer's job,
/// the peer's id and its grant.
pub async fn create_batch(
    batches: &Batches,
    request: CreateBatch,
    caller: &Caller,
    peer: Option<(String, String)>,
) -> Result<Batch, BatchesError> {
    check(&request)?;
    let lines = input_lines(batches, access::visible(caller), &request.input_file_id).await?;
    if let Some((n, line)) = lines
        .iter()
        .enumerate()
        .find(|(_, l)| l.url != request.endpoint)
    {
        return Err(refuse(
            "endpoint_mismatch",
            format!(
                "line {} calls {} but the batch's endpoint is {}",
                n + 1,
                line.url,
                request.endpoint
            ),
        ));
    }
    let models: BTreeSet<&str> = lines.iter().map(|l| l.model.as_str()).collect();
    if models.len() > MAX_MODELS {
        return Err(refuse(
            "too_many_models",
            format!("a batch names at most {MAX_MODELS} models"),
        ));
    }
    let new = NewBatch {
        id: format!("batch_{}", random_hex()),
        endpoint: request.endpoint,
        input_file_id: request.input_file_id.clone(),
        completion_window: request.completion_window,
        window: WINDOW,
        metadata: request.metadata,
        key_id: access::owner(caller).to_string(),
        scopes: caller.scopes.clone(),
        models: models.into_iter().map(String::from).collect(),
        lines: lines.into_iter().map(|l| (l.custom_id, l.body)).collect(),
        peer,
    };
    let batch = batches.store.insert_batch(&new).await?;
    tracing::info!(batch = %batch.id, key = %caller.key_id, lines = new.lines.len(), "batch created");
    Ok(batch)
}

/// A batch, if `visible` may see it.
pub async fn batch(
    batches: &Batches,
    visible: Visible<'_>,
    id: &str,
) -> Result<Batch, BatchesError> {
    batches.store.batch(id, visible).await.map_err(stored(id))
}

/// The batches `visible` may see, the newest first: at most `limit` (1 to
/// [`MAX_LIMIT`], [`DEFAULT_LIMIT`] when absent) after the batch `after`.
pub async fn list(
    batches: &Batches,
    visible: Visible<'_>,
    after: Option<&str>,
    limit: Option<i64>,
) -> Result<BatchList, BatchesError> {
    let limit = limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(BatchesError::invalid_request(format!(
            "limit must be 1 to {MAX_LIMIT}"
        )));
    }
    // One more than asked tells whether more follow.
    let mut data = batches
        .store
        .list_batches(visible, after, limit + 1)
        .await?;
    let has_more = data.len() as i64 > limit;
    data.truncate(limit as usize);
    Ok(BatchList {
        object: "list".into(),
        first_id: data.first().map(|b| b.id.clone()),
        last_id: data.last().map(|b| b.id.clone()),
        has_more,
        data,
    })
}

/// Cancels a batch `visible` may see: `cancelling` at once (lines not yet
/// running never run), `cancelled` once the lines running finished. 409
/// `batch_not_cancellable` for a batch that ended otherwise.
pub async fn cancel(
    batches: &Batches,
    visible: Visible<'_>,
    id: &str,
) -> Result<Batch, BatchesError> {
    match batches
        .store
        .cancel_batch(id, visible, None)
        .await
        .map_err(stored(id))?
    {
        Some(batch) => {
            tracing::info!(batch = %id, "batch cancelling");
            Ok(batch)
        }
        None => Err(BatchesError::NotCancellable(id.to_string())),
    }
}
