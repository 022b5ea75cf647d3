//! The admin API's request bodies: the CLI sends them, the server parses
//! them (and documents them in its OpenAPI document, with the `utoipa`
//! feature): registration tokens (`POST /api/nodes/registration-tokens`),
//! keys (`POST /api/keys`), deployments (`POST /api/deployments`,
//! `PUT /api/deployments/{id}/replicas`) and fetches (`POST /api/models/fetch`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::plugin::{FailMode, Mode};

/// A new registration token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct NewRegistrationToken {
    /// A label.
    pub name: String,
    /// Seconds it registers workers for (at most a year); absent: until revoked.
    #[serde(default)]
    #[cfg_attr(feature = "utoipa", schema(example = 86400))]
    pub ttl_seconds: Option<i64>,
    /// How many workers it may register; absent: no limit.
    #[serde(default)]
    #[cfg_attr(feature = "utoipa", schema(example = 1))]
    pub max_uses: Option<i32>,
}

/// A new key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct NewKey {
    /// A label.
    pub name: String,
    /// Scopes: `admin`, `inference`, `models:manage`, `nodes:manage`, `federation:manage`, `federation:invoke`.
    pub scopes: Vec<String>,
    /// The team it belongs to (it must exist), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team: Option<String>,
}

/// A new deployment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct NewDeployment {
    /// The model's id in the library.
    pub model: String,
    /// Its revision.
    pub revision: String,
    /// `reference`, `llama-cpp` or `vllm`.
    pub engine: String,
    /// The model id clients use on `/v1` [default: the model's id].
    pub served_model_name: Option<String>,
    /// Replicas [default: 1].
    pub replicas: Option<i32>,
    /// GPUs per replica, on one node [default: 0].
    pub gpus_per_replica: Option<i32>,
    /// Memory each GPU must have, overriding the estimate (the files' size
    /// spread over the GPUs, plus a fifth for the KV cache).
    pub gpu_memory_bytes: Option<i64>,
    /// Requests one replica serves at once [default: 8].
    pub max_concurrency: Option<i32>,
    /// The reference engine's delay per token, in ms [default: 0].
    pub token_delay_ms: Option<i32>,
    /// `binpack` (fill the fullest node that fits) or `spread` [default: binpack].
    pub strategy: Option<String>,
    /// Labels a node must have, every pair, to hold a replica [default: none].
    #[cfg_attr(feature = "utoipa", schema(example = json!({"gpu": "h100"})))]
    pub node_selector: Option<BTreeMap<String, String>>,
}

/// A new replica count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Scale {
    /// Replicas wanted.
    pub replicas: i32,
}

/// A new chain for a point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct SetChain {
    /// The policies, in order: the first enforced deny wins.
    pub policies: Vec<PolicyBinding>,
}

/// One policy of a chain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct PolicyBinding {
    /// Plugin name.
    pub plugin: String,
    /// Plugin version.
    pub version: String,
    /// Settings, checked by the plugin's own `validate-settings`.
    #[serde(default = "empty_object")]
    #[cfg_attr(feature = "utoipa", schema(value_type = Object))]
    pub settings: serde_json::Value,
    /// `enforce` (default) or `monitor`.
    #[serde(default)]
    pub mode: Mode,
    /// `closed` (default) or `open`.
    #[serde(default)]
    pub fail: FailMode,
    /// What the decision log keeps: `log_requests` (default false) and
    /// `allow_sample` (one allow in N; default 100).
    #[serde(flatten, default)]
    pub log: crate::decisions::DecisionLogging,
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(Default::default())
}

/// Where a rollback goes (the body is optional).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Rollback {
    /// The generation whose chain to restore; without it, the one before
    /// the generation whose chain is active.
    pub generation: Option<i64>,
}

/// The cluster's grant evaluator (`PUT /api/federation/evaluator`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SetEvaluator {
    /// Plugin name (a `grant` plugin: `grant-standard`).
    pub plugin: String,
    /// Plugin version.
    pub version: String,
    /// Settings, checked by the plugin's own `validate-settings`.
    #[serde(default = "empty_object")]
    #[cfg_attr(feature = "utoipa", schema(value_type = Object))]
    pub settings: serde_json::Value,
}

/// A file to fetch as a model revision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct FetchModel {
    /// An http or https URL.
    #[cfg_attr(
        feature = "utoipa",
        schema(example = "https://hub.example/org/model/resolve/main/model-q4_k_m.gguf")
    )]
    pub url: String,
    /// The file's SHA-256, hex: the download must hash to it.
    pub sha256: String,
    /// The model's id.
    pub id: String,
    /// The revision.
    pub revision: String,
    /// The file's path in the revision [default: the URL's last path segment].
    pub name: Option<String>,
    /// The licence to record.
    pub licence: Option<String>,
}

