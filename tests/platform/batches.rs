//! OpenAI batches on one cluster, end to end: real `switchyard serve` and
//! `worker` processes, the reference engine, PostgreSQL, the official
//! `openai` Python client and the CLI. A batch runs each line once (the
//! engine counts them), survives its engine killed and a frontend replica
//! killed mid-run, stops running lines when cancelled, and a bad input
//! file is refused with a code that names what is wrong.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use switchyard_protocol::batch::OutputLine;
use switchyard_tests::ADMIN_TOKEN;
use switchyard_tests::batch::{
    batch, batch_until, chat_lines, completed, engine_pid, kill, python_batch, python_ok, upload,
};
use switchyard_tests::cluster::{Cluster, PATIENCE};
use switchyard_tests::process::{ServeProcess, binary};
use tokio::io::AsyncBufReadExt;

/// A cluster with one worker (one declared GPU) serving `demo` on the
/// reference engine with `fields`; the worker's folder, to find its engine.
async fn serving(
    fields: Value,
) -> (
    Cluster,
    switchyard_tests::process::WorkerProcess,
    tempfile::TempDir,
) {
    let cluster = Cluster::start().await;
    let dir = tempfile::tempdir().unwrap();
    let worker = cluster.worker("w", dir.path(), &["--gpu", "name=L4,memory=24GiB"]);
    cluster.node_id("w").await;
    cluster.deploy_ready(fields).await;
    (cluster, worker, dir)
}

