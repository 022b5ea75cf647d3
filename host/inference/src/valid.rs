//! A `/v1` body parsed once into a [`ValidRequest`]: what admission and
//! routing need (the model, the token limit, `stream`, a prompt estimate),
//! read in one pass over the bytes without building a JSON tree.
//!
//! The frontend does not judge the OpenAI fields themselves: the engine
//! does, with its own errors (the reference engine's `openai/valid.rs`),
//! and engines differ in what they accept. So this type is the frontend's,
//! not shared with an engine: it rejects only what cannot be routed (not
//! JSON, no `model`, a limit the admission record cannot hold) and passes
//! every other shape through unread, as the client sent it.
//!
//! The pass ([`fields`](super::fields)) checks the whole body as strictly
//! as a `serde_json::Value` would, so a body the frontend used to refuse is
//! still refused, without allocating for the fields it skips.

use bytes::Bytes;
use switchyard_runtime::admission::{AdmissionRequest, InferencePatch, InferenceRequest};

use super::Caller;
use super::InferenceError;
use super::fields::{self, Given};

/// The `/v1` route a request came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `/v1/chat/completions`.
    Chat,
    /// `/v1/completions`.
    Completions,
    /// `/v1/embeddings`.
    Embeddings,
}

impl Endpoint {
    /// Every endpoint.
    pub const ALL: [Endpoint; 3] = [Endpoint::Chat, Endpoint::Completions, Endpoint::Embeddings];

    /// The endpoint served at `path`, if any.
    pub fn from_path(path: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.path() == path)
    }

    /// The path, as the engine serves it and the admission record names it.
    pub fn path(self) -> &'static str {
        match self {
            Endpoint::Chat => "/v1/chat/completions",
            Endpoint::Completions => "/v1/completions",
            Endpoint::Embeddings => "/v1/embeddings",
        }
    }
}

/// Characters per token in the prompt estimate the chain is told: the
/// usual rule of thumb for English text with BPE tokenizers (the frontend
/// has no tokenizer; a policy needs an order of magnitude, not a count).
const CHARS_PER_TOKEN: usize = 4;

/// A `/v1` request the frontend can admit and route.
#[derive(Debug, Clone)]
pub struct ValidRequest {
    /// The route it came in on.
    pub endpoint: Endpoint,
    /// The model asked for.
    pub model: String,
    /// `max_tokens`, else `max_completion_tokens`, when a non-negative integer.
    pub max_tokens: Option<u32>,
    /// Whether the client asked for server-sent events.
    pub stream: bool,
    /// Roughly [`CHARS_PER_TOKEN`] characters per token of the text in
    /// `messages`, `prompt` and `input`; at least 1.
    pub prompt_tokens: u32,
    /// The caller's span (its `traceparent`, or a peer's over the link).
    pub traceparent: Option<switchyard_telemetry::TraceContext>,
    /// The body as the client sent it.
    body: Bytes,
}

impl ValidRequest {
    /// Parses a body: 400 `invalid_request` when it is not JSON, names no
    /// `model` string, or gives a field the frontend reads (`max_tokens`,
    /// `max_completion_tokens`, `stream`) a value of the wrong type or
    /// range, naming that field as `param`: a value dropped here would be
    /// overwritten by a clamp's patch and answered 200. Other fields are
    /// the engine's to judge.
    pub fn parse(endpoint: Endpoint, body: Bytes) -> Result<Self, InferenceError> {
        let fields = fields::read(&body)
            .map_err(|e| InferenceError::Invalid(format!("the body is not JSON: {e}")))?;
        let model = fields
            .model
            .ok_or_else(|| InferenceError::Invalid("`model` is required".into()))?;
        let max_tokens = limit("max_tokens", fields.max_tokens)?;
        let max_completion_tokens = limit("max_completion_tokens", fields.max_completion_tokens)?;
        let stream = match fields.stream {
            Given::Absent => false,
            Given::Is(stream) => stream,
            Given::Wrong => {
                return Err(InferenceError::InvalidField {
                    param: "stream",
                    message: "stream must be a boolean".into(),
                });
            }
        };
        // `max_tokens` wins when both are given, as the record always had it.
        let max_tokens = max_tokens.or(max_completion_tokens);
        let chars = fields.messages + fields.prompt + fields.input;
        let prompt_tokens = u32::try_from(chars / CHARS_PER_TOKEN)
            .unwrap_or(u32::MAX)
            .max(1);
        Ok(Self {
            endpoint,
            model,
            max_tokens,
            stream,
            prompt_tokens,
            traceparent: None,
            body,
        })
    }

