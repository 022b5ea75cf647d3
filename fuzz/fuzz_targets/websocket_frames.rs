//! The tunnel's own websocket reader (`host/carrier/src/tunnel/websocket/
//! frames.rs` and `frame.rs`): what a frontend reads from every worker that
//! dials it, and a worker from the frontend, before anything is checked.
//!
//! The two modules are compiled here from their source files, not through
//! the `switchyard-carrier` crate, which links wasmtime; they need only
//! `bytes` and `thiserror`.
//!
//! Input: a control byte (bit 0: read as the server, else as the client;
//! the rest: the size of the pieces the bytes arrive in, 0 meaning all at
//! once), then the bytes.
//! Invariants: no panic; the messages, and whether reading failed, are the
//! same whatever the pieces; no data message is over MAX_MESSAGE and no
//! ping over 125 bytes; the reader holds at most a bounded buffer beyond
//! the input: its read buffers and a fragmented message, whatever lengths
//! the frames claim.

#![no_main]

#[allow(dead_code, unreachable_pub)]
#[path = "../../host/carrier/src/tunnel/websocket/frame.rs"]
mod frame;
#[allow(dead_code, unreachable_pub)]
#[path = "../../host/carrier/src/tunnel/websocket/frames.rs"]
mod frames;

use bytes::BytesMut;
use frame::{MAX_MESSAGE, Role};
use frames::{Frames, Message, READ_AHEAD};
use libfuzzer_sys::fuzz_target;
use switchyard_fuzz::peak_during;

/// Everything read, and whether reading stopped at an error.
fn read(role: Role, data: &[u8], piece: usize) -> (Vec<Message>, bool) {
    let mut frames = Frames::new(role, BytesMut::new());
    let mut messages = Vec::new();
    for piece in data.chunks(piece.max(1)) {
        frames.buffer().extend_from_slice(piece);
        loop {
            match frames.next_message() {
                Ok(Some(message)) => messages.push(message),
                Ok(None) => break,
                Err(_) => return (messages, true),
            }
        }
    }
    (messages, false)
}

fuzz_target!(|data: &[u8]| {
    let Some((&control, bytes)) = data.split_first() else {
        return;
    };
    let role = if control & 1 == 1 {
        Role::Server
    } else {
        Role::Client
    };
    let piece = usize::from(control >> 1);
    let (whole, peak) = peak_during(|| read(role, bytes, bytes.len()));
    let (pieces, _) =
        peak_during(|| read(role, bytes, if piece == 0 { bytes.len() } else { piece }));
    assert_eq!(whole, pieces);
    for message in &whole.0 {
        match message {
            Message::Binary(b) | Message::Text(b) => assert!(b.len() <= MAX_MESSAGE),
            Message::Ping(p) => assert!(p.len() <= 125),
            Message::Pong | Message::Close => {}
        }
    }
    assert!(
        peak <= 4 * bytes.len() + 2 * READ_AHEAD + MAX_MESSAGE,
        "{peak} bytes held for {} of input",
        bytes.len()
    );
});
