//! Raw requests parsed into what the engine acts on; every check of a
//! request's fields lives here.

use serde_json::Value;

use super::ApiError;
use super::request::{EmbeddingRequest, GenerationRequest, RawMessage};
use crate::generator::EMBEDDING_DIMENSION;
use crate::prompt::{Message, Prompt};

/// `max_tokens` when a request gives none (OpenAI's completions default).
pub const DEFAULT_MAX_TOKENS: u32 = 16;

/// The largest `max_tokens`: a typo must not keep a paced engine streaming
/// for hours.
pub const MAX_TOKENS_LIMIT: u32 = 65_536;

/// Stop strings per request (OpenAI's limit).
pub const MAX_STOP_STRINGS: usize = 4;

/// Inputs per embeddings request (OpenAI's limit).
pub const MAX_EMBEDDING_INPUTS: usize = 2048;

/// A chat or completions request the engine can generate for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generation {
    /// What to continue.
    pub prompt: Prompt,
    /// Tokens to generate at most.
    pub max_tokens: u32,
    /// Words that end the completion.
    pub stop: Vec<String>,
    /// Varies the words for the same prompt.
    pub seed: Option<i64>,
    /// Answer with server-sent events.
    pub stream: bool,
    /// Send a usage chunk before `[DONE]` when streaming.
    pub include_usage: bool,
}

impl Generation {
    /// A `/v1/chat/completions` request.
    pub fn chat(raw: GenerationRequest) -> Result<Self, ApiError> {
        let messages = raw
            .messages
            .as_deref()
            .ok_or_else(|| ApiError::invalid("messages", "messages is required"))?;
        if messages.is_empty() {
            return Err(ApiError::invalid("messages", "messages must not be empty"));
        }
        let messages = messages
            .iter()
            .enumerate()
            .map(|(i, message)| parse_message(i, message))
            .collect::<Result<_, _>>()?;
        Self::with_prompt(&raw, Prompt::Chat(messages))
    }

    /// A `/v1/completions` request.
    pub fn completion(raw: GenerationRequest) -> Result<Self, ApiError> {
        let prompt = match &raw.prompt {
            None | Some(Value::Null) => {
                return Err(ApiError::invalid("prompt", "prompt is required"));
            }
            Some(Value::String(text)) => text.clone(),
            Some(Value::Array(items)) => match items.as_slice() {
                [Value::String(text)] => text.clone(),
                [] => return Err(ApiError::invalid("prompt", "prompt must not be empty")),
                [Value::String(_), ..] => {
                    return Err(ApiError::invalid(
                        "prompt",
                        format!(
                            "prompt may hold one string, got {}: the reference engine generates one choice",
                            items.len()
                        ),
                    ));
                }
                _ => return Err(token_arrays("prompt")),
            },
            Some(_) => {
                return Err(ApiError::invalid(
                    "prompt",
                    "prompt must be a string or a list of one string",
                ));
            }
        };
        Self::with_prompt(&raw, Prompt::Text(prompt))
    }

    fn with_prompt(raw: &GenerationRequest, prompt: Prompt) -> Result<Self, ApiError> {
        if let Some(n) = raw.n.filter(|&n| n != 1) {
            return Err(ApiError::invalid(
                "n",
                format!("n must be 1: the reference engine generates one choice, got {n}"),
            ));
        }
        Ok(Self {
            prompt,
            max_tokens: max_tokens(raw)?,
            stop: stop(raw.stop.as_ref())?,
            seed: raw.seed,
            stream: raw.stream.unwrap_or(false),
            include_usage: raw
                .stream_options
                .as_ref()
                .and_then(|options| options.include_usage)
                .unwrap_or(false),
        })
    }
}

/// The token limit: `max_completion_tokens` or `max_tokens`, the smaller of
/// the two when a client (or an admission patch) set both.
fn max_tokens(raw: &GenerationRequest) -> Result<u32, ApiError> {
    let (param, value) = match (raw.max_tokens, raw.max_completion_tokens) {
        (None, None) => return Ok(DEFAULT_MAX_TOKENS),
        (Some(old), Some(new)) if old < new => ("max_tokens", old),
        (_, Some(new)) => ("max_completion_tokens", new),
        (Some(old), None) => ("max_tokens", old),
    };
    if value == 0 {
        return Err(ApiError::invalid(
            param,
            format!("{param} must be at least 1, got 0"),
        ));
    }
    u32::try_from(value)
        .ok()
        .filter(|&value| value <= MAX_TOKENS_LIMIT)
        .ok_or_else(|| {
            ApiError::invalid(
                param,
                format!("{param} must be at most {MAX_TOKENS_LIMIT}, got {value}"),
            )
        })
}

