//! A test cluster as real processes: a `switchyard serve` frontend on a
//! fresh database, its registration token, and the demo model (`demo@r1`)
//! in its library; workers join with [`Cluster::worker`].

use std::path::Path;
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::ADMIN_TOKEN;
use crate::db::fresh_database;
use crate::process::{ServeProcess, WorkerProcess};

/// How long a test waits for a cluster to get somewhere.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// A frontend, its registration token, and a model revision (`demo@r1`)
/// in its library.
pub struct Cluster {
    pub serve: ServeProcess,
    http: reqwest::Client,
    token: String,
    pub digest: String,
    /// The frontend's data directory.
    pub data: tempfile::TempDir,
    /// The cluster's database.
    pub database_url: String,
}

impl Cluster {
    pub async fn start() -> Self {
        Self::start_on(None).await
    }

    /// On the `nats` set when a NATS URL is given, else `tunnel`.
    pub async fn start_on(nats_url: Option<&str>) -> Self {
        Self::start_with(nats_url, &[]).await
    }

    /// [`Cluster::start_on`], with more flags for `serve`.
    pub async fn start_with(nats_url: Option<&str>, serve_extra: &[&str]) -> Self {
        Self::start_logging(nats_url, serve_extra, None).await
    }

    /// [`Cluster::start_with`]; with `log`, the frontend logs at `info` into it.
    pub async fn start_logging(
        nats_url: Option<&str>,
        serve_extra: &[&str],
        log: Option<std::process::Stdio>,
    ) -> Self {
        let database_url = fresh_database().await;
        let data = tempfile::tempdir().unwrap();
        let serve = ServeProcess::on_set_to(&database_url, data.path(), nats_url, serve_extra, log);
        let mut cluster = Self {
            serve,
            http: reqwest::Client::new(),
            token: String::new(),
            digest: String::new(),
            data,
            database_url: database_url.clone(),
        };
        let (_, token) = cluster
            .call(
                Method::POST,
                "/api/nodes/registration-tokens",
                Some(json!({"name": "e2e"})),
            )
            .await;
        cluster.token = token["value"].as_str().unwrap().to_string();
        let weights = weights();
        cluster.digest = hex::encode(Sha256::digest(&weights));
        let uploaded = cluster
            .http
            .put(format!(
                "{}/api/library/blobs/{}",
                cluster.serve.url, cluster.digest
            ))
            .bearer_auth(ADMIN_TOKEN)
            .body(weights.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(uploaded.status(), StatusCode::CREATED);
        let (status, body) = cluster
            .call(
                Method::POST,
                "/api/models",
                Some(json!({
                    "id": "demo", "revision": "r1",
                    "files": [{"path": "m.gguf", "size": weights.len(), "sha256": cluster.digest}],
                })),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        cluster
    }

    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.serve.url))
            .bearer_auth(ADMIN_TOKEN);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    pub fn worker(
        &self,
        name: &str,
        dir: &Path,
        extra: &[impl AsRef<std::ffi::OsStr>],
    ) -> WorkerProcess {
        WorkerProcess::start(&self.serve.url, &self.token, name, dir, extra)
    }

    /// Polls `path` until `done` holds; returns what it answered then.
    pub async fn until(&self, path: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        let started = Instant::now();
        loop {
            let (_, shown) = self.call(Method::GET, path, None).await;
            if done(&shown) {
                return shown;
            }
            assert!(started.elapsed() < PATIENCE, "{what}: {shown}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The id of the node named `name`, once it heartbeats.
    pub async fn node_id(&self, name: &str) -> String {
        let nodes = self
            .until("/api/nodes", "the worker never registered", |v| {
                v["nodes"].as_array().is_some_and(|nodes| {
                    nodes
                        .iter()
                        .any(|n| n["name"] == name && !n["last_heartbeat_at"].is_null())
                })
            })
            .await;
        nodes["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["name"] == name)
            .and_then(|n| n["id"].as_str())
            .unwrap()
            .to_string()
    }

    /// Deploys `demo@r1` on the reference engine, one GPU a replica, with
    /// `fields` added to the request; its id, once its replica is ready.
    pub async fn deploy_ready(&self, fields: Value) -> String {
        let mut body = json!({"model": "demo", "revision": "r1", "engine": "reference",
                              "gpus_per_replica": 1, "gpu_memory_bytes": 1 << 30});
        for (name, value) in fields.as_object().into_iter().flatten() {
            body[name] = value.clone();
        }
        let (status, created) = self
            .call(Method::POST, "/api/deployments", Some(body))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{created}");
        let id = created["id"].as_str().unwrap().to_string();
        self.ready_replica(&id).await;
        id
    }

    /// A new API key with the `inference` scope.
    pub async fn inference_key(&self) -> String {
        let (status, key) = self
            .call(
                Method::POST,
                "/api/keys",
                Some(json!({"name": "app", "scopes": ["inference"]})),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{key}");
        key["token"].as_str().unwrap().to_string()
    }

    /// The one ready replica of a deployment.
    pub async fn ready_replica(&self, id: &str) -> Value {
        let shown = self
            .until(
                &format!("/api/deployments/{id}"),
                "the replica never became ready",
                |v| v["replicas_status"][0]["state"] == "ready",
            )
            .await;
        shown["replicas_status"][0].clone()
    }
}

/// The demo model's file: 1 MiB of a fixed pattern.
pub fn weights() -> Vec<u8> {
    (0..1024 * 1024u32).map(|i| (i % 229) as u8).collect()
}
