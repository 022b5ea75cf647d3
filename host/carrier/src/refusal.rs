//! [`Refusal`]: why a stream to a worker's service was not opened, the one
//! type every transport answers with (a tunnel session, a relay through
//! another replica, a direct dial). The tunnel plugin's WIT `refusal` is
//! turned into it in one place (`tunnel/driver.rs`); on the wire it is the
//! answer line of [`crate::handshake`].
//!
//! This file depends on std alone: the fuzz target `direct_hello` compiles
//! it by path beside `handshake.rs`, without `switchyard-carrier` (which
//! links wasmtime).

use std::fmt;

/// Why a stream could not be opened. The kinds stay apart: only
/// [`Refusal::NotDelivered`] says the worker never answered, so only then
/// may the call go elsewhere (after a plain open the worker learned
/// nothing; after a [`call`](crate::stream_seam::StreamsSeam::call), whose
/// request rides with the open, it may have seen the request, so only
/// idempotent calls go again).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The worker has no such service.
    UnknownService,
    /// The service refused, with its reason.
    ServiceRefused(String),
    /// The worker has too many streams open.
    Overloaded,
    /// No answer from the worker (no session, session lost, dial failed).
    NotDelivered(String),
    /// During a carrier change, no set this replica runs reaches the
    /// worker: it is attached to none of them. Nothing was sent.
    NoRoute(String),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownService => f.write_str("unknown service"),
            Self::ServiceRefused(message) => write!(f, "service refused: {message}"),
            Self::Overloaded => f.write_str("worker overloaded"),
            Self::NotDelivered(why) => write!(f, "not delivered: {why}"),
            Self::NoRoute(why) => write!(f, "no route: {why}"),
        }
    }
}

impl std::error::Error for Refusal {}
