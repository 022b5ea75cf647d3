//! `/v1/files`: a batch's input uploaded (checked line by line and written
//! in chunks as it streams in), a file's record, its content (an upload's
//! chunks, or a batch's output written from its lines), and its deletion.
//! Every file belongs to a key ([`super::access`]); an upload expires.

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use switchyard_protocol::batch::{BATCH_PURPOSE, FileDeleted, FileObject, MAX_EXPIRES_SECONDS};
use switchyard_store::batches::files::Appended;
use switchyard_store::batches::{StoredFile, Visible};
use switchyard_store::{Store, StoreError};

use super::output::{self, Part};
use super::valid::{Lines, MAX_FILE_BYTES, MAX_FILENAME};
use crate::Batches;
use crate::BatchesError;

/// A file's bytes as they are served.
pub type Content = BoxStream<'static, Result<Bytes, std::io::Error>>;

/// Bytes of an upload written per statement: a replica holds at most this
/// much of a file (and one line, [`super::valid::MAX_LINE`]) whatever its
/// size, and a 64 MiB file is 64 short transactions.
pub const CHUNK: usize = 1 << 20;

/// The bytes of uploads one key may keep at once when no setting says
/// otherwise: eight files of the largest size, room to queue batches back
/// to back, while one key cannot fill the database's disk (one grew it
/// from 50 MB to 2 GB before there was a quota).
pub const DEFAULT_QUOTA: u64 = 8 * MAX_FILE_BYTES as u64;

/// 404 `file_not_found`: for a file that does not exist and for another
/// key's alike.
pub fn not_found(id: &str) -> BatchesError {
    BatchesError::FileNotFound(id.to_string())
}

/// A store error, with a missing row as [`not_found`].
fn stored(id: &str) -> impl Fn(StoreError) -> BatchesError + '_ {
    move |e| match e {
        StoreError::NotFound(_) => not_found(id),
        e => e.into(),
    }
}

/// 413 `file_too_large`.
pub fn too_large() -> BatchesError {
    BatchesError::FileTooLarge
}

/// 413 `quota_exceeded`.
fn quota_exceeded(used: i64, quota: u64) -> BatchesError {
    BatchesError::QuotaExceeded { used, quota }
}

/// 400 `invalid_purpose` unless `purpose` is `batch`.
pub fn check_purpose(purpose: &str) -> Result<(), BatchesError> {
    if purpose != BATCH_PURPOSE {
        return Err(BatchesError::invalid(
            "invalid_purpose",
            format!("purpose must be `{BATCH_PURPOSE}`"),
        ));
    }
    Ok(())
}

/// An upload being written: checked line by line ([`Lines`]) and stored
/// in [`CHUNK`]s as its bytes arrive, invisible until [`Upload::finish`].
/// Dropped unfinished (refused, or its client went away), its rows are
/// deleted; a replica that dies leaves them to the sweep.
pub struct Upload {
    store: Store,
    id: String,
    owner: String,
    quota: u64,
    seq: i32,
    buffer: Vec<u8>,
    bytes: usize,
    lines: Lines,
    finished: bool,
}

impl Upload {
    /// Starts an upload of `filename` owned by `owner`.
    pub async fn begin(
        batches: &Batches,
        owner: &str,
        filename: &str,
    ) -> Result<Self, BatchesError> {
        if filename.is_empty() || filename.len() > MAX_FILENAME || filename.contains('\0') {
            return Err(BatchesError::invalid_request(format!(
                "the file's name must be 1 to {MAX_FILENAME} bytes without NUL"
            )));
        }
        let id = format!("file-{}", random_hex());
        batches.store.begin_batch_file(&id, owner, filename).await?;
        Ok(Upload {
            store: batches.store.clone(),
            id,
            owner: owner.to_string(),
            quota: batches.storage_quota,
            seq: 0,
            buffer: Vec::new(),
            bytes: 0,
            lines: Lines::default(),
            finished: false,
        })
    }

    /// Takes the next bytes of the file.
    pub async fn push(&mut self, data: &[u8]) -> Result<(), BatchesError> {
        self.bytes += data.len();
        if self.bytes > MAX_FILE_BYTES {
            return Err(too_large());
        }
        self.lines.push(data)?;
        self.buffer.extend_from_slice(data);
        if self.buffer.len() >= CHUNK {
            self.flush().await?;
        }
        Ok(())
    }

