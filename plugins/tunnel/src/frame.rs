//! The wire format: one websocket binary message is exactly one frame.
//!
//! See the crate documentation for the layout of each kind. A DATA frame's
//! payload (the body) is never decoded or encoded here: the host splits it
//! off by [`BODY_RULE`] and keeps it, and only the header and the body's
//! length reach the session.

use std::fmt;

use thiserror::Error;

mod decode;

use decode::{decode_hello, decode_reply, split_header};

/// The protocol version this crate speaks, sent in HELLO.
pub const PROTOCOL_VERSION: u8 = 1;

/// Bytes before the payload: the stream id (4) and the kind (1).
pub const HEADER_LEN: usize = 5;

/// The largest whole frame. The host reads and writes the websocket with
/// 64 KiB buffers, so a frame (header included) always fits one buffer.
pub const MAX_FRAME_LEN: usize = 64 * 1024;

/// The largest payload of one frame: what is left of [`MAX_FRAME_LEN`]
/// after the header.
pub const MAX_FRAME_PAYLOAD: usize = MAX_FRAME_LEN - HEADER_LEN;

/// The longest service name an OPEN may carry. Service names are short
/// identifiers (`inference`, `files`), and one length byte's worth keeps an
/// OPEN tiny.
pub const MAX_SERVICE_LEN: usize = 255;

/// The longest message a `ServiceRefused` reply carries; longer messages
/// are cut at a character boundary. It is a hint for an operator, not a body.
pub const MAX_REFUSAL_MESSAGE: usize = 1024;

/// How the host splits an incoming message into a header for the session
/// and a body it keeps: messages whose byte at `kind_offset` is `kind` carry
/// a body after `header_len` bytes; any other message is all header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BodyRule {
    /// Where the kind byte is.
    pub kind_offset: usize,
    /// The kind whose messages carry a body.
    pub kind: u8,
    /// The bytes in front of the body.
    pub header_len: usize,
}

/// This protocol's rule: a DATA frame's payload is its body.
pub const BODY_RULE: BodyRule = BodyRule {
    kind_offset: 4,
    kind: Kind::Data as u8,
    header_len: HEADER_LEN,
};

impl BodyRule {
    /// Splits `message` as the host does: the header and the body, or the
    /// whole message and an empty body when the rule does not match.
    pub fn split<'m>(&self, message: &'m [u8]) -> (&'m [u8], &'m [u8]) {
        if self.has_body(message) {
            message.split_at(self.header_len)
        } else {
            (message, &[])
        }
    }

    /// Whether `header` and a body of `body_len` bytes are what
    /// [`BodyRule::split`] makes of some message.
    pub fn is_split(&self, header: &[u8], body_len: usize) -> bool {
        if self.has_body(header) {
            header.len() == self.header_len
        } else {
            body_len == 0
        }
    }

    fn has_body(&self, message: &[u8]) -> bool {
        message.len() >= self.header_len && message.get(self.kind_offset) == Some(&self.kind)
    }
}

/// A stream's id. Odd ids are opened by the frontend, even ids by the
/// worker; 0 names the session itself (HELLO, PING, PONG).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId(pub u32);

impl StreamId {
    /// The id session-level frames carry.
    pub const SESSION: StreamId = StreamId(0);

    /// Whether the frontend opened this stream (the id is odd).
    pub fn is_frontend(self) -> bool {
        self.0 % 2 == 1
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "stream {}", self.0)
    }
}

/// Which end of the websocket a session is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    /// The side that dials streams (odd ids).
    Frontend,
    /// The side that accepts streams for its local services (even ids).
    Worker,
}

impl Side {
    /// The other end.
    pub fn peer(self) -> Side {
        match self {
            Side::Frontend => Side::Worker,
            Side::Worker => Side::Frontend,
        }
    }

    fn code(self) -> u8 {
        match self {
            Side::Frontend => 1,
            Side::Worker => 2,
        }
    }
}

/// Which of a worker's two sessions this is; the lanes differ in window size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lane {
    /// Model calls and health checks.
    Inference,
    /// File transfer.
    Bulk,
}

impl Lane {
    fn code(self) -> u8 {
        match self {
            Lane::Inference => 1,
            Lane::Bulk => 2,
        }
    }
}

