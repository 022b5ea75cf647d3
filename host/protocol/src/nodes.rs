//! The admin API's answers about workers: nodes as the cluster knows them,
//! and the registration tokens that let workers join.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::node::Inventory;
use crate::state::NodeState;

/// A node as the API shows it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Node {
    /// Stable id (`node_...`).
    pub id: String,
    /// The worker's name (unique).
    pub name: String,
    /// pending, healthy, unhealthy, draining or offline.
    pub state: NodeState,
    /// An address the frontends may dial, if the worker has one.
    pub address: Option<String>,
    /// What the worker reported: machine, GPUs, disk, engines.
    #[cfg_attr(feature = "utoipa", schema(value_type = Object))]
    pub inventory: Inventory,
    /// When it (last) registered.
    pub registered_at: String,
    /// When an admin approved it.
    pub approved_at: Option<String>,
    /// Its last heartbeat.
    pub last_heartbeat_at: Option<String>,
    /// In maintenance: no new placements, its replicas stay.
    pub maintenance: bool,
    /// The worker's labels (`--label key=value`), matched by deployments' node selectors.
    pub labels: BTreeMap<String, String>,
    /// SHA-256s of the complete, verified files in its placement cache.
    pub files_held: Vec<String>,
}

/// `GET /api/nodes`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Nodes {
    /// Every node.
    pub nodes: Vec<Node>,
}

/// A registration token as listed (never the token).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct RegistrationToken {
    /// Stable id (`reg_...`).
    pub id: String,
    /// A label.
    pub name: String,
    /// When it was created.
    pub created_at: String,
    /// When it was revoked.
    pub revoked_at: Option<String>,
    /// When it stops registering workers; `None`: never.
    pub expires_at: Option<String>,
    /// How many registrations it may make; `None`: no limit.
    pub max_uses: Option<i32>,
    /// How many it made.
    pub uses: i32,
    /// When it last registered a worker.
    pub last_used_at: Option<String>,
}

/// `GET /api/nodes/registration-tokens`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct RegistrationTokens {
    /// Every token, revoked ones too.
    pub tokens: Vec<RegistrationToken>,
}

/// `POST /api/nodes/registration-tokens`: the token, and its value, shown
/// this once.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct CreatedRegistrationToken {
    /// The token as listed.
    pub token: RegistrationToken,
    /// The secret a worker registers with.
    pub value: String,
}
