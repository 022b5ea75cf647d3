//! A sans-IO NATS client protocol engine for the Switchyard `nats` carrier.
//!
//! The engine does no I/O, spawns nothing and reads no clock: the host (later,
//! a WebAssembly carrier component wrapping this crate) owns the socket and
//! the timers, reports what happened, and carries out the [`Action`]s each
//! call returns:
//!
//! ```
//! use switchyard_plugin_nats::{Action, Config, Connection};
//!
//! let mut conn = Connection::new(Config { seed: 7, ..Config::default() }).unwrap();
//! conn.on_connected(0);
//! let out = conn.on_bytes(b"INFO {\"max_payload\":1048576,\"headers\":true}\r\n", 1);
//! assert!(matches!(&out[0], Action::Write(bytes) if bytes.starts_with(b"CONNECT {")));
//! let out = conn.on_bytes(b"PONG\r\n", 2);
//! assert_eq!(out, vec![Action::Connected]);
//! let out = conn.publish("jobs.1.progress", None, None, b"50%").unwrap();
//! assert_eq!(out, vec![Action::Write(b"PUB jobs.1.progress 3\r\n50%\r\n".to_vec())]);
//! ```
//!
//! The events are [`Connection::on_connected`], [`Connection::on_bytes`]
//! (a whole read at a time), [`Connection::on_closed`] and
//! [`Connection::on_tick`]; the operations are [`Connection::publish`],
//! [`Connection::subscribe`], [`Connection::unsubscribe`],
//! [`Connection::request`] and [`Connection::close`].
//!
//! # Layout
//!
//! - `connection.rs`: the state machine and its events; `connection/read.rs`
//!   reads frames, runs the handshake and delivers; `connection/ops.rs` has
//!   the operations.
//! - `action.rs`: what the engine returns.
//! - `parser.rs` (server to client) and `encode.rs` (client to server): the
//!   wire format; `headers.rs`: NATS/1.0 header blocks.
//! - `info.rs`, `connect.rs`, `auth.rs`: INFO, CONNECT and credentials
//!   (NKey signing, `.creds` files).
//! - `subject.rs`: subject rules, matching and the allowed roots.
//! - `subscription.rs`, `request.rs`: what a reconnect restores, and the
//!   request inbox.
//! - `backoff.rs`, `rng.rs`: reconnect delays from the caller's seed.
//! - `server_error.rs`: `-ERR` lines, fatal or not; `error.rs`: the error type.

mod action;
// SAFETY: only wit-bindgen's generated exports use `unsafe`.
mod auth;
use switchyard_carrier_kit::backoff;
#[allow(unsafe_code)]
#[cfg(target_arch = "wasm32")]
mod component;
mod component_config;
mod config;
mod connect;
mod connection;
mod encode;
mod error;
mod headers;
mod info;
mod parser;
mod request;
use switchyard_carrier_kit::rng;
mod server_error;
use switchyard_carrier_kit::subject;
mod subscription;

pub use action::{Action, Claim, ClaimTarget, Intake, Message, Output, Payload};
pub use auth::Auth;
pub use backoff::{BACKOFF_MAX_MS, BACKOFF_START_MS, Backoff};
pub use component_config::ComponentConfig;
pub use config::{
    Config, DEFAULT_HANDSHAKE_TIMEOUT_MS, DEFAULT_MAX_PINGS_OUTSTANDING, DEFAULT_PING_INTERVAL_MS,
};
pub use connect::{LANG, VERSION};
pub use connection::{CloseReason, Connection, ConnectionState, MAX_PAYLOAD_CEILING, READ_ROOM};
pub use encode::MAX_CLIENT_LINE;
pub use error::Error;
pub use headers::{HEADER_VERSION, HeaderError, Headers, STATUS_NO_RESPONDERS, parse_headers};
pub use info::{DEFAULT_MAX_PAYLOAD, ServerInfo};
pub use parser::MAX_SERVER_LINE;
pub use request::{INBOX_SID, RequestError, RequestId};
pub use server_error::{ServerError, ServerErrorKind};
pub use subject::{SubjectError, SubjectPolicy, subject_matches, validate_subject};
