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

pub mod client;
pub mod conformance;
mod database;
mod engine;
pub mod fanout;
mod io;
pub mod message;

pub use client::{Carrier, CarrierSpec, Subscription};
pub use fanout::FanOut;
pub use message::{CarrierStats, Message, SendError};
