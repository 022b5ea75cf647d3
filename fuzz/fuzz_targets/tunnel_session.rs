//! The tunnel's session state machine (`plugins/tunnel/src/session.rs`)
//! driven by a hostile peer and an arbitrary application: the input is a
//! list of operations, mostly messages from the peer (as the host splits
//! them by BODY_RULE), mixed with the application's calls and the clock.
//!
//! Invariants: no panic; every frame the session queues decodes and is not
//! DATA (bodies never enter the session); DATA events are 1 to
//! MAX_FRAME_PAYLOAD bytes; a granted send is within the request, the frame
//! size and the window, and its header decodes to that DATA; windows never
//! pass the lane's; at most MAX_STREAMS streams; an error ends the session
//! and a closed session refuses every message.

#![no_main]

use std::collections::HashMap;

use libfuzzer_sys::fuzz_target;
use switchyard_fuzz::Input;
use switchyard_plugin_tunnel::{
    BODY_RULE, Event, Frame, Lane, MAX_FRAME_PAYLOAD, MAX_STREAMS, Refusal, ResetReason, Session,
    SessionError, Side, StreamId,
};

struct Harness {
    session: Session,
    now: u64,
    /// Streams seen, for the application's calls to name.
    streams: Vec<StreamId>,
    /// Bytes delivered and not yet consumed, per stream.
    unconsumed: HashMap<StreamId, u64>,
}

impl Harness {
    fn window(&self) -> u64 {
        u64::from(self.session.lane().window())
    }

    fn stream(&self, input: &mut Input<'_>) -> StreamId {
        let pick = input.byte();
        match self.streams.len() {
            // A few ids no one opened, too.
            n if n == 0 || pick >= 0xf0 => StreamId(u32::from(pick & 0x0f)),
            n => self.streams[usize::from(pick) % n],
        }
    }

    fn receive(&mut self, message: &[u8]) {
        let (header, body) = BODY_RULE.split(message);
        let was_closed = self.session.is_closed();
        match self.session.on_header(header, body.len(), self.now) {
            Ok(()) => assert!(!was_closed),
            Err(SessionError::Closed) => assert!(was_closed),
            Err(_) => assert!(self.session.is_closed()),
        }
    }

    fn check(&mut self) {
        assert!(self.session.stream_count() <= MAX_STREAMS);
        for stream in &self.streams {
            if let Some(window) = self.session.send_window(*stream) {
                assert!(window <= self.window(), "{stream} send window {window}");
            }
        }
    }

    fn drain(&mut self) {
        for message in self.session.drain_output() {
            let frame = Frame::decode(&message).expect("the session writes valid frames");
            assert!(!matches!(frame, Frame::Data { .. }), "DATA was queued");
        }
        for event in self.session.drain_events() {
            match event {
                Event::Opened { stream, .. } => {
                    assert_ne!(stream.is_frontend(), self.session.side() == Side::Frontend);
                    self.streams.push(stream);
                }
                Event::Data { stream, len } => {
                    assert!((1..=MAX_FRAME_PAYLOAD).contains(&len));
                    *self.unconsumed.entry(stream).or_default() += len as u64;
                }
                Event::Reset { stream, .. } => {
                    self.unconsumed.remove(&stream);
                }
                _ => {}
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let setup = input.byte();
    let side = if setup & 1 == 0 {
        Side::Worker
    } else {
        Side::Frontend
    };
    let lane = if setup & 2 == 0 {
        Lane::Inference
    } else {
        Lane::Bulk
    };
    let mut h = Harness {
        session: Session::new(side, lane, 0),
        now: 0,
        streams: Vec::new(),
        unconsumed: HashMap::new(),
    };
    if setup & 4 != 0 {
        // Greet on the peer's behalf, so that every input starts past HELLO.
        let hello = Frame::Hello {
            side: side.peer(),
            lane,
        }
        .encode();
        h.receive(&hello);
    }
    while !input.is_empty() {
        match input.byte() % 12 {
            // A message from the peer, as raw bytes.
            0..=3 => {
                let message = input.chunk();
                h.receive(message);
            }
            // A DATA frame with a body of a chosen size, without spelling it out.
            4 => {
                let stream = h.stream(&mut input);
                let len = usize::from(input.u16());
                let mut message = Frame::Data { stream, len }.encode();
                message.resize(message.len() + len, 0xab);
                h.receive(&message);
            }
            5 => {
                let stream = h.stream(&mut input);
                let _ = h.session.accept(stream);
            }
            6 => {
                let stream = h.stream(&mut input);
                let refusal = match input.byte() % 4 {
                    0 => Refusal::UnknownService,
                    1 => Refusal::Overloaded,
                    2 => Refusal::NotDelivered,
                    _ => Refusal::ServiceRefused("é".repeat(usize::from(input.byte()) * 8)),
                };
                let _ = h.session.refuse(stream, refusal);
            }
            7 => {
                let stream = h.stream(&mut input);
                let waiting = h.unconsumed.get(&stream).copied().unwrap_or(0);
                let n = u64::from(input.u32()) % (waiting + 2);
                let result = h.session.consumed(stream, n);
                if result.is_ok()
                    && !h.session.is_closed()
                    && let Some(left) = h.unconsumed.get_mut(&stream)
                {
                    *left = left.saturating_sub(n);
                }
            }
            8 => {
                let stream = h.stream(&mut input);
                let len = input.u32() as usize;
                let before = h.session.send_window(stream);
                if let Ok((header, granted)) = h.session.reserve_send(stream, len) {
                    let window = before.expect("granted on a known stream");
                    assert!(granted <= len && granted <= MAX_FRAME_PAYLOAD);
                    assert!(granted as u64 <= window);
                    if granted > 0 {
                        assert_eq!(
                            Frame::decode_split(&header, granted),
                            Ok(Frame::Data {
                                stream,
                                len: granted
                            })
                        );
                    }
                }
            }
            9 => {
                let stream = h.stream(&mut input);
                match input.byte() % 3 {
                    0 => {
                        let _ = h.session.finish(stream);
                    }
                    1 => {
                        let _ = h.session.reset(stream, ResetReason::Cancelled);
                    }
                    _ => {
                        let _ = h.session.reset(stream, ResetReason::SessionEnded);
                    }
                }
            }
            10 => {
                let service = String::from_utf8_lossy(input.chunk()).into_owned();
                if let Ok(stream) = h.session.open_stream(&service) {
                    assert_eq!(stream.is_frontend(), side == Side::Frontend);
                    h.streams.push(stream);
                }
            }
            _ => {
                h.now += u64::from(input.u16()) * 16;
                h.session.on_tick(h.now);
                if input.byte() & 1 == 0 {
                    h.drain();
                }
            }
        }
        h.check();
    }
    h.drain();
    h.session.close();
    assert!(h.session.is_closed());
    assert_eq!(h.session.stream_count(), 0);
    assert_eq!(
        h.session
            .on_header(&[0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 1], 0, h.now),
        Err(SessionError::Closed)
    );
});
