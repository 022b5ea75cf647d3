//! Carrier sets as values: which component serves which seam for `nats`
//! and `tunnel`, their subject roots and configuration, and one [`start`]
//! that a frontend and a worker both call.
//!
//! | set | fan-out and work queue | control | streams |
//! |---|---|---|---|
//! | `nats` | `nats` | `nats` (requests to the node's subject) | `tunnel` sessions the frontend dials to the worker's address |
//! | `tunnel` | `pgbus` | over streams | `tunnel` sessions the worker dials |
//!
//! Nothing here picks an implementation by matching a name elsewhere: the
//! set's [`SetName::entry`] says what runs, and [`start`] runs it from the
//! components the caller resolved (a frontend from the plugin registry, a
//! worker from what it fetched and verified).

use std::sync::Arc;

use switchyard_runtime::Runtime;
use switchyard_runtime::carrier::Endpoint;
use switchyard_runtime::inspect::PluginKind;

use crate::client::{Carrier, CarrierSetup};
use crate::component::ComponentSpec;
use crate::control::{CarrierControl, ControlSeam, StreamControl};
use crate::dialled::DialledSessions;
use crate::direct::Resolver;
use crate::message::SendError;
use crate::stream_seam::StreamsSeam;
use crate::tunnel::TunnelRegistry;

/// The subject roots every set carries (defined with the other contracts
/// between frontends and workers).
pub use switchyard_protocol::limits::SUBJECT_ROOTS as ROOTS;
/// The root the work queue claims units on (pgbus keeps it in a table of
/// its own, not in `pg_notify`).
const QUEUE_ROOT: &str = "work";

/// A named carrier set, the value an admin switches between.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SetName {
    /// NATS for fan-out, queue and control; streams ride sessions dialled
    /// to the worker's address.
    Nats,
    /// pgbus for fan-out and queue; tunnel sessions for control and streams.
    Tunnel,
}

impl SetName {
    /// Every set this build runs.
    pub const ALL: [SetName; 2] = [SetName::Nats, SetName::Tunnel];

    /// The name in the `cluster_carrier` row and the API.
    pub fn as_str(self) -> &'static str {
        match self {
            SetName::Nats => "nats",
            SetName::Tunnel => "tunnel",
        }
    }

    /// Parses [`SetName::as_str`]'s output.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|set| set.as_str() == s)
    }

    /// Every set's name, for messages (`nats and tunnel`).
    pub fn names() -> String {
        Self::ALL.map(SetName::as_str).join(" and ")
    }

    /// What serves each seam.
    pub fn entry(self) -> &'static SetEntry {
        match self {
            SetName::Nats => &NATS,
            SetName::Tunnel => &TUNNEL,
        }
    }
}

impl std::fmt::Display for SetName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a set's control calls ride.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlVia {
    /// Requests on the messages carrier (the node's subject).
    Messages,
    /// A stream to the node's control service.
    Streams,
}

/// Where a set's streams ride.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamsVia {
    /// TCP sessions the frontend dials to the worker's address (one per
    /// worker and lane), run by this tunnel component.
    Dialled(&'static str),
    /// Websocket sessions the worker dials, run by this tunnel component.
    Tunnel(&'static str),
}

impl StreamsVia {
    /// The tunnel component the sessions run.
    pub fn component(self) -> &'static str {
        match self {
            StreamsVia::Dialled(name) | StreamsVia::Tunnel(name) => name,
        }
    }
}

/// One set of the catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetEntry {
    /// The set.
    pub name: SetName,
    /// The carrier component fan-out and the work queue ride.
    pub messages: &'static str,
    /// Whether that carrier runs on the frontends' PostgreSQL.
    pub messages_on_database: bool,
    /// Where control calls ride.
    pub control: ControlVia,
    /// Where streams ride.
    pub streams: StreamsVia,
}

const NATS: SetEntry = SetEntry {
    name: SetName::Nats,
    messages: "nats",
    messages_on_database: false,
    control: ControlVia::Messages,
    streams: StreamsVia::Dialled("tunnel"),
};

const TUNNEL: SetEntry = SetEntry {
    name: SetName::Tunnel,
    messages: "pgbus",
    messages_on_database: true,
    control: ControlVia::Streams,
    streams: StreamsVia::Tunnel("tunnel"),
};

/// A component a set needs: its plugin name and kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Needed {
    /// Plugin name in the registry.
    pub name: &'static str,
    /// The kind (and so the world) it must be.
    pub kind: PluginKind,
}

