use std::time::Duration;

use serde_json::json;
use switchyard_reference_engine::{EngineError, ReferenceConfig, serve};

use crate::engine::{Engine, Events, MODEL};

#[tokio::test]
async fn a_missing_model_file_is_a_startup_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absent.gguf");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let result = serve(
        listener,
        ReferenceConfig::new(&path),
        std::future::pending(),
    )
    .await;
    let error = result.unwrap_err();
    assert!(matches!(error, EngineError::OpenModel { .. }), "{error}");
    let message = error.to_string();
    assert!(message.contains("absent.gguf"), "{message}");
}

#[tokio::test]
async fn shutdown_lets_a_stream_in_flight_finish() {
    let mut engine = Engine::start_with(|c| c.token_delay = Duration::from_millis(20)).await;
    let body = json!({"model": MODEL, "prompt": "finish me", "max_tokens": 10, "stream": true});
    let mut events = Events::new(engine.post("/v1/completions", &body).await);
    events.next_json().await;
    engine.shut_down();

    for _ in 1..10 {
        events.next_json().await;
    }
    let finish = events.next_json().await;
    assert_eq!(finish["choices"][0]["finish_reason"], "length");
    events.expect_done().await;
    engine.stop().await.unwrap();
}
