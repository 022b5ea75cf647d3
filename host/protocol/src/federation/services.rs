//! Managed services (a deployment on the owner inside an
//! `inference:manage` grant) and the remote services a key may call.

use serde::{Deserialize, Serialize};

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

text_enum! {
    /// Where a managed service is (`federation_services.state`).
    pub enum ServiceState {
        /// No replicas wanted.
        Stopped => "stopped",
        /// Serving.
        Running => "running",
        /// Finishing its calls before it stops.
        Draining => "draining",
    }
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
    pub state: ServiceState,
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