impl SetEntry {
    /// The components `side` runs for this set: a frontend runs every seam;
    /// a worker runs the messages carrier only where control rides it;
    /// both run the tunnel component (every set's streams ride sessions).
    pub fn components(&self, side: SideKind) -> Vec<Needed> {
        let mut needed = Vec::new();
        if side == SideKind::Frontend || self.control == ControlVia::Messages {
            needed.push(Needed {
                name: self.messages,
                kind: PluginKind::Carrier,
            });
        }
        needed.push(Needed {
            name: self.streams.component(),
            kind: PluginKind::Tunnel,
        });
        needed
    }

    /// The messages carrier's configuration.
    fn messages_setup(&self, env: &SetEnv, side: &Side) -> Result<CarrierSetup, SetError> {
        match self.name {
            SetName::Nats => {
                let url = env.nats_url.clone().ok_or(SetError::NeedsNatsUrl)?;
                // The component takes `host:port`; `nats://host:port` is the
                // same server (the settings keep the short form already).
                let url = url
                    .strip_prefix("nats://")
                    .map(str::to_string)
                    .unwrap_or(url);
                Ok(CarrierSetup {
                    config: serde_json::json!({"servers": [url], "roots": ROOTS}).to_string(),
                    database_url: None,
                    // The operator's --nats-url is the only place the plugin may dial.
                    allowed_endpoints: vec![Endpoint::Tcp(url)],
                })
            }
            SetName::Tunnel => {
                let Side::Frontend(Frontend {
                    database_url: Some(database_url),
                    ..
                }) = side
                else {
                    return Err(SetError::NeedsDatabase);
                };
                let fanout_roots: Vec<&str> =
                    ROOTS.into_iter().filter(|r| *r != QUEUE_ROOT).collect();
                Ok(CarrierSetup {
                    config: serde_json::json!({"roots": fanout_roots, "queue_roots": [QUEUE_ROOT]})
                        .to_string(),
                    database_url: Some(database_url.clone()),
                    // The host's database, dialled by the host: no TCP endpoint at all.
                    allowed_endpoints: vec![Endpoint::Database],
                })
            }
        }
    }
}

/// Which side of the cluster starts a set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SideKind {
    /// A frontend replica.
    Frontend,
    /// A worker.
    Worker,
}

/// What a frontend replica brings to a set.
pub struct Frontend {
    /// The database login a set whose messages carrier runs on PostgreSQL
    /// uses ([`SetEntry::messages_on_database`]).
    pub database_url: Option<String>,
    /// The replica's worker sessions: the `tunnel` set's streams seam.
    pub sessions: Arc<TunnelRegistry>,
    /// Where the `nats` set dials a node's sessions.
    pub resolve: Resolver,
}

impl std::fmt::Debug for Frontend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The database URL may hold a password.
        f.debug_struct("Frontend").finish_non_exhaustive()
    }
}

/// Which side starts a set, with what that side brings.
#[derive(Debug)]
pub enum Side {
    /// A frontend replica.
    Frontend(Frontend),
    /// A worker (it serves; it opens nothing to others).
    Worker,
}

impl Side {
    /// The side without what it brings.
    pub fn kind(&self) -> SideKind {
        match self {
            Side::Frontend(_) => SideKind::Frontend,
            Side::Worker => SideKind::Worker,
        }
    }
}

/// What both sides bring to a set.
#[derive(Clone)]
pub struct SetEnv {
    /// The runtime carriers and sessions run on.
    pub runtime: Arc<Runtime>,
    /// The components, resolved and pinned (at least those
    /// [`SetEntry::components`] names for the side).
    pub components: Vec<ComponentSpec>,
    /// The NATS server (`nats` set; may hold credentials, never shown).
    pub nats_url: Option<String>,
}

impl std::fmt::Debug for SetEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SetEnv")
            .field("components", &self.components)
            .finish_non_exhaustive()
    }
}

impl SetEnv {
    fn component(&self, set: SetName, name: &str) -> Result<ComponentSpec, SetError> {
        self.components
            .iter()
            .find(|c| c.name == name)
            .cloned()
            .ok_or_else(|| SetError::MissingComponent {
                set,
                name: name.to_string(),
            })
    }
}

/// Why a set did not start.
#[derive(Debug, thiserror::Error)]
pub enum SetError {
    /// A component the set runs was not given.
    #[error(
        "the `{set}` carrier set needs the `{name}` component, which is not in the plugin registry"
    )]
    MissingComponent {
        /// The set.
        set: SetName,
        /// The component's name.
        name: String,
    },
    /// The `nats` set without a NATS server.
    #[error("the cluster's carrier is `nats`: give this process the NATS URL (--nats-url)")]
    NeedsNatsUrl,
    /// A set whose fan-out runs on PostgreSQL, on a side without the database.
    #[error("this carrier set's fan-out runs on PostgreSQL, which only frontends reach")]
    NeedsDatabase,
    /// The messages carrier did not start.
    #[error("the `{name}` carrier did not start: {error}")]
    Carrier {
        /// The component's name.
        name: String,
        /// What failed.
        error: SendError,
    },
}

