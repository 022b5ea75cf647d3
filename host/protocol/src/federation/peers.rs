//! Peers: this cluster's identity, join tokens, a join, and a peer and
//! its link as each side keeps them.

use serde::{Deserialize, Serialize};

text_enum! {
    /// A link's state as one replica sees it.
    pub enum LinkState {
        /// Authenticated and carrying streams.
        Up => "up",
        /// Dialling or proving keys.
        Connecting => "connecting",
        /// Not connected.
        Down => "down",
    }
}

/// This cluster's identity (`GET /api/federation/identity`). The private
/// key never leaves its file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Identity {
    /// A random id, chosen at the first start.
    pub cluster_id: String,
    /// The name peers see.
    pub label: String,
    /// The ed25519 public key (hex); `null` before a key is configured.
    pub public_key: Option<String>,
}

/// How long a join token works when its maker names no lifetime: a day.
pub const DEFAULT_JOIN_TOKEN_TTL_S: u64 = 24 * 3600;
/// The longest lifetime a join token may be given: 30 days.
pub const MAX_JOIN_TOKEN_TTL_S: u64 = 30 * 24 * 3600;
/// The most joins one token may be given.
pub const MAX_JOIN_TOKEN_USES: u32 = 128;

/// A new join token (`POST /api/federation/join-token`), shown once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct JoinToken {
    /// The token; the previous one stops working.
    pub join_token: String,
    /// Seconds until it stops working.
    #[serde(default)]
    pub expires_in_s: u64,
    /// How many joins it admits (each spent once a joining cluster proved
    /// its key).
    #[serde(default)]
    pub uses: u32,
}

/// The optional body of `POST /api/federation/join-token`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewJoinToken {
    /// Its lifetime in seconds, 60 to [`MAX_JOIN_TOKEN_TTL_S`]; default
    /// [`DEFAULT_JOIN_TOKEN_TTL_S`].
    #[serde(default)]
    pub ttl_s: Option<u64>,
    /// How many joins it admits, 1 to [`MAX_JOIN_TOKEN_USES`]; default 1.
    #[serde(default)]
    pub uses: Option<u32>,
}

/// `POST /api/federation/peers`: join the cluster at `url`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct JoinPeer {
    /// The peer's frontend (`http://host:port`).
    pub url: String,
    /// The peer's join token.
    pub join_token: String,
    /// The name this cluster gives the peer.
    pub label: String,
}

/// A link's state (`peer.link`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct LinkStatus {
    /// `up`, `connecting` or `down`.
    pub state: LinkState,
    /// Why it is not up, when it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Since when it is in this state (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
}

/// A peer as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Peer {
    /// Its id here.
    pub id: String,
    /// The name this cluster gives it (unique here).
    pub label: String,
    /// Where this cluster dials it; `null` when it dials this cluster.
    pub url: Option<String>,
    /// Its cluster id.
    pub cluster_id: String,
    /// Its ed25519 public key (hex), proved at every link.
    pub public_key: String,
    /// The link.
    pub link: LinkStatus,
    /// When its identity was last proved over the link (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_verified_at: Option<String>,
}
