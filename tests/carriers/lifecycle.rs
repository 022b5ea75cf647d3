//! Replica lifecycle end to end with real processes on the `tunnel` set:
//! deleting a deployment stops its engine (drained on the worker, its GPU
//! counted until then), and a worker stops an engine no replica names any
//! more (its replica was forgotten), whose GPU the scheduler counts as busy
//! until the worker reports it gone. And a model imported through one
//! frontend replica is staged by another, which fetches the files from the
//! first.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use switchyard_tests::ADMIN_TOKEN;
use switchyard_tests::db::fresh_database;
use switchyard_tests::process::{ServeProcess, WorkerProcess};
use switchyard_tests::replica::Replica;

use crate::placement::Cluster;

/// Whether the node's last heartbeat reports the engine `id` running.
fn reports(node: &Value, id: &str) -> bool {
    node["inventory"]["engines"]
        .as_array()
        .is_some_and(|engines| {
            engines
                .iter()
                .any(|e| e["id"] == id && e["state"]["state"] != "stopped")
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_deployment_stops_its_engine_before_its_gpu_is_used_again() {
    let cluster = Cluster::start().await;
    let dir = tempfile::tempdir().unwrap();
    let _worker = cluster.worker("one-gpu", dir.path(), &["--gpu", "name=L4,memory=24GiB"]);
    let node = cluster.node_id("one-gpu").await;
    let first = cluster
        .deploy_ready(json!({"served_model_name": "first"}))
        .await;
    let engine = cluster.ready_replica(&first).await["id"]
        .as_str()
        .unwrap()
        .to_string();

    let (status, _) = cluster
        .call(Method::DELETE, &format!("/api/deployments/{first}"), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    // The only GPU is busy until the engine is stopped.
    let (status, created) = cluster
        .call(
            Method::POST,
            "/api/deployments",
            Some(
                json!({"model": "demo", "revision": "r1", "engine": "reference",
                        "served_model_name": "second",
                        "gpus_per_replica": 1, "gpu_memory_bytes": 1 << 30}),
            ),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let second = created["id"].as_str().unwrap().to_string();

    let id = engine.clone();
    cluster
        .until(
            &format!("/api/nodes/{node}"),
            "the deleted deployment's engine still runs",
            |v| !reports(v, &id),
        )
        .await;
    let replica = cluster.ready_replica(&second).await;
    assert_eq!(replica["gpus"], json!([0]), "{replica}");
    assert_ne!(replica["id"], engine.as_str());
    let (_, shown) = cluster
        .call(Method::GET, &format!("/api/nodes/{node}"), None)
        .await;
    assert!(!reports(&shown, &engine), "{shown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_stops_an_engine_no_replica_names() {
    let cluster = Cluster::start().await;
    let dir = tempfile::tempdir().unwrap();
    let _worker = cluster.worker("one-gpu", dir.path(), &["--gpu", "name=L4,memory=24GiB"]);
    let node = cluster.node_id("one-gpu").await;
    let deployment = cluster.deploy_ready(json!({})).await;
    let engine = cluster.ready_replica(&deployment).await["id"]
        .as_str()
        .unwrap()
        .to_string();

    // The replica is forgotten (as after a stop its worker never confirmed):
    // its engine still runs on the worker.
    let db = switchyard_tests::db::connect(&cluster.database_url).await;
    db.execute("DELETE FROM deployment_replicas WHERE id = $1", &[&engine])
        .await
        .unwrap();

    // The worker stops it; only then does the replacement get the GPU.
    let id = engine.clone();
    cluster
        .until(
            &format!("/api/nodes/{node}"),
            "the worker kept an engine no replica names",
            |v| !reports(v, &id),
        )
        .await;
    let id = engine.clone();
    let shown = cluster
        .until(
            &format!("/api/deployments/{deployment}"),
            "the replacement never became ready",
            |v| {
                v["replicas_status"]
                    .as_array()
                    .is_some_and(|r| r.len() == 1 && r[0]["state"] == "ready" && r[0]["id"] != id)
            },
        )
        .await;
    assert_eq!(shown["replicas_status"][0]["gpus"], json!([0]), "{shown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_imported_through_one_frontend_is_staged_by_another() {
    let db = fresh_database().await;
    let (dir_a, dir_b, dir_worker) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    // The importing replica runs no carrier set, so it never schedules: the
    // other one, which lacks the files, must stage them.
    let importer = Replica::on(&db, dir_a.path()).await;
    let weights: Vec<u8> = (0..3 * 1024 * 1024u32).map(|i| (i % 241) as u8).collect();
    let digest = hex::encode(Sha256::digest(&weights));
    let (status, _) = importer
        .call(
            importer
                .admin(Method::PUT, &format!("/api/library/blobs/{digest}"))
                .body(weights.clone()),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, body) = importer
        .call(importer.admin(Method::POST, "/api/models").json(&json!({
            "id": "demo", "revision": "r1",
            "files": [{"path": "m.gguf", "size": weights.len(), "sha256": digest}],
        })))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");

    let scheduler = ServeProcess::start(
        &[
            "--database-url",
            &db,
            "--auto-approve",
            "--data-dir",
            dir_b.path().to_str().unwrap(),
        ],
        &[("SWITCHYARD_ADMIN_TOKEN", ADMIN_TOKEN)],
    );
    let http = reqwest::Client::new();
    let call = |method: Method, path: &str, body: Option<Value>| {
        let mut request = http
            .request(method, format!("{}{path}", scheduler.url))
            .bearer_auth(ADMIN_TOKEN);
        if let Some(body) = body {
            request = request.json(&body);
        }
        async move {
            let response = request.send().await.unwrap();
            let status = response.status();
            (
                status,
                response.json::<Value>().await.unwrap_or(Value::Null),
            )
        }
    };
    let (_, token) = call(
        Method::POST,
        "/api/nodes/registration-tokens",
        Some(json!({"name": "e2e"})),
    )
    .await;
    let _worker = WorkerProcess::start(
        &scheduler.url,
        token["value"].as_str().unwrap(),
        "worker",
        dir_worker.path(),
        &["--gpu", "name=L4,memory=24GiB"],
    );
    let (status, created) = call(
        Method::POST,
        "/api/deployments",
        Some(
            json!({"model": "demo", "revision": "r1", "engine": "reference",
                    "gpus_per_replica": 1, "gpu_memory_bytes": 1 << 30}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["id"].as_str().unwrap().to_string();
    let started = Instant::now();
    loop {
        let (_, shown) = call(Method::GET, &format!("/api/deployments/{id}"), None).await;
        if shown["replicas_status"][0]["state"] == "ready" {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the replica never became ready: {shown}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The scheduling replica's library holds a verified copy now.
    let copy = std::fs::read(dir_b.path().join("library/blobs/sha256").join(&digest)).unwrap();
    assert_eq!(copy, weights);
    importer.stop().await;
}
