//! The session: one websocket's streams, windows and keepalive.

mod errors;
mod event;
mod stream;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::frame::{
    Frame, Lane, MAX_FRAME_PAYLOAD, MAX_SERVICE_LEN, Refusal, ResetReason, Side, StreamId,
    truncate_message,
};
pub use errors::{SessionError, StreamError};
pub use event::Event;
use stream::{Phase, Stream};

/// Default per-stream receive window on the inference lane. Model calls move
/// prompts and token streams, rarely more than a few MiB in flight; 4 MiB
/// keeps one call from stalling on round trips without letting a few hundred
/// concurrent calls pin much memory on either end.
pub const INFERENCE_WINDOW: u32 = 4 * 1024 * 1024;

/// Default per-stream receive window on the bulk lane. File transfer wants
/// the link full: at 1 Gbit/s and 200 ms round trip the bandwidth-delay
/// product is 25 MB, so 32 MiB keeps a long fat link busy with one stream.
pub const BULK_WINDOW: u32 = 32 * 1024 * 1024;

/// Concurrent streams per session, opening and pending ones included. A
/// worker answers OPENs past it with [`Refusal::Overloaded`]; a local
/// `open_stream` past it fails. With the bulk window it bounds what one
/// session can be owed at 8 GiB of credit, and in practice far less.
pub const MAX_STREAMS: usize = 256;

/// Frames waiting in the output queue after an incoming frame is handled.
/// The host drains output after every call; a peer that floods PINGs or
/// OPENs while output is not drained ends the session instead of growing it.
pub const MAX_QUEUED_FRAMES: usize = 4096;

/// Events waiting for the application after an incoming frame is handled.
/// Each frame adds at most one event, so only a host that stopped draining
/// events reaches it; the session ends rather than buffer without bound.
pub const MAX_QUEUED_EVENTS: usize = 4096;

/// How long the session may hear nothing before it sends a PING.
pub const PING_IDLE_MS: u64 = 15_000;

/// How long after a PING the session waits to hear anything before it
/// declares the peer lost. Any frame proves the peer alive, not only PONG.
pub const PONG_TIMEOUT_MS: u64 = 10_000;

impl Lane {
    /// The per-stream receive window on this lane.
    pub fn window(self) -> u32 {
        match self {
            Lane::Inference => INFERENCE_WINDOW,
            Lane::Bulk => BULK_WINDOW,
        }
    }
}

/// One websocket's multiplexer. See the crate documentation.
#[derive(Debug)]
pub struct Session {
    side: Side,
    lane: Lane,
    greeted: bool,
    closed: bool,
    next_id: u32,
    last_peer_id: u32,
    streams: BTreeMap<StreamId, Stream>,
    /// Streams whose last `reserve_send` found the window spent.
    blocked: BTreeSet<StreamId>,
    /// Frames to write. DATA is never queued: the host writes it with the
    /// body it holds, so this holds only small frames.
    output: VecDeque<Vec<u8>>,
    events: VecDeque<Event>,
    last_heard_ms: u64,
    /// The nonce and send time of the PING not yet answered.
    ping: Option<(u64, u64)>,
    next_nonce: u64,
}

impl Session {
    /// A session for one end of a websocket; HELLO is queued to send.
    pub fn new(side: Side, lane: Lane, now_ms: u64) -> Session {
        let mut session = Session {
            side,
            lane,
            greeted: false,
            closed: false,
            next_id: match side {
                Side::Frontend => 1,
                Side::Worker => 2,
            },
            last_peer_id: 0,
            streams: BTreeMap::new(),
            blocked: BTreeSet::new(),
            output: VecDeque::new(),
            events: VecDeque::new(),
            last_heard_ms: now_ms,
            ping: None,
            next_nonce: 1,
        };
        session.push(&Frame::Hello { side, lane });
        session
    }

    /// This session's side.
    pub fn side(&self) -> Side {
        self.side
    }

    /// This session's lane.
    pub fn lane(&self) -> Lane {
        self.lane
    }

