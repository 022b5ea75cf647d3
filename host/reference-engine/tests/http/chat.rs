use std::time::Duration;

use serde_json::{Value, json};

use crate::engine::{Engine, Events, MODEL, expect_error};

fn request(content: &str, max_tokens: u64) -> Value {
    json!({
        "model": MODEL,
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": content},
        ],
        "max_tokens": max_tokens,
        "temperature": 0.7,
    })
}

fn content(completion: &Value) -> &str {
    completion["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
}

#[tokio::test]
async fn answers_deterministically_with_usage() {
    let engine = Engine::start().await;
    let body = request("Say hello to the world", 6);
    let first = engine.post_ok("/v1/chat/completions", &body).await;
    let second = engine.post_ok("/v1/chat/completions", &body).await;

    assert!(first["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_ne!(first["id"], second["id"]);
    assert_eq!(first["object"], "chat.completion");
    assert_eq!(first["model"], MODEL);
    assert!(first["created"].as_u64().unwrap() > 1_600_000_000);
    let choice = &first["choices"][0];
    assert_eq!(first["choices"].as_array().unwrap().len(), 1);
    assert_eq!(choice["index"], 0);
    assert_eq!(choice["message"]["role"], "assistant");
    assert_eq!(choice["finish_reason"], "length");
    assert_eq!(content(&first).split_whitespace().count(), 6);
    // "You are terse." + "Say hello to the world": 3 + 5 words.
    assert_eq!(
        first["usage"],
        json!({"prompt_tokens": 8, "completion_tokens": 6, "total_tokens": 14})
    );

    assert_eq!(content(&first), content(&second));
    let other = engine
        .post_ok("/v1/chat/completions", &request("Say goodbye", 6))
        .await;
    assert_ne!(content(&first), content(&other));
}

#[tokio::test]
async fn the_seed_and_the_model_file_change_the_answer() {
    let engine = Engine::start().await;
    let twin = Engine::start_on(b"reference weights", |_| {}).await;
    let other = Engine::start_on(b"other weights", |_| {}).await;
    let body = request("Tell me a story", 8);
    let answer = engine.post_ok("/v1/chat/completions", &body).await;
    assert_eq!(
        content(&twin.post_ok("/v1/chat/completions", &body).await),
        content(&answer)
    );
    assert_ne!(
        content(&other.post_ok("/v1/chat/completions", &body).await),
        content(&answer)
    );

    let mut seeded = body.clone();
    seeded["seed"] = json!(42);
    let with_seed = engine.post_ok("/v1/chat/completions", &seeded).await;
    assert_ne!(content(&with_seed), content(&answer));
    assert_eq!(
        content(&engine.post_ok("/v1/chat/completions", &seeded).await),
        content(&with_seed)
    );
}

#[tokio::test]
async fn text_parts_read_as_the_same_text() {
    let engine = Engine::start().await;
    let parts = json!({
        "model": MODEL,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Say hello"}]}],
        "max_completion_tokens": 4,
    });
    let plain = json!({
        "model": MODEL,
        "messages": [{"role": "user", "content": "Say hello"}],
        "max_tokens": 4,
    });
    assert_eq!(
        content(&engine.post_ok("/v1/chat/completions", &parts).await),
        content(&engine.post_ok("/v1/chat/completions", &plain).await),
    );
}

#[tokio::test]
async fn a_stop_word_ends_the_answer_before_it() {
    let engine = Engine::start().await;
    let body = request("Count the sheep", 12);
    let full = engine.post_ok("/v1/chat/completions", &body).await;
    let words: Vec<&str> = content(&full).split_whitespace().collect();
    let stop = words[4];
    let before = words.iter().position(|w| *w == stop).unwrap();

    let mut stopped = body.clone();
    stopped["stop"] = json!(["\n\n", stop]);
    let answer = engine.post_ok("/v1/chat/completions", &stopped).await;
    assert_eq!(answer["choices"][0]["finish_reason"], "stop");
    let kept: Vec<&str> = content(&answer).split_whitespace().collect();
    assert_eq!(kept, words[..before]);
    assert_eq!(answer["usage"]["completion_tokens"], before);
}

#[tokio::test]
async fn only_one_choice_is_generated() {
    let engine = Engine::start().await;
    let mut body = request("hi", 2);
    body["n"] = json!(2);
    let error = expect_error(
        engine.post("/v1/chat/completions", &body).await,
        400,
        "invalid_request",
    )
    .await;
    assert_eq!(error["param"], "n");
    body["n"] = json!(1);
    engine.post_ok("/v1/chat/completions", &body).await;
}

#[tokio::test]
async fn the_last_request_is_kept_as_received() {
    let engine = Engine::start().await;
    let body = request("What reached you?", 3);
    engine.post_ok("/v1/chat/completions", &body).await;
    let stats = engine.stats().await;
    assert_eq!(stats.last_request, Some(body));
    assert_eq!(
        (stats.requests, stats.completed, stats.in_flight),
        (1, 1, 0)
    );
}

#[tokio::test]
async fn streams_one_chunk_per_token_then_done() {
    let engine = Engine::start_with(|c| {
        c.token_delay = Duration::from_millis(20);
        c.first_token_delay = Duration::from_millis(20);
    })
    .await;
    let mut body = request("Stream to me", 4);
    let whole = engine.post_ok("/v1/chat/completions", &body).await;
    body["stream"] = json!(true);
    body["stream_options"] = json!({"include_usage": true});
    let mut events = Events::new(engine.post("/v1/chat/completions", &body).await);

    let opening = events.next_json().await;
    assert_eq!(opening["object"], "chat.completion.chunk");
    assert!(opening["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(opening["model"], MODEL);
    assert_eq!(opening["choices"][0]["delta"]["role"], "assistant");
    assert_eq!(opening["choices"][0]["finish_reason"], Value::Null);

    let mut streamed = String::new();
    for _ in 0..4 {
        let chunk = events.next_json().await;
        assert_eq!(chunk["id"], opening["id"]);
        let choice = &chunk["choices"][0];
        assert_eq!(choice["delta"].get("role"), None);
        assert_eq!(choice["finish_reason"], Value::Null);
        let token = choice["delta"]["content"].as_str().unwrap();
        assert_eq!(token.split_whitespace().count(), 1, "{token:?}");
        streamed.push_str(token);
    }
    assert_eq!(streamed, content(&whole));

    let finish = events.next_json().await;
    assert_eq!(finish["choices"][0]["finish_reason"], "length");
    assert_eq!(finish["choices"][0]["delta"], json!({}));
    let usage = events.next_json().await;
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"], whole["usage"]);
    events.expect_done().await;

    let stats = engine.wait_stats(|s| s.completed == 2).await;
    assert_eq!((stats.in_flight, stats.cancelled), (0, 0));
}

#[tokio::test]
async fn a_stream_without_usage_ends_at_the_finish_chunk() {
    let engine = Engine::start().await;
    let mut body = request("short", 2);
    body["stream"] = json!(true);
    let mut events = Events::new(engine.post("/v1/chat/completions", &body).await);
    events.next_json().await; // role
    events.next_json().await;
    events.next_json().await;
    let finish = events.next_json().await;
    assert_eq!(finish["choices"][0]["finish_reason"], "length");
    assert_eq!(finish.get("usage"), None);
    events.expect_done().await;
}

#[tokio::test]
async fn a_client_that_goes_away_stops_the_generation() {
    let engine = Engine::start_with(|c| c.token_delay = Duration::from_millis(20)).await;
    let mut body = request("Go on forever", 5_000);
    body["stream"] = json!(true);
    let mut events = Events::new(engine.post("/v1/chat/completions", &body).await);
    events.next_json().await;
    events.next_json().await;
    assert_eq!(engine.stats().await.in_flight, 1);
    drop(events);

    let stats = engine.wait_stats(|s| s.cancelled == 1).await;
    assert_eq!((stats.in_flight, stats.completed), (0, 0));
}
