//! The control verbs a frontend calls on a worker, each with its request
//! and answer. A verb's payload and answer are JSON; a refusal is the
//! carrier's `{code, message}`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::engines::{EngineKind, EngineState};

/// The verbs' names.
pub mod verbs {
    /// `pong`: the worker answers.
    pub const PING: &str = "ping";
    /// The payload back.
    pub const ECHO: &str = "echo";
    /// `[FileRef]` → `[FileStatus]`: what the placement cache holds.
    pub const FILES_STATUS: &str = "files.status";
    /// `[sha256]` → [`super::FilesDeleted`].
    pub const FILES_DELETE: &str = "files.delete";
    /// [`super::EngineStart`] → [`super::EngineAnswer`].
    pub const ENGINE_START: &str = "engine.start";
    /// [`super::EngineRef`] → [`super::EngineAnswer`]: stop at once.
    pub const ENGINE_STOP: &str = "engine.stop";
    /// [`super::EngineRef`] → [`super::EngineAnswer`]: no new requests,
    /// stop once those in flight end or the deadline passes.
    pub const ENGINE_DRAIN: &str = "engine.drain";
    /// Nothing → `[EngineReport]`.
    pub const ENGINE_LIST: &str = "engine.list";
}

/// A file by digest and size (`files.status`' request is a list of them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRef {
    /// SHA-256, lowercase hex.
    pub sha256: String,
    /// Its size in bytes.
    pub size: u64,
}

/// What the placement cache holds of one file (`files.status`' answer is
/// a list of them, in the request's order).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileStatus {
    /// SHA-256, lowercase hex.
    pub sha256: String,
    /// What is there.
    pub state: FileState,
}

/// What the cache holds of one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum FileState {
    /// Complete and verified.
    Complete,
    /// Partly here: bytes `0..offset` are durable.
    Partial {
        /// The durable offset.
        offset: u64,
    },
    /// Nothing here.
    Absent,
}

/// `files.delete`' answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilesDeleted {
    /// How many files were deleted.
    pub deleted: usize,
}

/// `engine.start`'s request: what to run for one replica. The worker
/// decides under its own policy whether it runs it (the model by digest,
/// from its placement cache; arguments, environment and a path only where
/// its operator allowed them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineStart {
    /// The replica's id (the engine's id on the worker).
    pub id: String,
    /// The engine.
    pub kind: EngineKind,
    /// The model file, by SHA-256 (lowercase hex), from the placement cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_sha256: Option<String>,
    /// A model path on the worker, instead of a digest (only under roots
    /// its operator allowed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_path: Option<PathBuf>,
    /// The model id clients use.
    pub served_model_name: String,
    /// GPU indices to pin it to.
    #[serde(default)]
    pub gpus: Vec<u32>,
    /// More arguments, appended.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_args: Vec<String>,
    /// More environment.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The reference engine's delay per generated token, in ms.
    #[serde(default)]
    pub token_delay_ms: u64,
}

/// `engine.stop`'s and `engine.drain`'s request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineRef {
    /// The engine's (replica's) id.
    pub id: String,
    /// How long a drain may wait for requests in flight, in ms; absent:
    /// the worker's default.
    #[serde(default)]
    pub deadline_ms: Option<u64>,
}

/// `engine.start`'s, `engine.stop`'s and `engine.drain`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineAnswer {
    /// The engine's id.
    pub id: String,
    /// Where it is now.
    pub state: EngineState,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::round_trip;

    #[test]
    fn the_files_verbs_round_trip() {
        round_trip(&FileRef {
            sha256: "ab".repeat(32),
            size: 10,
        });
        for state in [
            FileState::Complete,
            FileState::Partial { offset: 4 },
            FileState::Absent,
        ] {
            let json = round_trip(&FileStatus {
                sha256: "ab".repeat(32),
                state,
            });
            assert!(json["state"]["state"].is_string());
        }
        assert_eq!(
            round_trip(&FilesDeleted { deleted: 2 }),
            json!({"deleted": 2})
        );
    }

    #[test]
    fn the_engine_verbs_round_trip() {
        let start = EngineStart {
            id: "rep_1".into(),
            kind: EngineKind::Reference,
            model_sha256: Some("ab".repeat(32)),
            model_path: None,
            served_model_name: "tiny".into(),
            gpus: vec![0],
            extra_args: vec!["--ctx-size".into()],
            env: [("HF_HOME".into(), "/x".into())].into(),
            token_delay_ms: 2,
        };
        round_trip(&start);
        let bare = EngineStart {
            extra_args: Vec::new(),
            env: BTreeMap::new(),
            ..start
        };
        let json = round_trip(&bare);
        assert!(json.get("model_path").is_none() && json.get("env").is_none());
        round_trip(&EngineRef {
            id: "rep_1".into(),
            deadline_ms: Some(30_000),
        });
        round_trip(&EngineAnswer {
            id: "rep_1".into(),
            state: EngineState::Ready { pid: 1 },
        });
    }

    #[test]
    fn an_unknown_field_in_engine_start_is_refused() {
        let refused = serde_json::from_value::<EngineStart>(json!({
            "id": "r", "kind": "reference", "served_model_name": "m", "unknown": 1,
        }));
        assert!(refused.is_err());
    }
}