    /// Whether the session has ended (lost, closed or broken by the peer).
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Streams currently open, opening or waiting for an answer.
    pub fn stream_count(&self) -> usize {
        self.streams.len()
    }

    /// Bytes `reserve_send` could grant now on `stream` over any number of
    /// calls: its send window.
    pub fn send_window(&self, stream: StreamId) -> Option<u64> {
        self.streams.get(&stream).map(|s| s.send_window)
    }

    /// When the host should call [`Session::on_tick`] next, if ever.
    pub fn next_tick_ms(&self) -> Option<u64> {
        if self.closed {
            return None;
        }
        Some(match self.ping {
            Some((_, sent)) => sent.saturating_add(PONG_TIMEOUT_MS),
            None => self.last_heard_ms.saturating_add(PING_IDLE_MS),
        })
    }

    /// The next frame to write as one binary websocket message.
    pub fn poll_output(&mut self) -> Option<Vec<u8>> {
        self.output.pop_front()
    }

    /// Every frame waiting to be written, in order.
    pub fn drain_output(&mut self) -> Vec<Vec<u8>> {
        std::iter::from_fn(|| self.poll_output()).collect()
    }

    /// The next event for the application.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Every event waiting, in order.
    pub fn drain_events(&mut self) -> Vec<Event> {
        self.events.drain(..).collect()
    }

    /// The host's clock moved: sends a PING after [`PING_IDLE_MS`] of
    /// silence and ends the session with [`Event::SessionLost`] when nothing
    /// is heard for [`PONG_TIMEOUT_MS`] after it.
    pub fn on_tick(&mut self, now_ms: u64) {
        if self.closed {
            return;
        }
        match self.ping {
            Some((_, sent)) if now_ms.saturating_sub(sent) >= PONG_TIMEOUT_MS => {
                self.shut_down();
                self.events.push_back(Event::SessionLost);
            }
            Some(_) => {}
            None if now_ms.saturating_sub(self.last_heard_ms) >= PING_IDLE_MS => {
                let nonce = self.next_nonce;
                self.next_nonce = self.next_nonce.wrapping_add(1);
                self.ping = Some((nonce, now_ms));
                self.push(&Frame::Ping { nonce });
            }
            None => {}
        }
    }

    /// The websocket is gone (closed by either end or failed). Streams still
    /// waiting for a reply end with [`Refusal::NotDelivered`], the others
    /// with [`ResetReason::SessionEnded`]; output is dropped.
    pub fn close(&mut self) {
        if !self.closed {
            self.shut_down();
        }
    }

    /// Handles one incoming websocket message, split by
    /// [`BODY_RULE`](crate::BODY_RULE): its header, and the length of the
    /// body the host kept (a message without a body comes whole, with
    /// `body_len` 0). [`Event::Data`] says which stream the body belongs to;
    /// when none comes (the stream is gone, or the DATA broke its rules and
    /// the stream was reset) the host drops the body.
    ///
    /// An error ends the session (after the same events as
    /// [`Session::close`]); the host closes the websocket.
    pub fn on_header(
        &mut self,
        header: &[u8],
        body_len: usize,
        now_ms: u64,
    ) -> Result<(), SessionError> {
        if self.closed {
            return Err(SessionError::Closed);
        }
        let result = self.handle(header, body_len, now_ms);
        if result.is_err() {
            self.shut_down();
        }
        result
    }

