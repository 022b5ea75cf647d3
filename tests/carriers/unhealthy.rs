//! A worker that falls silent for less than the grace is unhealthy: its
//! replica gets no requests (503 with Retry-After, never a hang) but stays
//! placed, and the first heartbeat after makes it healthy and serving
//! again. The worker is paused with SIGSTOP (its engine runs on); the
//! answers and the states show in `/metrics`.

use std::process::Command;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::placement::Cluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_worker_is_unhealthy_until_it_speaks_again() {
    // Unhealthy after a third of the grace (4 s), offline after 12 s.
    let cluster = Cluster::start_with(None, &["--node-grace-ms", "12000"]).await;
    let dir = tempfile::tempdir().unwrap();
    let worker = cluster.worker("w", dir.path(), &["--gpu", "name=L4,memory=24GiB"]);
    let node = cluster.node_id("w").await;
    let deployment = cluster.deploy_ready(json!({})).await;
    let placed = cluster.ready_replica(&deployment).await;
    let key = cluster.inference_key().await;
    let http = reqwest::Client::new();
    // A request routed to the paused worker before the table changed would
    // wait for it: give up after a while and ask again.
    let chat = || async {
        let response = http
            .post(format!("{}/v1/chat/completions", cluster.serve.url))
            .bearer_auth(&key)
            .json(&json!({"model": "demo", "max_tokens": 2,
                          "messages": [{"role": "user", "content": "hi"}]}))
            .timeout(std::time::Duration::from_secs(2))
            .send()
            .await;
        let Ok(response) = response else {
            return (StatusCode::GATEWAY_TIMEOUT, None, Value::Null);
        };
        let retry = response.headers().get("retry-after").cloned();
        let status = response.status();
        (
            status,
            retry,
            response.json::<Value>().await.unwrap_or(Value::Null),
        )
    };
    assert_eq!(chat().await.0, StatusCode::OK);

    let signal = |name: &str| {
        let sent = Command::new("kill")
            .args([name, &worker.child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
    };
    signal("-STOP");
    cluster
        .until(
            &format!("/api/nodes/{node}"),
            "the silent node never became unhealthy",
            |v| v["state"] == "unhealthy",
        )
        .await;
    // Routing follows within a refresh (once a second).
    let started = std::time::Instant::now();
    let (status, retry, body) = loop {
        let answer = chat().await;
        if answer.0 == StatusCode::SERVICE_UNAVAILABLE || started.elapsed().as_secs() > 10 {
            break answer;
        }
    };
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"]["code"], "model_loading", "{body}");
    assert!(retry.is_some());
    signal("-CONT");

    cluster
        .until(
            &format!("/api/nodes/{node}"),
            "the node never came back",
            |v| v["state"] == "healthy",
        )
        .await;
    let shown = cluster
        .until(
            &format!("/api/deployments/{deployment}"),
            "the replica never served again",
            |v| v["replicas_status"][0]["state"] == "ready",
        )
        .await;
    assert_eq!(
        shown["replicas_status"][0]["id"], placed["id"],
        "the replica stayed where it was"
    );
    let started = std::time::Instant::now();
    loop {
        let (status, _, body) = chat().await;
        if status == StatusCode::OK {
            break;
        }
        assert!(
            started.elapsed().as_secs() < 10,
            "never served again: {body}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }

    // What happened shows in /metrics.
    let metrics = http
        .get(format!("{}/metrics", cluster.serve.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let value = |series: &str| -> u64 {
        metrics
            .lines()
            .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {series} in {metrics}"))
    };
    assert!(value("switchyard_inference_requests_total{model=\"demo\",status=\"200\"}") >= 2);
    assert!(value("switchyard_inference_requests_total{model=\"demo\",status=\"503\"}") >= 1);
    assert!(value("switchyard_inference_head_seconds_count") >= 2);
    assert_eq!(value("switchyard_nodes{state=\"healthy\"}"), 1);
    assert_eq!(
        value("switchyard_replicas{model=\"demo\",state=\"ready\"}"),
        1
    );
    assert_eq!(value("switchyard_carrier_connected{carrier=\"tunnel\"}"), 1);
}
