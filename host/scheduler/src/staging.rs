//! Model files to a worker's placement cache over the bulk lane: asks what
//! the worker holds (`files.status`), then sends each missing range (at most
//! 64 MiB) of each file from the library, resuming from the durable offset
//! the worker reports, one file after another.

use std::time::Duration;

use bytes::Bytes;
use switchyard_carrier::stream_seam::Lane;
use switchyard_carrier::{ControlSeam, Stream, StreamsSeam};
use switchyard_protocol::control::{FileRef, FileState, FileStatus, verbs};
use switchyard_protocol::limits::{MAX_HEAD, MAX_RANGE};
use switchyard_protocol::stream::{BLOB, BlobAnswer, BlobHead, BlobRefusal};
use switchyard_store::models::ModelRevision;
use tokio::io::{AsyncReadExt, AsyncSeekExt};

use super::BringUpError;
use switchyard_library::Library;

const CONTROL_DEADLINE: Duration = Duration::from_secs(30);
const READ: usize = 1024 * 1024;
/// Ranges tried again after an interruption before staging gives up.
const RETRIES: u32 = 5;

/// Sends every file of `revision` the node lacks; `report` hears progress
/// (bytes the node holds, of the total).
pub async fn stage(
    control: &dyn ControlSeam,
    streams: &dyn StreamsSeam,
    library: &Library,
    node: &str,
    revision: &ModelRevision,
    mut report: impl FnMut(u64, u64),
) -> Result<(), BringUpError> {
    let total: u64 = revision.files.iter().map(|f| f.size as u64).sum();
    let files: Vec<FileRef> = revision
        .files
        .iter()
        .map(|f| FileRef {
            sha256: f.sha256.clone(),
            size: f.size as u64,
        })
        .collect();
    let files = serde_json::to_vec(&files).map_err(|e| BringUpError::Failed(e.to_string()))?;
    let answer = control
        .call(
            node,
            verbs::FILES_STATUS,
            Bytes::from(files),
            CONTROL_DEADLINE,
        )
        .await
        .map_err(|e| BringUpError::from_control(verbs::FILES_STATUS, e))?;
    let states: Vec<FileStatus> =
        serde_json::from_slice(&answer).map_err(|e| BringUpError::Failed(e.to_string()))?;
    let mut held: u64 = 0;
    let mut to_send = Vec::new();
    for (file, status) in revision.files.iter().zip(&states) {
        match status.state {
            FileState::Complete => held += file.size as u64,
            FileState::Partial { offset } => {
                held += offset;
                to_send.push((file, offset));
            }
            FileState::Absent => to_send.push((file, 0)),
        }
    }
    report(held, total);
    for (file, mut offset) in to_send {
        let size = file.size as u64;
        let mut retries = 0;
        while offset < size {
            let length = (size - offset).min(MAX_RANGE);
            match send_range(streams, library, node, &file.sha256, size, offset, length).await {
                Ok(next) => {
                    held += next - offset;
                    offset = next;
                    report(held, total);
                }
                Err(Failure::Resume(durable)) if retries < RETRIES => {
                    retries += 1;
                    held = held - offset + durable;
                    offset = durable;
                }
                Err(Failure::Resume(_)) => {
                    return Err(BringUpError::Failed(format!(
                        "{}: too many interruptions",
                        file.path
                    )));
                }
                Err(Failure::Fatal(e)) => {
                    return Err(BringUpError::Failed(format!("{}: {e}", file.path)));
                }
                Err(Failure::Unreachable(e)) => {
                    return Err(BringUpError::Unreachable(format!("{}: {e}", file.path)));
                }
            }
        }
    }
    Ok(())
}

enum Failure {
    /// Start again from this durable offset.
    Resume(u64),
    /// The bulk lane is not there (yet).
    Unreachable(String),
    Fatal(String),
}

async fn send_range(
    streams: &dyn StreamsSeam,
    library: &Library,
    node: &str,
    sha256: &str,
    size: u64,
    offset: u64,
    length: u64,
) -> Result<u64, Failure> {
    let Stream {
        mut reader,
        mut writer,
    } = streams
        .open(node, Lane::Bulk, BLOB)
        .await
        .map_err(|e| match e {
            switchyard_carrier::Refusal::NotDelivered(_) => {
                Failure::Unreachable(format!("opening the bulk stream: {e}"))
            }
            other => Failure::Fatal(format!("opening the bulk stream: {other}")),
        })?;
    let head = BlobHead {
        sha256: sha256.to_string(),
        size,
        offset,
        length,
    };
    let mut head = serde_json::to_vec(&head).map_err(|e| Failure::Fatal(e.to_string()))?;
    head.push(b'\n');
    let sending = async {
        writer
            .write(Bytes::from(head))
            .await
            .map_err(|e| e.to_string())?;
        let mut file = tokio::fs::File::open(library.blob_path(sha256))
            .await
            .map_err(|e| e.to_string())?;
        file.seek(std::io::SeekFrom::Start(offset))
            .await
            .map_err(|e| e.to_string())?;
        let mut left = length;
        while left > 0 {
            let mut buffer = vec![0u8; READ.min(left as usize)];
            let n = file.read(&mut buffer).await.map_err(|e| e.to_string())?;
            if n == 0 {
                return Err("the library's file is shorter than its manifest".into());
            }
            buffer.truncate(n);
            writer
                .write(Bytes::from(buffer))
                .await
                .map_err(|e| e.to_string())?;
            left -= n as u64;
        }
        writer.finish();
        Ok::<_, String>(())
    };
    let (sent, answer) = tokio::join!(sending, reader.read_to_end(MAX_HEAD));
    let answer: Option<BlobAnswer> = answer.ok().and_then(|a| serde_json::from_slice(&a).ok());
    let refusal = match answer {
        Some(BlobAnswer::Received { offset, .. }) => return Ok(offset),
        Some(BlobAnswer::Refused { error }) => Some(error),
        None => None,
    };
    // Interrupted or refused: the worker says where its durable offset is.
    let durable = match refusal.as_ref().and_then(|r| r.state.as_ref()) {
        Some(FileState::Partial { offset }) => Some(*offset),
        // Discarded (a corrupted file): from the start.
        Some(FileState::Absent) => Some(0),
        _ => None,
    };
    match (sent, durable, refusal) {
        (_, Some(durable), _) => Err(Failure::Resume(durable)),
        (Err(e), None, _) => Err(Failure::Fatal(e)),
        (Ok(()), None, Some(BlobRefusal { code, message, .. })) => Err(Failure::Fatal(format!(
            "the worker refused the range: {code}: {message}"
        ))),
        (Ok(()), None, None) => Err(Failure::Fatal("the worker's answer is unreadable".into())),
    }
}
