//! Deployments and their replicas, as the admin API shows them (and the
//! store keeps them).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::state::ReplicaState;

/// A deployment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Deployment {
    /// Its id.
    pub id: String,
    /// The model.
    pub model_id: String,
    /// The model's revision.
    pub revision: String,
    /// `reference`, `llama-cpp` or `vllm`.
    pub engine: String,
    /// The model id clients use on `/v1`.
    pub served_model_name: String,
    /// Replicas wanted.
    pub replicas: i32,
    /// GPUs per replica (on one node).
    pub gpus_per_replica: i32,
    /// Memory each of its GPUs must have free.
    pub gpu_memory_bytes: i64,
    /// Requests one replica serves at once; beyond, 429.
    pub max_concurrency: i32,
    /// The reference engine's delay per token.
    pub token_delay_ms: i32,
    /// `binpack` or `spread`.
    pub strategy: String,
    /// Labels a node must have (every pair) to hold a replica.
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
    /// Why a wanted replica is not placed, while one is not (set by the scheduler).
    #[serde(default)]
    pub pending_reason: Option<String>,
    /// The nodes it may run on; empty: any (a managed service stays on the
    /// machines its grant names).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
}

/// A replica of a deployment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Replica {
    /// Its id (also the engine's id on the worker).
    pub id: String,
    /// Its deployment.
    pub deployment_id: String,
    /// Where it is placed.
    pub node_id: String,
    /// The GPU indices it holds there.
    pub gpus: Vec<i32>,
    /// placed, staging, starting, ready, failed, stopping.
    #[cfg_attr(feature = "utoipa", schema(value_type = String))]
    pub state: ReplicaState,
    /// Why, when it is not ready.
    pub detail: Option<String>,
    /// While staging: bytes of the revision's files the node holds.
    #[serde(default)]
    pub staged_bytes: Option<i64>,
    /// While staging: bytes of all the revision's files.
    #[serde(default)]
    pub staging_total_bytes: Option<i64>,
}

/// A deployment with its replicas.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct DeploymentStatus {
    /// The deployment.
    pub deployment: Deployment,
    /// Its replicas: state, node, GPUs, staging progress.
    pub replicas_status: Vec<Replica>,
}

/// `GET /api/deployments`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Deployments {
    /// Every deployment with its replicas.
    pub deployments: Vec<DeploymentStatus>,
}
