//! A cluster to change the carrier of while it serves, for the live switch's
//! end-to-end suite (`tests/carriers/switch.rs`) and its benchmark
//! (`switchyard-bench switch`): `serve` replicas on one database, workers,
//! a real nats-server with its monitoring port, the reference engine
//! serving a deployed model, chat clients and probe publishers that count
//! what they saw, and a change driven through the admin API and watched
//! until it settles.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::ADMIN_TOKEN;
use crate::nats::NatsServer;
use crate::process::{ServeProcess, WorkerProcess};

/// How long a step may take before the suite calls it a failure.
pub const PATIENCE: Duration = Duration::from_secs(60);
/// The model the reference engine serves.
pub const MODEL: &str = "demo-switch";

/// A free loopback port.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits until `check` holds, polling every 25 ms; panics after `PATIENCE`.
pub async fn eventually<F, Fut>(what: &str, check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    eventually_within(what, PATIENCE, check).await
}

/// [`eventually`] with its own deadline.
pub async fn eventually_within<F, Fut>(what: &str, patience: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    while !check().await {
        assert!(
            started.elapsed() < patience,
            "never happened within {patience:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// A nats-server with its HTTP monitoring port (`/connz`).
pub struct Nats {
    /// The server.
    pub server: NatsServer,
    /// Its monitoring port.
    pub monitor: u16,
}

impl Nats {
    /// Starts one.
    pub fn start() -> Self {
        let monitor = free_port();
        let server = NatsServer::start(&["-m", &monitor.to_string()]);
        Self { server, monitor }
    }

    /// `127.0.0.1:PORT`.
    pub fn address(&self) -> String {
        self.server.address()
    }

    /// Client connections the server holds now.
    pub async fn connections(&self) -> u64 {
        let url = format!("http://127.0.0.1:{}/connz", self.monitor);
        let body: Value = reqwest::get(url).await.unwrap().json().await.unwrap();
        body["num_connections"].as_u64().expect("connz answers")
    }
}

/// One `serve` replica, restartable with other flags.
pub struct Replica {
    /// The process (`None` after a kill).
    pub process: Option<ServeProcess>,
    /// Its `http://ADDR`.
    pub url: String,
    data_dir: PathBuf,
}

impl Replica {
    /// The process id.
    pub fn pid(&self) -> u32 {
        self.process.as_ref().expect("running").child.id()
    }

    /// Sends `signal` (`STOP`, `CONT`, `KILL`) to it.
    pub fn signal(&self, signal: &str) {
        let status = std::process::Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid().to_string())
            .status()
            .unwrap();
        assert!(status.success(), "kill -{signal}");
    }

    /// SIGKILL and reap.
    pub fn kill(&mut self) {
        if let Some(mut process) = self.process.take() {
            let _ = process.child.kill();
            let _ = process.child.wait();
        }
    }
}

/// A worker process with its folder and name.
pub struct Worker {
    /// The process (`None` after a kill).
    pub process: Option<WorkerProcess>,
    /// Its identity folder (kept across restarts).
    pub dir: tempfile::TempDir,
    /// Its name.
    pub name: String,
}

impl Worker {
    /// The node id it registered as.
    pub fn node_id(&self) -> String {
        let identity: Value = serde_json::from_str(
            &std::fs::read_to_string(self.dir.path().join("node.json")).unwrap(),
        )
        .unwrap();
        identity["node_id"].as_str().unwrap().to_string()
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.process.as_ref().expect("running").child.id()
    }

    /// Whether the process is still the one that started (not exited).
    pub fn alive(&mut self) -> bool {
        self.process
            .as_mut()
            .is_some_and(|p| matches!(p.child.try_wait(), Ok(None)))
    }

    /// SIGKILL and reap.
    pub fn kill(&mut self) {
        if let Some(mut process) = self.process.take() {
            let _ = process.child.kill();
            let _ = process.child.wait();
            // Drop's SIGTERM goes to a reaped pid: forget the child instead.
            std::mem::forget(process);
        }
    }
}

/// Replicas on one database, workers, the admin API.
pub struct Cluster {
    /// The database.
    pub database_url: String,
    /// The replicas, in start order (the first one leads changes).
    pub replicas: Vec<Replica>,
    /// The workers.
    pub workers: Vec<Worker>,
    /// A registration token.
    pub token: String,
    /// An `inference` key, once [`Cluster::deploy`] made one.
    pub key: Option<String>,
    /// The client.
    pub http: reqwest::Client,
}

impl Cluster {
    /// `count` replicas on a fresh database, each started with `flags`; the
    /// first start seeds the row (`nats` when `flags` hold `--nats-url`).
    /// Settings for tests are put at once: no attach jitter.
    pub async fn start(database_url: String, count: usize, flags: &[&str]) -> Self {
        let mut cluster = Self {
            database_url,
            replicas: Vec::new(),
            workers: Vec::new(),
            token: String::new(),
            key: None,
            http: reqwest::Client::new(),
        };
        for _ in 0..count {
            let data_dir = tempfile::tempdir().unwrap().keep();
            let replica = cluster.spawn_replica(data_dir, flags);
            cluster.replicas.push(replica);
        }
        let (status, body) = cluster
            .put(0, "/api/cluster/settings", json!({"attach_jitter_ms": 0}))
            .await;
        assert_eq!(status, StatusCode::OK, "settings: {body}");
        let (status, token) = cluster
            .post(0, "/api/nodes/registration-tokens", json!({"name": "e2e"}))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{token}");
        cluster.token = token["value"].as_str().unwrap().to_string();
        cluster
    }

    fn spawn_replica(&self, data_dir: PathBuf, flags: &[&str]) -> Replica {
        let process = ServeProcess::on_set(&self.database_url, &data_dir, None, flags);
        Replica {
            url: process.url.clone(),
            process: Some(process),
            data_dir,
        }
    }

    /// Starts replica `i` again (after a kill) on its own data folder, with `flags`.
    pub fn restart_replica(&mut self, i: usize, flags: &[&str]) {
        self.replicas[i].kill();
        let data_dir = self.replicas[i].data_dir.clone();
        self.replicas[i] = self.spawn_replica(data_dir, flags);
    }

    /// The URL of replica `i`.
    pub fn url(&self, i: usize) -> &str {
        &self.replicas[i].url
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> (StatusCode, Value) {
        let response = request.bearer_auth(ADMIN_TOKEN).send().await.unwrap();
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// GET through replica `i`; 200 expected.
    pub async fn get(&self, i: usize, path: &str) -> Value {
        let (status, body) = self
            .send(self.http.get(format!("{}{path}", self.url(i))))
            .await;
        assert_eq!(status, StatusCode::OK, "GET {path}: {body}");
        body
    }

    /// POST JSON through replica `i`.
    pub async fn post(&self, i: usize, path: &str, body: Value) -> (StatusCode, Value) {
        self.send(self.http.post(format!("{}{path}", self.url(i))).json(&body))
            .await
    }

    /// PUT JSON through replica `i`.
    pub async fn put(&self, i: usize, path: &str, body: Value) -> (StatusCode, Value) {
        self.send(self.http.put(format!("{}{path}", self.url(i))).json(&body))
            .await
    }

    /// `GET /api/cluster/carrier` through replica `i`.
    pub async fn carrier(&self, i: usize) -> Value {
        self.get(i, "/api/cluster/carrier").await
    }

    /// Starts a worker registering at replica `frontend` with `extra` flags.
    pub fn start_worker(&mut self, name: &str, frontend: usize, extra: &[String]) -> usize {
        let dir = tempfile::tempdir().unwrap();
        let mut args = vec!["--gpu".to_string(), "name=H200,memory=141GiB".to_string()];
        args.extend_from_slice(extra);
        let process =
            WorkerProcess::start(self.url(frontend), &self.token, name, dir.path(), &args);
        self.workers.push(Worker {
            process: Some(process),
            dir,
            name: name.to_string(),
        });
        self.workers.len() - 1
    }

    /// Starts worker `i` again on its identity, at replica `frontend`, with `extra`.
    pub fn restart_worker(&mut self, i: usize, frontend: usize, extra: &[String]) {
        self.workers[i].kill();
        let mut args = vec!["--gpu".to_string(), "name=H200,memory=141GiB".to_string()];
        args.extend_from_slice(extra);
        let url = self.url(frontend).to_string();
        let worker = &mut self.workers[i];
        worker.process = Some(WorkerProcess::start(
            &url,
            &self.token,
            &worker.name,
            worker.dir.path(),
            &args,
        ));
    }

    /// Waits until worker `i` registered; returns its node id.
    pub async fn node_id(&self, i: usize) -> String {
        let dir = self.workers[i].dir.path().to_path_buf();
        eventually("the worker registered", || async {
            dir.join("node.json").exists()
        })
        .await;
        self.workers[i].node_id()
    }

    /// The carrier status's entry of `node`.
    pub async fn worker_report(&self, node: &str) -> Value {
        let status = self.carrier(0).await;
        status["workers"]
            .as_array()
            .and_then(|w| w.iter().find(|w| w["node"] == node).cloned())
            .unwrap_or(Value::Null)
    }

    /// Waits until every worker reports being attached to `set` at the row's epoch.
    pub async fn workers_attached(&self, set: &str) {
        let all: Vec<usize> = (0..self.workers.len()).collect();
        self.workers_attached_some(&all, set).await;
    }

    /// Waits until workers `which` report being attached to `set` at the row's epoch.
    pub async fn workers_attached_some(&self, which: &[usize], set: &str) {
        let mut nodes = Vec::new();
        for &i in which {
            nodes.push(self.node_id(i).await);
        }
        eventually(&format!("every worker attached to `{set}`"), || async {
            let status = self.carrier(0).await;
            let epoch = status["epoch"].as_i64().unwrap_or(0);
            nodes.iter().all(|node| {
                status["workers"].as_array().is_some_and(|ws| {
                    ws.iter().any(|w| {
                        w["node"] == node.as_str()
                            && w["attached"]
                                .as_array()
                                .is_some_and(|a| a.iter().any(|s| s == set))
                            && w["epoch_seen"].as_i64().unwrap_or(0) >= epoch
                    })
                })
            })
        })
        .await;
    }

    /// Imports a small model, deploys it on the reference engine with one
    /// replica per worker, waits until every replica is ready, and makes an
    /// `inference` key.
    pub async fn deploy(&mut self, replicas: usize, token_delay_ms: u32) {
        let weights: Vec<u8> = (0..256 * 1024u32).map(|i| (i % 241) as u8).collect();
        let digest = hex::encode(Sha256::digest(&weights));
        let (status, body) = self
            .send(
                self.http
                    .put(format!("{}/api/library/blobs/{digest}", self.url(0)))
                    .body(weights.clone()),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        let (status, body) = self
            .post(
                0,
                "/api/models",
                json!({"id": MODEL, "revision": "r1",
                    "files": [{"path": "tiny.gguf", "size": weights.len(), "sha256": digest}]}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        let (status, created) = self
            .post(
                0,
                "/api/deployments",
                json!({"model": MODEL, "revision": "r1", "engine": "reference",
                    "gpus_per_replica": 1, "gpu_memory_bytes": 1 << 30,
                    "replicas": replicas, "token_delay_ms": token_delay_ms}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{created}");
        let id = created["id"].as_str().unwrap().to_string();
        eventually("every replica of the deployment is ready", || async {
            let shown = self.get(0, &format!("/api/deployments/{id}")).await;
            let replicas_status = shown["replicas_status"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            assert!(
                replicas_status.iter().all(|r| r["state"] != "failed"),
                "a replica failed: {shown}"
            );
            replicas_status.len() == replicas
                && replicas_status.iter().all(|r| r["state"] == "ready")
        })
        .await;
        let (status, key) = self
            .post(
                0,
                "/api/keys",
                json!({"name": "app", "scopes": ["inference"]}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{key}");
        self.key = Some(key["token"].as_str().unwrap().to_string());
        // Both frontends route to it before the load starts.
        for i in 0..self.replicas.len() {
            let url = self.url(i).to_string();
            let key = self.key.clone().unwrap();
            let http = self.http.clone();
            eventually("the frontend completes a chat", || {
                let (url, key, http) = (url.clone(), key.clone(), http.clone());
                async move { chat(&http, &url, &key, false).await.is_ok() }
            })
            .await;
        }
    }

    /// The worker processes' ids and the engines' ids and pids, as the
    /// nodes report them.
    pub async fn pids(&mut self) -> (Vec<u32>, BTreeMap<String, u64>) {
        let workers = self.workers.iter().map(Worker::pid).collect();
        let nodes = self.get(0, "/api/nodes").await;
        let mut engines = BTreeMap::new();
        collect_engine_pids(&nodes, &mut engines);
        (workers, engines)
    }
}

/// Every `{id, ..., state: {pid}}` below `value`.
fn collect_engine_pids(value: &Value, into: &mut BTreeMap<String, u64>) {
    match value {
        Value::Object(map) => {
            if let (Some(id), Some(pid)) = (
                map.get("id").and_then(Value::as_str),
                map.get("state")
                    .and_then(|s| s.get("pid"))
                    .and_then(Value::as_u64),
            ) {
                into.insert(id.to_string(), pid);
            }
            map.values().for_each(|v| collect_engine_pids(v, into));
        }
        Value::Array(items) => items.iter().for_each(|v| collect_engine_pids(v, into)),
        _ => {}
    }
}

/// One chat completion (streamed or not) through `url`; `Err` says why it failed.
pub async fn chat(
    http: &reqwest::Client,
    url: &str,
    key: &str,
    stream: bool,
) -> Result<(), String> {
    let response = http
        .post(format!("{url}/v1/chat/completions"))
        .bearer_auth(key)
        .json(&json!({"model": MODEL, "max_tokens": 6, "stream": stream,
            "messages": [{"role": "user", "content": "hello"}]}))
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .map_err(|e| format!("send: {e}"))?;
    let status = response.status();
    let text = response.text().await.map_err(|e| format!("body: {e}"))?;
    if status != StatusCode::OK {
        return Err(format!("{status}: {text}"));
    }
    if stream {
        let last = text.lines().rfind(|l| l.starts_with("data: "));
        if last != Some("data: [DONE]") || text.contains("\"error\"") {
            return Err(format!("a stream that did not finish: {text}"));
        }
    } else {
        let body: Value = serde_json::from_str(&text).map_err(|e| format!("{e}: {text}"))?;
        if body["object"] != "chat.completion" {
            return Err(format!("not a completion: {text}"));
        }
    }
    Ok(())
}

/// Each request's end and outcome.
type Outcomes = Arc<Mutex<Vec<(Instant, Result<(), String>)>>>;

/// Chat clients sending until stopped, each alternating frontends and
/// streaming every other request.
pub struct Load {
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    done: Outcomes,
}

impl Load {
    /// `clients` clients over `urls`.
    pub fn start(http: &reqwest::Client, urls: &[String], key: &str, clients: usize) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(Mutex::new(Vec::new()));
        let tasks = (0..clients)
            .map(|c| {
                let (stop, done, http) = (stop.clone(), done.clone(), http.clone());
                let (urls, key) = (urls.to_vec(), key.to_string());
                tokio::spawn(async move {
                    let mut n = c;
                    while !stop.load(Ordering::Relaxed) {
                        let url = &urls[n % urls.len()];
                        let result = chat(&http, url, &key, (n / urls.len()) % 2 == 1).await;
                        done.lock().unwrap().push((Instant::now(), result));
                        n += 1;
                    }
                })
            })
            .collect();
        Self { stop, tasks, done }
    }

    /// Requests completed (ok or not) between `from` and `to`.
    pub fn completed_between(&self, from: Instant, to: Instant) -> usize {
        let done = self.done.lock().unwrap();
        done.iter()
            .filter(|(at, r)| r.is_ok() && *at >= from && *at <= to)
            .count()
    }

    /// The failures so far, with when each ended.
    pub fn failures(&self) -> Vec<(Instant, String)> {
        let done = self.done.lock().unwrap();
        done.iter()
            .filter_map(|(at, r)| r.clone().err().map(|e| (*at, e)))
            .collect()
    }

    /// Stops the clients; returns (completed, failures).
    pub async fn stop(self) -> (usize, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        for task in self.tasks {
            task.await.unwrap();
        }
        let done = Arc::try_unwrap(self.done).unwrap().into_inner().unwrap();
        let failures: Vec<String> = done.iter().filter_map(|(_, r)| r.clone().err()).collect();
        (done.len() - failures.len(), failures)
    }
}

/// Probes posted one after another, alternating replicas: each publishes
/// a broadcast every replica must hear and submits a unit one replica must
/// handle.
pub struct Probes {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
    posted: Arc<Mutex<Vec<(String, Instant, StatusCode)>>>,
}

impl Probes {
    /// Starts posting `prefix-N` probes every `every` through `urls`.
    pub fn start(http: &reqwest::Client, urls: &[String], prefix: &str, every: Duration) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let posted = Arc::new(Mutex::new(Vec::new()));
        let task = {
            let (stop, posted, http) = (stop.clone(), posted.clone(), http.clone());
            let (urls, prefix) = (urls.to_vec(), prefix.to_string());
            tokio::spawn(async move {
                let mut n = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    let id = format!("{prefix}-{n}");
                    let started = Instant::now();
                    let status = http
                        .post(format!("{}/api/cluster/probe", urls[n % urls.len()]))
                        .bearer_auth(ADMIN_TOKEN)
                        .json(&json!({"id": id}))
                        .send()
                        .await
                        .map(|r| r.status())
                        .unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
                    posted.lock().unwrap().push((id, started, status));
                    n += 1;
                    tokio::time::sleep(every).await;
                }
            })
        };
        Self { stop, task, posted }
    }

    /// Stops posting; returns (id, when the post began, status).
    pub async fn stop(self) -> Vec<(String, Instant, StatusCode)> {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap();
        Arc::try_unwrap(self.posted).unwrap().into_inner().unwrap()
    }
}

/// What the replicas heard and handled of the probes.
#[derive(Debug, Default)]
pub struct ProbeCount {
    /// Probes whose post failed.
    pub failed_posts: Vec<String>,
    /// Broadcasts posted after the commit that some replica did not hear.
    pub lost_broadcasts: Vec<String>,
    /// Broadcasts some replica heard more than once.
    pub repeated_broadcasts: Vec<String>,
    /// Units no replica handled.
    pub lost_units: Vec<String>,
    /// Units handled more than once.
    pub repeated_units: Vec<String>,
}

impl ProbeCount {
    /// Nothing failed, lost or repeated.
    pub fn clean(&self) -> bool {
        self.failed_posts.is_empty()
            && self.lost_broadcasts.is_empty()
            && self.repeated_broadcasts.is_empty()
            && self.lost_units.is_empty()
            && self.repeated_units.is_empty()
    }
}

/// How long [`count_probes`] waits for a unit no replica handled yet: a
/// unit a released pgbus consumer claimed but never delivered comes back
/// once its lease (30 s) lapses, and the leader's next poll moves it to the
/// active set (docs/carriers.md, "Work queue").
pub const UNIT_PATIENCE: std::time::Duration = std::time::Duration::from_secs(40);

/// Counts `posted` probes on every replica of `urls`: units exactly once
/// over all replicas, broadcasts posted at or after `committed` exactly once
/// by each replica (at most once before it). Waits up to `patience` for
/// stragglers.
pub async fn count_probes(
    http: &reqwest::Client,
    urls: &[String],
    posted: &[(String, Instant, StatusCode)],
    committed: Instant,
    patience: Duration,
) -> ProbeCount {
    let read = || async {
        let mut lists = Vec::new();
        for url in urls {
            let body: Value = http
                .get(format!("{url}/api/cluster/probe"))
                .bearer_auth(ADMIN_TOKEN)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let list = |key: &str| -> BTreeMap<String, usize> {
                let mut counts = BTreeMap::new();
                for id in body[key].as_array().into_iter().flatten() {
                    *counts
                        .entry(id.as_str().unwrap_or_default().to_string())
                        .or_default() += 1;
                }
                counts
            };
            lists.push((list("heard"), list("handled")));
        }
        lists
    };
    let accepted: Vec<&(String, Instant, StatusCode)> = posted
        .iter()
        .filter(|(_, _, s)| *s == StatusCode::ACCEPTED)
        .collect();
    let started = Instant::now();
    loop {
        let lists = read().await;
        let mut count = ProbeCount {
            failed_posts: posted
                .iter()
                .filter(|(_, _, s)| *s != StatusCode::ACCEPTED)
                .map(|(id, _, s)| format!("{id}: {s}"))
                .collect(),
            ..ProbeCount::default()
        };
        for (id, at, _) in &accepted {
            let handled: usize = lists
                .iter()
                .map(|(_, h)| h.get(id).copied().unwrap_or(0))
                .sum();
            match handled {
                0 => count.lost_units.push(id.clone()),
                1 => {}
                n => count.repeated_units.push(format!("{id} x{n}")),
            }
            for (url, (heard, _)) in urls.iter().zip(&lists) {
                match heard.get(id).copied().unwrap_or(0) {
                    0 if *at >= committed => count.lost_broadcasts.push(format!("{id} at {url}")),
                    0 | 1 => {}
                    n => count
                        .repeated_broadcasts
                        .push(format!("{id} x{n} at {url}")),
                }
            }
        }
        let waiting = !count.lost_units.is_empty() || !count.lost_broadcasts.is_empty();
        if !waiting || started.elapsed() >= patience {
            return count;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A change as the admin API showed it.
#[derive(Debug, Clone)]
pub struct Change {
    /// When the request was sent.
    pub requested: Instant,
    /// When the answer came.
    pub answered: Instant,
    /// The first poll that saw it past prepare.
    pub committed: Instant,
    /// The first poll that saw it settled.
    pub settled: Instant,
    /// `last_change` from the status once settled.
    pub record: Value,
    /// The first poll in prepare that saw every live replica ready.
    pub replicas_ready: Option<Instant>,
    /// The first poll in prepare that saw every worker attached to the target.
    pub workers_attached: Option<Instant>,
}

/// Posts a change through replica `via`; returns when it was sent and the
/// answer. A 422 whose only blockers are `replica_silent` (a replica did
/// not refresh its report within the preflight's 6 s: seen when the test
/// machine's CPUs are saturated) is tried again, at most 3 times, and said.
pub async fn start_change(
    cluster: &Cluster,
    via: usize,
    body: &Value,
) -> (Instant, StatusCode, Value) {
    let mut tries = 0;
    loop {
        let requested = Instant::now();
        let (status, answer) = cluster
            .post(via, "/api/cluster/carrier", body.clone())
            .await;
        tries += 1;
        let silent_only = status == StatusCode::UNPROCESSABLE_ENTITY
            && answer["blockers"]
                .as_array()
                .is_some_and(|b| b.iter().all(|b| b["code"] == "replica_silent"));
        if !silent_only || tries == 3 {
            return (requested, status, answer);
        }
        eprintln!(
            "a preflight found replicas silent; trying again: {}",
            answer["error"]
        );
    }
}

/// Posts `body` through replica `via` (202 expected), then polls the status
/// until the change left prepare and settled on `target`.
pub async fn change(cluster: &Cluster, via: usize, body: Value, target: &str) -> Change {
    let before = cluster.carrier(via).await;
    let (requested, status, answer) = start_change(cluster, via, &body).await;
    let answered = Instant::now();
    assert_eq!(status, StatusCode::ACCEPTED, "{body} → {answer}");
    assert_eq!(answer["state"], "prepare", "{answer}");
    assert!(
        answer["epoch"].as_i64() > before["epoch"].as_i64(),
        "the epoch grew: {before} → {answer}"
    );
    let epoch = answer["epoch"].as_i64().unwrap();
    let mut committed = None;
    let (mut replicas_ready, mut workers_attached) = (None, None);
    let started = Instant::now();
    loop {
        let status = cluster.carrier(via).await;
        let now = Instant::now();
        if status["state"] == "prepare" && status["epoch"].as_i64() == Some(epoch) {
            let all = |key: &str, check: &dyn Fn(&Value) -> bool| {
                status[key].as_array().is_some_and(|a| a.iter().all(check))
            };
            if replicas_ready.is_none() && all("replicas", &|r| r["ready"] == true) {
                replicas_ready = Some(now);
            }
            let attached = |w: &Value| {
                w["attached"]
                    .as_array()
                    .is_some_and(|a| a.iter().any(|s| s == target))
                    && w["epoch_seen"].as_i64() >= Some(epoch)
            };
            if workers_attached.is_none() && all("workers", &attached) {
                workers_attached = Some(now);
            }
        }
        let past_prepare = status["epoch"].as_i64().unwrap_or(0) > epoch;
        if past_prepare && committed.is_none() {
            committed = Some(now);
        }
        if past_prepare && status["state"] == "stable" {
            assert_eq!(status["carrier"], target, "settled elsewhere: {status}");
            let record = status["last_change"].clone();
            assert_eq!(record["outcome"], "settled", "{status}");
            return Change {
                requested,
                answered,
                committed: committed.unwrap(),
                settled: now,
                record,
                replicas_ready,
                workers_attached,
            };
        }
        assert!(
            started.elapsed() < PATIENCE,
            "the change to {target} did not settle: {status}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Polls replica `via` until the row is stable on `target`; panics with
/// the last status after `PATIENCE`.
pub async fn settled_on(cluster: &Cluster, via: usize, target: &str) -> Value {
    let started = Instant::now();
    loop {
        let status = cluster.carrier(via).await;
        if status["carrier"] == target && status["state"] == "stable" {
            return status;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "never settled on {target}: {status}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// A node the test registers and heartbeats itself: it reports the carrier
/// sets it is attached to, so a change's prepare waits for it until the
/// test opens it. Holding a prepare open is otherwise a race with real
/// workers, which attach within milliseconds.
pub struct Gate {
    open: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
    /// Its node id.
    pub node: String,
}

impl Gate {
    /// Registers `name` at replica 0 and heartbeats every 100 ms: attached
    /// to the active set only while shut, to both sets once open.
    pub async fn register(cluster: &Cluster, name: &str) -> Self {
        let response = cluster
            .http
            .post(format!("{}/api/nodes/register", cluster.url(0)))
            .bearer_auth(&cluster.token)
            .json(&json!({"name": name}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
        let registered: Value = response.json().await.unwrap();
        let node = registered["node"]["id"].as_str().unwrap().to_string();
        let credential = registered["credential"].as_str().unwrap().to_string();
        let open = Arc::new(AtomicBool::new(true));
        let urls: Vec<String> = (0..cluster.replicas.len())
            .map(|i| cluster.url(i).to_string())
            .collect();
        let task = {
            let (open, node, http) = (open.clone(), node.clone(), cluster.http.clone());
            tokio::spawn(async move {
                let mut n = 0usize;
                loop {
                    n += 1;
                    // Any replica that answers: the test kills some.
                    let url = &urls[n % urls.len()];
                    let beat = async {
                        let status: Value = http
                            .get(format!("{url}/api/cluster/carrier"))
                            .bearer_auth(ADMIN_TOKEN)
                            .timeout(Duration::from_secs(2))
                            .send()
                            .await?
                            .json()
                            .await?;
                        let active = status["carrier"].as_str().unwrap_or_default().to_string();
                        let attached = match open.load(Ordering::Relaxed) {
                            true => vec!["nats".to_string(), "tunnel".to_string()],
                            false => vec![active],
                        };
                        http.post(format!("{url}/api/nodes/{node}/heartbeat"))
                            .bearer_auth(&credential)
                            .timeout(Duration::from_secs(2))
                            .json(&json!({"carriers": {"attached": attached,
                                "epoch_seen": status["epoch"]}}))
                            .send()
                            .await?;
                        Ok::<_, reqwest::Error>(())
                    };
                    let _ = beat.await;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            })
        };
        Self { open, task, node }
    }

    /// Holds the next prepare (reports the active set only).
    pub fn shut(&self) {
        self.open.store(false, Ordering::Relaxed);
    }

    /// Lets a prepare commit.
    pub fn open(&self) {
        self.open.store(true, Ordering::Relaxed);
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The nats component's bytes with a custom section appended: a second
/// build of the same code under another digest.
pub fn second_build(bytes: &[u8], tag: &str) -> Vec<u8> {
    fn leb(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    let name = b"switchyard-build";
    let mut content = Vec::new();
    leb(name.len(), &mut content);
    content.extend_from_slice(name);
    content.extend_from_slice(tag.as_bytes());
    let mut out = bytes.to_vec();
    out.push(0);
    leb(content.len(), &mut out);
    out.extend_from_slice(&content);
    out
}

/// Pushes `bytes` as plugin `name@version` through replica 0.
pub async fn push_plugin(cluster: &Cluster, name: &str, version: &str, bytes: Vec<u8>) {
    let digest = hex::encode(Sha256::digest(&bytes));
    let (status, body) = cluster
        .send(
            cluster
                .http
                .post(format!("{}/api/plugins", cluster.url(0)))
                .query(&[("name", name), ("version", version), ("sha256", &digest)])
                .body(bytes),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}

/// The replica's folder, for a test that reads what it wrote.
pub fn data_dir(replica: &Replica) -> &Path {
    &replica.data_dir
}