    /// The record the `inference` chain judges, built from the fields
    /// already parsed.
    pub fn admission(&self, caller: &Caller) -> AdmissionRequest {
        AdmissionRequest::Inference(InferenceRequest {
            caller: switchyard_runtime::admission::Caller {
                key_id: caller.key_id.clone(),
                // A key's team is the project the WIT record names.
                project: caller.team.clone(),
                scopes: caller.scopes.clone(),
            },
            model: self.model.clone(),
            endpoint: self.endpoint.path().into(),
            prompt_tokens: self.prompt_tokens,
            max_tokens: self.max_tokens,
            stream: self.stream,
        })
    }

    /// The body the engine gets: the client's bytes when no patch changed
    /// anything (the common case, not copied), else the body with the patched
    /// fields. A patched body is parsed a second time into a tree: patches
    /// are the exception, and keeping every field of every request for
    /// them would cost each unpatched request the allocations saved above.
    pub fn body(&self, patch: Option<&InferencePatch>) -> Result<Bytes, InferenceError> {
        match patch.and_then(|p| p.max_tokens) {
            None => Ok(self.body.clone()),
            Some(limit) => self.rewritten(Some(limit), None),
        }
    }

    /// The body for a call a peer's grant admitted: the model is the name
    /// the service's deployment serves (the client named
    /// `<peer>/<service>`, which an engine that checks the name refuses),
    /// and the limit, if any, applied.
    pub fn body_for(&self, model: &str, limit: Option<u32>) -> Result<Bytes, InferenceError> {
        self.rewritten(limit, Some(model))
    }

    fn rewritten(&self, limit: Option<u32>, model: Option<&str>) -> Result<Bytes, InferenceError> {
        let mut body: serde_json::Map<String, serde_json::Value> =
            serde_json::from_slice(&self.body).map_err(InferenceError::internal)?;
        if let Some(limit) = limit {
            body.insert("max_tokens".into(), limit.into());
            // Engines that read the newer name must see the limit too.
            if let Some(newer) = body.get_mut("max_completion_tokens") {
                *newer = limit.into();
            }
        }
        if let Some(model) = model {
            body.insert("model".into(), model.into());
        }
        serde_json::to_vec(&body)
            .map(Bytes::from)
            .map_err(InferenceError::internal)
    }
}

