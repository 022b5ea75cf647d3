//! One stream's state inside a session.

/// Where a stream is in its opening handshake.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// This side sent OPEN and waits for the REPLY.
    Opening,
    /// The peer sent OPEN and the application has not answered yet.
    Pending,
    /// Accepted: data may flow.
    Open,
}

impl Phase {
    /// Whether the peer may send DATA and FIN: on a stream it opened
    /// (early data before this side's reply included) or an accepted one,
    /// never before the reply to an OPEN of this side's.
    pub(crate) fn receives(self) -> bool {
        self != Phase::Opening
    }
}

/// Per-stream flow-control and half-close state.
#[derive(Debug)]
pub(crate) struct Stream {
    pub(crate) phase: Phase,
    /// Bytes this side may still send (the peer's credit to us).
    pub(crate) send_window: u64,
    /// Bytes the peer may still send before it overruns our window.
    pub(crate) recv_window: u64,
    /// Bytes delivered to the application and not yet reported consumed.
    pub(crate) unconsumed: u64,
    /// Bytes consumed but not yet returned to the peer in a WINDOW.
    pub(crate) unreturned: u64,
    /// This side sent FIN.
    pub(crate) local_fin: bool,
    /// The peer sent FIN.
    pub(crate) remote_fin: bool,
}

impl Stream {
    pub(crate) fn new(phase: Phase, window: u64) -> Stream {
        Stream {
            phase,
            send_window: window,
            recv_window: window,
            unconsumed: 0,
            unreturned: 0,
            local_fin: false,
            remote_fin: false,
        }
    }

    /// Both directions are finished: the stream can be forgotten.
    pub(crate) fn done(&self) -> bool {
        self.local_fin && self.remote_fin
    }
}
