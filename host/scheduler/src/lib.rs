//! Deployments to running replicas. The reconciler (one frontend at a time,
//! under an advisory lock) compares what deployments want with the replicas
//! placed and what workers report, places missing replicas ([`fit`] over
//! each node's [`view`]; a deployment that cannot be placed keeps the
//! reason in its `pending_reason`), asks the `deploy` admission chain
//! ([`admit`]), stages the files ([`staging`]) and starts the engines by
//! control verbs (`lifecycle`); replicas on nodes silent for longer than the grace are
//! placed again. Every frontend refreshes its routing table from the same
//! rows.
//!
//! Replica lifecycle. A pass places at most
//! [`reconcile::MAX_PLACEMENTS_PER_PASS`] replicas; the rest wait for the
//! next. Transient states hold a lease from the database clock
//! (`state_until`): `staging` is renewed while its frontend's task lives and
//! while bytes move, and a replica past it is placed again (its frontend
//! died); `stopping` is claimed by a pass, drained, and forgotten once the
//! worker confirms, or stopped once more and forgotten when the claim's
//! lease runs out. A `failed` replica is tried again after a backoff that
//! doubles with each failure in a row (`failures`, `retry_at` on the row). A
//! deleted deployment's replicas go through `stopping` and keep their GPUs
//! until then. Each heartbeat answer names the engines the cluster knows on
//! the node; the worker stops the others after a few answers, and until it
//! does the scheduler counts the GPUs of every engine a node reports running.
//!
//! [`routing`] is what the passes feed: which replica serves a `/v1`
//! request.

pub mod admit;
pub mod fit;
mod lifecycle;
pub mod preview;
pub mod reconcile;
pub mod routing;
pub mod staging;
pub mod view;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use switchyard_store::Store;

use crate::routing::Routing;
use switchyard_binding::admission::Admission;
use switchyard_carrier_set::Carriers;
use switchyard_library::Library;

/// What this frontend's reconciler works with: the handles it needs, not
/// the whole state of the replica (cheap to clone into a bring-up task).
#[derive(Debug, Clone)]
pub struct Scheduler {
    /// The database.
    pub store: Store,
    /// The chains; the reconciler asks the `deploy` one.
    pub admission: Arc<Admission>,
    /// Control calls and streams to the nodes; `None` without a carrier set
    /// (nothing is placed then; the routing table is still refreshed).
    pub carriers: Option<Arc<Carriers>>,
    /// Where the files staged on the nodes come from.
    pub library: Library,
    /// This replica's id, to ask the others for blobs its library lacks.
    pub instance_id: String,
    /// The routing table each pass refreshes.
    pub routing: Arc<Routing>,
    /// How long a node may be silent before its replicas move.
    pub node_grace: Duration,
    /// Replicas being brought up by a task of this frontend (empty at start).
    pub in_progress: Arc<Mutex<HashSet<String>>>,
}

/// Why a reconcile pass stopped early: it is logged, and the next pass
/// (a second later) starts over from the rows.
#[derive(Debug, thiserror::Error)]
pub enum PassError {
    /// The database.
    #[error("the database: {0}")]
    Store(#[from] switchyard_store::StoreError),
    /// A deployment names a revision that is no longer registered.
    #[error("deployment {0}: its model revision is gone")]
    RevisionGone(String),
    /// The `deploy` chain could not judge a placement.
    #[error("the deploy chain: {0}")]
    DeployChain(String),
}

/// Why a replica did not come up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BringUpError {
    /// The node could not be reached yet (no session, a deadline): the
    /// replica stays placed and the next pass tries again.
    Unreachable(String),
    /// The node refused or the files are wrong: the replica has failed.
    Failed(String),
}

impl BringUpError {
    /// From a control call's error: unreachable when it never got there.
    pub(crate) fn from_control(what: &str, e: switchyard_carrier::ControlError) -> Self {
        use switchyard_carrier::ControlError;
        match e {
            ControlError::NotDelivered(_) | ControlError::Timeout => {
                BringUpError::Unreachable(format!("{what}: {e}"))
            }
            other => BringUpError::Failed(format!("{what}: {other}")),
        }
    }
}
