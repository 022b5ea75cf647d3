use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use crate::engine::{Engine, MODEL, expect_error};

fn vectors(answer: &Value) -> Vec<Vec<f32>> {
    answer["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| {
            item["embedding"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap() as f32)
                .collect()
        })
        .collect()
}

#[tokio::test]
async fn unit_vectors_of_dimension_64_per_input() {
    let engine = Engine::start().await;
    let body = json!({"model": MODEL, "input": ["the first text", "the second", "the first text"]});
    let answer = engine.post_ok("/v1/embeddings", &body).await;
    assert_eq!(answer["object"], "list");
    assert_eq!(answer["model"], MODEL);
    assert_eq!(
        answer["usage"],
        json!({"prompt_tokens": 8, "total_tokens": 8})
    );
    for (i, item) in answer["data"].as_array().unwrap().iter().enumerate() {
        assert_eq!(item["object"], "embedding");
        assert_eq!(item["index"], i);
    }
    let found = vectors(&answer);
    for vector in &found {
        assert_eq!(vector.len(), 64);
        let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "{norm}");
    }
    assert_eq!(found[0], found[2]);
    assert_ne!(found[0], found[1]);

    let single = engine
        .post_ok(
            "/v1/embeddings",
            &json!({"model": MODEL, "input": "the second"}),
        )
        .await;
    assert_eq!(vectors(&single)[0], found[1]);
}

#[tokio::test]
async fn base64_holds_the_same_floats() {
    let engine = Engine::start().await;
    let floats = engine
        .post_ok("/v1/embeddings", &json!({"model": MODEL, "input": "hello"}))
        .await;
    let encoded = engine
        .post_ok(
            "/v1/embeddings",
            &json!({"model": MODEL, "input": "hello", "encoding_format": "base64"}),
        )
        .await;
    let bytes = STANDARD
        .decode(encoded["data"][0]["embedding"].as_str().unwrap())
        .unwrap();
    let decoded: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(decoded, vectors(&floats)[0]);
}

#[tokio::test]
async fn token_arrays_are_refused() {
    let engine = Engine::start().await;
    let body = json!({"model": MODEL, "input": [[1, 2, 3]]});
    let error = expect_error(
        engine.post("/v1/embeddings", &body).await,
        400,
        "invalid_request",
    )
    .await;
    assert_eq!(error["param"], "input");
}
