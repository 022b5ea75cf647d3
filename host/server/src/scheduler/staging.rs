//! Model files to a worker's placement cache over the bulk lane: asks what
//! the worker holds (`files.status`), then sends each missing range (at most
//! 64 MiB) of each file from the library, resuming from the durable offset
//! the worker reports, one file after another.

use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};
use switchyard_carrier::streams::Lane;
use switchyard_carrier::{ControlSeam, Stream, StreamsSeam};
use switchyard_store::models::ModelRevision;
use tokio::io::{AsyncReadExt, AsyncSeekExt};

use super::BringUpError;
use crate::library::Library;

/// The largest range per stream (the worker refuses more).
const MAX_RANGE: u64 = 64 * 1024 * 1024;
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
    let files: Vec<Value> = revision
        .files
        .iter()
        .map(|f| json!({"sha256": f.sha256, "size": f.size}))
        .collect();
    let answer = control
        .call(
            node,
            "files.status",
            Bytes::from(json!(files).to_string()),
            CONTROL_DEADLINE,
        )
        .await
        .map_err(|e| BringUpError::from_control("files.status", e))?;
    let states: Vec<Value> =
        serde_json::from_slice(&answer).map_err(|e| BringUpError::Failed(e.to_string()))?;
    let mut held: u64 = 0;
    let mut to_send = Vec::new();
    for (file, state) in revision.files.iter().zip(&states) {
        match state["state"]["state"].as_str() {
            Some("complete") => held += file.size as u64,
            Some("partial") => {
                let offset = state["state"]["offset"].as_u64().unwrap_or(0);
                held += offset;
                to_send.push((file, offset));
            }
            _ => to_send.push((file, 0)),
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
        .open(node, Lane::Bulk, "blob")
        .await
        .map_err(|e| match e {
            switchyard_carrier::Refusal::NotDelivered(_) => {
                Failure::Unreachable(format!("opening the bulk stream: {e}"))
            }
            other => Failure::Fatal(format!("opening the bulk stream: {other}")),
        })?;
    let head = json!({"sha256": sha256, "size": size, "offset": offset, "length": length});
    let sending = async {
        writer
            .write(Bytes::from(format!("{head}\n")))
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
    let (sent, answer) = tokio::join!(sending, reader.read_to_end(64 * 1024));
    let answer: Value = answer
        .ok()
        .and_then(|a| serde_json::from_slice(&a).ok())
        .unwrap_or(Value::Null);
    if let Some(next) = answer["offset"].as_u64() {
        return Ok(next);
    }
    // Interrupted or refused: the worker says where its durable offset is.
    let durable = match answer["error"]["state"]["state"].as_str() {
        Some("partial") => answer["error"]["state"]["offset"].as_u64(),
        // Discarded (a corrupted file): from the start.
        Some("absent") => Some(0),
        _ => None,
    };
    match (sent, durable) {
        (_, Some(durable)) => Err(Failure::Resume(durable)),
        (Err(e), None) => Err(Failure::Fatal(e)),
        (Ok(()), None) => Err(Failure::Fatal(format!("the worker answered {answer}"))),
    }
}
