//! Grants: what an owner allows a peer, how a peer asks for it, the terms
//! both keys sign, and what a grant has used.

use serde::{Deserialize, Serialize};

text_enum! {
    /// What a grant allows.
    pub enum Operation {
        /// `/v1` requests to the granted services.
        Inference => "inference",
        /// Creating and running managed services on granted machines.
        InferenceManage => "inference:manage",
        /// Copying granted model revisions.
        ModelsTransfer => "models:transfer",
    }
}

text_enum! {
    /// Which side of a grant this cluster is.
    pub enum Direction {
        /// This cluster owns the resources and granted them to the peer.
        Outgoing => "outgoing",
        /// The peer owns the resources and granted them to this cluster.
        Incoming => "incoming",
    }
}

text_enum! {
    /// A grant's stored state.
    pub enum GrantState {
        /// Approved and signed by the owner, not yet completed by the grantee.
        Offered => "offered",
        /// Signed by both.
        Active => "active",
        /// Revoked by the owner.
        Revoked => "revoked",
    }
}

/// `POST /api/federation/peers/{peer}/requests`: ask the peer for access.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct NewAccessRequest {
    /// The operations asked for.
    pub operations: Vec<Operation>,
    /// What for, for the peer's operator.
    #[serde(default)]
    pub note: String,
}

text_enum! {
    /// Where a request for access is (`federation_requests.state`).
    pub enum RequestState {
        /// Waiting for the owner's answer.
        Pending => "pending",
        /// Answered with a grant.
        Approved => "approved",
    }
}

text_enum! {
    /// Whether a grant can be used now, as its status says: its state,
    /// with its expiry applied.
    pub enum GrantStanding {
        /// In force.
        Active => "active",
        /// Offered, not accepted yet.
        Inactive => "inactive",
        /// Past its expiry.
        Expired => "expired",
        /// Revoked by its owner.
        Revoked => "revoked",
    }
}

/// A request for access, as each side keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct AccessRequest {
    /// Its id (the same on both sides).
    pub id: String,
    /// The peer's label here.
    pub peer: String,
    /// `incoming`: the peer asks this cluster; `outgoing`: this cluster asked.
    pub direction: Direction,
    /// The operations asked for.
    pub operations: Vec<Operation>,
    /// What for.
    pub note: String,
    /// `pending` or `approved` (then `grant` names the grant).
    pub state: RequestState,
    /// The grant that answered it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<String>,
    /// When it was made (RFC 3339).
    pub created_at: String,
}

/// What an owner grants: `POST /api/federation/requests/{id}/approve`, or,
/// with `peer`, `POST /api/federation/grants` (sharing unprompted).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct GrantSpec {
    /// The peer (label or id); only when sharing unprompted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<String>,
    /// The operations allowed.
    pub operations: Vec<Operation>,
    /// Service ids (of this cluster's service offers).
    #[serde(default)]
    pub services: Vec<String>,
    /// Model revisions, `model@revision`.
    #[serde(default)]
    pub models: Vec<String>,
    /// Node ids.
    #[serde(default)]
    pub machines: Vec<String>,
    /// Seconds it lives (at most a year).
    pub lifetime_s: i64,
    /// Calls in flight at once.
    pub max_concurrent: u32,
    /// Calls in all.
    pub max_requests: u64,
    /// Model bytes copied in all.
    #[serde(default)]
    pub max_model_bytes: u64,
    /// Stop the services created through it when it is revoked.
    #[serde(default)]
    pub stop_on_revoke: bool,
}

/// One side of a grant, as its terms name it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Party {
    /// Its cluster id.
    pub cluster_id: String,
    /// Its own label.
    pub label: String,
    /// Its public key (hex).
    pub public_key: String,
}

/// A grant's terms: exactly what both keys sign (as canonical JSON) in the
/// acceptance receipt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct GrantTerms {
    /// The grant's id (the same on both sides).
    pub id: String,
    /// The request it answers, if any.
    pub request: Option<String>,
    /// The cluster whose resources it shares.
    pub owner: Party,
    /// The cluster that may use them.
    pub grantee: Party,
    /// The operations allowed.
    pub operations: Vec<Operation>,
    /// Service ids.
    pub services: Vec<String>,
    /// Model revisions, `model@revision`.
    pub models: Vec<String>,
    /// Node ids.
    pub machines: Vec<String>,
    /// When it was issued (Unix ms).
    pub issued_at_unix_ms: u64,
    /// When it expires (Unix ms).
    pub expires_at_unix_ms: u64,
    /// Calls in flight at once.
    pub max_concurrent: u32,
    /// Calls in all.
    pub max_requests: u64,
    /// Model bytes copied in all.
    pub max_model_bytes: u64,
    /// Stop the services created through it when it is revoked.
    pub stop_on_revoke: bool,
}

/// What a grant has used, as the owner counts it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct GrantUsage {
    /// Calls in flight now.
    pub in_flight: u32,
    /// Calls charged.
    pub requests: u64,
    /// Model bytes charged.
    pub model_bytes: u64,
    /// Tokens charged.
    pub tokens: u64,
}

/// A grant as each side keeps it: the terms, both signatures, its state
/// and (on the owner) what it has used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct GrantRecord {
    /// Its id.
    pub id: String,
    /// The peer's label here.
    pub peer: String,
    /// `outgoing` (this cluster owns the resources) or `incoming`.
    pub direction: Direction,
    /// `offered`, `active` or `revoked`.
    pub state: GrantState,
    /// `active`, `inactive` (offered), `expired` or `revoked`.
    pub status: GrantStanding,
    /// The signed terms.
    pub terms: GrantTerms,
    /// The owner's signature of the terms (hex).
    pub owner_signature: String,
    /// The grantee's signature of the terms (hex), once completed.
    pub grantee_signature: Option<String>,
    /// What it has used (counted by the owner; the grantee's copy is what
    /// the owner last said).
    pub usage: GrantUsage,
    /// When this side last heard the owner confirm it (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_verified_at: Option<String>,
}

/// `POST /api/federation/grants/{id}/revoke`'s answer, and a peer's notice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Revoked {
    /// The grant.
    pub id: String,
    /// Whether the peer heard of it now (it refuses new calls either way).
    pub peer_notified: bool,
}