fn stop(value: Option<&Value>) -> Result<Vec<String>, ApiError> {
    let stops = match value {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(stop)) => vec![stop.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| item.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                ApiError::invalid("stop", "stop must be a string or a list of strings")
            })?,
        Some(_) => {
            return Err(ApiError::invalid(
                "stop",
                "stop must be a string or a list of strings",
            ));
        }
    };
    if stops.len() > MAX_STOP_STRINGS {
        return Err(ApiError::invalid(
            "stop",
            format!(
                "stop may hold at most {MAX_STOP_STRINGS} strings, got {}",
                stops.len()
            ),
        ));
    }
    Ok(stops)
}

fn parse_message(index: usize, raw: &RawMessage) -> Result<Message, ApiError> {
    let param = || format!("messages[{index}].content");
    let content = match &raw.content {
        Value::Null => String::new(),
        Value::String(text) => text.clone(),
        Value::Array(parts) => {
            let mut texts = Vec::with_capacity(parts.len());
            for (j, part) in parts.iter().enumerate() {
                let kind = part.get("type").and_then(Value::as_str);
                let text = part.get("text").and_then(Value::as_str);
                match (kind, text) {
                    (Some("text"), Some(text)) => texts.push(text),
                    (Some("text"), None) => {
                        return Err(ApiError::invalid(
                            &param(),
                            format!("{}[{j}] is a text part without a `text` string", param()),
                        ));
                    }
                    (kind, _) => {
                        return Err(ApiError::invalid(
                            &param(),
                            format!(
                                "{}[{j}] has type {}: the reference engine reads text parts only",
                                param(),
                                kind.map_or("(none)".to_owned(), |kind| format!("`{kind}`")),
                            ),
                        ));
                    }
                }
            }
            texts.join("\n")
        }
        _ => {
            return Err(ApiError::invalid(
                &param(),
                format!("{} must be a string or a list of text parts", param()),
            ));
        }
    };
    Ok(Message {
        role: raw.role.clone(),
        content,
    })
}

/// How embeddings are written in the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmbeddingEncoding {
    /// A JSON array of numbers.
    Float,
    /// Base64 of the little-endian f32s.
    Base64,
}

/// A `/v1/embeddings` request the engine can answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Embeddings {
    /// One or more texts.
    pub inputs: Vec<String>,
    /// How to write the vectors.
    pub encoding: EmbeddingEncoding,
}

impl Embeddings {
    /// Parses a raw embeddings request.
    pub fn parse(raw: EmbeddingRequest) -> Result<Self, ApiError> {
        let inputs = match raw.input {
            Value::String(text) => vec![text],
            Value::Array(items) if items.is_empty() => {
                return Err(ApiError::invalid("input", "input must not be empty"));
            }
            Value::Array(items) => items
                .into_iter()
                .map(|item| match item {
                    Value::String(text) => Ok(text),
                    _ => Err(token_arrays("input")),
                })
                .collect::<Result<Vec<_>, _>>()?,
            _ => {
                return Err(ApiError::invalid(
                    "input",
                    "input must be a string or a list of strings",
                ));
            }
        };
        if inputs.len() > MAX_EMBEDDING_INPUTS {
            return Err(ApiError::invalid(
                "input",
                format!(
                    "input may hold at most {MAX_EMBEDDING_INPUTS} strings, got {}",
                    inputs.len()
                ),
            ));
        }
        if let Some(dimensions) = raw.dimensions.filter(|&d| d != EMBEDDING_DIMENSION as u64) {
            return Err(ApiError::invalid(
                "dimensions",
                format!("dimensions must be {EMBEDDING_DIMENSION}, the engine's, got {dimensions}"),
            ));
        }
        let encoding = match raw.encoding_format.as_deref() {
            None | Some("float") => EmbeddingEncoding::Float,
            Some("base64") => EmbeddingEncoding::Base64,
            Some(other) => {
                return Err(ApiError::invalid(
                    "encoding_format",
                    format!("encoding_format must be `float` or `base64`, got `{other}`"),
                ));
            }
        };
        Ok(Self { inputs, encoding })
    }
}