/// Why a stream was not accepted.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum Refusal {
    /// The worker has no service by the name the OPEN gave.
    #[error("the worker has no such service")]
    UnknownService,
    /// The service exists and said no, with its reason.
    #[error("the service refused the stream: {0}")]
    ServiceRefused(String),
    /// The worker is at its stream limit, or the service is busy.
    #[error("the worker is overloaded")]
    Overloaded,
    /// No reply came before the session ended. Produced locally on the side
    /// that opened the stream, never sent. Without early data the worker
    /// learned at most the service name, so retrying is safe; with it, the
    /// request may have been delivered.
    #[error("the stream was not delivered: the session ended before a reply")]
    NotDelivered,
}

/// Why a stream was reset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum ResetReason {
    /// The application gave up on the stream.
    #[error("cancelled")]
    Cancelled,
    /// The peer sent more than the receive window allowed.
    #[error("the peer overran the receive window")]
    WindowOverrun,
    /// The peer broke the stream's rules (data after FIN, data before the
    /// reply, a window past its limit).
    #[error("the peer broke the stream protocol")]
    Protocol,
    /// The session ended with the stream open. Produced locally, never sent.
    #[error("the session ended")]
    SessionEnded,
}

impl ResetReason {
    /// A short, stable name for the reason (`cancelled`, `window overrun`,
    /// `protocol`, `session ended`), as the component reports it.
    pub fn name(self) -> &'static str {
        match self {
            ResetReason::Cancelled => "cancelled",
            ResetReason::WindowOverrun => "window overrun",
            ResetReason::Protocol => "protocol",
            ResetReason::SessionEnded => "session ended",
        }
    }
}

/// The kind byte of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Kind {
    /// Version, side and lane; the first frame each way.
    Hello = 0,
    /// Opens a stream to the named service.
    Open = 1,
    /// The answer to an OPEN: accepted or a refusal.
    Reply = 2,
    /// Stream bytes.
    Data = 3,
    /// Returns receive credit to the sender.
    Window = 4,
    /// The sender will send no more on this stream.
    Fin = 5,
    /// Abandons the stream in both directions.
    Reset = 6,
    /// Asks the peer to prove it is alive.
    Ping = 7,
    /// The answer to a PING.
    Pong = 8,
}

impl Kind {
    fn from_code(code: u8) -> Option<Kind> {
        Some(match code {
            0 => Kind::Hello,
            1 => Kind::Open,
            2 => Kind::Reply,
            3 => Kind::Data,
            4 => Kind::Window,
            5 => Kind::Fin,
            6 => Kind::Reset,
            7 => Kind::Ping,
            8 => Kind::Pong,
            _ => return None,
        })
    }
}

/// One decoded frame. Service names borrow from the message; a DATA
/// frame's body is not part of it, only its length.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// HELLO on stream 0.
    Hello {
        /// Who sent it.
        side: Side,
        /// Which lane the sender thinks this session is.
        lane: Lane,
    },
    /// OPEN: the first frame of a stream.
    Open {
        /// The new stream.
        stream: StreamId,
        /// The worker's local service.
        service: &'a str,
    },
    /// REPLY to an OPEN.
    Reply {
        /// The stream being answered.
        stream: StreamId,
        /// Accepted, or why not.
        result: Result<(), Refusal>,
    },
    /// DATA: the body follows the header in the same message.
    Data {
        /// The stream.
        stream: StreamId,
        /// The body's length, at most [`MAX_FRAME_PAYLOAD`].
        len: usize,
    },
    /// WINDOW: more receive credit.
    Window {
        /// The stream.
        stream: StreamId,
        /// Bytes of credit returned (never 0).
        increment: u32,
    },
    /// FIN: this direction is finished.
    Fin {
        /// The stream.
        stream: StreamId,
    },
    /// RESET: the stream is abandoned.
    Reset {
        /// The stream.
        stream: StreamId,
        /// Why.
        reason: ResetReason,
    },
    /// PING on stream 0.
    Ping {
        /// Echoed by the PONG.
        nonce: u64,
    },
    /// PONG on stream 0.
    Pong {
        /// The PING's nonce.
        nonce: u64,
    },
}

