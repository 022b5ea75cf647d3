//! Components bound with generations (admission chains, the grant
//! evaluator): what a generation binds, what each replica serves, and the
//! admin API's answers about them. The store keeps a generation's
//! components as the JSON of [`BoundComponent`].

use serde::{Deserialize, Serialize};

use crate::decisions::DecisionLogging;
use crate::plugin::{FailMode, Mode};
use crate::signing::Signer;

/// One component a generation binds, pinned to its digest.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct BoundComponent {
    /// Plugin name.
    pub plugin: String,
    /// Plugin version.
    pub version: String,
    /// The component's digest, pinned when it was bound.
    pub sha256: String,
    /// The binding's settings.
    #[cfg_attr(feature = "utoipa", schema(value_type = Object))]
    pub settings: serde_json::Value,
    /// Whether its deny counts (`enforce` or `monitor`).
    pub mode: Mode,
    /// What its error means (`closed` or `open`).
    pub fail: FailMode,
    /// What the decision log keeps of its answers (absent in chains stored
    /// before the log: the defaults).
    #[serde(flatten, default)]
    pub log: DecisionLogging,
}

/// A slot's binding at one generation: an admission point's chain, or the
/// grant evaluator (`point` `grant-evaluator`, at most one component).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Generation {
    /// The slot: a point's name, or `grant-evaluator`.
    pub point: String,
    /// Its number; 0 binds nothing (the empty chain, the shipped evaluator).
    pub generation: i64,
    /// The components, in order.
    pub policies: Vec<BoundComponent>,
    /// Why it was made (`set`, `rollback to 3`).
    pub note: String,
    /// The key that made it.
    pub created_by: String,
    /// When.
    pub created_at: Option<String>,
}

/// What one replica serves in a slot.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct ReplicaStatus {
    /// The replica's instance id.
    pub instance: String,
    /// Its host name.
    pub hostname: String,
    /// The generation it serves.
    pub generation: i64,
    /// `current`, `behind` or `failed`.
    pub status: String,
    /// The newer generation it could not build.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_generation: Option<i64>,
    /// Why that generation failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A bound policy with who signed it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct SignedComponent {
    /// The binding.
    #[serde(flatten)]
    pub component: BoundComponent,
    /// Its signer, or `None` for an unsigned component.
    pub signature: Option<Signer>,
}

/// `GET /api/admission/{point}`: the chain, its generation, and what each
/// replica serves.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct ChainStatus {
    /// The point.
    pub point: String,
    /// The newest generation.
    pub generation: i64,
    /// Its policies, in order, each with its signer.
    pub policies: Vec<SignedComponent>,
    /// Why it was made.
    pub note: String,
    /// The key that made it.
    pub created_by: String,
    /// When.
    pub created_at: Option<String>,
    /// Each policy that runs signed by a key no longer (or never) trusted.
    #[serde(default)]
    pub trust_warnings: Vec<String>,
    /// What each live replica serves.
    #[serde(default)]
    pub replicas: Vec<ReplicaStatus>,
}

/// One line of the grant evaluator's history.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct EvaluatorGeneration {
    /// The generation.
    pub generation: i64,
    /// The evaluator it binds (`grant-standard` when it binds none).
    pub plugin: String,
    /// Its version; `None` for the shipped evaluator by default.
    pub version: Option<String>,
    /// Why it was made.
    pub note: String,
    /// The key that made it.
    pub created_by: String,
    /// When.
    pub created_at: Option<String>,
}

/// `GET /api/federation/evaluator`: the evaluator in force, the newest
/// generations, and what each replica serves.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct EvaluatorStatus {
    /// The generation in force, and what it binds spelled out.
    #[serde(flatten)]
    pub current: EvaluatorGeneration,
    /// Whether it binds the shipped evaluator by default (generation 0,
    /// or a rollback to it).
    pub shipped: bool,
    /// The component's digest (absent when the shipped one is missing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Its settings.
    #[cfg_attr(feature = "utoipa", schema(value_type = Object))]
    pub settings: serde_json::Value,
    /// Its signer.
    pub signature: Option<Signer>,
    /// Set when it runs signed by a key no longer (or never) trusted.
    #[serde(default)]
    pub trust_warnings: Vec<String>,
    /// Why what it binds could not be read (the shipped evaluator missing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The newest generations, newest first.
    #[serde(default)]
    pub history: Vec<EvaluatorGeneration>,
    /// What each live replica serves.
    #[serde(default)]
    pub replicas: Vec<ReplicaStatus>,
}
