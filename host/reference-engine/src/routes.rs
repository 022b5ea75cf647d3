//! The HTTP API, one file per endpoint; [`router`] builds it.

mod chat;
mod completions;
mod embeddings;
mod health;
mod models;
mod stats;

use axum::Router;
use axum::http::{Method, Uri};
use axum::routing::{get, post};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::decode::Decoder;
use crate::generator::Generator;
use crate::model::Model;
use crate::openai::ApiError;
use crate::openai::request::parse;
use crate::openai::valid::Generation;
use crate::state::EngineState;

/// The engine's routes:
/// - `GET /health`: 200 once the model is loaded, 503 before.
/// - `GET /stats`: the [`StatsSnapshot`](crate::StatsSnapshot).
/// - `GET /v1/models`, `POST /v1/chat/completions`, `POST /v1/completions`,
///   `POST /v1/embeddings`: OpenAI-compatible.
pub fn router(state: EngineState) -> Router {
    Router::new()
        .route("/health", get(health::health))
        .route("/stats", get(stats::stats))
        .route("/v1/models", get(models::list))
        .route("/v1/chat/completions", post(chat::create))
        .route("/v1/completions", post(completions::create))
        .route("/v1/embeddings", post(embeddings::create))
        .fallback(no_route)
        .with_state(state)
}

/// Counts a `/v1/*` request, keeps its body for `/stats` and parses it. The
/// body is read as bytes rather than with axum's `Json`, whose rejections are
/// plain text: every error here has OpenAI's shape.
fn receive<T: DeserializeOwned>(state: &EngineState, body: &[u8]) -> Result<T, ApiError> {
    let json = serde_json::from_slice::<Value>(body);
    state.stats().received(json.as_ref().ok().cloned());
    let json = json.map_err(|e| ApiError::InvalidRequest {
        message: format!("the request body is not valid JSON: {e}"),
        param: None,
    })?;
    parse(&json)
}

async fn no_route(method: Method, uri: Uri) -> ApiError {
    ApiError::NoRoute(format!("{method} {}", uri.path()))
}

/// The decoder of a chat or completions request.
fn decoder(state: &EngineState, model: &Model, request: &Generation) -> Decoder {
    Decoder::new(
        Generator::new(&model.digest, &request.prompt, request.seed),
        request.max_tokens,
        request.stop.clone(),
        state.pace(),
    )
}
