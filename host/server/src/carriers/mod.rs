//! This replica's carriers: the cluster's carrier set as it runs here (the
//! four seam holders), the worker sessions it holds, the relay to other
//! replicas, and the probe that shows fan-out and the work queue working.
//! (Named `carriers`, not `cluster`: a cluster is what federation links.)
//!
//! - [`seed`]: the carrier components a replica pushes into the plugin
//!   registry, and their resolution from it.
//! - [`start`]: reads (or seeds) the `cluster_carrier` row and starts its set.
//! - [`relay`]: streams to a worker whose session another replica holds.
//! - [`probe`]: a broadcast heard by every replica and a unit handled by one.

pub mod probe;
pub mod relay;
pub mod seed;
pub mod session;
pub mod start;

use std::sync::Arc;

use switchyard_carrier::{
    ComponentSpec, ControlSeam, FanOut, Holder, StreamsSeam, TunnelRegistry, WorkQueue,
};
use switchyard_protocol::carrier::ComponentRef;
use switchyard_runtime::Runtime;
use switchyard_store::cluster::ClusterCarrier;

/// A replica's carrier set and seams.
pub struct Carriers {
    /// The cluster row as this replica started it.
    pub row: ClusterCarrier,
    /// The plugin runtime carriers and tunnel sessions run on (limits of
    /// their own, apart from the policies').
    pub runtime: Arc<Runtime>,
    /// Fan-out (publish/subscribe).
    pub fanout: FanOut,
    /// The work queue.
    pub queue: WorkQueue,
    /// Control calls to nodes.
    pub control: Holder<dyn ControlSeam>,
    /// Streams to nodes' services.
    pub streams: Holder<dyn StreamsSeam>,
    /// The worker sessions this replica holds. They belong to the replica,
    /// not to a set: the `tunnel` set's streams seam is this registry.
    pub sessions: Arc<TunnelRegistry>,
    /// The component worker sessions run (`None`: the registry holds no
    /// tunnel component, and the connect endpoint answers 503).
    pub tunnel: Option<ComponentSpec>,
    /// The components a worker runs for this set, for the heartbeat's
    /// carrier news (workers fetch them from a frontend by name and version).
    pub worker_components: Vec<ComponentSpec>,
    /// What this replica heard of the probes.
    pub probe: probe::Probe,
    /// Tasks that hold the cluster (the probe's listeners), ended by [`Carriers::shutdown`].
    pub(crate) tasks: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl Carriers {
    /// The components a worker runs for this set, as the heartbeat's
    /// carrier news names them.
    pub fn news_components(&self) -> Vec<ComponentRef> {
        self.worker_components
            .iter()
            .map(|c| ComponentRef {
                name: c.name.clone(),
                version: c.version.clone(),
                sha256: c.sha256.clone(),
            })
            .collect()
    }

    /// Ends the tasks that hold the cluster, so that its carriers stop once
    /// the last handle goes (before the database they use does).
    pub fn shutdown(&self) {
        for task in self.tasks.lock().expect("tasks lock").drain(..) {
            task.abort();
        }
    }
}

impl std::fmt::Debug for Carriers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Carriers")
            .field("row", &self.row)
            .finish_non_exhaustive()
    }
}
