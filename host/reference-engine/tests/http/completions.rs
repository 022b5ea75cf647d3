use serde_json::{Value, json};

use crate::engine::{Engine, Events, MODEL, expect_error};

#[tokio::test]
async fn completes_text_deterministically() {
    let engine = Engine::start().await;
    let body = json!({"model": MODEL, "prompt": "Once upon a time", "max_tokens": 5, "seed": 7});
    let first = engine.post_ok("/v1/completions", &body).await;
    assert!(first["id"].as_str().unwrap().starts_with("cmpl-"));
    assert_eq!(first["object"], "text_completion");
    assert_eq!(first["model"], MODEL);
    let choice = &first["choices"][0];
    assert_eq!(choice["index"], 0);
    assert_eq!(choice["finish_reason"], "length");
    assert_eq!(choice["logprobs"], Value::Null);
    let text = choice["text"].as_str().unwrap();
    assert_eq!(text.split_whitespace().count(), 5);
    assert_eq!(
        first["usage"],
        json!({"prompt_tokens": 4, "completion_tokens": 5, "total_tokens": 9})
    );

    let listed =
        json!({"model": MODEL, "prompt": ["Once upon a time"], "max_tokens": 5, "seed": 7});
    let second = engine.post_ok("/v1/completions", &listed).await;
    assert_eq!(second["choices"][0]["text"], text);
}

#[tokio::test]
async fn defaults_to_sixteen_tokens() {
    let engine = Engine::start().await;
    let answer = engine
        .post_ok("/v1/completions", &json!({"model": MODEL, "prompt": "x"}))
        .await;
    assert_eq!(answer["usage"]["completion_tokens"], 16);
}

#[tokio::test]
async fn streams_text_chunks() {
    let engine = Engine::start().await;
    let body = json!({"model": MODEL, "prompt": "Stream", "max_tokens": 3});
    let whole = engine.post_ok("/v1/completions", &body).await;
    let mut streaming = body.clone();
    streaming["stream"] = json!(true);
    streaming["stream_options"] = json!({"include_usage": true});
    let mut events = Events::new(engine.post("/v1/completions", &streaming).await);

    let mut text = String::new();
    for _ in 0..3 {
        let chunk = events.next_json().await;
        assert_eq!(chunk["object"], "text_completion");
        assert_eq!(chunk["choices"][0]["finish_reason"], Value::Null);
        text.push_str(chunk["choices"][0]["text"].as_str().unwrap());
    }
    assert_eq!(text, whole["choices"][0]["text"].as_str().unwrap());
    let finish = events.next_json().await;
    assert_eq!(finish["choices"][0]["text"], "");
    assert_eq!(finish["choices"][0]["finish_reason"], "length");
    let usage = events.next_json().await;
    assert_eq!(usage["usage"], whole["usage"]);
    events.expect_done().await;
}

#[tokio::test]
async fn refuses_several_prompts_and_token_arrays() {
    let engine = Engine::start().await;
    for prompt in [json!(["a", "b"]), json!([1, 2, 3]), json!(5)] {
        let body = json!({"model": MODEL, "prompt": prompt});
        let error = expect_error(
            engine.post("/v1/completions", &body).await,
            400,
            "invalid_request",
        )
        .await;
        assert_eq!(error["param"], "prompt");
    }
}
