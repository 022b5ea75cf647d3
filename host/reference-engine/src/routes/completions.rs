//! `POST /v1/completions`.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use tracing::field::Empty;

use super::{decoder, receive};
use crate::decode::FinishReason;
use crate::model::unix_now;
use crate::openai::ApiError;
use crate::openai::request::GenerationRequest;
use crate::openai::response::{TextChoice, TextCompletion, Usage, response_id};
use crate::openai::valid::Generation;
use crate::state::EngineState;
use crate::stream::{self, ChunkFormat};

/// A `text_completion`, or a stream of them.
#[tracing::instrument(skip_all, fields(model = Empty, stream = Empty))]
pub async fn create(State(state): State<EngineState>, body: Bytes) -> Result<Response, ApiError> {
    let raw: GenerationRequest = receive(&state, &body)?;
    tracing::Span::current().record("model", raw.model.as_str());
    let model = state.serving(&raw.model)?.clone();
    let request = Generation::completion(raw)?;
    tracing::Span::current().record("stream", request.stream);
    let in_flight = state.admit()?;
    let mut decoder = decoder(&state, &model, &request);
    let prompt_tokens = request.prompt.tokens();
    let chunks = TextChunks {
        id: response_id("cmpl"),
        created: unix_now(),
        model: model.name,
    };
    if request.stream {
        return Ok(stream::respond(
            decoder,
            chunks,
            prompt_tokens,
            request.include_usage,
            in_flight,
        ));
    }
    let text = decoder.collect().await;
    in_flight.complete();
    let reason = decoder.finish_reason().unwrap_or(FinishReason::Length);
    Ok(Json(TextCompletion {
        usage: Some(Usage::new(prompt_tokens, decoder.produced())),
        ..chunks.completion(text, Some(reason))
    })
    .into_response())
}

/// The `text_completion`s of one request.
struct TextChunks {
    id: String,
    created: u64,
    model: String,
}

impl TextChunks {
    fn completion(&self, text: String, finish_reason: Option<FinishReason>) -> TextCompletion {
        TextCompletion {
            id: self.id.clone(),
            object: "text_completion",
            created: self.created,
            model: self.model.clone(),
            choices: vec![TextChoice {
                index: 0,
                text,
                logprobs: None,
                finish_reason,
            }],
            usage: None,
        }
    }
}

impl ChunkFormat for TextChunks {
    type Chunk = TextCompletion;

    fn opening(&self) -> Option<TextCompletion> {
        None
    }

    fn token(&self, text: String) -> TextCompletion {
        self.completion(text, None)
    }

    fn finish(&self, reason: FinishReason) -> TextCompletion {
        self.completion(String::new(), Some(reason))
    }

    fn usage(&self, usage: Usage) -> TextCompletion {
        TextCompletion {
            choices: Vec::new(),
            usage: Some(usage),
            ..self.completion(String::new(), None)
        }
    }
}
