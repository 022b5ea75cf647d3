//! The heads of the stream services: the first line of a request (and of
//! an answer), JSON, at most [`crate::limits::MAX_HEAD`] bytes.
//!
//! - `blob` (bulk lane): a [`BlobHead`], then the range's bytes; the worker
//!   answers one [`BlobAnswer`].
//! - `inference` (inference lane): an [`InferenceHead`], then the request's
//!   body; the worker answers an [`AnswerHead`] and then the engine's body
//!   as it comes.

use serde::{Deserialize, Serialize};

use crate::control::FileState;

/// The `blob` service's name.
pub const BLOB: &str = "blob";
/// The `inference` service's name.
pub const INFERENCE: &str = "inference";

/// The header a worker adds to an `inference` answer's head: the
/// milliseconds from asking its engine to the engine's answer head. The
/// frontend takes it out and answers `x-switchyard-overhead-ms` (the time
/// to the head, less this) instead.
pub const ENGINE_MS_HEADER: &str = "x-switchyard-engine-ms";

/// The header every `/v1` answer from a local engine carries: the
/// milliseconds to its head spent in Switchyard, not in the engine.
pub const OVERHEAD_MS_HEADER: &str = "x-switchyard-overhead-ms";

/// One range of a model file for the worker's placement cache.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlobHead {
    /// The file's SHA-256, lowercase hex.
    pub sha256: String,
    /// The whole file's size.
    pub size: u64,
    /// Where the range starts: the durable offset the worker reported.
    pub offset: u64,
    /// The range's length, at most [`crate::limits::MAX_RANGE`].
    pub length: u64,
}

/// The worker's answer to a range.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum BlobAnswer {
    /// Written: the durable offset now, and whether the file is complete.
    Received {
        /// The durable offset.
        offset: u64,
        /// Complete and verified.
        complete: bool,
    },
    /// Refused or interrupted.
    Refused {
        /// Why.
        error: BlobRefusal,
    },
}

/// Why a range was refused, and what the cache holds of the file now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlobRefusal {
    /// `invalid_request` or `placement`.
    pub code: String,
    /// For the operator.
    pub message: String,
    /// What the cache holds now (where a resumed transfer starts), when the
    /// head could be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<FileState>,
}

/// An HTTP request for one of a worker's engines.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InferenceHead {
    /// The replica (engine id) it is for.
    pub replica: String,
    /// `GET` or `POST`.
    pub method: String,
    /// An absolute path under `/v1/`.
    pub path: String,
    /// Header names and values.
    #[serde(default)]
    pub headers: Vec<(String, String)>,
}

/// The head of an answer: the engine's (or the worker's) HTTP status and
/// headers; the body follows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnswerHead {
    /// The HTTP status.
    pub status: u16,
    /// Header names and values (no hop-by-hop ones, no length).
    #[serde(default)]
    pub headers: Vec<(String, String)>,
}

impl AnswerHead {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::round_trip;

    #[test]
    fn blob_heads_and_answers_round_trip() {
        round_trip(&BlobHead {
            sha256: "ab".repeat(32),
            size: 100,
            offset: 10,
            length: 90,
        });
        let received = BlobAnswer::Received {
            offset: 100,
            complete: true,
        };
        assert_eq!(
            round_trip(&received),
            json!({"offset": 100, "complete": true})
        );
        let refused = BlobAnswer::Refused {
            error: BlobRefusal {
                code: "placement".into(),
                message: "interrupted".into(),
                state: Some(FileState::Partial { offset: 10 }),
            },
        };
        assert_eq!(
            round_trip(&refused)["error"]["state"],
            json!({"state": "partial", "offset": 10})
        );
        round_trip(&BlobAnswer::Refused {
            error: BlobRefusal {
                code: "invalid_request".into(),
                message: "bad head".into(),
                state: None,
            },
        });
    }

    #[test]
    fn inference_heads_round_trip() {
        let head = InferenceHead {
            replica: "rep_1".into(),
            method: "POST".into(),
            path: "/v1/chat/completions".into(),
            headers: vec![("content-type".into(), "application/json".into())],
        };
        assert_eq!(
            round_trip(&head)["headers"],
            json!([["content-type", "application/json"]])
        );
        let answer = AnswerHead {
            status: 200,
            headers: vec![("Content-Type".into(), "text/event-stream".into())],
        };
        round_trip(&answer);
        assert_eq!(answer.header("content-type"), Some("text/event-stream"));
    }
}
