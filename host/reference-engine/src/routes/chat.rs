//! `POST /v1/chat/completions`.

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
use crate::openai::response::{
    AssistantMessage, ChatChoice, ChatChunk, ChatCompletion, ChunkChoice, Delta, Usage, response_id,
};
use crate::openai::valid::Generation;
use crate::state::EngineState;
use crate::stream::{self, ChunkFormat};

/// A `chat.completion`, or a stream of `chat.completion.chunk`s.
#[tracing::instrument(skip_all, fields(model = Empty, stream = Empty))]
pub async fn create(State(state): State<EngineState>, body: Bytes) -> Result<Response, ApiError> {
    let raw: GenerationRequest = receive(&state, &body)?;
    tracing::Span::current().record("model", raw.model.as_str());
    let model = state.serving(&raw.model)?.clone();
    let request = Generation::chat(raw)?;
    tracing::Span::current().record("stream", request.stream);
    let in_flight = state.admit()?;
    let mut decoder = decoder(&state, &model, &request);
    let prompt_tokens = request.prompt.tokens();
    let id = response_id("chatcmpl");
    let created = unix_now();
    if request.stream {
        let format = ChatChunks {
            id,
            created,
            model: model.name,
        };
        return Ok(stream::respond(
            decoder,
            format,
            prompt_tokens,
            request.include_usage,
            in_flight,
        ));
    }
    let content = decoder.collect().await;
    in_flight.complete();
    Ok(Json(ChatCompletion {
        id,
        object: "chat.completion",
        created,
        model: model.name,
        choices: vec![ChatChoice {
            index: 0,
            message: AssistantMessage {
                role: "assistant",
                content,
            },
            finish_reason: decoder.finish_reason().unwrap_or(FinishReason::Length),
        }],
        usage: Usage::new(prompt_tokens, decoder.produced()),
    })
    .into_response())
}

/// Chunks of one chat stream.
struct ChatChunks {
    id: String,
    created: u64,
    model: String,
}

impl ChatChunks {
    fn chunk(&self, delta: Delta, finish_reason: Option<FinishReason>) -> ChatChunk {
        ChatChunk {
            id: self.id.clone(),
            object: "chat.completion.chunk",
            created: self.created,
            model: self.model.clone(),
            choices: vec![ChunkChoice {
                index: 0,
                delta,
                finish_reason,
            }],
            usage: None,
        }
    }
}

impl ChunkFormat for ChatChunks {
    type Chunk = ChatChunk;

    fn opening(&self) -> Option<ChatChunk> {
        let delta = Delta {
            role: Some("assistant"),
            content: Some(String::new()),
        };
        Some(self.chunk(delta, None))
    }

    fn token(&self, text: String) -> ChatChunk {
        let delta = Delta {
            role: None,
            content: Some(text),
        };
        self.chunk(delta, None)
    }

    fn finish(&self, reason: FinishReason) -> ChatChunk {
        self.chunk(Delta::default(), Some(reason))
    }

    fn usage(&self, usage: Usage) -> ChatChunk {
        ChatChunk {
            choices: Vec::new(),
            usage: Some(usage),
            ..self.chunk(Delta::default(), None)
        }
    }
}
