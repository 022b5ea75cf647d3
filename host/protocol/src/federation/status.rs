//! `GET /api/federation/status` and an operation's receipt.

use serde::{Deserialize, Serialize};

use super::{Direction, Identity, LinkStatus};

/// A grant's state and what is left of it (`GET /api/federation/status`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct GrantStatus {
    /// The grant.
    pub id: String,
    /// `outgoing` or `incoming`.
    pub direction: Direction,
    /// `active`, `inactive`, `expired` or `revoked`.
    pub status: super::GrantStanding,
    /// Calls left.
    pub requests_left: u64,
    /// Calls that may start now.
    pub concurrent_left: u32,
    /// Model bytes left.
    pub model_bytes_left: u64,
    /// The limits reached: `requests`, `concurrent`, `model_bytes`.
    pub exhausted: Vec<String>,
    /// When the owner last confirmed it (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_verified_at: Option<String>,
}

/// One peer in `GET /api/federation/status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct PeerStatus {
    /// Its id.
    pub id: String,
    /// Its label.
    pub label: String,
    /// The link.
    pub link: LinkStatus,
    /// Whether its key was proved over the link since this replica started.
    pub identity_verified: bool,
    /// When its key was last proved (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_verified_at: Option<String>,
    /// Its grants, both directions.
    pub grants: Vec<GrantStatus>,
    /// The jobs this cluster made on it, as projected here.
    #[serde(default)]
    pub jobs: crate::jobs::JobProjections,
}

/// `GET /api/federation/status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct FederationStatus {
    /// `verified`, `identity_missing` or `identity_mismatch`: anything but
    /// `verified` suspends federation on this replica.
    pub identity: String,
    /// This cluster.
    pub cluster: Identity,
    /// Why federation is suspended, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspended: Option<String>,
    /// Each peer.
    pub peers: Vec<PeerStatus>,
    /// Bounded metadata: `{peers, offers, grants, operations}` used and allowed.
    pub bounds: Bounds,
    /// Model copies from peers not complete yet: bytes held of total,
    /// state, and why one stopped.
    #[serde(default)]
    pub copies: Vec<crate::copies::CopyRecord>,
}

/// What is kept and what may be.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Bounds {
    /// Peers kept (of [`MAX_PEERS`]).
    pub peers: i64,
    /// Offers published (of [`MAX_OFFERS`]).
    pub offers: i64,
    /// Grants kept (of [`MAX_GRANTS`]).
    pub grants: i64,
    /// Operation receipts kept (of [`MAX_OPERATIONS`]).
    pub operations: i64,
}

text_enum! {
    /// Where a managed-service operation is (`federation_operations.state`).
    pub enum OperationState {
        /// Under way; its outcome is not known yet.
        Running => "running",
        /// Its answer is recorded.
        Done => "done",
    }
}

/// A federated mutation's receipt on its owner
/// (`GET /api/federation/peers/{peer}/operations/{id}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct OperationRecord {
    /// The operation id the caller chose.
    pub id: String,
    /// The grant it ran under.
    pub grant: String,
    /// SHA-256 of the canonical request (hex).
    pub request_sha256: String,
    /// `running` (uncertain until it ends) or `done`.
    pub state: OperationState,
    /// The recorded answer's status, once done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The recorded answer's body, once done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<serde_json::Value>,
    /// When it was first received (RFC 3339).
    pub created_at: String,
}
