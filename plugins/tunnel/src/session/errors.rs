//! Why a frame ended the session, or a stream operation was refused.

use thiserror::Error;

use super::{MAX_QUEUED_EVENTS, MAX_QUEUED_FRAMES, MAX_STREAMS};
use crate::frame::{FrameError, Lane, MAX_SERVICE_LEN, Side, StreamId};

/// Why the session ended on an incoming frame. The host closes the websocket.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum SessionError {
    /// The message is not a frame.
    #[error("malformed frame: {0}")]
    Frame(#[from] FrameError),
    /// The first frame was not HELLO.
    #[error("expected HELLO as the first frame")]
    HelloExpected,
    /// HELLO came twice.
    #[error("HELLO came twice")]
    HelloRepeated,
    /// The peer claims to be the same side as this one.
    #[error("both ends of the session are the {0:?} side")]
    SameSide(Side),
    /// The peer thinks this session is another lane.
    #[error("the peer is on the {peer:?} lane, this session is on the {local:?} lane")]
    LaneMismatch {
        /// This session's lane.
        local: Lane,
        /// The peer's.
        peer: Lane,
    },
    /// The peer opened a stream with an id of this side's parity.
    #[error("the peer opened {0}, whose id belongs to this side")]
    WrongParity(StreamId),
    /// The peer opened a stream with an id not above its previous ones.
    #[error("the peer reused {0}")]
    StreamIdReused(StreamId),
    /// The host did not drain output and the queue reached its limit.
    #[error("more than {MAX_QUEUED_FRAMES} frames are waiting to be written")]
    OutputBacklog,
    /// The host did not drain events and the queue reached its limit.
    #[error("more than {MAX_QUEUED_EVENTS} events are waiting for the application")]
    EventBacklog,
    /// The session already ended.
    #[error("the session has ended")]
    Closed,
}

/// Why a call from the application on a stream was refused. Nothing was sent.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum StreamError {
    /// The session has ended.
    #[error("the session has ended")]
    SessionClosed,
    /// No such stream (never opened, or already finished or reset).
    #[error("no such stream: {0}")]
    UnknownStream(StreamId),
    /// The stream is not accepted yet (no reply, or not answered).
    #[error("{0} is not open yet")]
    NotOpen(StreamId),
    /// `accept` or `refuse` on a stream that is not waiting for an answer.
    #[error("{0} is not waiting for an answer")]
    NotPending(StreamId),
    /// This side already sent FIN on the stream.
    #[error("{0} is already finished on this side")]
    AlreadyFinished(StreamId),
    /// More consumed than was delivered.
    #[error("{stream}: consumed {consumed} bytes but only {delivered} were delivered")]
    OverConsumed {
        /// The stream.
        stream: StreamId,
        /// What the application reported.
        consumed: u64,
        /// What was delivered and not yet consumed.
        delivered: u64,
    },
    /// [`MAX_STREAMS`] streams are open.
    #[error("at most {MAX_STREAMS} streams may be open on one session")]
    TooManyStreams,
    /// The service name is empty or longer than [`MAX_SERVICE_LEN`].
    #[error("a service name must be 1 to {MAX_SERVICE_LEN} bytes, got {0}")]
    BadService(usize),
    /// This side has used every stream id.
    #[error("stream ids are exhausted; open a new session")]
    IdsExhausted,
    /// `NotDelivered` and `SessionEnded` are produced locally, never sent.
    #[error("that reason is produced locally and cannot be sent")]
    LocalOnlyReason,
}
