//! The cluster's carrier set on this replica: the four seam holders, the
//! worker sessions it holds (the `tunnel` set), the relay to other
//! replicas, and the probe that shows fan-out and the work queue working.
//!
//! - [`start`]: reads (or seeds) the `cluster_carrier` row and starts its set.
//! - [`relay`]: streams to a worker whose session another replica holds.
//! - [`probe`]: a broadcast heard by every replica and a unit handled by one.

pub mod probe;
pub mod relay;
pub mod session;
pub mod start;

use std::sync::Arc;

use switchyard_carrier::{
    ControlSeam, FanOut, Holder, StreamsSeam, TunnelRegistry, TunnelSpec, WorkQueue,
};
use switchyard_runtime::Runtime;
use switchyard_store::cluster::ClusterCarrier;

/// The carrier sets this build runs.
pub const CARRIER_SETS: [&str; 2] = ["nats", "tunnel"];

/// A replica's carrier set and seams.
pub struct Cluster {
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
    /// The worker sessions held here (the `tunnel` set), with the plugin
    /// that runs each.
    pub tunnel: Option<(Arc<TunnelRegistry>, TunnelSpec)>,
    /// What this replica heard of the probes.
    pub probe: probe::Probe,
    /// Tasks that hold the cluster (the probe's listeners), ended by [`Cluster::shutdown`].
    pub(crate) tasks: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl Cluster {
    /// Ends the tasks that hold the cluster, so that its carriers stop once
    /// the last handle goes (before the database they use does).
    pub fn shutdown(&self) {
        for task in self.tasks.lock().expect("tasks lock").drain(..) {
            task.abort();
        }
    }
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("row", &self.row)
            .finish_non_exhaustive()
    }
}
