use serde_json::json;

use crate::engine::{Engine, MODEL, expect_error};

#[tokio::test]
async fn lists_the_one_model_served() {
    let engine = Engine::start().await;
    let response = engine
        .client
        .get(engine.url("/v1/models"))
        .send()
        .await
        .unwrap();
    let list: serde_json::Value = response.json().await.unwrap();
    assert_eq!(list["object"], "list");
    let data = list["data"].as_array().unwrap();
    assert_eq!(data.len(), 1);
    assert_eq!(data[0]["id"], MODEL);
    assert_eq!(data[0]["object"], "model");
    assert_eq!(data[0]["owned_by"], "switchyard");
    assert!(data[0]["created"].as_u64().unwrap() > 1_600_000_000);
}

#[tokio::test]
async fn a_configured_name_replaces_the_stem() {
    let engine = Engine::start_with(|c| c.served_model_name = Some("acme/chat-7b".into())).await;
    let list: serde_json::Value = engine
        .client
        .get(engine.url("/v1/models"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list["data"][0]["id"], "acme/chat-7b");
    let body = json!({"model": "acme/chat-7b", "messages": [{"role": "user", "content": "hi"}]});
    engine.post_ok("/v1/chat/completions", &body).await;
}

#[tokio::test]
async fn another_model_is_a_404_on_every_endpoint() {
    let engine = Engine::start().await;
    for (path, body) in [
        (
            "/v1/chat/completions",
            json!({"model": "other", "messages": [{"role": "user", "content": "hi"}]}),
        ),
        ("/v1/completions", json!({"model": "other", "prompt": "hi"})),
        ("/v1/embeddings", json!({"model": "other", "input": "hi"})),
    ] {
        let error = expect_error(engine.post(path, &body).await, 404, "model_not_found").await;
        assert_eq!(error["type"], "invalid_request_error");
        assert_eq!(error["param"], "model");
        let message = error["message"].as_str().unwrap();
        assert!(
            message.contains("other") && message.contains(MODEL),
            "{message}"
        );
    }
}

#[tokio::test]
async fn malformed_requests_are_400s_in_openai_shape() {
    let engine = Engine::start().await;
    let not_json = engine
        .client
        .post(engine.url("/v1/chat/completions"))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    expect_error(not_json, 400, "invalid_request").await;

    let wrong_type = json!({"model": MODEL, "messages": "hi"});
    let error = expect_error(
        engine.post("/v1/chat/completions", &wrong_type).await,
        400,
        "invalid_request",
    )
    .await;
    assert_eq!(error["param"], "messages");

    let unknown = engine
        .client
        .get(engine.url("/v2/nothing"))
        .send()
        .await
        .unwrap();
    expect_error(unknown, 404, "not_found").await;
}
