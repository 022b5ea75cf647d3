//! A streamed answer that is silent for a while gets SSE keep-alive
//! comments from the frontend, only between events, and the events arrive
//! whole: the reference engine waits 700 ms a token, the frontend speaks up
//! after 200 ms of silence.

use serde_json::{Value, json};

use crate::placement::Cluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_streams_get_keep_alive_comments_between_events() {
    let cluster = Cluster::start_with(None, &["--sse-keepalive-ms", "200"]).await;
    let dir = tempfile::tempdir().unwrap();
    let _worker = cluster.worker("w", dir.path(), &["--gpu", "name=L4,memory=24GiB"]);
    cluster.deploy_ready(json!({"token_delay_ms": 700})).await;
    let key = cluster.inference_key().await;
    let text = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", cluster.serve.url))
        .bearer_auth(&key)
        .json(&json!({"model": "demo", "max_tokens": 3, "stream": true,
                      "messages": [{"role": "user", "content": "slowly"}]}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();

    let blocks: Vec<&str> = text
        .split("\n\n")
        .filter(|block| !block.is_empty())
        .collect();
    let comments = blocks.iter().filter(|b| **b == ": keep-alive").count();
    assert!(comments >= 2, "no keep-alives in {text:?}");
    let events: Vec<&str> = blocks
        .iter()
        .copied()
        .filter(|b| *b != ": keep-alive")
        .collect();
    for event in &events {
        let data = event
            .strip_prefix("data: ")
            .unwrap_or_else(|| panic!("a split or foreign block {event:?} in {text:?}"));
        if data != "[DONE]" {
            serde_json::from_str::<Value>(data).unwrap();
        }
    }
    assert_eq!(events.last(), Some(&"data: [DONE]"));
}