    async fn flush(&mut self) -> Result<(), BatchesError> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let quota = i64::try_from(self.quota).unwrap_or(i64::MAX);
        let appended = self
            .store
            .append_batch_file(&self.id, &self.owner, self.seq, &self.buffer, quota)
            .await?;
        if let Appended::OverQuota { used } = appended {
            return Err(quota_exceeded(used, self.quota));
        }
        self.seq += 1;
        self.buffer.clear();
        Ok(())
    }

    /// Checks the last line and the form's `purpose`, stores what is left
    /// and makes the file visible, expiring `expires_after` seconds after
    /// its creation.
    pub async fn finish(
        mut self,
        purpose: &str,
        expires_after: i64,
    ) -> Result<FileObject, BatchesError> {
        check_purpose(purpose)?;
        std::mem::take(&mut self.lines).finish()?;
        self.flush().await?;
        let file = self
            .store
            .complete_batch_file(&self.id, purpose, expires_after)
            .await?;
        self.finished = true;
        Ok(file)
    }
}

impl Drop for Upload {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let (store, id) = (self.store.clone(), std::mem::take(&mut self.id));
        tokio::spawn(async move {
            if let Err(e) = store.discard_batch_file(&id).await {
                tracing::debug!(file = %id, error = %e, "an unfinished upload was left to the sweep");
            }
        });
    }
}

/// Stores a batch input given whole (a peer's job), owned by `owner`,
/// expiring after the longest time an upload may keep.
pub async fn create_file(
    batches: &Batches,
    owner: &str,
    filename: &str,
    content: &[u8],
) -> Result<FileObject, BatchesError> {
    let mut upload = Upload::begin(batches, owner, filename).await?;
    for piece in content.chunks(CHUNK) {
        upload.push(piece).await?;
    }
    upload.finish(BATCH_PURPOSE, MAX_EXPIRES_SECONDS).await
}

/// A file's record, if `visible` may see it.
pub async fn stored_file(
    batches: &Batches,
    visible: Visible<'_>,
    id: &str,
) -> Result<StoredFile, BatchesError> {
    batches
        .store
        .batch_file(id, visible)
        .await
        .map_err(stored(id))
}

/// A file's record.
pub async fn file(
    batches: &Batches,
    visible: Visible<'_>,
    id: &str,
) -> Result<FileObject, BatchesError> {
    Ok(stored_file(batches, visible, id).await?.file)
}

/// An upload's chunks in order, read one at a time as they are sent.
pub fn chunks(store: Store, id: String) -> Content {
    futures::stream::try_unfold(-1, move |after| {
        let (store, id) = (store.clone(), id.clone());
        async move {
            let mut next = store
                .batch_file_chunks(&id, after, 1)
                .await
                .map_err(std::io::Error::other)?;
            Ok(next.pop().map(|(seq, data)| (Bytes::from(data), seq)))
        }
    })
    .boxed()
}

/// A file's content: an upload as it was stored, a batch's output or
/// error file from its lines.
pub async fn file_content(
    batches: &Batches,
    visible: Visible<'_>,
    id: &str,
) -> Result<Content, BatchesError> {
    let stored_file = stored_file(batches, visible, id).await?;
    let part = match stored_file.kind.as_str() {
        "output" => Part::Output,
        "error" => Part::Errors,
        _ => return Ok(chunks(batches.store.clone(), id.to_string())),
    };
    let batch = stored_file.batch_id.ok_or_else(|| not_found(id))?;
    Ok(output::stream(batches.store.clone(), batch, part))
}

/// An upload's bytes whole, if `visible` may see it (a job forwarded to
/// its owner cluster carries its input; at most [`MAX_FILE_BYTES`]).
pub async fn upload_bytes(
    batches: &Batches,
    visible: Visible<'_>,
    id: &str,
) -> Result<Vec<u8>, BatchesError> {
    let stored_file = stored_file(batches, visible, id).await?;
    if stored_file.kind != "upload" {
        return Err(not_found(id));
    }
    let mut bytes = Vec::new();
    let mut chunks = chunks(batches.store.clone(), id.to_string());
    while let Some(chunk) = chunks.next().await {
        bytes.extend_from_slice(&chunk.map_err(BatchesError::internal)?);
    }
    Ok(bytes)
}

/// Deletes a file `visible` may see.
pub async fn delete_file(
    batches: &Batches,
    visible: Visible<'_>,
    id: &str,
) -> Result<FileDeleted, BatchesError> {
    if !batches.store.delete_batch_file(id, visible).await? {
        return Err(not_found(id));
    }
    Ok(FileDeleted {
        id: id.to_string(),
        object: "file".into(),
        deleted: true,
    })
}

/// 64 random bits in hex: the tail of a file's or a batch's id.
pub fn random_hex() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 8];
    rand::rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}