/// The reference engine's counters, at the address the worker reports.
async fn engine_stats(cluster: &Cluster) -> Value {
    let node = cluster.node_id("w").await;
    let (status, engines) = cluster
        .call(
            Method::POST,
            &format!("/api/cluster/nodes/{node}/control/engine.list"),
            Some(json!({})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{engines}");
    let url = engines[0]["url"]
        .as_str()
        .expect("an engine url")
        .to_string();
    reqwest::get(format!("{url}/stats"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_500_lines_from_the_openai_client_runs_each_line_once() {
    let (cluster, _worker, _dir) = serving(json!({"max_concurrency": 32})).await;
    let key = cluster.inference_key().await;
    let before = engine_stats(&cluster).await["completed"].as_u64().unwrap();
    python_ok(python_batch(&cluster.serve.url, &key, "demo", 500, None)).await;
    let after = engine_stats(&cluster).await["completed"].as_u64().unwrap();
    assert_eq!(after - before, 500, "the engine answered each line once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_survives_its_engine_and_a_frontend_replica_killed_mid_run() {
    // 20 ms a token, 8 tokens, 8 at a time: 500 lines take about 15 s.
    let (cluster, _worker, dir) =
        serving(json!({"max_concurrency": 8, "token_delay_ms": 20})).await;
    let key = cluster.inference_key().await;
    // A second frontend replica on the same database runs lines too.
    let data_b = tempfile::tempdir().unwrap();
    let mut replica_b = ServeProcess::on_set(&cluster.database_url, data_b.path(), None, &[]);
    let mut client = python_batch(&cluster.serve.url, &key, "demo", 500, None);
    let mut stdout = tokio::io::BufReader::new(client.stdout.take().unwrap()).lines();
    let id = tokio::time::timeout(PATIENCE, stdout.next_line())
        .await
        .expect("the client never created the batch")
        .unwrap()
        .expect("a batch id");
    let url = cluster.serve.url.clone();

    // The engine dies under the lines it runs; the worker restarts it.
    batch_until(&url, &key, &id, "the batch never got going", |b| {
        completed(b) >= 80
    })
    .await;
    kill(engine_pid(dir.path()).expect("the worker's engine"));
    // Replica B dies (SIGKILL) with the lines it ran and the units it held.
    let shown = batch_until(
        &url,
        &key,
        &id,
        "the batch stalled after the engine died",
        |b| completed(b) >= 250,
    )
    .await;
    assert_eq!(shown["status"], "in_progress", "{shown}");
    replica_b.child.kill().unwrap();
    let _ = replica_b.child.wait();

    // The client sees the batch complete with one 200 a line (it checks).
    let rest = tokio::spawn(async move {
        let mut lines = Vec::new();
        while let Ok(Some(line)) = stdout.next_line().await {
            lines.push(line);
        }
        lines
    });
    let status = tokio::time::timeout(Duration::from_secs(300), client.wait())
        .await
        .expect("the Python client never finished")
        .unwrap();
    let mut stderr = String::new();
    if let Some(mut err) = client.stderr.take() {
        use tokio::io::AsyncReadExt;
        let _ = err.read_to_string(&mut stderr).await;
    }
    let lines = rest.await.unwrap();
    assert!(
        status.success() && lines.last().map(String::as_str) == Some("ok"),
        "{lines:?}\n{stderr}"
    );
}

/// Runs the CLI against the cluster with `key`.
fn cli(cluster: &Cluster, key: &str, args: &[&str]) -> std::process::Output {
    std::process::Command::new(binary())
        .args(args)
        .args(["--server", &cluster.serve.url, "--token", key])
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_cancelled_mid_run_ends_cancelled_with_the_lines_that_ran() {
    // 50 ms a token, 8 tokens, 4 at a time: 200 lines would take 20 s.
    let (cluster, _worker, _dir) =
        serving(json!({"max_concurrency": 4, "token_delay_ms": 50})).await;
    let key = cluster.inference_key().await;
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), chat_lines("demo", 200)).unwrap();
    let created = cli(
        &cluster,
        &key,
        &[
            "batch",
            "create",
            file.path().to_str().unwrap(),
            "--metadata",
            "suite=cancel",
            "--json",
        ],
    );
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );
    let created: Value = serde_json::from_slice(&created.stdout).unwrap();
    let id = created["id"].as_str().unwrap().to_string();
    assert_eq!(created["metadata"]["suite"], "cancel", "{created}");
    let url = cluster.serve.url.clone();
    batch_until(&url, &key, &id, "no line ran", |b| completed(b) >= 8).await;

    let cancelled = cli(&cluster, &key, &["batch", "cancel", &id, "--json"]);
    assert!(
        cancelled.status.success(),
        "{}",
        String::from_utf8_lossy(&cancelled.stderr)
    );
    let cancelled: Value = serde_json::from_slice(&cancelled.stdout).unwrap();
    assert!(
        ["cancelling", "cancelled"].contains(&cancelled["status"].as_str().unwrap()),
        "{cancelled}"
    );
    let ended = batch_until(&url, &key, &id, "the batch never ended", |b| {
        b["status"] == "cancelled"
    })
    .await;
    let done = completed(&ended);
    assert!((8..200).contains(&done), "{ended}");
    assert!(ended["cancelled_at"].as_i64().is_some(), "{ended}");
    // No line starts once the batch is cancelled.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(completed(&batch(&url, &key, &id).await.1), done);

    // The output holds exactly the lines that ran, each a 200.
    let output = cli(&cluster, &key, &["batch", "output", &id]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<OutputLine> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len() as i64, done);
    assert!(
        lines
            .iter()
            .all(|l| l.response.as_ref().unwrap().status_code == 200)
    );

    // Cancelling an ended batch is refused; listing shows it.
    let (status, refused) = call(
        &cluster,
        &key,
        Method::POST,
        &format!("/v1/batches/{id}/cancel"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{refused}");
    assert_eq!(refused["status"], "cancelled");
    let listed = cli(&cluster, &key, &["batch", "list"]);
    assert!(String::from_utf8_lossy(&listed.stdout).contains(&id));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_whose_key_is_revoked_ends_cancelled_and_runs_no_line_after() {
    // 50 ms a token, 8 tokens, 4 at a time: 200 lines would take 20 s.
    let (cluster, _worker, _dir) =
        serving(json!({"max_concurrency": 4, "token_delay_ms": 50})).await;
    let (status, key) = cluster
        .call(
            Method::POST,
            "/api/keys",
            Some(json!({"name": "app", "scopes": ["inference"]})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{key}");
    let (key_id, token) = (
        key["key"]["id"].as_str().unwrap().to_string(),
        key["token"].as_str().unwrap().to_string(),
    );
    let url = cluster.serve.url.clone();
    let (status, file) = upload(&url, &token, "batch", chat_lines("demo", 200).as_bytes()).await;
    assert_eq!(status, StatusCode::OK, "{file}");
    let made = json!({"input_file_id": file["id"], "endpoint": "/v1/chat/completions",
        "completion_window": "24h"});
    let (status, created) = call(&cluster, &token, Method::POST, "/v1/batches", Some(made)).await;
    assert_eq!(status, StatusCode::OK, "{created}");
    let id = created["id"].as_str().unwrap().to_string();
    batch_until(&url, &token, &id, "no line ran", |b| completed(b) >= 8).await;

    let (status, _) = cluster
        .call(Method::DELETE, &format!("/api/keys/{key_id}"), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    // The admin key reads it: the revoked key reads nothing any more.
    let ended = batch_until(&url, ADMIN_TOKEN, &id, "the batch ran on", |b| {
        b["status"] == "cancelled"
    })
    .await;
    assert_eq!(ended["errors"]["data"][0]["code"], "key_revoked", "{ended}");
    let done = completed(&ended);
    assert!((8..200).contains(&done), "{ended}");
    // No line runs once it ended: the engine answers no more.
    let served = engine_stats(&cluster).await["completed"].as_u64().unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        engine_stats(&cluster).await["completed"].as_u64().unwrap(),
        served
    );
    assert_eq!(completed(&batch(&url, ADMIN_TOKEN, &id).await.1), done);
}

async fn call(
    cluster: &Cluster,
    key: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut request = reqwest::Client::new()
        .request(method, format!("{}{path}", cluster.serve.url))
        .bearer_auth(key);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_batch_file_is_refused_with_a_code_that_names_the_fault() {
    let cluster = Cluster::start().await;
    let key = cluster.inference_key().await;
    let good = chat_lines("demo", 2);
    let body = json!({"model": "demo", "messages": []});
    let line = |fields: Value| fields.to_string() + "\n";
    let cases: Vec<(String, &str)> = vec![
        (
            line(json!({"method": "POST", "url": "/v1/chat/completions", "body": body})),
            "missing_custom_id",
        ),
        (
            format!("{0}\n{0}\n", good.lines().next().unwrap()),
            "duplicate_custom_id",
        ),
        (
            line(json!({"custom_id": "a", "method": "POST", "url": "/v1/images", "body": body})),
            "invalid_url",
        ),
        (
            line(
                json!({"custom_id": "a", "method": "GET", "url": "/v1/chat/completions", "body": body}),
            ),
            "invalid_method",
        ),
        (
            "{\"custom_id\": \"x\", not json\n".to_string(),
            "invalid_jsonl",
        ),
        (
            line(
                json!({"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": {"messages": []}}),
            ),
            "invalid_body",
        ),
        (chat_lines("demo", 50_001), "too_many_lines"),
        (String::new(), "empty_file"),
    ];
    for (content, code) in cases {
        let (status, body) = upload(&cluster.serve.url, &key, "batch", content.as_bytes()).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (StatusCode::BAD_REQUEST, Some(code)),
            "{body}"
        );
    }
    let (status, body) = upload(&cluster.serve.url, &key, "fine-tune", good.as_bytes()).await;
    assert_eq!(body["error"]["code"], "invalid_purpose", "{status} {body}");
    // Blank lines: the file's size is refused, not a line's.
    let huge = vec![b'\n'; (64 << 20) + 1];
    let (status, body) = upload(&cluster.serve.url, &key, "batch", &huge).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    assert_eq!(body["error"]["code"], "file_too_large");

    // A good file; a batch whose endpoint its lines do not call is refused.
    let (status, file) = upload(&cluster.serve.url, &key, "batch", good.as_bytes()).await;
    assert_eq!(status, StatusCode::OK, "{file}");
    let file_id = file["id"].as_str().unwrap();
    let create = |endpoint: &str, window: &str, file: &str| json!({"input_file_id": file, "endpoint": endpoint, "completion_window": window});
    for (body, status, code) in [
        (
            create("/v1/embeddings", "24h", file_id),
            StatusCode::BAD_REQUEST,
            "endpoint_mismatch",
        ),
        (
            create("/v1/chat/completions", "1h", file_id),
            StatusCode::BAD_REQUEST,
            "invalid_completion_window",
        ),
        (
            create("/v1/models", "24h", file_id),
            StatusCode::BAD_REQUEST,
            "invalid_endpoint",
        ),
        (
            create("/v1/chat/completions", "24h", "file-0"),
            StatusCode::NOT_FOUND,
            "file_not_found",
        ),
    ] {
        let (got, answer) = call(&cluster, &key, Method::POST, "/v1/batches", Some(body)).await;
        assert_eq!(
            (got, answer["error"]["code"].as_str()),
            (status, Some(code)),
            "{answer}"
        );
    }
    // The file's content is served back as uploaded.
    let content = reqwest::Client::new()
        .get(format!("{}/v1/files/{file_id}/content", cluster.serve.url))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(content, good);
    // Anonymous: 401; a key without `inference`: 403; an unknown batch: 404.
    let (status, _) = call(&cluster, "", Method::GET, "/v1/batches", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, other) = cluster
        .call(
            Method::POST,
            "/api/keys",
            Some(json!({"name": "m", "scopes": ["models:manage"]})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, _) = call(
        &cluster,
        other["token"].as_str().unwrap(),
        Method::GET,
        "/v1/batches",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, body) = call(
        &cluster,
        ADMIN_TOKEN,
        Method::GET,
        "/v1/batches/batch_0",
        None,
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("batch_not_found"))
    );
}
