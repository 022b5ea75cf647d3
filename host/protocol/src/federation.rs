//! Federation's messages: the admin API's bodies and answers under
//! `/api/federation/` (the CLI sends and reads them, the server builds
//! them), a grant's signed terms, and what crosses the link between two
//! clusters (the heads of its streams and its calls).
//!
//! Names: a *peer* is another cluster this one is paired with; a grant's
//! *owner* is the cluster whose resources it shares, its *grantee* the peer
//! that uses them. `outgoing` grants are this cluster's (it owns the
//! resources), `incoming` ones a peer gave this cluster.

use serde::{Deserialize, Serialize};

/// The most peers a cluster keeps.
pub const MAX_PEERS: i64 = 128;
/// The most offers a cluster publishes.
pub const MAX_OFFERS: i64 = 256;
/// The most grants a cluster keeps, both directions together.
pub const MAX_GRANTS: i64 = 256;
/// The most operation receipts a cluster keeps.
pub const MAX_OPERATIONS: i64 = 2048;
/// The longest a grant may live: a year.
pub const MAX_GRANT_LIFETIME_S: i64 = 365 * 24 * 3600;
/// The longest label, service id or operation id.
pub const MAX_NAME: usize = 64;

/// The stream service of a remote inference call: an [`InferenceCall`]
/// line, then the body; the owner answers as a worker does (an answer head
/// line, then the engine's body).
pub const INFERENCE_SERVICE: &str = "federation.inference";
/// The stream service of every other call: one [`LinkCall`] as JSON, one
/// [`LinkAnswer`] back.
pub const CALL_SERVICE: &str = "federation.call";
/// The stream service of one range of a granted model file (bulk lane).
pub use crate::copies::RANGE_SERVICE;

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

text_enum! {
    /// What kind of resource an offer publishes.
    pub enum OfferKind {
        /// A deployment shared as a service.
        Service => "service",
        /// A model revision.
        Model => "model",
        /// A node.
        Machine => "machine",
        /// An engine kind with a GPU shape, for managed services.
        Runtime => "runtime",
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
    pub state: String,
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
    pub status: String,
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

/// `POST /api/federation/offers`: publish a resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct NewOffer {
    /// A stable id (a service id peers call the service by); default: the
    /// resource's own name.
    #[serde(default)]
    pub id: Option<String>,
    /// What is offered.
    pub resource: Resource,
}

/// A resource an offer publishes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Resource {
    /// A deployment, called by its service id.
    Service {
        /// The deployment's id.
        deployment: String,
    },
    /// A model revision.
    Model {
        /// The model.
        model: String,
        /// The revision.
        revision: String,
    },
    /// A node.
    Machine {
        /// The node's id.
        node: String,
    },
    /// An engine kind with a GPU shape, for managed services.
    Runtime {
        /// `reference`, `llama-cpp` or `vllm`.
        engine: String,
        /// GPUs per replica.
        #[serde(default)]
        gpus_per_replica: i32,
    },
}

impl Resource {
    /// The offer kind.
    pub fn kind(&self) -> OfferKind {
        match self {
            Resource::Service { .. } => OfferKind::Service,
            Resource::Model { .. } => OfferKind::Model,
            Resource::Machine { .. } => OfferKind::Machine,
            Resource::Runtime { .. } => OfferKind::Runtime,
        }
    }

    /// The id an offer takes when none is given.
    pub fn default_id(&self) -> String {
        match self {
            Resource::Service { deployment } => deployment.clone(),
            Resource::Model { model, revision } => format!("{model}@{revision}"),
            Resource::Machine { node } => node.clone(),
            Resource::Runtime {
                engine,
                gpus_per_replica,
            } => format!("{engine}-{gpus_per_replica}gpu"),
        }
    }
}

/// A published offer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Offer {
    /// Its stable id.
    pub id: String,
    /// What it offers.
    pub resource: Resource,
    /// When it was published (RFC 3339).
    pub created_at: String,
}

