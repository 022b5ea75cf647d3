//! A client that goes away cancels the engine's work, on each carrier set:
//! a streamed completion is dropped after its first event, and the
//! reference engine (slow on purpose: 100 ms a token) counts the request
//! as cancelled instead of generating the rest.

use std::time::{Duration, Instant};

use futures::StreamExt;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use switchyard_tests::nats::{NatsServer, worker_flags};

use crate::placement::Cluster;

const PATIENCE: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_goes_away_cancels_the_engine_on_the_tunnel_set() {
    client_goes_away(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_goes_away_cancels_the_engine_on_the_nats_set() {
    let nats = NatsServer::start(&[]);
    client_goes_away(Some(&nats)).await;
}

async fn client_goes_away(nats: Option<&NatsServer>) {
    let nats_url = nats.map(NatsServer::address);
    let cluster = Cluster::start_on(nats_url.as_deref()).await;
    let dir = tempfile::tempdir().unwrap();
    let mut extra = vec!["--gpu".to_string(), "name=L4,memory=24GiB".to_string()];
    extra.extend(worker_flags(nats));
    let _worker = cluster.worker("w", dir.path(), &extra);
    let node = cluster.node_id("w").await;
    cluster.deploy_ready(json!({"token_delay_ms": 100})).await;
    let key = cluster.inference_key().await;

    // The engine's own counters, at the address the worker reports.
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
        .unwrap_or_else(|| panic!("an engine url in {engines}"))
        .to_string();
    let http = reqwest::Client::new();
    let stats = || async {
        http.get(format!("{url}/stats"))
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()
    };

    // 200 tokens would take 20 s; the client leaves after the first event.
    let response = http
        .post(format!("{}/v1/chat/completions", cluster.serve.url))
        .bearer_auth(&key)
        .json(&json!({"model": "demo", "max_tokens": 200, "stream": true,
                      "messages": [{"role": "user", "content": "go on"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.bytes_stream();
    let first = body.next().await.unwrap().unwrap();
    assert!(first.starts_with(b"data: "), "{first:?}");
    assert_eq!(stats().await["in_flight"], 1);
    drop(body);

    let started = Instant::now();
    loop {
        let now = stats().await;
        assert_eq!(now["completed"], 0, "generated to the end: {now}");
        if now["cancelled"] == 1 {
            assert_eq!(now["in_flight"], 0, "{now}");
            assert_eq!(now["completed"], 0, "{now}");
            break;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "the engine never heard the client leave: {now}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
