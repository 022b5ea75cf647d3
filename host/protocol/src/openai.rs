//! OpenAI's error shape, for the answers that reach a `/v1` client from
//! something other than the frontend's own error path (a worker's refusal
//! streamed through as the engine's answer): the body carries OpenAI's
//! `type`, sorted by status as OpenAI sorts its errors, beside the stable
//! `code` and `message`, so a client that reads `error.type` behaves as it
//! does against OpenAI.

use serde::{Deserialize, Serialize};

/// What a client reads of an internal error (500 `internal`): the detail
/// is the operator's, in the server log.
pub const INTERNAL_MESSAGE: &str = "internal error; see the server log";

/// OpenAI's `type` for an error answered with `status`.
pub fn error_type(status: u16) -> &'static str {
    match status {
        401 => "authentication_error",
        403 => "permission_error",
        429 => "rate_limit_error",
        500.. => "server_error",
        _ => "invalid_request_error",
    }
}

/// `{"error": {"code", "message", "type", "param"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenAiErrorBody {
    /// The error.
    pub error: OpenAiError,
}

/// The `error` of an [`OpenAiErrorBody`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenAiError {
    /// A stable code (`replica_unavailable`).
    pub code: String,
    /// For the user.
    pub message: String,
    /// OpenAI's kind of error ([`error_type`]).
    #[serde(rename = "type")]
    pub kind: String,
    /// The request field at fault, when one is.
    pub param: Option<String>,
}

impl OpenAiErrorBody {
    /// The body of an error answered with `status`, blaming no field.
    pub fn new(status: u16, code: &str, message: impl Into<String>) -> Self {
        Self {
            error: OpenAiError {
                code: code.into(),
                message: message.into(),
                kind: error_type(status).into(),
                param: None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_has_openai_s_type_for_its_status_and_round_trips() {
        let body = OpenAiErrorBody::new(503, "replica_unavailable", "no replica r here");
        let text = serde_json::to_value(&body).unwrap();
        assert_eq!(
            text,
            serde_json::json!({"error": {"code": "replica_unavailable", "message": "no replica r here",
                "type": "server_error", "param": null}})
        );
        assert_eq!(
            serde_json::from_value::<OpenAiErrorBody>(text).unwrap(),
            body
        );
        assert_eq!(error_type(400), "invalid_request_error");
        assert_eq!(error_type(429), "rate_limit_error");
    }
}
