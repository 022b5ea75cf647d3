//! The host side of carriers.
//!
//! A carrier plugin is a sans-IO protocol engine; this crate gives it I/O.
//! The plugin lives on an engine thread of its own (its calls are
//! synchronous, and WASI's synchronous host calls must not run on an async
//! worker); tokio tasks own the sockets and timers and hand events to that
//! thread, which performs the actions the plugin answers with.
//!
//! # Layout
//! - [`message`]: messages, errors and the public types of a carrier.
//! - [`engine`]: the engine thread: events in, plugin calls, actions out.
//! - [`io`]: connection tasks (dial, read, write) and the timer.
//! - `database`: database connections (LISTEN, queries) for carriers on PostgreSQL.
//! - [`client`]: [`Carrier`], the handle host code uses (publish, subscribe, request).
//! - [`conformance`]: the suite every carrier passes, also a CLI command.
//! - [`fanout`]: the fan-out holder: an atomic pointer to the active carrier and
//!   a registry of subscriptions that can listen on two carriers at once.
//! - [`queue`]: the work-queue holder (requests and queue groups on a carrier).
//! - [`control`]: the control seam (over streams, or over carrier requests).
//! - [`stream`], [`streams`]: a byte stream to a worker's service, the streams
//!   seam, and the tunnel sessions a replica holds.
//! - [`tunnel`]: a websocket session driven by the tunnel plugin.
//! - [`direct`]: streams over TCP dialled to a worker's address.
//! - [`framed`]: a stream over any message transport (the relay's websocket).
//! - [`holder`]: the atomic pointer the control and streams seams sit behind.

pub mod client;
pub mod conformance;
pub mod control;
mod database;
pub mod direct;
mod engine;
pub mod fanout;
pub mod framed;
pub mod holder;
mod io;
pub mod message;
pub mod queue;
pub mod stream;
pub mod streams;
pub mod tunnel;

pub use client::{Carrier, CarrierSpec, Subscription, endpoints_named_by};
pub use control::{ControlError, ControlRefusal, ControlSeam};
pub use engine::PluginState;
pub use fanout::FanOut;
pub use holder::Holder;
pub use message::{CarrierStats, Message, SendError};
pub use queue::WorkQueue;
pub use stream::{Refusal, Stream, StreamError, StreamReader, StreamWriter};
pub use streams::{Lane, StreamsSeam, TunnelRegistry};
pub use switchyard_runtime::carrier::Endpoint;
pub use tunnel::{TunnelSession, TunnelSpec};
