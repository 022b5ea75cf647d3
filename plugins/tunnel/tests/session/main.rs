//! Sessions driven with raw frames and wired back to back.

mod close;
mod flow;
mod fuzz;
mod keepalive;
mod open;

use switchyard_plugin_tunnel::{Event, Frame, Lane, Session, Side, StreamId};

/// A frontend and a worker that have exchanged HELLO.
pub fn pair(lane: Lane) -> (Session, Session) {
    let mut frontend = Session::new(Side::Frontend, lane, 0);
    let mut worker = Session::new(Side::Worker, lane, 0);
    pump(&mut frontend, &mut worker, 0);
    (frontend, worker)
}

/// Moves frames both ways until neither side has any left.
pub fn pump(a: &mut Session, b: &mut Session, now_ms: u64) {
    loop {
        let ab = a.drain_output();
        let ba = b.drain_output();
        if ab.is_empty() && ba.is_empty() {
            return;
        }
        for message in ab {
            b.on_frame(&message, now_ms).unwrap();
        }
        for message in ba {
            a.on_frame(&message, now_ms).unwrap();
        }
    }
}

/// Opens `service` from the frontend and accepts it on the worker.
pub fn open_accepted(frontend: &mut Session, worker: &mut Session) -> StreamId {
    let stream = frontend.open_stream("svc").unwrap();
    pump(frontend, worker, 0);
    assert_eq!(
        worker.drain_events(),
        [Event::Opened {
            stream,
            service: "svc".into()
        }]
    );
    worker.accept(stream).unwrap();
    pump(frontend, worker, 0);
    assert_eq!(
        frontend.drain_events(),
        [Event::Replied {
            stream,
            result: Ok(())
        }]
    );
    stream
}

/// Every frame waiting in `session`'s output.
pub fn frames(session: &mut Session) -> Vec<Vec<u8>> {
    session.drain_output()
}

/// The kinds of `messages`, for asserting on what was sent.
pub fn decoded(messages: &[Vec<u8>]) -> Vec<Frame<'_>> {
    messages.iter().map(|m| Frame::decode(m).unwrap()).collect()
}

/// Every byte of DATA events for `stream`, consuming as it reads.
pub fn read_all(session: &mut Session, stream: StreamId) -> Vec<u8> {
    let mut out = Vec::new();
    for event in session.drain_events() {
        if let Event::Data { stream: s, bytes } = event {
            assert_eq!(s, stream);
            session.consumed(stream, bytes.len() as u64).unwrap();
            out.extend(bytes);
        }
    }
    out
}
