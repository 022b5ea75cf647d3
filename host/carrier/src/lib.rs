//! The host side of carriers.
//!
//! A carrier plugin is a sans-IO protocol engine; this crate gives it I/O.
//! Its reactor (the plugin and what it has open) runs on whichever task
//! hands it an event: the connection task that read bytes, the caller that
//! published, the timer that fired. That task calls the plugin (calls are
//! short, bounded by the plugin's deadline) and performs the actions it
//! answers with, writing sockets directly. ("Engine" in Switchyard means an
//! inference engine on a worker, nothing else here.)
//!
//! # Layout
//! - [`message`]: messages, errors and the public types of a carrier.
//! - `reactor`: events in, plugin calls, actions out; `reactor/core.rs`:
//!   the queue of events and who runs it;
//! - `combining`: state that whichever task hands it work runs, one at a
//!   time (a carrier's reactor, a tunnel session's driver);
//!   `reactor/bypass.rs`: held payloads and windowed reads with claimed bodies (0.3.0).
//! - [`io`]: connection tasks (dial, read, write) and the timer.
//! - `payloads`: payloads the host holds for a 0.3.0 plugin (named by id, used once).
//! - `intake`: a connection's unparsed bytes and the body a 0.3.0 plugin claimed.
//! - `database`: database connections (LISTEN, queries) for carriers on PostgreSQL.
//! - [`client`]: [`Carrier`], the handle host code uses (publish, subscribe, request).
//! - [`component`]: [`ComponentSpec`], a carrier or tunnel component pinned by its SHA-256.
//! - [`set`]: carrier sets as values (`nats`, `tunnel`): which component serves
//!   which seam, and one [`set::start`] for frontends and workers.
//! - [`conformance`]: the suite every carrier passes, also a CLI command.
//! - [`fanout`]: the fan-out holder: an atomic pointer to the active carrier and
//!   a registry of subscriptions that can listen on two carriers at once.
//! - [`queue`]: the work-queue holder (requests and queue groups on a carrier).
//! - [`control`]: the control seam (over streams, or over carrier requests).
//! - [`stream`], [`stream_seam`]: a byte stream to a worker's service and the streams seam.
//! - [`tunnel`]: a websocket session driven by the tunnel plugin, and the
//!   [`TunnelRegistry`] of the sessions a replica holds.
//! - [`direct`]: the TCP connection dialled to a worker's address, and its hello.
//! - [`dialled`]: the `nats` set's streams: tunnel sessions over those
//!   connections, one per worker and lane.
//! - [`framed`]: a stream over any message transport (the relay's websocket).
//! - [`handshake`]: the answer line of a stream open (direct dials and the
//!   relay) and the direct streams' challenge and hello; `refusal.rs`: [`Refusal`].
//! - [`holder`]: the atomic pointer the control and streams seams sit behind.
//! - [`leftovers`]: work units a released pgbus queue still holds, handed
//!   over to the active carrier (the host's one reader of pgbus's table).
//! - [`window`]: the control and streams seams between a change's commit and
//!   its settle, routing each call by what its worker is attached to.

pub mod allocator;
pub mod client;
mod combining;
pub mod component;
pub mod conformance;
pub mod control;
mod database;
pub mod dialled;
pub mod direct;
pub mod fanout;
pub mod framed;
pub mod handshake;
pub mod holder;
mod intake;
mod io;
pub mod leftovers;
pub mod message;
mod payloads;
pub mod queue;
mod reactor;
mod refusal;
pub mod set;
pub mod stream;
pub mod stream_seam;
pub mod tunnel;
pub mod window;

pub use client::{Carrier, CarrierSetup, Subscription, endpoints_named_by};
pub use component::{ComponentSpec, DigestMismatch};
pub use control::{ControlError, ControlRefusal, ControlSeam};
pub use fanout::FanOut;
pub use holder::Holder;
pub use message::{CarrierStats, Message, SendError};
pub use queue::WorkQueue;
pub use reactor::PluginState;
pub use refusal::Refusal;
pub use set::{Seams, SetName};
pub use stream::{Stream, StreamError, StreamReader, StreamWriter};
pub use stream_seam::{Lane, StreamsSeam};
pub use switchyard_runtime::carrier::Endpoint;
pub use tunnel::{TunnelRegistry, TunnelSession};
