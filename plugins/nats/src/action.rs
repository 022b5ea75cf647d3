//! What the engine asks of the host: the batch every call returns.

use std::ops::Range;

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
    /// Write the host's held payload with this id here, between the writes
    /// around it (a publish of a [`Payload::Held`]).
    WritePayload(u64),
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
    /// [`Action::Deliver`] of a message wholly inside the data handed to
    /// this [`crate::Connection::on_read`] call, as byte ranges of that
    /// data (with `Config::deliver_spans`).
    DeliverSpans {
        /// The caller's sid.
        sid: u64,
        /// Where the subject is.
        subject: Range<usize>,
        /// Where the reply subject is, if the publisher wants a reply.
        reply_to: Option<Range<usize>>,
        /// The headers, for HMSG.
        headers: Option<Headers>,
        /// Where the payload is.
        payload: Range<usize>,
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

impl Action {
    /// This action with an [`Action::DeliverSpans`] read out of `data` (the
    /// bytes of the call that answered it) as the [`Action::Deliver`] it
    /// stands for: the subjects read as UTF-8, what is not replaced, as the
    /// host reads them. A span outside `data` panics: it is the engine's bug.
    pub fn owned(self, data: &[u8]) -> Action {
        let text = |range: Range<usize>| String::from_utf8_lossy(&data[range]).into_owned();
        match self {
            Action::DeliverSpans {
                sid,
                subject,
                reply_to,
                headers,
                payload,
            } => Action::Deliver {
                sid,
                subject: text(subject),
                reply_to: reply_to.map(text),
                headers,
                payload: data[payload].to_vec(),
            },
            other => other,
        }
    }
}

/// A payload to publish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payload<'a> {
    /// The bytes themselves.
    Bytes(&'a [u8]),
    /// A payload the host holds: the engine writes the framing around it
    /// and an [`Action::WritePayload`] where its bytes go.
    Held {
        /// The host's id.
        id: u64,
        /// Its length.
        len: usize,
    },
}

impl Payload<'_> {
    /// Its length in bytes.
    pub fn len(&self) -> usize {
        match self {
            Payload::Bytes(bytes) => bytes.len(),
            Payload::Held { len, .. } => *len,
        }
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What [`crate::Connection::on_read`] answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Intake {
    /// The actions, as [`crate::Connection::on_bytes`] returns them.
    pub output: Output,
    /// How many bytes of the data were parsed (an unfinished frame the
    /// engine keeps counts as parsed); the rest comes again after the
    /// claimed body.
    pub consumed: usize,
    /// The payload that follows the parsed bytes, for the host to take.
    pub claim: Option<Claim>,
}

/// A payload the host takes beside the engine: `len` bytes, then the
/// engine reads again (from the CRLF after it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// The payload's length.
    pub len: usize,
    /// Where it goes.
    pub target: ClaimTarget,
}

/// Where a claimed payload goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimTarget {
    /// A delivery to the subscription `sid`, as [`Action::Deliver`] without its payload.
    Deliver {
        /// The caller's sid.
        sid: u64,
        /// The subject it was published to.
        subject: String,
        /// Where a reply should go.
        reply_to: Option<String>,
        /// The headers, for HMSG.
        headers: Option<Headers>,
    },
    /// The reply to a request, as [`Action::Reply`] without its payload.
    Reply {
        /// The id `request` returned.
        request_id: RequestId,
        /// The inbox subject.
        subject: String,
        /// The reply's headers.
        headers: Option<Headers>,
    },
    /// Nobody takes it (an ended subscription, a late reply, bad headers):
    /// the host reads past it and drops it.
    Drop,
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
