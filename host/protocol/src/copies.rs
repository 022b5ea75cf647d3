//! Verified model copies between clusters: the manifest an owner shows
//! for a granted revision, the head of each range stream on the bulk lane
//! and its answer, and the grantee's copy records
//! (`/api/federation/copies`).
//!
//! A copy asks the owner for immutable ranges of at most [`MAX_RANGE`]
//! bytes, each on a fresh stream of the bulk lane ([`RANGE_SERVICE`]):
//! a [`RangeRequest`] line; the owner answers a [`RangeHead`] line and,
//! when it is `200`, exactly `length` bytes.

use serde::{Deserialize, Serialize};

use crate::models::ModelFile;

/// The stream service that serves one range of a granted model file (bulk
/// lane): a [`RangeRequest`] line, then a [`RangeHead`] line and the bytes.
pub const RANGE_SERVICE: &str = "federation.model-range";

/// The most bytes one range asks for: a lost stream repeats at most this
/// much (and charges it again), and a range fits the owner's reads.
pub const MAX_RANGE: u64 = 64 << 20;

/// The most copy records a cluster keeps (finished ones included; delete
/// some to make room).
pub const MAX_COPIES: i64 = 256;

/// A granted revision as its owner shows it: never any upstream URL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct ModelManifest {
    /// The model's id.
    pub id: String,
    /// The immutable revision.
    pub revision: String,
    /// Its licence, as its importer said.
    pub licence: Option<String>,
    /// Its files with their sizes and SHA-256 digests.
    pub files: Vec<ModelFile>,
}

impl ModelManifest {
    /// Bytes of all its files.
    pub fn size(&self) -> u64 {
        self.files.iter().map(|f| f.size.max(0) as u64).sum()
    }
}

/// The head line of a [`RANGE_SERVICE`] stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RangeRequest {
    /// The grant it claims.
    pub grant: String,
    /// The model.
    pub model: String,
    /// The revision.
    pub revision: String,
    /// The file's path in the revision.
    pub path: String,
    /// The SHA-256 the copy started with (the owner refuses with
    /// `content_changed` when the file is no longer this one).
    pub sha256: String,
    /// The file's size the copy started with.
    pub size: u64,
    /// The first byte.
    pub offset: u64,
    /// How many bytes (at most [`MAX_RANGE`]).
    pub length: u64,
}

/// The owner's answer line to a [`RangeRequest`]; `200` is followed by
/// exactly the bytes asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RangeHead {
    /// An HTTP status.
    pub status: u16,
    /// A stable code when refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// For the operator, when refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

text_enum! {
    /// Where a copy stands.
    pub enum CopyState {
        /// Ranges are being fetched.
        Running => "running",
        /// The link broke: waiting before an automatic reconnect.
        Waiting => "waiting",
        /// Paused by an operator; resume goes on from the durable offset.
        Paused => "paused",
        /// The reconnect allowance is spent; only a resume goes on.
        Interrupted => "interrupted",
        /// Stopped for a reason a reconnect does not mend (`code`).
        Stopped => "stopped",
        /// Every file is verified and the revision is registered.
        Complete => "complete",
    }
}

impl CopyState {
    /// Whether a replica runs the copy in this state.
    pub fn is_active(self) -> bool {
        matches!(self, CopyState::Running | CopyState::Waiting)
    }
}

/// `POST /api/federation/copies`: copy (or resume copying) a revision a
/// peer granted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct NewCopy {
    /// The owner (label or id).
    pub peer: String,
    /// The model.
    pub model: String,
    /// The revision.
    pub revision: String,
}

/// One file of a copy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct CopyFile {
    /// Its path in the revision.
    pub path: String,
    /// Its size.
    pub size: u64,
    /// Its declared SHA-256.
    pub sha256: String,
    /// Bytes held durably (fsync'd before this was recorded).
    pub offset: u64,
    /// Verified and in the library.
    pub complete: bool,
}

/// One automatic reconnect of the current acquisition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Reconnect {
    /// When the wait ended (RFC 3339, milliseconds).
    pub at: String,
    /// How long it waited, measured.
    pub waited_ms: u64,
}

/// A copy of a peer's model revision into this cluster's library.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct CopyRecord {
    /// Its id.
    pub id: String,
    /// The owner's label (kept after the peer is forgotten).
    pub peer: String,
    /// The grant it copies under.
    pub grant: String,
    /// The model.
    pub model: String,
    /// The revision.
    pub revision: String,
    /// Where it stands.
    pub state: CopyState,
    /// Why it stopped or was interrupted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// The detail, for the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Bytes held durably.
    pub bytes_held: u64,
    /// Bytes of all its files.
    pub bytes_total: u64,
    /// Its files.
    pub files: Vec<CopyFile>,
    /// The automatic reconnects of the current acquisition (at most three).
    pub reconnects: Vec<Reconnect>,
    /// When it was made (RFC 3339).
    pub created_at: String,
    /// When it last changed (RFC 3339).
    pub updated_at: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::round_trip;

    #[test]
    fn a_range_head_leaves_out_what_it_lacks() {
        let ok = RangeHead {
            status: 200,
            code: None,
            message: None,
        };
        assert_eq!(serde_json::to_string(&ok).unwrap(), r#"{"status":200}"#);
        round_trip(&ok);
    }

    #[test]
    fn copy_states_are_text() {
        assert_eq!(
            serde_json::to_string(&CopyState::Interrupted).unwrap(),
            "\"interrupted\""
        );
        assert!(CopyState::Waiting.is_active());
        assert!(!CopyState::Paused.is_active());
    }
}
