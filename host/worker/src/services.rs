//! What a worker serves to frontends: control verbs (`ping`, `echo`,
//! `sleep` for now) and stream services (`control`, `echo`, `sink`,
//! `source`), whatever carries them.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
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
    acceptor_counted(control, InFlight::default())
}

/// [`acceptor`], counting each stream in `in_flight` until its service ends.
pub fn acceptor_counted(control: ControlHandler, in_flight: InFlight) -> Acceptor {
    let runtime = tokio::runtime::Handle::current();
    Arc::new(move |service: &str, stream: Stream| {
        match service {
            CONTROL_SERVICE => {
                runtime.spawn(in_flight.counted(serve_control_stream(stream, control.clone())))
            }
            "echo" => runtime.spawn(in_flight.counted(echo(stream))),
            "sink" => runtime.spawn(in_flight.counted(sink(stream))),
            "source" => runtime.spawn(in_flight.counted(source(stream))),
            _ => return Err(Refusal::UnknownService),
        };
        Ok(())
    })
}

/// Work running on one carrier set: streams being served and control
/// calls being answered. A set the cluster released is closed only once
/// this is zero (or its drain time is up), so that a switch cuts nothing
/// short. Cloning shares the count.
#[derive(Debug, Clone, Default)]
pub struct InFlight(Arc<AtomicUsize>);

/// One unit of [`InFlight`] work; dropping it ends it.
#[derive(Debug)]
pub struct Running(Arc<AtomicUsize>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl InFlight {
    /// How much runs now.
    pub fn count(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }

    /// Counts one unit of work until the guard drops. Taken before the
    /// work is spawned, so a count of zero never misses accepted work.
    pub fn enter(&self) -> Running {
        self.0.fetch_add(1, Ordering::AcqRel);
        Running(self.0.clone())
    }

    /// `work`, counted from now until it ends (or is dropped).
    pub fn counted<F: Future>(&self, work: F) -> impl Future<Output = F::Output> + use<F> {
        let running = self.enter();
        async move {
            let _running = running;
            work.await
        }
    }

    /// `handler`, with each call counted until its answer is ready.
    pub fn control(&self, handler: ControlHandler) -> ControlHandler {
        let in_flight = self.clone();
        Arc::new(move |verb: String, payload: Bytes| {
            Box::pin(in_flight.counted(handler(verb, payload)))
        })
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn in_flight_counts_a_control_call_until_its_answer_is_ready() {
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let released = Arc::new(std::sync::Mutex::new(Some(released)));
        let handler: ControlHandler = Arc::new(move |_verb: String, payload: Bytes| {
            let released = released.lock().unwrap().take();
            Box::pin(async move {
                if let Some(released) = released {
                    let _ = released.await;
                }
                Ok(payload)
            })
        });
        let in_flight = InFlight::default();
        let counted = in_flight.control(handler);
        // Counted from the call, before the answer is polled.
        let call = counted("echo".into(), Bytes::from_static(b"x"));
        assert_eq!(in_flight.count(), 1);
        let answer = tokio::spawn(call);
        release.send(()).unwrap();
        assert_eq!(answer.await.unwrap().unwrap(), Bytes::from_static(b"x"));
        assert_eq!(in_flight.count(), 0);

        // Work dropped before it ran (a task aborted) is no longer counted.
        let dropped = in_flight.counted(std::future::pending::<()>());
        assert_eq!(in_flight.count(), 1);
        drop(dropped);
        assert_eq!(in_flight.count(), 0);
    }
}
