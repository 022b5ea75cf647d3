//! What the engine asks of the host: the batch every call returns.

use crate::error::Error;
use crate::headers::Headers;
use crate::request::{RequestError, RequestId};

/// The actions of one call, in order. At most one [`Action::Write`], and it
/// comes first: every byte one call produces goes out in one write.
pub type Output = Vec<Action>;

/// One thing for the host to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Write these bytes to the transport, before acting on the rest.
    Write(Vec<u8>),
    /// A message for the subscription `sid` (from MSG or HMSG).
    Deliver {
        /// The caller's sid.
        sid: u64,
        /// The subject it was published to.
        subject: String,
        /// Where a reply should go, if the publisher wants one.
        reply_to: Option<String>,
        /// The headers, for HMSG.
        headers: Option<Headers>,
        /// The payload.
        payload: Vec<u8>,
    },
    /// The outcome of a [`crate::Connection::request`].
    Reply {
        /// The id `request` returned.
        request_id: RequestId,
        /// The reply, or why there is none.
        result: Result<Message, RequestError>,
    },
    /// The first handshake completed: operations may run.
    Connected,
    /// A later handshake completed and these sids were subscribed again
    /// (the server has confirmed them): the host's reconnect hook runs now.
    Reconnected {
        /// The caller's sids, in order.
        resubscribed: Vec<u64>,
    },
    /// The transport is gone: dial again after this many milliseconds, then
    /// call `on_connected` (or `on_closed` if the dial fails).
    Reconnect {
        /// The backoff delay.
        after_ms: u64,
    },
    /// Something went wrong; if the connection cannot go on, [`Action::Close`]
    /// follows in the same batch.
    Error(Error),
    /// Close the transport, then call `on_closed`.
    Close,
}

/// A reply to a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The inbox subject the reply came on.
    pub subject: String,
    /// The reply's headers, if it had any.
    pub headers: Option<Headers>,
    /// The reply's payload.
    pub payload: Vec<u8>,
}

/// Collects one call's writes and actions, and puts the writes first.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    pub write: Vec<u8>,
    pub actions: Vec<Action>,
}

impl Batch {
    pub(crate) fn push(&mut self, action: Action) {
        self.actions.push(action);
    }

    pub(crate) fn finish(self) -> Output {
        let mut out = Vec::with_capacity(self.actions.len() + 1);
        if !self.write.is_empty() {
            out.push(Action::Write(self.write));
        }
        out.extend(self.actions);
        out
    }
}