/// Why a message is not a frame. Any of these ends the session.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum FrameError {
    /// Fewer bytes than a header.
    #[error("a frame needs at least {HEADER_LEN} bytes, got {0}")]
    Truncated(usize),
    /// More bytes than a frame may have.
    #[error("a frame may be at most {MAX_FRAME_LEN} bytes, got {0}")]
    TooLong(usize),
    /// The header and body are not what [`BODY_RULE`] makes of a message:
    /// a DATA header with bytes after it, or a body on another kind. The
    /// host split the message wrongly.
    #[error("a {header_len}-byte header with a {body_len}-byte body does not follow the body rule")]
    BadSplit {
        /// The header's length.
        header_len: usize,
        /// The body's length.
        body_len: usize,
    },
    /// The kind byte names no kind.
    #[error("unknown frame kind {0}")]
    UnknownKind(u8),
    /// HELLO named a version this crate does not speak.
    #[error("the peer speaks tunnel protocol version {0}, this side speaks {PROTOCOL_VERSION}")]
    UnsupportedVersion(u8),
    /// The stream id does not fit the kind (0 on a stream frame or the reverse).
    #[error("a {kind:?} frame cannot carry stream id {stream}")]
    BadStreamId {
        /// The frame's kind.
        kind: Kind,
        /// The id it carried.
        stream: u32,
    },
    /// The payload is not what the kind requires.
    #[error("malformed {kind:?} payload: {reason}")]
    BadPayload {
        /// The frame's kind.
        kind: Kind,
        /// What was wrong.
        reason: &'static str,
    },
}

fn bad(kind: Kind, reason: &'static str) -> FrameError {
    FrameError::BadPayload { kind, reason }
}

fn u32_of(kind: Kind, payload: &[u8]) -> Result<u32, FrameError> {
    let bytes: [u8; 4] = payload
        .try_into()
        .map_err(|_| bad(kind, "expected 4 bytes"))?;
    Ok(u32::from_be_bytes(bytes))
}

fn u64_of(kind: Kind, payload: &[u8]) -> Result<u64, FrameError> {
    let bytes: [u8; 8] = payload
        .try_into()
        .map_err(|_| bad(kind, "expected 8 bytes"))?;
    Ok(u64::from_be_bytes(bytes))
}

impl<'a> Frame<'a> {
    /// The frame's kind.
    pub fn kind(&self) -> Kind {
        match self {
            Frame::Hello { .. } => Kind::Hello,
            Frame::Open { .. } => Kind::Open,
            Frame::Reply { .. } => Kind::Reply,
            Frame::Data { .. } => Kind::Data,
            Frame::Window { .. } => Kind::Window,
            Frame::Fin { .. } => Kind::Fin,
            Frame::Reset { .. } => Kind::Reset,
            Frame::Ping { .. } => Kind::Ping,
            Frame::Pong { .. } => Kind::Pong,
        }
    }

    /// The stream the frame belongs to ([`StreamId::SESSION`] for HELLO,
    /// PING and PONG).
    pub fn stream(&self) -> StreamId {
        match self {
            Frame::Hello { .. } | Frame::Ping { .. } | Frame::Pong { .. } => StreamId::SESSION,
            Frame::Open { stream, .. }
            | Frame::Reply { stream, .. }
            | Frame::Data { stream, .. }
            | Frame::Window { stream, .. }
            | Frame::Fin { stream }
            | Frame::Reset { stream, .. } => *stream,
        }
    }

