use std::time::Duration;

use serde_json::json;

use crate::engine::{Engine, Events, MODEL, expect_error};

#[tokio::test]
async fn beyond_max_concurrency_is_a_429_with_retry_after() {
    let engine = Engine::start_with(|c| {
        c.max_concurrency = Some(1);
        c.token_delay = Duration::from_millis(20);
    })
    .await;
    let long = json!({"model": MODEL, "prompt": "hold on", "max_tokens": 5_000, "stream": true});
    let mut holding = Events::new(engine.post("/v1/completions", &long).await);
    holding.next_json().await;

    let short = json!({"model": MODEL, "prompt": "me too", "max_tokens": 1});
    let refused = engine.post("/v1/completions", &short).await;
    assert_eq!(refused.headers()["retry-after"], "1");
    let error = expect_error(refused, 429, "engine_at_capacity").await;
    assert_eq!(error["type"], "rate_limit_error");
    let embeddings = json!({"model": MODEL, "input": "me too"});
    expect_error(
        engine.post("/v1/embeddings", &embeddings).await,
        429,
        "engine_at_capacity",
    )
    .await;
    assert_eq!(engine.stats().await.rejected, 2);

    drop(holding);
    engine.wait_stats(|s| s.in_flight == 0).await;
    engine.post_ok("/v1/completions", &short).await;
}
