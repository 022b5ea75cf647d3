//! What crosses the link between two clusters: the head of a remote
//! inference stream, a call and its answer.

use serde::{Deserialize, Serialize};

use super::{GrantTerms, ManageCall, Operation};

/// The head of a remote inference stream ([`INFERENCE_SERVICE`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InferenceCall {
    /// The grant it claims.
    pub grant: String,
    /// The service id.
    pub service: String,
    /// `/v1/chat/completions` and the like.
    pub path: String,
    /// The tokens it may produce (its `max_tokens`), 0 when not said.
    #[serde(default)]
    pub tokens: u64,
    /// Clusters the request crossed already (loop prevention): a call that
    /// crossed once is not forwarded again.
    #[serde(default)]
    pub hops: Vec<String>,
    /// The caller's span (W3C `traceparent`), so that the owner's spans
    /// join the caller's trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
}

/// A call over the link ([`CALL_SERVICE`]), from either side.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "call", rename_all = "snake_case")]
pub enum LinkCall {
    /// The grantee asks for access.
    RequestAccess {
        /// The request's id.
        id: String,
        /// The operations asked for.
        operations: Vec<Operation>,
        /// What for.
        note: String,
    },
    /// The owner offers a grant, signed by its key.
    OfferGrant {
        /// The terms.
        terms: GrantTerms,
        /// The owner's signature.
        owner_signature: String,
    },
    /// The grantee completes a grant with its signature.
    CompleteGrant {
        /// The grant.
        id: String,
        /// The grantee's signature of the terms.
        grantee_signature: String,
    },
    /// The owner revoked a grant.
    RevokeGrant {
        /// The grant.
        id: String,
    },
    /// The grantee asks the owner what a grant has used and whether it holds.
    RefreshGrant {
        /// The grant.
        id: String,
    },
    /// A managed-service mutation.
    Manage(ManageCall),
    /// The managed services a grant created.
    ListServices {
        /// The grant.
        grant: String,
    },
    /// The owner's receipt of an operation.
    InspectOperation {
        /// The operation id.
        id: String,
    },
    /// The manifest of a model revision a `models:transfer` grant lists
    /// (a [`crate::copies::ModelManifest`]).
    InspectModel {
        /// The grant.
        grant: String,
        /// The model.
        model: String,
        /// The revision.
        revision: String,
    },
}

/// The answer to a [`LinkCall`]: the status and JSON body the owner's API
/// would have answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkAnswer {
    /// An HTTP status.
    pub status: u16,
    /// The body (an `{"error":{code,message}}` when the status is not 2xx).
    pub body: serde_json::Value,
}
