//! Starting an engine on a free port and talking to it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;
use switchyard_reference_engine::{EngineError, ReferenceConfig, StatsSnapshot, serve};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The served name of [`model_file`]s.
pub const MODEL: &str = "tiny";

/// How long a test waits for something that should happen at once.
const PATIENCE: Duration = Duration::from_secs(10);

/// Writes a model file named `tiny.gguf` with `contents` in `dir`.
pub fn model_file(dir: &Path, contents: &[u8]) -> PathBuf {
    let path = dir.join(format!("{MODEL}.gguf"));
    std::fs::write(&path, contents).unwrap();
    path
}

/// A running engine.
pub struct Engine {
    pub url: String,
    pub client: reqwest::Client,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), EngineError>>>,
    _dir: tempfile::TempDir,
}

impl Engine {
    /// An engine on a model file with fixed contents.
    pub async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    /// An engine on a model file with fixed contents, configured by `configure`.
    pub async fn start_with(configure: impl FnOnce(&mut ReferenceConfig)) -> Self {
        Self::start_on(b"reference weights", configure).await
    }

    /// An engine on a model file holding `contents`, once it reports healthy.
    pub async fn start_on(contents: &[u8], configure: impl FnOnce(&mut ReferenceConfig)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut config = ReferenceConfig::new(model_file(dir.path(), contents));
        configure(&mut config);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (shutdown, stop) = oneshot::channel::<()>();
        let task = tokio::spawn(serve(listener, config, async {
            let _ = stop.await;
        }));
        let engine = Self {
            url,
            client: reqwest::Client::new(),
            shutdown: Some(shutdown),
            task: Some(task),
            _dir: dir,
        };
        engine.wait_healthy().await;
        engine
    }

    async fn wait_healthy(&self) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let health = self.client.get(self.url("/health")).send().await;
            if health.is_ok_and(|r| r.status() == 200) {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "never became healthy"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }

    /// Sends `body` to `path`, without reading the answer.
    pub async fn post(&self, path: &str, body: &Value) -> reqwest::Response {
        self.client
            .post(self.url(path))
            .json(body)
            .send()
            .await
            .unwrap()
    }

    /// Sends `body` to `path` and reads a 200 answer's JSON.
    pub async fn post_ok(&self, path: &str, body: &Value) -> Value {
        let response = self.post(path, body).await;
        assert_eq!(response.status(), 200);
        response.json().await.unwrap()
    }

    pub async fn stats(&self) -> StatsSnapshot {
        let response = self.client.get(self.url("/stats")).send().await.unwrap();
        response.json().await.unwrap()
    }

    /// Polls `/stats` until `done` holds.
    pub async fn wait_stats(&self, done: impl Fn(&StatsSnapshot) -> bool) -> StatsSnapshot {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let stats = self.stats().await;
            if done(&stats) {
                return stats;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "stats never got there: {stats:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Asks the engine to shut down without waiting.
    pub fn shut_down(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }

    /// Shuts the engine down and returns what `serve` returned.
    pub async fn stop(mut self) -> Result<(), EngineError> {
        self.shut_down();
        let task = self.task.take().unwrap();
        tokio::time::timeout(PATIENCE, task).await.unwrap().unwrap()
    }
}

/// Reads server-sent events one at a time, as they arrive.
pub struct Events {
    body: futures::stream::BoxStream<'static, reqwest::Result<axum::body::Bytes>>,
    buffer: String,
}

impl Events {
    pub fn new(response: reqwest::Response) -> Self {
        assert_eq!(response.status(), 200);
        let content_type = response.headers()["content-type"].to_str().unwrap();
        assert!(
            content_type.starts_with("text/event-stream"),
            "{content_type}"
        );
        Self {
            body: response.bytes_stream().boxed(),
            buffer: String::new(),
        }
    }

    /// The next event's `data`, `None` at the end of the body.
    pub async fn next(&mut self) -> Option<String> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let event: String = self.buffer.drain(..end + 2).collect();
                let data = event.trim_end().strip_prefix("data: ");
                return Some(
                    data.unwrap_or_else(|| panic!("not a data event: {event:?}"))
                        .to_owned(),
                );
            }
            let bytes = tokio::time::timeout(PATIENCE, self.body.next())
                .await
                .unwrap()?;
            self.buffer
                .push_str(std::str::from_utf8(&bytes.unwrap()).unwrap());
        }
    }

    /// The next event's data as JSON.
    pub async fn next_json(&mut self) -> Value {
        let data = self.next().await.expect("the stream ended early");
        serde_json::from_str(&data).unwrap_or_else(|e| panic!("{e}: {data}"))
    }

    /// Expects `[DONE]` and then the end of the body.
    pub async fn expect_done(mut self) {
        assert_eq!(self.next().await.as_deref(), Some("[DONE]"));
        assert_eq!(self.next().await, None);
        assert!(self.buffer.is_empty(), "{:?}", self.buffer);
    }
}

/// Asserts an OpenAI-style error body and returns it.
pub async fn expect_error(response: reqwest::Response, status: u16, code: &str) -> Value {
    assert_eq!(response.status(), status);
    let body: Value = response.json().await.unwrap();
    let error = &body["error"];
    assert_eq!(error["code"], code, "{body}");
    assert!(
        error["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{body}"
    );
    assert!(error["type"].is_string(), "{body}");
    assert!(error.get("param").is_some(), "{body}");
    error.clone()
}