fn token_arrays(param: &str) -> ApiError {
    ApiError::invalid(
        param,
        format!("{param} must be text: the reference engine has no tokenizer for token arrays"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openai::request::parse;
    use serde_json::json;

    fn chat(body: Value) -> Result<Generation, ApiError> {
        Generation::chat(parse(&body).unwrap())
    }

    fn param(error: ApiError) -> Option<String> {
        match error {
            ApiError::InvalidRequest { param, .. } => param,
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn defaults() {
        let valid = chat(json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}));
        assert_eq!(
            valid.unwrap(),
            Generation {
                prompt: Prompt::Chat(vec![Message {
                    role: "user".into(),
                    content: "hi".into()
                }]),
                max_tokens: DEFAULT_MAX_TOKENS,
                stop: Vec::new(),
                seed: None,
                stream: false,
                include_usage: false,
            }
        );
    }

    #[test]
    fn text_parts_are_joined_and_other_parts_refused() {
        let valid = chat(
            json!({"model": "m", "messages": [{"role": "user", "content": [
                {"type": "text", "text": "a b"}, {"type": "text", "text": "c"}
            ]}]}),
        )
        .unwrap();
        assert_eq!(valid.prompt.tokens(), 3);
        let image = chat(
            json!({"model": "m", "messages": [{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "x"}}
            ]}]}),
        );
        assert_eq!(
            param(image.unwrap_err()).as_deref(),
            Some("messages[0].content")
        );
    }

    #[test]
    fn the_smaller_token_limit_wins_and_limits_are_checked() {
        let messages = json!([{"role": "user", "content": "hi"}]);
        let both = chat(
            json!({"model": "m", "messages": messages, "max_tokens": 5, "max_completion_tokens": 9}),
        );
        assert_eq!(both.unwrap().max_tokens, 5);
        let zero = chat(json!({"model": "m", "messages": messages, "max_completion_tokens": 0}));
        assert_eq!(
            param(zero.unwrap_err()).as_deref(),
            Some("max_completion_tokens")
        );
        let huge = chat(json!({"model": "m", "messages": messages, "max_tokens": 1u64 << 40}));
        assert_eq!(param(huge.unwrap_err()).as_deref(), Some("max_tokens"));
    }

    #[test]
    fn stop_is_a_string_or_a_short_list() {
        let messages = json!([{"role": "user", "content": "hi"}]);
        let one = chat(json!({"model": "m", "messages": messages, "stop": "x"}));
        assert_eq!(one.unwrap().stop, vec!["x"]);
        let five =
            chat(json!({"model": "m", "messages": messages, "stop": ["a", "b", "c", "d", "e"]}));
        assert_eq!(param(five.unwrap_err()).as_deref(), Some("stop"));
        let number = chat(json!({"model": "m", "messages": messages, "stop": 3}));
        assert_eq!(param(number.unwrap_err()).as_deref(), Some("stop"));
    }

    #[test]
    fn completion_prompts_are_one_string() {
        let completion = |prompt: Value| {
            Generation::completion(parse(&json!({"model": "m", "prompt": prompt})).unwrap())
        };
        assert_eq!(
            completion(json!(["a b"])).unwrap().prompt,
            Prompt::Text("a b".into())
        );
        assert!(completion(json!(["a", "b"])).is_err());
        assert!(completion(json!([1, 2])).is_err());
        assert!(completion(json!(null)).is_err());
    }

    #[test]
    fn embedding_inputs_are_text() {
        let embeddings = |body: Value| Embeddings::parse(parse(&body).unwrap());
        let valid =
            embeddings(json!({"model": "m", "input": ["a", "b"], "encoding_format": "base64"}));
        assert_eq!(
            valid.unwrap(),
            Embeddings {
                inputs: vec!["a".into(), "b".into()],
                encoding: EmbeddingEncoding::Base64
            }
        );
        assert!(embeddings(json!({"model": "m", "input": [[1, 2]]})).is_err());
        assert!(embeddings(json!({"model": "m", "input": []})).is_err());
        assert!(embeddings(json!({"model": "m", "input": "a", "dimensions": 32})).is_err());
    }
}
