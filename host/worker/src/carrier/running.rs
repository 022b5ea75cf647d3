//! What runs for a set, and what waits to.

use std::sync::Arc;

use switchyard_carrier::ComponentSpec;
use switchyard_carrier::SetName;
use switchyard_carrier::dialled::SessionServer;
use switchyard_protocol::carrier::SetRef;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::Role;
use super::lanes::{Lanes, Probe};
use crate::services::InFlight;

/// A set that runs.
pub(super) struct Running {
    pub(super) name: SetName,
    /// What the news said of it last.
    pub(super) role: Role,
    /// When the news stopped naming it.
    pub(super) released_at: Option<Instant>,
    /// Streams and control calls running on it.
    pub(super) in_flight: InFlight,
    pub(super) probe: Option<Probe>,
    /// The tunnel component its lanes run, and its sessions (`tunnel` sets).
    pub(super) tunnel: Option<(ComponentSpec, Arc<Lanes>)>,
    pub(super) tasks: Vec<JoinHandle<()>>,
}

impl Running {
    pub(super) fn connected(&self) -> bool {
        self.probe.as_ref().is_some_and(Probe::connected)
    }

    pub(super) fn close(self) {
        self.tasks.iter().for_each(JoinHandle::abort);
        if let Some((_, lanes)) = &self.tunnel {
            lanes.close();
        }
    }
}

/// A set the news names that does not run yet.
pub(super) struct Pending {
    pub(super) set: SetRef,
    pub(super) role: Role,
    pub(super) due: Instant,
    pub(super) failures: u32,
}

/// The worker's sessions listener on `--address`: one for every `nats` set
/// that runs (two versions of the set share it; the newest attached names
/// the tunnel component new sessions run), with the streams it serves
/// counted.
pub(super) struct Direct {
    pub(super) task: JoinHandle<()>,
    pub(super) server: Arc<SessionServer>,
    pub(super) in_flight: InFlight,
}

impl Direct {
    /// Stops listening and ends the sessions.
    pub(super) fn close(self) {
        self.task.abort();
        self.server.close();
    }
}
