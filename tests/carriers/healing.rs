//! A deployment of two replicas spread on two workers, on each carrier
//! set: requests are shared between them; a killed engine is restarted by
//! its worker and its replica serves again; when one worker is killed, its
//! replica is placed again on the other after the grace, and requests go on
//! being answered.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use switchyard_tests::ADMIN_TOKEN;
use switchyard_tests::db::fresh_database;
use switchyard_tests::nats::{NatsServer, worker_flags};
use switchyard_tests::process::{ServeProcess, WorkerProcess};

const PATIENCE: Duration = Duration::from_secs(60);
/// The longest one chat request may take: a request that gets no answer
/// fails the test with what it was doing, rather than hanging it.
const REQUEST_PATIENCE: Duration = Duration::from_secs(30);

async fn call(
    http: &reqwest::Client,
    method: Method,
    url: String,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut request = http.request(method, url).bearer_auth(ADMIN_TOKEN);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Waits until the deployment has `count` ready replicas; returns them.
async fn ready(http: &reqwest::Client, base: &str, id: &str, count: usize) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let (_, shown) = call(
            http,
            Method::GET,
            format!("{base}/api/deployments/{id}"),
            None,
        )
        .await;
        let replicas: Vec<Value> = shown["replicas_status"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|r| r["state"] == "ready")
            .collect();
        if replicas.len() == count {
            return replicas;
        }
        assert!(started.elapsed() < PATIENCE, "not {count} ready: {shown}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until `count` nodes are healthy, so that a spread placement sees
/// them all (a deployment made before the second worker registers would
/// place both replicas on the first).
async fn healthy_nodes(http: &reqwest::Client, base: &str, count: usize) {
    let started = Instant::now();
    loop {
        let (_, shown) = call(http, Method::GET, format!("{base}/api/nodes"), None).await;
        let healthy = shown["nodes"].as_array().map_or(0, |nodes| {
            nodes.iter().filter(|n| n["state"] == "healthy").count()
        });
        if healthy == count {
            return;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "not {count} healthy nodes: {shown}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The pid of the engine a worker whose data is under `dir` runs, if any.
fn engine_pid(dir: &std::path::Path) -> Option<u32> {
    let output = std::process::Command::new("pgrep")
        .args(["-f", &format!("engine reference .*{}", dir.display())])
        .output()
        .unwrap();
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .next()
        .and_then(|pid| pid.trim().parse().ok())
}

/// The node id a worker keeps under `dir`.
fn node_id(dir: &std::path::Path) -> String {
    let identity: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("node.json")).unwrap()).unwrap();
    identity["node_id"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_share_requests_and_heal_on_the_tunnel_set() {
    heals(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_share_requests_and_heal_on_the_nats_set() {
    let nats = NatsServer::start(&[]);
    heals(Some(&nats)).await;
}

/// Two replicas on two workers share requests; a killed engine is
/// restarted and serves again; a killed worker's replica moves after the
/// grace. On the `nats` set when a server is given, else `tunnel`.
async fn heals(nats: Option<&NatsServer>) {
    let database_url = fresh_database().await;
    let data_dir = tempfile::tempdir().unwrap();
    let nats_url = nats.map(NatsServer::address);
    // A short grace, so that the lost worker's replica moves soon; not
    // shorter: a node is unschedulable once a third of it passes without a
    // heartbeat, and on a loaded machine a worker can be that late while
    // the replicas are placed (both then land on the other node).
    let serve = ServeProcess::on_set(
        &database_url,
        data_dir.path(),
        nats_url.as_deref(),
        &["--node-grace-ms", "4000"],
    );
    let base = serve.url.clone();
    let http = reqwest::Client::new();
    let (_, token) = call(
        &http,
        Method::POST,
        format!("{base}/api/nodes/registration-tokens"),
        Some(json!({"name": "e2e"})),
    )
    .await;
    let token = token["value"].as_str().unwrap().to_string();
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let worker_args = || {
        let mut args = vec!["--gpu".to_string(), "name=L4,memory=24GiB,count=2".into()];
        args.extend(worker_flags(nats));
        args
    };
    let (args_a, args_b) = (worker_args(), worker_args());
    let _worker_a = WorkerProcess::start(&base, &token, "gpu-a", dir_a.path(), &args_a);
    let mut worker_b = WorkerProcess::start(&base, &token, "gpu-b", dir_b.path(), &args_b);

    let weights: Vec<u8> = (0..1024 * 1024u32).map(|i| (i % 233) as u8).collect();
    let digest = hex::encode(Sha256::digest(&weights));
    let uploaded = http
        .put(format!("{base}/api/library/blobs/{digest}"))
        .bearer_auth(ADMIN_TOKEN)
        .body(weights.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(uploaded.status(), StatusCode::CREATED);
    let (status, _) = call(
        &http,
        Method::POST,
        format!("{base}/api/models"),
        Some(json!({
            "id": "demo-pair", "revision": "r1",
            "files": [{"path": "m.gguf", "size": weights.len(), "sha256": digest}],
        })),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    healthy_nodes(&http, &base, 2).await;
    let (status, created) = call(
        &http,
        Method::POST,
        format!("{base}/api/deployments"),
        Some(json!({
            "model": "demo-pair", "revision": "r1", "engine": "reference", "replicas": 2,
            "gpus_per_replica": 1, "gpu_memory_bytes": 1 << 30, "strategy": "spread",
        })),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["id"].as_str().unwrap().to_string();
    let replicas = ready(&http, &base, &id, 2).await;
    assert_ne!(
        replicas[0]["node_id"], replicas[1]["node_id"],
        "spread on two workers"
    );

    let (_, key) = call(
        &http,
        Method::POST,
        format!("{base}/api/keys"),
        Some(json!({"name": "app", "scopes": ["inference"]})),
    )
    .await;
    let key = key["token"].as_str().unwrap().to_string();
    let complete = || async {
        let response = http
            .post(format!("{base}/v1/chat/completions"))
            .bearer_auth(&key)
            .json(&json!({"model": "demo-pair", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}))
            .timeout(REQUEST_PATIENCE)
            .send()
            .await
            .unwrap_or_else(|e| panic!("a chat request got no answer: {e}"));
        let replica = response
            .headers()
            .get("x-switchyard-replica")
            .map(|v| v.to_str().unwrap().to_string());
        (response.status(), replica)
    };
    let mut served: HashMap<String, usize> = HashMap::new();
    for _ in 0..20 {
        let (status, replica) = complete().await;
        assert_eq!(status, StatusCode::OK);
        *served.entry(replica.unwrap()).or_default() += 1;
    }
    assert_eq!(served.len(), 2, "both replicas served: {served:?}");
    assert!(served.values().all(|n| *n >= 5), "shared: {served:?}");

    // Worker a's engine is killed: the worker restarts it, and its replica
    // serves again (requests meanwhile may fail; none hangs).
    let node_a = node_id(dir_a.path());
    let replica_a = replicas
        .iter()
        .find(|r| r["node_id"] == node_a.as_str())
        .and_then(|r| r["id"].as_str())
        .unwrap()
        .to_string();
    let killed = engine_pid(dir_a.path()).expect("worker a's engine");
    assert!(
        std::process::Command::new("kill")
            .args(["-KILL", &killed.to_string()])
            .status()
            .unwrap()
            .success()
    );
    let started = Instant::now();
    loop {
        let (status, replica) = complete().await;
        let restarted = engine_pid(dir_a.path()).is_some_and(|pid| pid != killed);
        if restarted && status == StatusCode::OK && replica.as_deref() == Some(&replica_a) {
            break;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "the killed engine's replica never served again"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Worker b goes away for good: after the grace, its replica is placed
    // again on a's free GPU.
    let node_b = node_id(dir_b.path());
    worker_b.child.kill().unwrap();
    let _ = worker_b.child.wait();
    // Its engine died with it (parent-death signal), leaving no orphan on the GPU.
    let orphan = || {
        std::process::Command::new("pgrep")
            .args(["-f", &dir_b.path().display().to_string()])
            .status()
            .unwrap()
            .success()
    };
    let started = Instant::now();
    while orphan() {
        assert!(
            started.elapsed() < PATIENCE,
            "the killed worker's engine survived"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let started = Instant::now();
    loop {
        let replicas = ready(&http, &base, &id, 2).await;
        if replicas.iter().all(|r| r["node_id"] != node_b.as_str()) {
            break;
        }
        assert!(started.elapsed() < PATIENCE, "the replica never moved");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (_, nodes) = call(
        &http,
        Method::GET,
        format!("{base}/api/nodes/{node_b}"),
        None,
    )
    .await;
    assert_eq!(nodes["state"], "offline", "{nodes}");
    for _ in 0..4 {
        assert_eq!(complete().await.0, StatusCode::OK);
    }
}