    fn handle(&mut self, header: &[u8], body_len: usize, now_ms: u64) -> Result<(), SessionError> {
        let frame = Frame::decode_split(header, body_len)?;
        self.last_heard_ms = now_ms;
        self.ping = None;
        if !self.greeted {
            let Frame::Hello { side, lane } = frame else {
                return Err(SessionError::HelloExpected);
            };
            if side == self.side {
                return Err(SessionError::SameSide(side));
            }
            if lane != self.lane {
                return Err(SessionError::LaneMismatch {
                    local: self.lane,
                    peer: lane,
                });
            }
            self.greeted = true;
            return Ok(());
        }
        match frame {
            Frame::Hello { .. } => return Err(SessionError::HelloRepeated),
            Frame::Ping { nonce } => self.push(&Frame::Pong { nonce }),
            Frame::Pong { .. } => {}
            Frame::Open { stream, service } => self.on_open(stream, service)?,
            Frame::Reply { stream, result } => self.on_reply(stream, result),
            Frame::Data { stream, len } => self.on_data(stream, len),
            Frame::Window { stream, increment } => self.on_window(stream, increment),
            Frame::Fin { stream } => self.on_fin(stream),
            Frame::Reset { stream, reason } => {
                if self.forget(stream).is_some() {
                    self.events.push_back(Event::Reset { stream, reason });
                }
            }
        }
        if self.output.len() > MAX_QUEUED_FRAMES {
            return Err(SessionError::OutputBacklog);
        }
        if self.events.len() > MAX_QUEUED_EVENTS {
            return Err(SessionError::EventBacklog);
        }
        Ok(())
    }

    fn on_open(&mut self, stream: StreamId, service: &str) -> Result<(), SessionError> {
        if stream.is_frontend() != (self.side.peer() == Side::Frontend) {
            return Err(SessionError::WrongParity(stream));
        }
        if stream.0 <= self.last_peer_id {
            return Err(SessionError::StreamIdReused(stream));
        }
        self.last_peer_id = stream.0;
        if self.streams.len() >= MAX_STREAMS {
            self.push(&Frame::Reply {
                stream,
                result: Err(Refusal::Overloaded),
            });
            return Ok(());
        }
        let window = u64::from(self.lane.window());
        self.streams
            .insert(stream, Stream::new(Phase::Pending, window));
        self.events.push_back(Event::Opened {
            stream,
            service: service.to_owned(),
        });
        Ok(())
    }

    fn on_reply(&mut self, id: StreamId, result: Result<(), Refusal>) {
        // Unknown: this side reset the stream before the reply crossed it.
        let Some(stream) = self.streams.get_mut(&id) else {
            return;
        };
        if stream.phase != Phase::Opening {
            return self.violation(id, ResetReason::Protocol);
        }
        match result {
            Ok(()) => stream.phase = Phase::Open,
            Err(_) => {
                self.forget(id);
            }
        }
        self.events.push_back(Event::Replied { stream: id, result });
    }

    fn on_data(&mut self, id: StreamId, len: usize) {
        // Unknown: data in flight when this side reset or refused the stream.
        let Some(stream) = self.streams.get_mut(&id) else {
            return;
        };
        // Early data rides with the OPEN, before this side's reply.
        if !stream.phase.receives() || stream.remote_fin {
            return self.violation(id, ResetReason::Protocol);
        }
        let credit = len as u64;
        if credit > stream.recv_window {
            return self.violation(id, ResetReason::WindowOverrun);
        }
        stream.recv_window -= credit;
        stream.unconsumed += credit;
        if len > 0 {
            self.events.push_back(Event::Data { stream: id, len });
        }
    }

    fn on_window(&mut self, id: StreamId, increment: u32) {
        let limit = u64::from(self.lane.window());
        let Some(stream) = self.streams.get_mut(&id) else {
            return;
        };
        // The peer can only return credit it was given, so a window past
        // the lane's size is a broken peer.
        let grown = stream.send_window + u64::from(increment);
        if stream.phase != Phase::Open || grown > limit {
            return self.violation(id, ResetReason::Protocol);
        }
        stream.send_window = grown;
        if self.blocked.remove(&id) {
            self.events.push_back(Event::Writable { stream: id });
        }
    }

    fn on_fin(&mut self, id: StreamId) {
        let Some(stream) = self.streams.get_mut(&id) else {
            return;
        };
        if !stream.phase.receives() || stream.remote_fin {
            return self.violation(id, ResetReason::Protocol);
        }
        stream.remote_fin = true;
        let done = stream.done();
        self.events.push_back(Event::Finished { stream: id });
        if done {
            self.forget(id);
        }
    }

