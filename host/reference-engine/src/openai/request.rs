//! Request bodies as clients send them. Fields that accept several shapes
//! (`content`, `stop`, `prompt`, `input`) stay JSON values here and are
//! parsed in [`valid`](super::valid), with an error that names them; fields
//! this engine does not know are ignored, as OpenAI clients send many.

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::ApiError;

/// A `/v1/chat/completions` or `/v1/completions` body: the two share their
/// parameters and differ in `messages` versus `prompt`.
#[derive(Debug, Clone, Deserialize)]
pub struct GenerationRequest {
    /// The served model name.
    pub model: String,
    /// Chat: the conversation.
    pub messages: Option<Vec<RawMessage>>,
    /// Completions: a string or a list of one string.
    pub prompt: Option<Value>,
    /// The older name of the token limit.
    pub max_tokens: Option<u64>,
    /// The newer name of the token limit.
    pub max_completion_tokens: Option<u64>,
    /// Accepted and ignored: the generator is deterministic.
    pub temperature: Option<f64>,
    /// Changes the words generated for the same prompt.
    pub seed: Option<i64>,
    /// A string or a list of strings.
    pub stop: Option<Value>,
    /// Whether to answer with server-sent events.
    pub stream: Option<bool>,
    /// `include_usage` adds a usage chunk to a stream.
    pub stream_options: Option<StreamOptions>,
    /// Choices to generate; only 1 is supported.
    pub n: Option<u64>,
}

/// One message of a chat request.
#[derive(Debug, Clone, Deserialize)]
pub struct RawMessage {
    /// Any role.
    pub role: String,
    /// A string, a list of `{"type": "text", "text": ...}` parts, or null.
    #[serde(default)]
    pub content: Value,
}

/// `stream_options`.
#[derive(Debug, Clone, Deserialize)]
pub struct StreamOptions {
    /// Send a last chunk with `usage` before `[DONE]`.
    pub include_usage: Option<bool>,
}

/// A `/v1/embeddings` body.
#[derive(Debug, Clone, Deserialize)]
pub struct EmbeddingRequest {
    /// The served model name.
    pub model: String,
    /// A string or a list of strings.
    pub input: Value,
    /// `float` (the default) or `base64`.
    pub encoding_format: Option<String>,
    /// If given, must be the engine's dimension.
    pub dimensions: Option<u64>,
}

/// Parses a request body that is already known to be JSON into `T`, naming
/// the field at fault when there is one.
pub fn parse<T: DeserializeOwned>(body: &Value) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(body).map_err(|e| {
        let path = e.path().to_string();
        let (message, param) = if path == "." {
            (e.into_inner().to_string(), None)
        } else {
            (format!("{path}: {}", e.into_inner()), Some(path))
        };
        ApiError::InvalidRequest { message, param }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn message(error: ApiError) -> (String, Option<String>) {
        match error {
            ApiError::InvalidRequest { message, param } => (message, param),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn a_wrong_type_names_its_field() {
        let err = parse::<GenerationRequest>(&json!({"model": "m", "max_tokens": "ten"}));
        let (message, param) = message(err.unwrap_err());
        assert!(message.starts_with("max_tokens: invalid type"), "{message}");
        assert_eq!(param.as_deref(), Some("max_tokens"));
    }

    #[test]
    fn a_missing_field_is_named() {
        let (message, param) = message(parse::<GenerationRequest>(&json!({})).unwrap_err());
        assert_eq!(message, "missing field `model`");
        assert_eq!(param, None);
    }
}
