//! A sans-IO stream multiplexer for the Switchyard websocket tunnel carrier.
//!
//! Workers dial out to the frontend over a websocket, one per lane
//! ([`Lane::Inference`], [`Lane::Bulk`]); a [`Session`] on each end carries
//! many ordered, half-closable byte streams over it with per-stream flow
//! control. The session does no I/O and reads no clock: the host owns the
//! websocket and the timer, writes every message [`Session::poll_output`]
//! yields, calls [`Session::on_tick`] by [`Session::next_tick_ms`], and gives
//! the application the [`Event`]s. Built for wasm32 the crate is also the
//! `switchyard:carrier/tunnel@0.2.0` component, one session per instance.
//!
//! # Bodies stay with the host
//!
//! Stream bytes never enter the session, so a component copies no body
//! across its boundary. The host splits each incoming message by
//! [`BODY_RULE`] (a DATA frame: kind byte 3 at offset 4, a 5-byte header)
//! and hands the session the header and the body's length
//! ([`Session::on_header`]); [`Event::Data`] names the stream the body it
//! kept belongs to. To send, [`Session::reserve_send`] grants credit and
//! returns the DATA header; the host writes it and that many bytes as one
//! message.
//!
//! ```
//! use switchyard_plugin_tunnel::{BODY_RULE, Event, Lane, Session, Side};
//!
//! /// What the host does with each message it reads.
//! fn receive(session: &mut Session, message: &[u8]) {
//!     let (header, body) = BODY_RULE.split(message);
//!     session.on_header(header, body.len(), 0).unwrap();
//! }
//!
//! let mut frontend = Session::new(Side::Frontend, Lane::Inference, 0);
//! let mut worker = Session::new(Side::Worker, Lane::Inference, 0);
//! let stream = frontend.open_stream("inference").unwrap();
//! for message in frontend.drain_output() {
//!     receive(&mut worker, &message);
//! }
//! assert_eq!(
//!     worker.poll_event(),
//!     Some(Event::Opened { stream, service: "inference".into() })
//! );
//! worker.accept(stream).unwrap();
//! for message in worker.drain_output() {
//!     receive(&mut frontend, &message);
//! }
//! assert_eq!(frontend.poll_event(), Some(Event::Replied { stream, result: Ok(()) }));
//!
//! let body = b"{\"prompt\":\"hi\"}";
//! let (header, granted) = frontend.reserve_send(stream, body.len()).unwrap();
//! assert_eq!(granted, 15);
//! let message = [&header[..], &body[..granted]].concat();
//! receive(&mut worker, &message);
//! // The worker's host keeps `message[5..]` for the stream the event names.
//! assert_eq!(worker.poll_event(), Some(Event::Data { stream, len: 15 }));
//! worker.consumed(stream, 15).unwrap();
//! ```
//!
//! # Frame format (version 1)
//!
//! Each websocket binary message is exactly one frame, at most
//! [`MAX_FRAME_LEN`] (64 KiB) bytes including the header, so it fits the
//! host's 64 KiB buffers. Integers are big-endian.
//!
//! ```text
//! +----------------+--------+-------------------------------------+
//! | stream id: u32 | kind u8| payload (0 ..= MAX_FRAME_PAYLOAD)   |
//! +----------------+--------+-------------------------------------+
//! ```
//!
//! | kind | code | stream id | payload |
//! |---|---|---|---|
//! | HELLO | 0 | 0 | version `1`, side (1 frontend, 2 worker), lane (1 inference, 2 bulk) |
//! | OPEN | 1 | new id | service name, UTF-8, 1 to 255 bytes |
//! | REPLY | 2 | the opened id | status: 0 accepted, 1 unknown service, 2 service refused (then a UTF-8 message of at most 1024 bytes), 3 overloaded |
//! | DATA | 3 | open stream | bytes (the body, kept by the host) |
//! | WINDOW | 4 | open stream | u32 credit increment, not 0 |
//! | FIN | 5 | open stream | empty |
//! | RESET | 6 | stream | reason: 1 cancelled, 2 window overrun, 3 protocol |
//! | PING | 7 | 0 | u64 nonce |
//! | PONG | 8 | 0 | the PING's nonce |
//!
//! Rules:
//!
//! - Each side sends HELLO first. The version byte is read before anything
//!   else; a peer that names another version, the same side or another lane
//!   ends the session.
//! - Odd stream ids are opened by the frontend and even ids by the worker,
//!   so the two never collide; each side's ids only grow. The protocol is
//!   symmetric, though Switchyard's frontend is the one that opens.
//! - The side receiving OPEN always answers with REPLY: the application's
//!   accept or refusal, or `overloaded` past [`MAX_STREAMS`]. The opener
//!   may send DATA and FIN right after its OPEN, within the lane's window,
//!   so a request rides with the OPEN instead of waiting a round trip; a
//!   refused stream's early data is dropped (it is for a stream gone). The
//!   side that received the OPEN sends nothing on it before its REPLY.
//! - Each direction of an accepted stream starts with the lane's window
//!   ([`INFERENCE_WINDOW`], [`BULK_WINDOW`]) of credit. DATA spends it,
//!   WINDOW returns it (the receiver batches: once half the window was
//!   consumed). DATA past the credit resets the stream (`window overrun`);
//!   DATA from the replying side before its reply, DATA after FIN, or
//!   credit past the lane's window resets it (`protocol`). The session
//!   survives both.
//! - FIN closes one direction; the stream is gone once both are closed or
//!   after RESET. Frames for a stream already gone are ignored (they were in
//!   flight).
//! - A malformed frame, an OPEN with a reused or wrong-parity id, or a
//!   repeated HELLO ends the session ([`SessionError`]).
//! - After [`PING_IDLE_MS`] without hearing a frame a side sends PING; if
//!   nothing is heard within [`PONG_TIMEOUT_MS`] the session is lost.
//!
//! # Layout
//!
//! - `frame.rs`: the wire format ([`Frame`] encode and decode, the
//!   [`BODY_RULE`] split), ids, sides, lanes, refusals and reset reasons;
//!   `frame/decode.rs` the header's checks and the HELLO and REPLY payloads.
//! - `session.rs`: the [`Session`] state machine, its events, errors and
//!   limits; `session/stream.rs` one stream's windows and half-close state.
//! - `component.rs` (wasm32 only): the `switchyard:carrier/tunnel@0.2.0`
//!   glue, one session per instance in a thread-local.

// SAFETY: only wit-bindgen's generated exports use `unsafe`.
#[allow(unsafe_code)]
#[cfg(target_arch = "wasm32")]
mod component;
pub mod frame;
mod session;

pub use frame::{
    BODY_RULE, BodyRule, Frame, FrameError, Kind, Lane, MAX_FRAME_LEN, MAX_FRAME_PAYLOAD,
    MAX_REFUSAL_MESSAGE, MAX_SERVICE_LEN, PROTOCOL_VERSION, Refusal, ResetReason, Side, StreamId,
};
pub use session::{
    BULK_WINDOW, Event, INFERENCE_WINDOW, MAX_QUEUED_EVENTS, MAX_QUEUED_FRAMES, MAX_STREAMS,
    PING_IDLE_MS, PONG_TIMEOUT_MS, Session, SessionError, StreamError,
};