/// A token limit: a positive integer the record (`u32`) can hold, as
/// OpenAI and the engines require.
fn limit(param: &'static str, value: Given<u64>) -> Result<Option<u32>, InferenceError> {
    let invalid = |message: String| InferenceError::InvalidField { param, message };
    match value {
        Given::Absent => Ok(None),
        Given::Wrong => Err(invalid(format!("{param} must be a positive integer"))),
        Given::Is(0) => Err(invalid(format!("{param} must be at least 1, got 0"))),
        Given::Is(value) => u32::try_from(value)
            .map(Some)
            .map_err(|_| invalid(format!("{param} must be at most {}, got {value}", u32::MAX))),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn parse(body: &str) -> Result<ValidRequest, InferenceError> {
        ValidRequest::parse(Endpoint::Chat, Bytes::copy_from_slice(body.as_bytes()))
    }

    fn refused(body: &str) -> String {
        match parse(body) {
            Err(InferenceError::Invalid(message)) => message,
            other => panic!("{body}: {other:?}"),
        }
    }

    #[test]
    fn a_body_that_cannot_be_routed_is_refused_as_before() {
        for body in ["", "{\"model\": \"m\"", "{\"model\": \"\\ud800\"}"] {
            let why = serde_json::from_str::<Value>(body).unwrap_err();
            assert_eq!(refused(body), format!("the body is not JSON: {why}"));
        }
        for body in [
            "[\"model\"]",
            "null",
            "{\"model\": 5}",
            "{\"messages\": []}",
        ] {
            assert_eq!(refused(body), "`model` is required", "{body}");
        }
    }

    /// A refusal that names its field: (param, message).
    fn refused_field(body: &str) -> (&'static str, String) {
        match parse(body) {
            Err(InferenceError::InvalidField { param, message }) => (param, message),
            other => panic!("{body}: {other:?}"),
        }
    }

    #[test]
    fn the_record_fields_follow_the_body() {
        let valid = parse(
            r#"{"model": "m", "max_tokens": null, "max_completion_tokens": 9,
                "messages": [{"content": "twelve chars"}], "prompt": "1234", "stream": null}"#,
        )
        .unwrap();
        // `null` is no limit: the newer name is the limit.
        assert_eq!(valid.max_tokens, Some(9));
        assert!(!valid.stream);
        assert_eq!(valid.prompt_tokens, 4);
        let valid = parse(
            r#"{"model": "m", "max_tokens": 7, "max_completion_tokens": 9,
            "stream": true}"#,
        )
        .unwrap();
        assert_eq!(
            (valid.max_tokens, valid.stream, valid.prompt_tokens),
            (Some(7), true, 1)
        );
    }

    #[test]
    fn a_field_of_the_wrong_type_or_range_is_refused_and_named() {
        for (value, why) in [
            ("-5", "must be a positive integer"),
            ("\"ten\"", "must be a positive integer"),
            ("8.5", "must be a positive integer"),
            ("8.0", "must be a positive integer"),
            ("true", "must be a positive integer"),
            ("[1]", "must be a positive integer"),
            ("0", "must be at least 1, got 0"),
        ] {
            for param in ["max_tokens", "max_completion_tokens"] {
                let body = format!(r#"{{"model": "m", "{param}": {value}}}"#);
                assert_eq!(
                    refused_field(&body),
                    (param, format!("{param} {why}")),
                    "{body}"
                );
            }
        }
        for value in ["\"yes\"", "1", "{}"] {
            let body = format!(r#"{{"model": "m", "stream": {value}}}"#);
            assert_eq!(
                refused_field(&body),
                ("stream", "stream must be a boolean".into())
            );
        }
    }

    #[test]
    fn a_limit_the_record_cannot_hold_is_refused_and_named() {
        assert_eq!(
            refused_field(r#"{"model": "m", "max_tokens": 5000000000}"#),
            (
                "max_tokens",
                "max_tokens must be at most 4294967295, got 5000000000".into()
            )
        );
        assert_eq!(
            refused_field(r#"{"model": "m", "max_completion_tokens": 5000000000}"#),
            (
                "max_completion_tokens",
                "max_completion_tokens must be at most 4294967295, got 5000000000".into()
            )
        );
        let valid = parse(r#"{"model": "m", "max_tokens": 4294967295}"#).unwrap();
        assert_eq!(valid.max_tokens, Some(u32::MAX));
    }

    #[test]
    fn the_record_is_built_from_the_parsed_fields() {
        let body = r#"{"model": "demo", "max_completion_tokens": 64, "stream": true,
            "messages": [{"role": "user", "content": "sixteen letters!"}]}"#;
        let request = ValidRequest::parse(
            Endpoint::Completions,
            Bytes::copy_from_slice(body.as_bytes()),
        )
        .unwrap();
        let caller = Caller {
            key_id: "key_1".into(),
            scopes: vec!["inference".into()],
            team: None,
        };
        let expected = json!({
            "caller": {"key_id": "key_1", "project": null, "scopes": ["inference"]},
            "model": "demo",
            "endpoint": "/v1/completions",
            "prompt_tokens": 4,
            "max_tokens": 64,
            "stream": true,
        });
        assert_eq!(
            request.admission(&caller),
            AdmissionRequest::from_json(
                switchyard_runtime::admission::AdmissionPoint::Inference,
                expected
            )
            .unwrap()
        );
    }

    #[test]
    fn no_patch_forwards_the_clients_bytes_and_a_patch_rewrites_its_fields() {
        // Spacing, key order and escapes a re-serialisation would change.
        let body = "{\"stream\":false,  \"model\":\"demo\",\"max_completion_tokens\":900,\n\
                    \"max_tokens\":900,\"messages\":[{\"content\":\"caf\\u00e9\"}]}";
        let request = parse(body).unwrap();
        for patch in [None, Some(InferencePatch { max_tokens: None })] {
            let forwarded = request.body(patch.as_ref()).unwrap();
            assert_eq!(forwarded, body.as_bytes());
            // The same buffer, not a copy.
            assert_eq!(forwarded.as_ptr(), request.body.as_ptr());
        }
        let patched = request
            .body(Some(&InferencePatch {
                max_tokens: Some(16),
            }))
            .unwrap();
        let patched: Value = serde_json::from_slice(&patched).unwrap();
        assert_eq!(
            patched,
            json!({"stream": false, "model": "demo", "max_completion_tokens": 16,
                   "max_tokens": 16, "messages": [{"content": "café"}]})
        );
        // Only the fields the client sent, plus the limit.
        let request = parse(r#"{"model": "demo", "messages": []}"#).unwrap();
        let patched = request
            .body(Some(&InferencePatch {
                max_tokens: Some(16),
            }))
            .unwrap();
        assert_eq!(
            serde_json::from_slice::<Value>(&patched).unwrap(),
            json!({"model": "demo", "messages": [], "max_tokens": 16})
        );
    }
}
