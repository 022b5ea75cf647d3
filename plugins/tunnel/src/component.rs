//! The `switchyard:carrier/tunnel@0.2.0` component around the session: one
//! instance holds one [`Session`] (one websocket), and every call answers
//! with the events and frames the session queued, drained in order.

use std::cell::RefCell;

use crate::{BODY_RULE, Event, Lane, Refusal, ResetReason, Session, Side, StreamError, StreamId};

wit_bindgen::generate!({
    path: "../../wit",
    world: "switchyard:carrier/tunnel@0.2.0",
    generate_all,
});

use exports::switchyard::carrier0_2_0::session::{self as wit, Guest};

/// What a call before `start` is told.
const NOT_STARTED: &str = "the session has not started";
/// Why a stream this side opened got no reply: its session ended first.
const SESSION_ENDED: &str = "the session ended before the worker answered";

thread_local! {
    static SESSION: RefCell<Option<Session>> = const { RefCell::new(None) };
}

/// Runs `f` on the session, or answers `NOT_STARTED`.
fn with<R>(f: impl FnOnce(&mut Session) -> Result<R, String>) -> Result<R, String> {
    SESSION.with(|s| match s.borrow_mut().as_mut() {
        Some(session) => f(session),
        None => Err(NOT_STARTED.to_owned()),
    })
}

/// Everything the session queued for the host, in order.
fn step(session: &mut Session) -> wit::Step {
    wit::Step {
        events: session.drain_events().into_iter().map(event).collect(),
        frames: session.drain_output(),
    }
}

fn event(event: Event) -> wit::Event {
    match event {
        Event::Opened { stream, service } => wit::Event::Opened((stream.0, service)),
        Event::Replied { stream, result } => {
            wit::Event::Replied((stream.0, result.map_err(wit_refusal)))
        }
        Event::Data { stream, .. } => wit::Event::Data(stream.0),
        Event::Writable { stream } => wit::Event::Writable(stream.0),
        Event::Finished { stream } => wit::Event::Finished(stream.0),
        Event::Reset { stream, reason } => wit::Event::Reset((stream.0, reason.name().to_owned())),
        Event::SessionLost => wit::Event::Lost("keepalive timeout".to_owned()),
    }
}

fn wit_refusal(refusal: Refusal) -> wit::Refusal {
    match refusal {
        Refusal::UnknownService => wit::Refusal::UnknownService,
        Refusal::ServiceRefused(message) => wit::Refusal::ServiceRefused(message),
        Refusal::Overloaded => wit::Refusal::Overloaded,
        Refusal::NotDelivered => wit::Refusal::NotDelivered(SESSION_ENDED.to_owned()),
    }
}

fn refusal(refusal: wit::Refusal) -> Refusal {
    match refusal {
        wit::Refusal::UnknownService => Refusal::UnknownService,
        wit::Refusal::ServiceRefused(message) => Refusal::ServiceRefused(message),
        wit::Refusal::Overloaded => Refusal::Overloaded,
        wit::Refusal::NotDelivered(_) => Refusal::NotDelivered,
    }
}

/// Why `open` opened nothing: at the stream limit the session is
/// overloaded; otherwise nothing reached the peer.
fn open_refusal(e: StreamError) -> wit::Refusal {
    match e {
        StreamError::TooManyStreams => wit::Refusal::Overloaded,
        other => wit::Refusal::NotDelivered(other.to_string()),
    }
}

/// Runs a stream call and answers with the step it queued.
fn stream_call<E: std::fmt::Display>(
    f: impl FnOnce(&mut Session) -> Result<(), E>,
) -> Result<wit::Step, String> {
    with(|session| {
        f(session).map_err(|e| e.to_string())?;
        Ok(step(session))
    })
}

struct Tunnel;

impl Guest for Tunnel {
    fn start(side: wit::Side, lane: wit::Lane, now_ms: u64) -> wit::Step {
        let side = match side {
            wit::Side::Frontend => Side::Frontend,
            wit::Side::Worker => Side::Worker,
        };
        let lane = match lane {
            wit::Lane::Inference => Lane::Inference,
            wit::Lane::Bulk => Lane::Bulk,
        };
        let mut session = Session::new(side, lane, now_ms);
        let answer = step(&mut session);
        SESSION.with(|s| *s.borrow_mut() = Some(session));
        answer
    }

    fn body_rule() -> wit::BodySplit {
        // Both are single-digit offsets into a 5-byte header.
        wit::BodySplit {
            kind_offset: BODY_RULE.kind_offset as u32,
            kind: BODY_RULE.kind,
            header_len: BODY_RULE.header_len as u32,
        }
    }

    fn frame(header: Vec<u8>, body_len: u32, now_ms: u64) -> Result<wit::Step, String> {
        with(|session| {
            let body_len = usize::try_from(body_len).unwrap_or(usize::MAX);
            match session.on_header(&header, body_len, now_ms) {
                Ok(()) => Ok(step(session)),
                Err(e) => {
                    // The session has ended and every stream with it; the
                    // error alone tells the host so.
                    session.drain_events();
                    Err(e.to_string())
                }
            }
        })
    }

    fn tick(now_ms: u64) -> wit::Step {
        with(|session| {
            session.on_tick(now_ms);
            Ok(step(session))
        })
        .unwrap_or_else(|_| wit::Step {
            events: Vec::new(),
            frames: Vec::new(),
        })
    }

    fn next_tick() -> Option<u64> {
        with(|session| Ok(session.next_tick_ms())).unwrap_or(None)
    }

    fn open(service: String) -> Result<(u32, wit::Step), wit::Refusal> {
        SESSION.with(|s| {
            let mut session = s.borrow_mut();
            let Some(session) = session.as_mut() else {
                return Err(wit::Refusal::NotDelivered(NOT_STARTED.to_owned()));
            };
            let stream = session.open_stream(&service).map_err(open_refusal)?;
            Ok((stream.0, step(session)))
        })
    }

    fn accept(stream: u32) -> Result<wit::Step, String> {
        stream_call(|session| session.accept(StreamId(stream)))
    }

    fn refuse(stream: u32, why: wit::Refusal) -> Result<wit::Step, String> {
        stream_call(|session| session.refuse(StreamId(stream), refusal(why)))
    }

    fn send(stream: u32, len: u32) -> Result<(Vec<u8>, u32), String> {
        with(|session| {
            let len = usize::try_from(len).unwrap_or(usize::MAX);
            let (header, granted) = session
                .reserve_send(StreamId(stream), len)
                .map_err(|e| e.to_string())?;
            // Never more than `len`, a u32.
            Ok((header, granted as u32))
        })
    }

    fn consumed(stream: u32, n: u32) -> Result<wit::Step, String> {
        stream_call(|session| session.consumed(StreamId(stream), u64::from(n)))
    }

    fn finish(stream: u32) -> Result<wit::Step, String> {
        stream_call(|session| session.finish(StreamId(stream)))
    }

    fn reset(stream: u32) -> Result<wit::Step, String> {
        stream_call(|session| session.reset(StreamId(stream), ResetReason::Cancelled))
    }
}

export!(Tunnel);
