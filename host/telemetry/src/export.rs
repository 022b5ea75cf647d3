//! The exporter: finished spans go to a bounded queue (a full queue drops
//! the span and counts it: tracing never holds a request back); a task
//! sends them to the collector in batches, at most a second after the
//! first, over OTLP/HTTP with protobuf bodies.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::mpsc;

use crate::otlp::export_request;
use crate::span::SpanRecord;

/// Spans held for the exporter before they are dropped.
const QUEUE: usize = 8192;
/// Spans in one request at most.
const BATCH: usize = 512;
/// The longest a span waits for its batch.
const FLUSH: Duration = Duration::from_secs(1);
/// How long one export may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Where and as what a process exports.
#[derive(Debug, Clone)]
pub struct TracerConfig {
    /// The collector's base URL (`http://collector:4318`); spans go to
    /// `<endpoint>/v1/traces`.
    pub endpoint: String,
    /// `service.name` of every span (`switchyard-frontend`).
    pub service: String,
}

/// A process's tracer: hands finished spans to the exporter task.
#[derive(Debug)]
pub struct Tracer {
    queue: mpsc::Sender<SpanRecord>,
    dropped: AtomicU64,
    exported: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
}

impl Tracer {
    /// The tracer, and its exporter task to spawn (it ends when the
    /// tracer is dropped, after sending what it held).
    pub fn start(config: TracerConfig) -> (Arc<Self>, impl Future<Output = ()> + Send + 'static) {
        let (queue, receiver) = mpsc::channel(QUEUE);
        let tracer = Arc::new(Self {
            queue,
            dropped: AtomicU64::new(0),
            exported: Arc::default(),
            failed: Arc::default(),
        });
        let task = export(
            config,
            receiver,
            tracer.exported.clone(),
            tracer.failed.clone(),
        );
        (tracer, task)
    }

    /// Queues a finished span.
    pub fn record(&self, span: SpanRecord) {
        if !span.context.sampled {
            return;
        }
        if self.queue.try_send(span).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// `(exported, dropped, failed)` spans so far.
    pub fn counts(&self) -> (u64, u64, u64) {
        (
            self.exported.load(Ordering::Relaxed),
            self.dropped.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
        )
    }
}

async fn export(
    config: TracerConfig,
    mut receiver: mpsc::Receiver<SpanRecord>,
    exported: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
) {
    let url = format!("{}/v1/traces", config.endpoint.trim_end_matches('/'));
    let http = reqwest::Client::builder()
        .timeout(TIMEOUT)
        .build()
        .unwrap_or_default();
    let mut batch = Vec::with_capacity(BATCH);
    loop {
        // Wait for a first span, then gather for at most FLUSH.
        match receiver.recv().await {
            Some(span) => batch.push(span),
            None => break,
        }
        let deadline = tokio::time::Instant::now() + FLUSH;
        while batch.len() < BATCH {
            match tokio::time::timeout_at(deadline, receiver.recv()).await {
                Ok(Some(span)) => batch.push(span),
                Ok(None) | Err(_) => break,
            }
        }
        send(&http, &url, &config.service, &mut batch, &exported, &failed).await;
    }
    send(&http, &url, &config.service, &mut batch, &exported, &failed).await;
}

async fn send(
    http: &reqwest::Client,
    url: &str,
    service: &str,
    batch: &mut Vec<SpanRecord>,
    exported: &AtomicU64,
    failed: &AtomicU64,
) {
    if batch.is_empty() {
        return;
    }
    let n = batch.len() as u64;
    let body = export_request(service, batch);
    batch.clear();
    let sent = http
        .post(url)
        .header("content-type", "application/x-protobuf")
        .body(body)
        .send()
        .await;
    match sent {
        Ok(response) if response.status().is_success() => {
            exported.fetch_add(n, Ordering::Relaxed);
        }
        Ok(response) => {
            failed.fetch_add(n, Ordering::Relaxed);
            tracing::warn!(status = %response.status(), spans = n, "the OTLP collector refused spans");
        }
        Err(e) => {
            failed.fetch_add(n, Ordering::Relaxed);
            tracing::warn!(error = %e, spans = n, "cannot export spans over OTLP");
        }
    }
}