    /// Parses one whole websocket message; a DATA frame's body is only
    /// counted.
    pub fn decode(message: &'a [u8]) -> Result<Frame<'a>, FrameError> {
        let (header, body) = BODY_RULE.split(message);
        Frame::decode_split(header, body.len())
    }

    /// Parses a message the host split by [`BODY_RULE`]: its header, and
    /// the length of the body it kept (0 for a message without one).
    pub fn decode_split(header: &'a [u8], body_len: usize) -> Result<Frame<'a>, FrameError> {
        let (stream, kind, payload) = split_header(header, body_len)?;
        Ok(match kind {
            Kind::Hello => decode_hello(payload)?,
            Kind::Open => {
                if payload.is_empty() || payload.len() > MAX_SERVICE_LEN {
                    return Err(bad(kind, "service name must be 1 to 255 bytes"));
                }
                let service =
                    std::str::from_utf8(payload).map_err(|_| bad(kind, "service is not UTF-8"))?;
                Frame::Open { stream, service }
            }
            Kind::Reply => Frame::Reply {
                stream,
                result: decode_reply(payload)?,
            },
            // The split guarantees the header holds nothing after the kind.
            Kind::Data => Frame::Data {
                stream,
                len: body_len,
            },
            Kind::Window => {
                let increment = u32_of(kind, payload)?;
                if increment == 0 {
                    return Err(bad(kind, "increment must not be 0"));
                }
                Frame::Window { stream, increment }
            }
            Kind::Fin => {
                if !payload.is_empty() {
                    return Err(bad(kind, "expected no payload"));
                }
                Frame::Fin { stream }
            }
            Kind::Reset => {
                let reason = match payload {
                    [1] => ResetReason::Cancelled,
                    [2] => ResetReason::WindowOverrun,
                    [3] => ResetReason::Protocol,
                    _ => return Err(bad(kind, "expected one known reason byte")),
                };
                Frame::Reset { stream, reason }
            }
            Kind::Ping => Frame::Ping {
                nonce: u64_of(kind, payload)?,
            },
            Kind::Pong => Frame::Pong {
                nonce: u64_of(kind, payload)?,
            },
        })
    }

    /// Writes the frame as one websocket message, or for DATA its header:
    /// the writer puts the `len` bytes of body right after it.
    ///
    /// The caller keeps data within [`MAX_FRAME_PAYLOAD`], service names
    /// within [`MAX_SERVICE_LEN`] and refusal messages within
    /// [`MAX_REFUSAL_MESSAGE`] (the session does); a frame outside them
    /// would be refused by the peer. The local-only [`Refusal::NotDelivered`]
    /// and [`ResetReason::SessionEnded`] encode to codes the peer refuses.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN + self.payload_len());
        out.extend_from_slice(&self.stream().0.to_be_bytes());
        out.push(self.kind() as u8);
        match self {
            Frame::Hello { side, lane } => {
                out.extend_from_slice(&[PROTOCOL_VERSION, side.code(), lane.code()])
            }
            Frame::Open { service, .. } => out.extend_from_slice(service.as_bytes()),
            Frame::Reply { result, .. } => match result {
                Ok(()) => out.push(0),
                Err(Refusal::UnknownService) => out.push(1),
                Err(Refusal::ServiceRefused(message)) => {
                    out.push(2);
                    out.extend_from_slice(message.as_bytes());
                }
                Err(Refusal::Overloaded) => out.push(3),
                Err(Refusal::NotDelivered) => out.push(4),
            },
            Frame::Data { .. } => {}
            Frame::Window { increment, .. } => out.extend_from_slice(&increment.to_be_bytes()),
            Frame::Fin { .. } => {}
            Frame::Reset { reason, .. } => out.push(match reason {
                ResetReason::Cancelled => 1,
                ResetReason::WindowOverrun => 2,
                ResetReason::Protocol => 3,
                ResetReason::SessionEnded => 4,
            }),
            Frame::Ping { nonce } | Frame::Pong { nonce } => {
                out.extend_from_slice(&nonce.to_be_bytes())
            }
        }
        out
    }

    /// The bytes [`Frame::encode`] writes after the header.
    fn payload_len(&self) -> usize {
        match self {
            Frame::Hello { .. } => 3,
            Frame::Open { service, .. } => service.len(),
            Frame::Reply {
                result: Err(Refusal::ServiceRefused(m)),
                ..
            } => 1 + m.len(),
            Frame::Reply { .. } | Frame::Reset { .. } => 1,
            Frame::Window { .. } => 4,
            Frame::Data { .. } | Frame::Fin { .. } => 0,
            Frame::Ping { .. } | Frame::Pong { .. } => 8,
        }
    }
}

/// Cuts `message` to at most [`MAX_REFUSAL_MESSAGE`] bytes at a character
/// boundary.
pub(crate) fn truncate_message(mut message: String) -> String {
    if message.len() > MAX_REFUSAL_MESSAGE {
        let mut end = MAX_REFUSAL_MESSAGE;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
    }
    message
}

#[cfg(test)]
mod tests;
