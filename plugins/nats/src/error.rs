//! The engine's one error type: refused operations, protocol faults from the
//! server side, and the reasons the engine closes a connection.

use crate::headers::HeaderError;
use crate::server_error::ServerError;
use crate::subject::SubjectError;

/// Everything that can go wrong in the engine.
///
/// Operations (`publish`, `subscribe`, ...) return these directly and write
/// nothing; faults found while reading arrive as [`crate::Action::Error`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// An operation that needs a live connection ran while there was none.
    /// Publishing is at most once: nothing is queued for later.
    #[error("not connected to a NATS server; the message was not sent")]
    NotConnected,
    /// The connection was closed for good with `close()`.
    #[error("the connection was closed and will not reconnect")]
    Closed,
    /// The message is larger than the server (or the configured cap) accepts.
    #[error("message of {size} bytes (headers included) exceeds max_payload of {max} bytes")]
    PayloadTooLarge {
        /// Headers and payload together.
        size: usize,
        /// The smaller of the server's max_payload and the configured cap.
        max: usize,
    },
    /// The subject, pattern or reply subject was refused.
    #[error(transparent)]
    Subject(#[from] SubjectError),
    /// A queue group that is empty or has whitespace.
    #[error("queue group `{0}` is empty or has whitespace or control characters")]
    InvalidQueueGroup(String),
    /// A header that cannot be written, or a block that cannot be read.
    #[error(transparent)]
    Header(#[from] HeaderError),
    /// Headers were given but the server does not support them.
    #[error("the server does not support headers (INFO has headers=false)")]
    HeadersNotSupported,
    /// A protocol line longer than the server's default `max_control_line`.
    #[error(
        "protocol line of {len} bytes exceeds the server's limit of {max} bytes; use a shorter subject"
    )]
    ControlLineTooLong {
        /// The line's length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Sid 0 belongs to the engine's request inbox.
    #[error("sid 0 is reserved for the request inbox; use sids from 1")]
    ReservedSid,
    /// The sid is already subscribed.
    #[error("sid {0} is already subscribed")]
    DuplicateSid(u64),
    /// The sid is not subscribed.
    #[error("sid {0} is not subscribed")]
    UnknownSid(u64),
    /// The credentials in the configuration cannot be used.
    #[error("invalid credentials: {0}")]
    InvalidAuth(String),
    /// The server sent bytes that are not the NATS protocol.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// An unfinished frame grew past what any valid frame can be.
    #[error(
        "unfinished frame of {size} bytes exceeds the read limit of {limit} bytes (max_payload plus room for the protocol line)"
    )]
    ReadBufferFull {
        /// The bytes held for the unfinished frame.
        size: usize,
        /// max_payload plus the room for a protocol line.
        limit: usize,
    },
    /// A `-ERR` from the server.
    #[error(transparent)]
    Server(#[from] ServerError),
    /// The server did not answer our PINGs.
    #[error("stale connection: {0} PINGs went unanswered")]
    StaleConnection(u32),
    /// INFO, CONNECT and the first PONG did not complete in time.
    #[error("the handshake did not complete within {0} ms")]
    HandshakeTimeout(u64),
    /// The server requires TLS and the host's transport is not TLS.
    #[error("the server requires TLS but the transport is plain TCP")]
    TlsRequired,
}