/// One line of a streamed answer to a fetch (`Accept: application/x-ndjson`):
/// progress while the file downloads, then one outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FetchLine {
    /// Bytes received so far, of the total when the source said it.
    Progress {
        /// Bytes received.
        received: u64,
        /// Bytes in all, when known.
        total: Option<u64>,
    },
    /// The end: the HTTP status the answer would have had, and the
    /// registered manifest or the error.
    Outcome {
        /// An HTTP status.
        status: u16,
        /// The manifest (the `GET /api/models/{id}/{revision}` form), on success.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<crate::models::ModelRevision>,
        /// Why it failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<ErrorDetail>,
    },
}

/// Every API error's body: `{"error": {"code", "message"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// The code and the message.
    pub error: ErrorDetail,
}

/// An API error's code and message (the `error` of `{"error": {...}}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorDetail {
    /// A stable code (`digest_mismatch`).
    pub code: String,
    /// For the user.
    pub message: String,
}

/// Where the scheduler would place a new deployment's replicas now, and why
/// nodes refuse one (`POST /api/deployments/preview`); nothing is written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct DeploymentPreview {
    /// The replicas that would be placed, in order.
    pub placements: Vec<PreviewPlacement>,
    /// The nodes that could not take the last replica considered (the first
    /// that could not be placed, or else the last placed), each with why.
    pub refused: Vec<PreviewRefusal>,
    /// Whether every wanted replica would be placed.
    pub placeable: bool,
    /// Why the first replica that cannot be placed is not, as the
    /// deployment's `pending_reason` would say it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_reason: Option<String>,
}

/// One replica's place in a [`DeploymentPreview`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct PreviewPlacement {
    /// The replica's number, from 0.
    pub replica: u32,
    /// The node's id.
    pub node: String,
    /// The node's name.
    pub node_name: String,
    /// The GPU indices it would take.
    pub gpus: Vec<u32>,
}

/// A node that would not take a replica in a [`DeploymentPreview`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct PreviewRefusal {
    /// The node's id.
    pub node: String,
    /// The node's name.
    pub node_name: String,
    /// Why (`pending an admin's approval`, `labels lack gpu=h100`,
    /// `0 suitable free GPUs, 1 needed`, the deploy chain's `code: message`).
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::round_trip;

    #[test]
    fn node_and_key_bodies_round_trip() {
        round_trip(&NewRegistrationToken {
            name: "rack-4".into(),
            ttl_seconds: Some(86400),
            max_uses: None,
        });
        round_trip(&NewKey {
            name: "ci".into(),
            scopes: vec!["inference".into()],
            team: Some("research".into()),
        });
    }

    #[test]
    fn deployment_bodies_round_trip() {
        round_trip(&NewDeployment {
            model: "m".into(),
            revision: "r".into(),
            engine: "reference".into(),
            replicas: Some(2),
            node_selector: Some([("gpu".into(), "h100".into())].into()),
            ..NewDeployment::default()
        });
        round_trip(&Scale { replicas: 3 });
        round_trip(&SetEvaluator {
            plugin: "grant-standard".into(),
            version: "0.1.0".into(),
            settings: serde_json::json!({"max_tokens_per_call": 4096}),
        });
    }

    #[test]
    fn admission_bodies_round_trip_and_default_as_documented() {
        round_trip(&SetChain {
            policies: vec![PolicyBinding {
                plugin: "max-tokens".into(),
                version: "1.0.0".into(),
                settings: serde_json::json!({"max_tokens": 10}),
                mode: Mode::Monitor,
                fail: FailMode::Open,
                log: Default::default(),
            }],
        });
        let bare: PolicyBinding =
            serde_json::from_value(serde_json::json!({"plugin": "p", "version": "1"})).unwrap();
        assert_eq!((bare.mode, bare.fail), (Mode::Enforce, FailMode::Closed));
        assert_eq!(bare.settings, serde_json::json!({}));
        round_trip(&Rollback {
            generation: Some(2),
        });
    }

    #[test]
    fn a_fetch_round_trips() {
        round_trip(&FetchModel {
            url: "https://hub.example/m.gguf".into(),
            sha256: "ab".repeat(32),
            id: "m".into(),
            revision: "r".into(),
            name: None,
            licence: Some("apache-2.0".into()),
        });
    }

    #[test]
    fn fetch_lines_round_trip() {
        round_trip(&FetchLine::Progress {
            received: 10,
            total: Some(100),
        });
        round_trip(&FetchLine::Progress {
            received: 10,
            total: None,
        });
        round_trip(&FetchLine::Outcome {
            status: 201,
            model: Some(crate::models::ModelRevision {
                id: "m".into(),
                revision: "r".into(),
                licence: None,
                files: Vec::new(),
                imported_by: "k".into(),
                imported_at: "T".into(),
            }),
            error: None,
        });
        round_trip(&FetchLine::Outcome {
            status: 422,
            model: None,
            error: Some(ErrorDetail {
                code: "digest_mismatch".into(),
                message: "the bytes hash to something else".into(),
            }),
        });
        round_trip(&ErrorBody {
            error: ErrorDetail {
                code: "not_found".into(),
                message: "no model 'demo'".into(),
            },
        });
    }
}
