//! Placement inputs the workers report, end to end with real processes on
//! the `tunnel` set: a node selector lands the replica on the labelled
//! worker of two (and a selector no node matches leaves the deployment
//! pending with the reason), and a worker whose placement cache already
//! holds the model's files wins over an otherwise equal one.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use switchyard_tests::ADMIN_TOKEN;
use switchyard_tests::db::fresh_database;
use switchyard_tests::process::{ServeProcess, WorkerProcess, binary};

const PATIENCE: Duration = Duration::from_secs(60);

/// A frontend, its registration token, and a model revision (`demo@r1`)
/// in its library.
pub(crate) struct Cluster {
    pub(crate) serve: ServeProcess,
    http: reqwest::Client,
    token: String,
    pub(crate) digest: String,
    /// The frontend's data directory.
    pub(crate) data: tempfile::TempDir,
    /// The cluster's database.
    pub(crate) database_url: String,
}

impl Cluster {
    pub(crate) async fn start() -> Self {
        Self::start_on(None).await
    }

    /// On the `nats` set when a NATS URL is given, else `tunnel`.
    pub(crate) async fn start_on(nats_url: Option<&str>) -> Self {
        Self::start_with(nats_url, &[]).await
    }

    /// [`Cluster::start_on`], with more flags for `serve`.
    pub(crate) async fn start_with(nats_url: Option<&str>, serve_extra: &[&str]) -> Self {
        let database_url = fresh_database().await;
        let data = tempfile::tempdir().unwrap();
        let serve = ServeProcess::on_set(&database_url, data.path(), nats_url, serve_extra);
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

    pub(crate) async fn call(
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

    pub(crate) fn worker(
        &self,
        name: &str,
        dir: &Path,
        extra: &[impl AsRef<std::ffi::OsStr>],
    ) -> WorkerProcess {
        WorkerProcess::start(&self.serve.url, &self.token, name, dir, extra)
    }

    /// Polls `path` until `done` holds; returns what it answered then.
    pub(crate) async fn until(
        &self,
        path: &str,
        what: &str,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
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
    pub(crate) async fn node_id(&self, name: &str) -> String {
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
    pub(crate) async fn deploy_ready(&self, fields: Value) -> String {
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
    pub(crate) async fn inference_key(&self) -> String {
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
    pub(crate) async fn ready_replica(&self, id: &str) -> Value {
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

fn weights() -> Vec<u8> {
    (0..1024 * 1024u32).map(|i| (i % 229) as u8).collect()
}

/// `switchyard deployment create` of `demo@r1` through the CLI, one replica on one GPU.
pub(crate) fn create(cluster: &Cluster, extra: &[&str]) -> std::process::Output {
    Command::new(binary())
        .args([
            "deployment",
            "create",
            "--model",
            "demo",
            "--revision",
            "r1",
            "--gpus",
            "1",
            "--gpu-memory-mib",
            "1024",
        ])
        .args(extra)
        .env("SWITCHYARD_SERVER", &cluster.serve.url)
        .env("SWITCHYARD_TOKEN", ADMIN_TOKEN)
        .output()
        .expect("switchyard deployment create")
}

/// [`create`], which must succeed; the deployment's id.
fn create_deployment(cluster: &Cluster, extra: &[&str]) -> String {
    let output = create(cluster, extra);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let created: Value = serde_json::from_slice(&output.stdout).unwrap();
    created["id"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_selector_lands_the_replica_on_the_labelled_worker() {
    let cluster = Cluster::start().await;
    let (dir_plain, dir_labelled) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // Binpack prefers the plain worker (one GPU, which the replica fills;
    // the labelled one keeps GPUs free): only the selector sends the
    // replica to the labelled one.
    let _plain = cluster.worker(
        "plain",
        dir_plain.path(),
        &["--gpu", "name=L4,memory=24GiB", "--label", "zone=a"],
    );
    let _labelled = cluster.worker(
        "labelled",
        dir_labelled.path(),
        &[
            "--gpu",
            "name=H100,memory=80GiB,count=3",
            "--label",
            "gpu=h100",
            "--label",
            "zone=b",
        ],
    );
    let plain = cluster.node_id("plain").await;
    let labelled = cluster.node_id("labelled").await;
    let (_, shown) = cluster
        .call(Method::GET, &format!("/api/nodes/{labelled}"), None)
        .await;
    assert_eq!(shown["labels"], json!({"gpu": "h100", "zone": "b"}));

    // A selector no node matches: pending, and the status says why.
    let nowhere = create_deployment(
        &cluster,
        &[
            "--served-model-name",
            "nowhere",
            "--node-selector",
            "gpu=b200",
        ],
    );
    let shown = cluster
        .until(
            &format!("/api/deployments/{nowhere}"),
            "no pending reason",
            |v| !v["deployment"]["pending_reason"].is_null(),
        )
        .await;
    let reason = shown["deployment"]["pending_reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!("{plain}: labels lack gpu=b200"))
            && reason.contains(&format!("{labelled}: labels lack gpu=b200")),
        "{reason}"
    );
    assert_eq!(shown["replicas_status"], json!([]));

    // `--wait` shows the replica until it is ready, then exits 0.
    let output = create(
        &cluster,
        &[
            "--served-model-name",
            "on-h100",
            "--node-selector",
            "gpu=h100",
            "--node-selector",
            "zone=b",
            "--wait",
        ],
    );
    let shown = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{shown}");
    assert!(
        shown.contains(&format!(" on {labelled}  ready"))
            && shown.ends_with("1 of 1 replicas ready\n"),
        "{shown}"
    );
    let created: Value = serde_json::from_slice(&output.stdout).unwrap();
    let id = created["id"].as_str().unwrap();
    let replica = cluster.ready_replica(id).await;
    assert_eq!(replica["node_id"], labelled.as_str(), "{replica}");
    let (_, shown) = cluster
        .call(Method::GET, &format!("/api/deployments/{id}"), None)
        .await;
    assert_eq!(
        shown["deployment"]["node_selector"],
        json!({"gpu": "h100", "zone": "b"})
    );
    assert!(shown["deployment"]["pending_reason"].is_null(), "{shown}");

    // Without a selector, binpack takes the plain worker: the selector did it.
    let free = create_deployment(&cluster, &["--served-model-name", "anywhere"]);
    let replica = cluster.ready_replica(&free).await;
    assert_eq!(replica["node_id"], plain.as_str(), "{replica}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_holding_the_files_wins_over_an_equal_one() {
    let cluster = Cluster::start().await;
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let gpus = ["--gpu", "name=L4,memory=24GiB"];
    let _a = cluster.worker("equal-a", dir_a.path(), &gpus);
    let _b = cluster.worker("equal-b", dir_b.path(), &gpus);
    let a = cluster.node_id("equal-a").await;
    let b = cluster.node_id("equal-b").await;
    // Equal nodes go to the smaller id; the files go to the other one, as
    // an earlier staging would have left them.
    let (holder, holder_dir) = if a > b {
        (&a, dir_a.path())
    } else {
        (&b, dir_b.path())
    };
    let cached = holder_dir.join("models/blobs/sha256").join(&cluster.digest);
    std::fs::write(&cached, weights()).unwrap();
    let digest = cluster.digest.clone();
    cluster
        .until(
            &format!("/api/nodes/{holder}"),
            "the heartbeat never reported the file",
            |v| v["files_held"] == json!([digest]),
        )
        .await;

    let id = create_deployment(&cluster, &[]);
    let replica = cluster.ready_replica(&id).await;
    assert_eq!(replica["node_id"], holder.as_str(), "{replica}");

    // Removing the file is reported too (the list is sent when it changes).
    std::fs::remove_file(&cached).unwrap();
    cluster
        .until(
            &format!("/api/nodes/{holder}"),
            "the heartbeat never reported the removal",
            |v| v["files_held"] == json!([]),
        )
        .await;
}