    /// The peer broke a stream's rules: reset that stream, keep the session.
    fn violation(&mut self, stream: StreamId, reason: ResetReason) {
        self.forget(stream);
        self.push(&Frame::Reset { stream, reason });
        self.events.push_back(Event::Reset { stream, reason });
    }

    /// Opens a stream to `service` on the peer; the answer comes as
    /// [`Event::Replied`]. Data (and FIN) may follow at once, within the
    /// lane's window: a request rides with its OPEN instead of waiting a
    /// round trip for the reply.
    pub fn open_stream(&mut self, service: &str) -> Result<StreamId, StreamError> {
        self.check_open()?;
        if service.is_empty() || service.len() > MAX_SERVICE_LEN {
            return Err(StreamError::BadService(service.len()));
        }
        if self.streams.len() >= MAX_STREAMS {
            return Err(StreamError::TooManyStreams);
        }
        let id = StreamId(self.next_id);
        self.next_id = self
            .next_id
            .checked_add(2)
            .ok_or(StreamError::IdsExhausted)?;
        let window = u64::from(self.lane.window());
        self.streams.insert(id, Stream::new(Phase::Opening, window));
        self.push(&Frame::Open {
            stream: id,
            service,
        });
        Ok(id)
    }

    /// Accepts a stream the peer opened ([`Event::Opened`]).
    pub fn accept(&mut self, stream: StreamId) -> Result<(), StreamError> {
        self.pending(stream)?.phase = Phase::Open;
        self.push(&Frame::Reply {
            stream,
            result: Ok(()),
        });
        // Early data consumed before the reply.
        self.return_credit(stream);
        Ok(())
    }

    /// Refuses a stream the peer opened ([`Event::Opened`]). A
    /// `ServiceRefused` message longer than
    /// [`MAX_REFUSAL_MESSAGE`](crate::frame::MAX_REFUSAL_MESSAGE) is cut.
    pub fn refuse(&mut self, stream: StreamId, refusal: Refusal) -> Result<(), StreamError> {
        let refusal = match refusal {
            Refusal::NotDelivered => return Err(StreamError::LocalOnlyReason),
            Refusal::ServiceRefused(message) => Refusal::ServiceRefused(truncate_message(message)),
            other => other,
        };
        self.pending(stream)?;
        self.forget(stream);
        self.push(&Frame::Reply {
            stream,
            result: Err(refusal),
        });
        Ok(())
    }

    /// Reserves up to `len` bytes of the stream's send window for one DATA
    /// message, at most [`MAX_FRAME_PAYLOAD`]: returns the header and how
    /// many bytes it grants. The host writes the header followed by exactly
    /// that many bytes as one message, after the output queued so far and
    /// before any queued later; the session never holds the bytes.
    ///
    /// A grant short of `len` because of the frame size means call again. A
    /// grant of 0 (with an empty header) for a non-empty `len` means the
    /// window is spent: wait for [`Event::Writable`].
    pub fn reserve_send(
        &mut self,
        id: StreamId,
        len: usize,
    ) -> Result<(Vec<u8>, usize), StreamError> {
        self.check_open()?;
        let stream = self.open(id)?;
        let window = usize::try_from(stream.send_window).unwrap_or(usize::MAX);
        let granted = len.min(MAX_FRAME_PAYLOAD).min(window);
        stream.send_window -= granted as u64;
        if granted < len && stream.send_window == 0 {
            self.blocked.insert(id);
        }
        if granted == 0 {
            return Ok((Vec::new(), 0));
        }
        let header = Frame::Data {
            stream: id,
            len: granted,
        }
        .encode();
        Ok((header, granted))
    }

    /// The application took `n` bytes of [`Event::Data`] bodies on `stream`.
    /// Credit goes back to the peer in one WINDOW once at least half the
    /// window has been consumed. A stream already gone is ignored.
    pub fn consumed(&mut self, id: StreamId, n: u64) -> Result<(), StreamError> {
        self.check_open()?;
        let Some(stream) = self.streams.get_mut(&id) else {
            return Ok(());
        };
        if n > stream.unconsumed {
            return Err(StreamError::OverConsumed {
                stream: id,
                consumed: n,
                delivered: stream.unconsumed,
            });
        }
        stream.unconsumed -= n;
        stream.unreturned += n;
        self.return_credit(id);
        Ok(())
    }

