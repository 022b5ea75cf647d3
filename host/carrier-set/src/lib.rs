//! A frontend replica's carriers: the cluster's carrier set as it runs here
//! (the four seam holders), the worker sessions it holds, the live switch
//! (the follower every replica runs, the leader's pure decision and its
//! move), the relay to other replicas, and the probe that shows fan-out and
//! the work queue working. The carrier runtime itself (seams, reactor,
//! tunnel) is `switchyard-carrier`'s; the HTTP side (status, sessions'
//! upgrade) is the server's.
//!
//! # Layout
//! - [`seed`]: the carrier components a replica pushes into the plugin
//!   registry, and their resolution from it.
//! - [`start`]: reads (or seeds) the `cluster_carrier` row and starts its set.
//! - [`build`]: builds a set from the components the row pins; whether a
//!   set could be built here.
//! - [`follow`]: every replica follows the row: builds a change's target
//!   beside the active set, swaps at the commit, releases at the settle,
//!   and reports what it built in `instances`.
//! - [`decide`]: the leader's next move, a pure function of the row and
//!   the replicas' and workers' reports; [`lead`]: the replica holding the
//!   leader lock reads them and carries the move out.
//! - [`units`]: work units left on a released pgbus queue move to the new set.
//! - [`news`]: the carrier news a heartbeat answer carries.
//! - [`nats_url`]: a NATS URL as the settings keep it, checked and masked.
//! - [`relay`]: streams to a worker whose session another replica holds.
//! - [`probe`]: a broadcast heard by every replica and a unit handled by one.

pub mod build;
pub mod decide;
pub mod follow;
pub mod lead;
pub mod nats_url;
pub mod news;
pub mod probe;
pub mod relay;
pub mod seed;
pub mod start;
pub mod units;

use std::sync::Arc;

use arc_swap::{ArcSwap, ArcSwapOption};
use switchyard_carrier::window::Attachments;
use switchyard_carrier::{
    ComponentSpec, ControlSeam, FanOut, Holder, StreamsSeam, TunnelRegistry, WorkQueue,
};
use switchyard_protocol::carrier::{CarrierNews, ClusterSettings};
use switchyard_runtime::Runtime;
use switchyard_store::cluster::ClusterCarrier;

use build::{Builder, BuiltSet};

/// How recent an `instances` heartbeat must be for a replica to count as
/// live (the switch waits for live replicas; the status lists them).
pub const LIVE: std::time::Duration = std::time::Duration::from_secs(5);

/// A replica's carrier sets and seams.
pub struct Carriers {
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
    /// The component new worker sessions run (`None`: the registry holds
    /// no tunnel component, and the connect endpoint answers 503). A
    /// session keeps the version it began with.
    pub tunnel: ArcSwapOption<ComponentSpec>,
    /// What this replica heard of the probes.
    pub probe: probe::Probe,
    /// This replica's id.
    pub instance_id: String,
    /// Builds sets from the registry.
    pub(crate) builder: Builder,
    /// The row and settings as this replica last read them.
    view: ArcSwap<View>,
    /// The sets built here.
    pub(crate) built: tokio::sync::Mutex<Built>,
    /// What each worker reported it is attached to (the window routes by it).
    pub(crate) attachments: Attachments,
    /// Tasks that hold the cluster (the probe's listeners), ended by [`Carriers::shutdown`].
    pub(crate) tasks: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

/// The cluster row and settings as a replica last read them.
#[derive(Debug, Clone)]
pub struct View {
    /// The `cluster_carrier` row.
    pub row: ClusterCarrier,
    /// The cluster's settings.
    pub settings: ClusterSettings,
    /// Workers that follow the carrier (approved, not offline), as last
    /// counted during a change; 0 while the row is stable.
    pub workers: usize,
}

/// The sets a replica runs: the active one, the target of a prepare, and
/// the set that drains after a commit.
#[derive(Debug)]
pub struct Built {
    /// Where publishes, submits, control calls and streams go.
    pub active: BuiltSet,
    /// Built beside the active set during a prepare.
    pub target: Option<BuiltSet>,
    /// Kept after a commit until the change settles.
    pub draining: Option<BuiltSet>,
    /// The row epoch this replica acted on last.
    pub epoch: i64,
    /// The last target that failed to build here, and when.
    pub failed: Option<(switchyard_protocol::carrier::SetKey, std::time::Instant)>,
}

impl Built {
    /// The labels `instances.built` records.
    pub fn labels(&self) -> Vec<String> {
        std::iter::once(&self.active)
            .chain(&self.target)
            .chain(&self.draining)
            .map(|set| set.key.label())
            .collect()
    }
}

impl Carriers {
    /// The row and settings as this replica last read them.
    pub fn view(&self) -> Arc<View> {
        self.view.load_full()
    }

    /// The carrier news a heartbeat answer carries.
    pub fn news(&self) -> CarrierNews {
        let view = self.view();
        news::news(&view.row, &view.settings, view.workers)
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
            .field("row", &self.view().row)
            .finish_non_exhaustive()
    }
}