/// A started set: the seams the side runs. A frontend gets all four
/// (fan-out and the work queue ride `messages`); a worker gets `messages`
/// where control rides it, and `tunnel`.
pub struct Seams {
    /// The set.
    pub name: SetName,
    /// The carrier fan-out and the work queue ride (on a worker, the one
    /// control verbs are served on).
    pub messages: Option<Arc<Carrier>>,
    /// Control calls to nodes (a frontend's).
    pub control: Option<Arc<dyn ControlSeam>>,
    /// Streams to nodes' services (a frontend's).
    pub streams: Option<Arc<dyn StreamsSeam>>,
    /// The component the set's tunnel sessions run (the worker dials them
    /// or serves them by [`SetEntry::streams`]).
    pub tunnel: Option<ComponentSpec>,
}

impl std::fmt::Debug for Seams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Seams")
            .field("name", &self.name)
            .field("messages", &self.messages.as_ref().map(|c| c.name()))
            .field("tunnel", &self.tunnel)
            .finish_non_exhaustive()
    }
}

/// Starts `set` on `side` from the components in `env` (I/O runs on the
/// current tokio runtime; the messages carrier connects in the background:
/// see [`Carrier::wait_ready`]).
pub fn start(set: SetName, env: &SetEnv, side: Side) -> Result<Seams, SetError> {
    let entry = set.entry();
    let wanted = entry.components(side.kind());
    // Checked before the carrier starts: a set missing it starts nothing.
    let tunnel = env.component(set, entry.streams.component())?;
    let mut messages = None;
    if wanted.iter().any(|n| n.name == entry.messages) {
        let component = env.component(set, entry.messages)?;
        let setup = entry.messages_setup(env, &side)?;
        let carrier = Carrier::start(component, setup, env.runtime.clone()).map_err(|error| {
            SetError::Carrier {
                name: entry.messages.to_string(),
                error,
            }
        })?;
        messages = Some(carrier);
    }
    let (control, streams) = match side {
        Side::Worker => (None, None),
        Side::Frontend(frontend) => {
            let streams: Arc<dyn StreamsSeam> = match entry.streams {
                StreamsVia::Dialled(_) => Arc::new(DialledSessions::new(
                    env.runtime.clone(),
                    tunnel.clone(),
                    frontend.resolve,
                )),
                StreamsVia::Tunnel(_) => frontend.sessions,
            };
            let control: Arc<dyn ControlSeam> = match (entry.control, &messages) {
                (ControlVia::Messages, Some(carrier)) => {
                    Arc::new(CarrierControl::new(carrier.clone()))
                }
                _ => Arc::new(StreamControl::new(streams.clone())),
            };
            (Some(control), Some(streams))
        }
    };
    Ok(Seams {
        name: set,
        messages,
        control,
        streams,
        tunnel: Some(tunnel),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_sets_are_none() {
        for set in SetName::ALL {
            assert_eq!(SetName::parse(set.as_str()), Some(set));
            assert_eq!(set.entry().name, set);
        }
        assert_eq!(SetName::parse("carrier-pigeon"), None);
        assert_eq!(SetName::names(), "nats and tunnel");
    }

    #[test]
    fn a_worker_runs_only_what_serves_it() {
        let names = |set: SetName, side| {
            set.entry()
                .components(side)
                .into_iter()
                .map(|n| (n.name, n.kind))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(SetName::Nats, SideKind::Frontend),
            [
                ("nats", PluginKind::Carrier),
                ("tunnel", PluginKind::Tunnel)
            ]
        );
        assert_eq!(
            names(SetName::Nats, SideKind::Worker),
            [
                ("nats", PluginKind::Carrier),
                ("tunnel", PluginKind::Tunnel)
            ]
        );
        assert_eq!(
            names(SetName::Tunnel, SideKind::Frontend),
            [
                ("pgbus", PluginKind::Carrier),
                ("tunnel", PluginKind::Tunnel)
            ]
        );
        // A worker reaches no database: pgbus is the frontends' alone.
        assert_eq!(
            names(SetName::Tunnel, SideKind::Worker),
            [("tunnel", PluginKind::Tunnel)]
        );
    }

    #[tokio::test]
    async fn a_missing_component_is_named() {
        let env = SetEnv {
            runtime: Runtime::new(switchyard_runtime::RuntimeConfig::for_carriers(None)).unwrap(),
            components: Vec::new(),
            nats_url: None,
        };
        let err = start(SetName::Tunnel, &env, Side::Worker).unwrap_err();
        assert!(
            matches!(&err, SetError::MissingComponent { name, .. } if name == "tunnel"),
            "{err}"
        );
    }
}