    /// Sends the stream's consumed credit back once it is half the window.
    /// After the peer's FIN no more data comes, so credit is pointless;
    /// before this side's REPLY a WINDOW would arrive ahead of it (`accept`
    /// calls again).
    fn return_credit(&mut self, id: StreamId) {
        let half = u64::from(self.lane.window() / 2);
        let Some(stream) = self.streams.get_mut(&id) else {
            return;
        };
        if stream.unreturned >= half && !stream.remote_fin && stream.phase == Phase::Open {
            let increment = stream.unreturned;
            stream.recv_window += increment;
            stream.unreturned = 0;
            self.push(&Frame::Window {
                stream: id,
                // At most the lane window, which is a u32.
                increment: u32::try_from(increment).unwrap_or(u32::MAX),
            });
        }
    }

    /// Sends FIN: this side sends no more on `stream`; the peer may go on
    /// sending until it finishes too.
    pub fn finish(&mut self, id: StreamId) -> Result<(), StreamError> {
        self.check_open()?;
        let stream = self.open(id)?;
        stream.local_fin = true;
        let done = stream.done();
        self.blocked.remove(&id);
        self.push(&Frame::Fin { stream: id });
        if done {
            self.forget(id);
        }
        Ok(())
    }

    /// Abandons `stream` in both directions. A stream waiting for this
    /// side's answer is refused instead (the worker always replies).
    pub fn reset(&mut self, stream: StreamId, reason: ResetReason) -> Result<(), StreamError> {
        self.check_open()?;
        if reason == ResetReason::SessionEnded {
            return Err(StreamError::LocalOnlyReason);
        }
        match self.streams.get(&stream) {
            None => return Err(StreamError::UnknownStream(stream)),
            Some(s) if s.phase == Phase::Pending => return Err(StreamError::NotOpen(stream)),
            Some(_) => {}
        }
        self.forget(stream);
        self.push(&Frame::Reset { stream, reason });
        Ok(())
    }

    fn check_open(&self) -> Result<(), StreamError> {
        if self.closed {
            Err(StreamError::SessionClosed)
        } else {
            Ok(())
        }
    }

    fn pending(&mut self, id: StreamId) -> Result<&mut Stream, StreamError> {
        self.check_open()?;
        match self.streams.get_mut(&id) {
            None => Err(StreamError::UnknownStream(id)),
            Some(s) if s.phase != Phase::Pending => Err(StreamError::NotPending(id)),
            Some(s) => Ok(s),
        }
    }

    /// The stream, if this side may send on it (opened here, or accepted)
    /// and has not finished it.
    fn open(&mut self, id: StreamId) -> Result<&mut Stream, StreamError> {
        match self.streams.get_mut(&id) {
            None => Err(StreamError::UnknownStream(id)),
            Some(s) if s.phase == Phase::Pending => Err(StreamError::NotOpen(id)),
            Some(s) if s.local_fin => Err(StreamError::AlreadyFinished(id)),
            Some(s) => Ok(s),
        }
    }

    fn forget(&mut self, id: StreamId) -> Option<Stream> {
        self.blocked.remove(&id);
        self.streams.remove(&id)
    }

    fn push(&mut self, frame: &Frame<'_>) {
        self.output.push_back(frame.encode());
    }

    fn shut_down(&mut self) {
        self.closed = true;
        self.output.clear();
        self.blocked.clear();
        for (stream, state) in std::mem::take(&mut self.streams) {
            self.events.push_back(match state.phase {
                Phase::Opening => Event::Replied {
                    stream,
                    result: Err(Refusal::NotDelivered),
                },
                Phase::Pending | Phase::Open => Event::Reset {
                    stream,
                    reason: ResetReason::SessionEnded,
                },
            });
        }
    }
}
