//! A replica running in this test process, on a port of its own.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use reqwest::{Method, RequestBuilder, StatusCode};
use serde_json::Value;
use switchyard_server::ServeConfig;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::ADMIN_TOKEN;

/// A running replica; [`Replica::stop`] shuts it down gracefully.
pub struct Replica {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// The HTTP client.
    pub http: reqwest::Client,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), String>>>,
}

/// Options for a test replica.
pub struct Options<'a> {
    /// The database.
    pub database_url: &'a str,
    /// Private state (compile cache).
    pub data_dir: &'a Path,
    /// Call deadline.
    pub call_deadline: Duration,
    /// Poll interval of the generation follower.
    pub poll_interval: Duration,
    /// Approve registering workers at once.
    pub auto_approve: bool,
}

impl Replica {
    /// Starts a replica and waits until it is ready.
    pub async fn start(options: Options<'_>) -> Self {
        let mut config = ServeConfig {
            database_url: Some(options.database_url.to_string()),
            data_dir: options.data_dir.to_path_buf(),
            admin_token: Some(ADMIN_TOKEN.to_string()),
            poll_interval: options.poll_interval,
            auto_approve: options.auto_approve,
            ..ServeConfig::default()
        };
        config.runtime.call_deadline = options.call_deadline;
        Self::start_config(config).await
    }

    /// Starts a replica with the usual test settings changed by `edit`
    /// (an allow-list, shorter limits).
    pub async fn with(
        database_url: &str,
        data_dir: &Path,
        edit: impl FnOnce(&mut ServeConfig),
    ) -> Self {
        let mut config = ServeConfig {
            database_url: Some(database_url.to_string()),
            data_dir: data_dir.to_path_buf(),
            admin_token: Some(ADMIN_TOKEN.to_string()),
            poll_interval: Duration::from_millis(500),
            ..ServeConfig::default()
        };
        config.runtime.call_deadline = Duration::from_millis(100);
        edit(&mut config);
        Self::start_config(config).await
    }

    /// Starts a replica with exactly `config` (its listen address aside:
    /// a free port) and waits until it is ready.
    pub async fn start_config(mut config: ServeConfig) -> Self {
        // The replica the binary runs: the console mounted beside the API.
        config.pages.get_or_insert(switchyard_console::router);
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .expect("binding a test port");
        let url = format!("http://{}", listener.local_addr().expect("local addr"));
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            switchyard_server::run_on(listener, config, async {
                let _ = stopped.await;
            })
            .await
            .map_err(|e| format!("{e:#}"))
        });
        let replica = Self {
            url,
            http: reqwest::Client::new(),
            stop: Some(stop),
            task: Some(task),
        };
        replica.wait_ready().await;
        replica
    }

    /// Starts a replica with the usual test settings.
    pub async fn on(database_url: &str, data_dir: &Path) -> Self {
        Self::start(Options {
            database_url,
            data_dir,
            call_deadline: Duration::from_millis(100),
            poll_interval: Duration::from_millis(500),
            auto_approve: false,
        })
        .await
    }

    /// Polls `/readyz` until 200 (at most 30 s).
    pub async fn wait_ready(&self) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(r) = self.http.get(format!("{}/readyz", self.url)).send().await
                && r.status() == StatusCode::OK
            {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "replica at {} never became ready",
                self.url
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// A request with the admin token.
    pub fn admin(&self, method: Method, path: &str) -> RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.url))
            .bearer_auth(ADMIN_TOKEN)
    }

    /// Sends and returns status and JSON body.
    pub async fn call(&self, request: RequestBuilder) -> (StatusCode, Value) {
        let response = request.send().await.expect("request sent");
        let status = response.status();
        let body = response.json().await.unwrap_or(Value::Null);
        (status, body)
    }

    /// Uploads a component as `name@version`.
    pub async fn push(&self, name: &str, version: &str, bytes: &[u8]) -> (StatusCode, Value) {
        let sha = crate::plugins::sha256(bytes);
        self.call(
            self.admin(Method::POST, "/api/plugins")
                .query(&[("name", name), ("version", version), ("sha256", &sha)])
                .body(bytes.to_vec()),
        )
        .await
    }

    /// Registers a node `name` with a fresh registration token; returns its
    /// id and its own credential.
    pub async fn register_node(&self, name: &str) -> (String, String) {
        let (status, token) = self
            .call(
                self.admin(Method::POST, "/api/nodes/registration-tokens")
                    .json(&serde_json::json!({"name": "test"})),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{token}");
        let (status, registered) = self
            .call(
                self.http
                    .post(format!("{}/api/nodes/register", self.url))
                    .bearer_auth(token["value"].as_str().expect("a token"))
                    .json(&serde_json::json!({"name": name, "inventory": {"cpus": 2}})),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{registered}");
        let field = |v: &Value| v.as_str().expect("registered").to_string();
        (
            field(&registered["node"]["id"]),
            field(&registered["credential"]),
        )
    }

    /// Sets a point's chain.
    pub async fn set_chain(&self, point: &str, policies: Value) -> (StatusCode, Value) {
        self.call(
            self.admin(Method::PUT, &format!("/api/admission/{point}"))
                .json(&serde_json::json!({ "policies": policies })),
        )
        .await
    }

    /// Dry-runs a request record.
    pub async fn evaluate(&self, point: &str, request: &Value) -> (StatusCode, Value) {
        self.call(
            self.admin(Method::POST, &format!("/api/admission/{point}/evaluate"))
                .json(request),
        )
        .await
    }

    /// Shuts down gracefully and waits for the end.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.await
                .expect("replica task")
                .expect("replica ran cleanly");
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}
