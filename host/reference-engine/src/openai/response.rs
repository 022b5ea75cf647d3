//! Answer bodies, field for field as OpenAI writes them.

use serde::Serialize;

use crate::decode::FinishReason;

/// Token counts of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Usage {
    /// Words of the prompt.
    pub prompt_tokens: u32,
    /// Tokens generated.
    pub completion_tokens: u32,
    /// The sum.
    pub total_tokens: u32,
}

impl Usage {
    /// Usage of a prompt and its completion.
    pub fn new(prompt_tokens: u32, completion_tokens: u32) -> Self {
        Self {
            prompt_tokens,
            completion_tokens,
            total_tokens: prompt_tokens.saturating_add(completion_tokens),
        }
    }
}

/// A fresh response id such as `chatcmpl-3f9a...`: random, since ids
/// name exchanges, not contents.
pub fn response_id(prefix: &str) -> String {
    format!("{prefix}-{}", hex::encode(rand::random::<[u8; 12]>()))
}

/// `chat.completion`.
#[derive(Debug, Clone, Serialize)]
pub struct ChatCompletion {
    /// `chatcmpl-<hex>`.
    pub id: String,
    /// `chat.completion`.
    pub object: &'static str,
    /// Unix seconds.
    pub created: u64,
    /// The served model name.
    pub model: String,
    /// Exactly one.
    pub choices: Vec<ChatChoice>,
    /// Token counts.
    pub usage: Usage,
}

/// A choice of a [`ChatCompletion`].
#[derive(Debug, Clone, Serialize)]
pub struct ChatChoice {
    /// Always 0.
    pub index: u32,
    /// The generated message.
    pub message: AssistantMessage,
    /// Why generation ended.
    pub finish_reason: FinishReason,
}

/// The generated message.
#[derive(Debug, Clone, Serialize)]
pub struct AssistantMessage {
    /// `assistant`.
    pub role: &'static str,
    /// The generated text.
    pub content: String,
}

/// `chat.completion.chunk`, one server-sent event of a chat stream.
#[derive(Debug, Clone, Serialize)]
pub struct ChatChunk {
    /// The same id for every chunk of a stream.
    pub id: String,
    /// `chat.completion.chunk`.
    pub object: &'static str,
    /// Unix seconds, the same for every chunk of a stream.
    pub created: u64,
    /// The served model name.
    pub model: String,
    /// One choice, or none in the usage chunk.
    pub choices: Vec<ChunkChoice>,
    /// Only in the usage chunk.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// A choice of a [`ChatChunk`].
#[derive(Debug, Clone, Serialize)]
pub struct ChunkChoice {
    /// Always 0.
    pub index: u32,
    /// What the chunk adds to the message.
    pub delta: Delta,
    /// Set in the last chunk of the choice.
    pub finish_reason: Option<FinishReason>,
}

/// What a chunk adds to the message.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Delta {
    /// `assistant`, in the first chunk only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<&'static str>,
    /// Text to append.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
}

/// `text_completion`, both the whole answer and each chunk of a stream.
#[derive(Debug, Clone, Serialize)]
pub struct TextCompletion {
    /// `cmpl-<hex>`.
    pub id: String,
    /// `text_completion`.
    pub object: &'static str,
    /// Unix seconds.
    pub created: u64,
    /// The served model name.
    pub model: String,
    /// One choice, or none in a stream's usage chunk.
    pub choices: Vec<TextChoice>,
    /// Always in a whole answer; in a stream only in the usage chunk.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// A choice of a [`TextCompletion`].
#[derive(Debug, Clone, Serialize)]
pub struct TextChoice {
    /// Always 0.
    pub index: u32,
    /// The generated text, or the chunk's part of it.
    pub text: String,
    /// Always null: the engine has no log-probabilities.
    pub logprobs: Option<()>,
    /// Set in the whole answer and in a stream's last chunk.
    pub finish_reason: Option<FinishReason>,
}

/// The `/v1/embeddings` answer.
#[derive(Debug, Clone, Serialize)]
pub struct EmbeddingList {
    /// `list`.
    pub object: &'static str,
    /// One per input, in order.
    pub data: Vec<EmbeddingData>,
    /// The served model name.
    pub model: String,
    /// Token counts (no completion).
    pub usage: EmbeddingUsage,
}

/// One embedding.
#[derive(Debug, Clone, Serialize)]
pub struct EmbeddingData {
    /// `embedding`.
    pub object: &'static str,
    /// The input's position.
    pub index: u32,
    /// The vector.
    pub embedding: EmbeddingVector,
}

/// A vector as `encoding_format` asked.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum EmbeddingVector {
    /// A JSON array of numbers.
    Float(Vec<f32>),
    /// Base64 of the little-endian f32s.
    Base64(String),
}

/// Token counts of an embeddings request.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct EmbeddingUsage {
    /// Words of all inputs.
    pub prompt_tokens: u32,
    /// The same.
    pub total_tokens: u32,
}

/// The `/v1/models` answer.
#[derive(Debug, Clone, Serialize)]
pub struct ModelList {
    /// `list`.
    pub object: &'static str,
    /// The one model served.
    pub data: Vec<ModelCard>,
}

/// A model of [`ModelList`].
#[derive(Debug, Clone, Serialize)]
pub struct ModelCard {
    /// The served model name.
    pub id: String,
    /// `model`.
    pub object: &'static str,
    /// When the engine loaded it, in Unix seconds.
    pub created: u64,
    /// `switchyard`.
    pub owned_by: &'static str,
}
