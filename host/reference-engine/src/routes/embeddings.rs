//! `POST /v1/embeddings`.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use tracing::field::Empty;

use super::receive;
use crate::generator::embedding;
use crate::openai::ApiError;
use crate::openai::request::EmbeddingRequest;
use crate::openai::response::{EmbeddingData, EmbeddingList, EmbeddingUsage, EmbeddingVector};
use crate::openai::valid::{EmbeddingEncoding, Embeddings};
use crate::prompt::words;
use crate::state::EngineState;

/// One deterministic unit vector per input.
#[tracing::instrument(skip_all, fields(model = Empty, inputs = Empty))]
pub async fn create(
    State(state): State<EngineState>,
    body: Bytes,
) -> Result<Json<EmbeddingList>, ApiError> {
    let raw: EmbeddingRequest = receive(&state, &body)?;
    tracing::Span::current().record("model", raw.model.as_str());
    let model = state.serving(&raw.model)?.clone();
    let request = Embeddings::parse(raw)?;
    tracing::Span::current().record("inputs", request.inputs.len());
    let in_flight = state.admit()?;
    let data = request
        .inputs
        .iter()
        .zip(0..)
        .map(|(input, index)| {
            let vector = embedding(&model.digest, input);
            let embedding = match request.encoding {
                EmbeddingEncoding::Float => EmbeddingVector::Float(vector),
                EmbeddingEncoding::Base64 => {
                    let bytes: Vec<u8> = vector.iter().flat_map(|x| x.to_le_bytes()).collect();
                    EmbeddingVector::Base64(STANDARD.encode(bytes))
                }
            };
            EmbeddingData {
                object: "embedding",
                index,
                embedding,
            }
        })
        .collect();
    let prompt_tokens = request
        .inputs
        .iter()
        .map(|input| words(input))
        .fold(0u32, u32::saturating_add);
    in_flight.complete();
    Ok(Json(EmbeddingList {
        object: "list",
        data,
        model: model.name,
        usage: EmbeddingUsage {
            prompt_tokens,
            total_tokens: prompt_tokens,
        },
    }))
}
