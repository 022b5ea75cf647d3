//! Sessions driven with raw frames and wired back to back, each behind a
//! [`Peer`] that does what the host does with bodies.

mod close;
mod flow;
mod fuzz;
mod keepalive;
mod open;
mod split;

use std::collections::HashMap;

use switchyard_plugin_tunnel::{
    BODY_RULE, Event, Frame, Lane, Session, SessionError, Side, StreamError, StreamId,
};

/// One end as its host drives it: the session, the messages written to the
/// websocket, and the bodies kept for the application.
pub struct Peer {
    pub session: Session,
    /// Messages written and not yet taken by [`Peer::output`], in order.
    wire: Vec<Vec<u8>>,
    /// Events drained from the session and not yet taken by [`Peer::events`].
    events: Vec<Event>,
    /// Bodies kept per stream and not yet taken by [`Peer::read`].
    bodies: HashMap<StreamId, Vec<u8>>,
}

impl Peer {
    pub fn new(side: Side, lane: Lane, now_ms: u64) -> Peer {
        Peer {
            session: Session::new(side, lane, now_ms),
            wire: Vec::new(),
            events: Vec::new(),
            bodies: HashMap::new(),
        }
    }

    /// Hands one message to the session split by the body rule, and keeps
    /// the body for the stream the session names.
    pub fn receive(&mut self, message: &[u8], now_ms: u64) -> Result<(), SessionError> {
        let (header, body) = BODY_RULE.split(message);
        let result = self.session.on_header(header, body.len(), now_ms);
        for event in self.session.drain_events() {
            if let Event::Data { stream, len } = event {
                assert_eq!(len, body.len(), "the event counts the whole body");
                self.bodies.entry(stream).or_default().extend(body);
            }
            self.events.push(event);
        }
        result
    }

    /// Writes as much of `bytes` as the session grants, in DATA messages
    /// after the output queued so far, and returns how much that was.
    pub fn send(&mut self, stream: StreamId, bytes: &[u8]) -> Result<usize, StreamError> {
        self.flush();
        let mut sent = 0;
        loop {
            let (header, granted) = self.session.reserve_send(stream, bytes.len() - sent)?;
            if granted == 0 {
                return Ok(sent);
            }
            self.wire
                .push([&header[..], &bytes[sent..sent + granted]].concat());
            sent += granted;
            if sent == bytes.len() {
                return Ok(sent);
            }
        }
    }

    /// Every message written, in order.
    pub fn output(&mut self) -> Vec<Vec<u8>> {
        self.flush();
        std::mem::take(&mut self.wire)
    }

    /// Every event, in order.
    pub fn events(&mut self) -> Vec<Event> {
        self.events.extend(self.session.drain_events());
        std::mem::take(&mut self.events)
    }

    /// The bytes kept for `stream` and not read yet, reported consumed.
    pub fn read(&mut self, stream: StreamId) -> Vec<u8> {
        let bytes = self.bodies.remove(&stream).unwrap_or_default();
        if !bytes.is_empty() {
            self.session.consumed(stream, bytes.len() as u64).unwrap();
        }
        bytes
    }

    fn flush(&mut self) {
        self.wire.extend(self.session.drain_output());
    }
}

/// A frontend and a worker that have exchanged HELLO.
pub fn pair(lane: Lane) -> (Peer, Peer) {
    let mut frontend = Peer::new(Side::Frontend, lane, 0);
    let mut worker = Peer::new(Side::Worker, lane, 0);
    pump(&mut frontend, &mut worker, 0);
    (frontend, worker)
}

/// Moves messages both ways until neither side has any left.
pub fn pump(a: &mut Peer, b: &mut Peer, now_ms: u64) {
    loop {
        let ab = a.output();
        let ba = b.output();
        if ab.is_empty() && ba.is_empty() {
            return;
        }
        for message in ab {
            b.receive(&message, now_ms).unwrap();
        }
        for message in ba {
            a.receive(&message, now_ms).unwrap();
        }
    }
}

/// Opens `service` from the frontend and accepts it on the worker.
pub fn open_accepted(frontend: &mut Peer, worker: &mut Peer) -> StreamId {
    let stream = frontend.session.open_stream("svc").unwrap();
    pump(frontend, worker, 0);
    assert_eq!(
        worker.events(),
        [Event::Opened {
            stream,
            service: "svc".into()
        }]
    );
    worker.session.accept(stream).unwrap();
    pump(frontend, worker, 0);
    assert_eq!(
        frontend.events(),
        [Event::Replied {
            stream,
            result: Ok(())
        }]
    );
    stream
}

/// The frames of `messages`, for asserting on what was sent.
pub fn decoded(messages: &[Vec<u8>]) -> Vec<Frame<'_>> {
    messages.iter().map(|m| Frame::decode(m).unwrap()).collect()
}

/// A whole DATA message, as a peer would write it.
pub fn data(stream: StreamId, body: &[u8]) -> Vec<u8> {
    let header = Frame::Data {
        stream,
        len: body.len(),
    };
    [&header.encode()[..], body].concat()
}

/// Every byte delivered on `stream`, consumed; the events go, and any data
/// among them must be for `stream`.
pub fn read_all(peer: &mut Peer, stream: StreamId) -> Vec<u8> {
    for event in peer.events() {
        if let Event::Data { stream: s, .. } = event {
            assert_eq!(s, stream);
        }
    }
    peer.read(stream)
}
