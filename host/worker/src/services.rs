//! What a worker serves to frontends: control verbs (`ping`, `echo`,
//! `sleep` for now) and stream services (`control`, `echo`, `sink`,
//! `source`), whatever carries them.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use switchyard_carrier::control::{
    CONTROL_SERVICE, ControlHandler, ControlRefusal, serve_control_stream,
};
use switchyard_carrier::stream_seam::Acceptor;
use switchyard_carrier::{Refusal, Stream};

/// The longest `sleep` a control call may ask for.
const MAX_SLEEP_MS: u64 = 60_000;
/// The most bytes `source` sends for one request.
const MAX_SOURCE_BYTES: u64 = 64 * 1024 * 1024 * 1024;
/// `source` writes in chunks of this size.
const SOURCE_CHUNK: usize = 1024 * 1024;

/// The worker's control verbs.
pub fn control_verbs() -> ControlHandler {
    Arc::new(|verb: String, payload: Bytes| {
        Box::pin(async move {
            match verb.as_str() {
                "ping" => Ok(Bytes::from_static(b"pong")),
                "echo" => Ok(payload),
                "sleep" => {
                    let ms: u64 = std::str::from_utf8(&payload)
                        .ok()
                        .and_then(|s| s.trim().parse().ok())
                        .filter(|ms| *ms <= MAX_SLEEP_MS)
                        .ok_or_else(|| {
                            ControlRefusal::new(
                                "invalid_request",
                                format!("sleep takes milliseconds up to {MAX_SLEEP_MS}"),
                            )
                        })?;
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    Ok(Bytes::from(format!("slept {ms}")))
                }
                other => Err(ControlRefusal::new(
                    "unknown_verb",
                    format!("this worker has no control verb `{other}`"),
                )),
            }
        })
    })
}

/// Serves every stream service; streams run on the current tokio runtime
/// (the acceptor may be called from a session's own thread).
pub fn acceptor(control: ControlHandler) -> Acceptor {
    let runtime = tokio::runtime::Handle::current();
    Arc::new(move |service: &str, stream: Stream| {
        match service {
            CONTROL_SERVICE => runtime.spawn(serve_control_stream(stream, control.clone())),
            "echo" => runtime.spawn(echo(stream)),
            "sink" => runtime.spawn(sink(stream)),
            "source" => runtime.spawn(source(stream)),
            _ => return Err(Refusal::UnknownService),
        };
        Ok(())
    })
}

/// Sends back what it reads, then finishes when the peer did.
async fn echo(stream: Stream) {
    let Stream {
        mut reader,
        mut writer,
    } = stream;
    while let Some(Ok(chunk)) = reader.read().await {
        if writer.write(chunk).await.is_err() {
            return;
        }
    }
    writer.finish();
}

/// Reads to the end, then answers with the byte count (decimal).
async fn sink(stream: Stream) {
    let Stream {
        mut reader,
        mut writer,
    } = stream;
    let mut total: u64 = 0;
    while let Some(chunk) = reader.read().await {
        match chunk {
            Ok(chunk) => total += chunk.len() as u64,
            Err(_) => return,
        }
    }
    let _ = writer.write(Bytes::from(total.to_string())).await;
    writer.finish();
}

/// Reads a byte count (decimal), then sends that many bytes and finishes.
async fn source(stream: Stream) {
    let Stream {
        mut reader,
        mut writer,
    } = stream;
    let Ok(request) = reader.read_to_end(64).await else {
        return;
    };
    let Some(mut left) = std::str::from_utf8(&request)
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .filter(|n| *n <= MAX_SOURCE_BYTES)
    else {
        writer.reset();
        return;
    };
    let chunk = Bytes::from(
        (0..SOURCE_CHUNK)
            .map(|i| (i % 251) as u8)
            .collect::<Vec<u8>>(),
    );
    while left > 0 {
        let n = left.min(SOURCE_CHUNK as u64) as usize;
        if writer.write(chunk.slice(..n)).await.is_err() {
            return;
        }
        left -= n as u64;
    }
    writer.finish();
}
