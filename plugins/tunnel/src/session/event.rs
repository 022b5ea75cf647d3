//! What a session reports to the application.

use crate::frame::{Refusal, ResetReason, StreamId};

/// What the application learns from the session, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The peer opened a stream to `service`; answer with
    /// [`Session::accept`] or [`Session::refuse`].
    Opened {
        /// The new stream.
        stream: StreamId,
        /// The local service the peer asked for.
        service: String,
    },
    /// The peer answered a stream this side opened.
    Replied {
        /// The stream.
        stream: StreamId,
        /// Accepted, or why not.
        result: Result<(), Refusal>,
    },
    /// The body of the message just handed to [`Session::on_header`]
    /// belongs to this stream; report it with [`Session::consumed`] once the
    /// application took it. Without this event the host drops the body.
    Data {
        /// The stream.
        stream: StreamId,
        /// The body's length (never 0).
        len: usize,
    },
    /// A stream whose window [`Session::reserve_send`] found spent can take
    /// more now.
    Writable {
        /// The stream.
        stream: StreamId,
    },
    /// The peer will send no more on this stream.
    Finished {
        /// The stream.
        stream: StreamId,
    },
    /// The stream is gone in both directions.
    Reset {
        /// The stream.
        stream: StreamId,
        /// Why.
        reason: ResetReason,
    },
    /// The peer did not answer a PING in time; the session has ended.
    SessionLost,
}
