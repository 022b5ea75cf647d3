//! A sans-IO stream multiplexer for the Switchyard websocket tunnel carrier.
//!
//! Workers dial out to the frontend over a websocket, one per lane
//! ([`Lane::Inference`], [`Lane::Bulk`]); a [`Session`] on each end carries
//! many ordered, half-closable byte streams over it with per-stream flow
//! control. The session does no I/O and reads no clock: the host owns the
//! websocket and the timer, hands each incoming binary message to
//! [`Session::on_frame`], writes every message [`Session::poll_output`]
//! yields, calls [`Session::on_tick`] by [`Session::next_tick_ms`], and gives
//! the application the [`Event`]s.
//!
//! ```
//! use switchyard_plugin_tunnel::{Event, Lane, Session, Side};
//!
//! let mut frontend = Session::new(Side::Frontend, Lane::Inference, 0);
//! let mut worker = Session::new(Side::Worker, Lane::Inference, 0);
//! let stream = frontend.open_stream("inference").unwrap();
//! for message in frontend.drain_output() {
//!     worker.on_frame(&message, 0).unwrap();
//! }
//! assert_eq!(
//!     worker.poll_event(),
//!     Some(Event::Opened { stream, service: "inference".into() })
//! );
//! worker.accept(stream).unwrap();
//! for message in worker.drain_output() {
//!     frontend.on_frame(&message, 0).unwrap();
//! }
//! assert_eq!(frontend.poll_event(), Some(Event::Replied { stream, result: Ok(()) }));
//! assert_eq!(frontend.send(stream, b"{\"prompt\":\"hi\"}").unwrap(), 15);
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
//! | DATA | 3 | open stream | bytes |
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
//!   sends no DATA before an accepting REPLY, so a stream left unanswered
//!   when the session ends ([`Refusal::NotDelivered`]) delivered nothing.
//! - Each direction of an accepted stream starts with the lane's window
//!   ([`INFERENCE_WINDOW`], [`BULK_WINDOW`]) of credit. DATA spends it,
//!   WINDOW returns it (the receiver batches: once half the window was
//!   consumed). DATA past the credit resets the stream (`window overrun`);
//!   DATA before the reply or after FIN, or credit past the lane's window,
//!   resets it (`protocol`). The session survives both.
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
//! - `frame.rs`: the wire format ([`Frame`] encode and decode), ids, sides,
//!   lanes, refusals and reset reasons.
//! - `session.rs`: the [`Session`] state machine, its events, errors and
//!   limits; `session/stream.rs` one stream's windows and half-close state.

pub mod frame;
mod session;

pub use frame::{
    Frame, FrameError, Kind, Lane, MAX_FRAME_LEN, MAX_FRAME_PAYLOAD, MAX_REFUSAL_MESSAGE,
    MAX_SERVICE_LEN, PROTOCOL_VERSION, Refusal, ResetReason, Side, StreamId,
};
pub use session::{
    BULK_WINDOW, Event, INFERENCE_WINDOW, MAX_QUEUED_EVENTS, MAX_QUEUED_FRAMES,
    MAX_QUEUED_OUTPUT_BYTES, MAX_STREAMS, PING_IDLE_MS, PONG_TIMEOUT_MS, Session, SessionError,
    StreamError,
};