/// A grant's state and what is left of it (`GET /api/federation/status`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct GrantStatus {
    /// The grant.
    pub id: String,
    /// `outgoing` or `incoming`.
    pub direction: Direction,
    /// `active`, `inactive`, `expired` or `revoked`.
    pub status: String,
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
    pub state: String,
    /// The recorded answer's status, once done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The recorded answer's body, once done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<serde_json::Value>,
    /// When it was first received (RFC 3339).
    pub created_at: String,
}

/// A managed service's configuration: a deployment on the owner, inside
/// an `inference:manage` grant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct ManagedServiceSpec {
    /// The service id (unique on the owner).
    pub service: String,
    /// The model revision, `model@revision` (in the grant).
    pub model: String,
    /// The runtime offer's id.
    pub runtime: String,
    /// The machines it may run on (each in the grant).
    pub machines: Vec<String>,
    /// Replicas when started [default: 1].
    #[serde(default = "one")]
    pub replicas: i32,
}

fn one() -> i32 {
    1
}

/// What a manage call does to a managed service.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum ManageAction {
    /// Create it, stopped.
    Create {
        /// Its configuration.
        spec: ManagedServiceSpec,
    },
    /// Change a stopped service's configuration.
    Configure {
        /// The service id.
        service: String,
        /// The revision the caller saw.
        revision: i64,
        /// The new configuration (its `service` must match).
        spec: ManagedServiceSpec,
    },
    /// Start its replicas.
    Start {
        /// The service id.
        service: String,
        /// The revision the caller saw.
        revision: i64,
    },
    /// Refuse new calls; calls in flight finish.
    Drain {
        /// The service id.
        service: String,
        /// The revision the caller saw.
        revision: i64,
    },
    /// Stop its replicas.
    Stop {
        /// The service id.
        service: String,
        /// The revision the caller saw.
        revision: i64,
    },
    /// Remove it.
    Remove {
        /// The service id.
        service: String,
        /// The revision the caller saw.
        revision: i64,
    },
}

/// `POST /api/federation/peers/{peer}/services`: one manage call, with the
/// operation id the caller chose and showed before sending it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct ManageCall {
    /// The grant it runs under.
    pub grant: String,
    /// The operation id (chosen by the caller; retries reuse it).
    pub operation_id: String,
    /// What to do.
    #[serde(flatten)]
    pub action: ManageAction,
}

/// A managed service on its owner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct ManagedService {
    /// The service id.
    pub service: String,
    /// The grant that created it.
    pub grant: String,
    /// Its revision: every change adds one; a call naming another is refused.
    pub revision: i64,
    /// `stopped`, `running` or `draining`.
    pub state: String,
    /// Its configuration.
    pub spec: ManagedServiceSpec,
    /// Its replicas ready now.
    pub ready_replicas: i64,
}

/// A remote service a key may call (`/v1/models` lists them as
/// `<peer label>/<service>`; `GET /api/federation/services`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct RemoteService {
    /// `<peer label>/<service>`: the model name on `/v1`.
    pub model: String,
    /// The peer.
    pub peer: String,
    /// The service id on the peer.
    pub service: String,
    /// The grant.
    pub grant: String,
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manage_call_is_flat_json() {
        let call = ManageCall {
            grant: "g".into(),
            operation_id: "op".into(),
            action: ManageAction::Start {
                service: "chat".into(),
                revision: 2,
            },
        };
        let json = serde_json::to_value(&call).unwrap();
        assert_eq!(json["action"], "start");
        assert_eq!(json["service"], "chat");
        let back: ManageCall = serde_json::from_value(json).unwrap();
        assert_eq!(back, call);
    }

    #[test]
    fn link_calls_round_trip() {
        let call = LinkCall::RequestAccess {
            id: "req".into(),
            operations: vec![Operation::Inference, Operation::InferenceManage],
            note: "n".into(),
        };
        let json = serde_json::to_string(&call).unwrap();
        assert!(json.contains("\"inference:manage\""));
        assert_eq!(serde_json::from_str::<LinkCall>(&json).unwrap(), call);
    }

    #[test]
    fn resources_are_tagged_by_kind() {
        let r: Resource =
            serde_json::from_str(r#"{"kind":"model","model":"m","revision":"r1"}"#).unwrap();
        assert_eq!(r.kind(), OfferKind::Model);
        assert_eq!(r.default_id(), "m@r1");
    }
}
