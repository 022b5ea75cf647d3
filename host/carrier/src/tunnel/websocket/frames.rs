//! Websocket messages out of bytes as they arrive (RFC 6455 5): frames
//! parsed, unmasked, fragments joined. Apart from any socket, so that it is
//! tested and fuzzed alone (`fuzz/fuzz_targets/websocket_frames.rs`
//! compiles this file and [`super::frame`] by path).

use bytes::{Buf, Bytes, BytesMut};

use super::frame::{self, FrameError, Head, MAX_HEAD, MAX_MESSAGE, Opcode, Role};

/// The read buffer's size: several frames per read.
pub const READ_AHEAD: usize = 4 * MAX_MESSAGE;

/// A message read from the websocket.
#[derive(Debug, PartialEq, Eq)]
pub enum Message {
    Binary(Bytes),
    Text(Bytes),
    /// A ping; its payload goes back in the pong.
    Ping(Bytes),
    Pong,
    Close,
}

/// Why reading stopped.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error(transparent)]
    Frame(#[from] FrameError),
    #[error("a fragmented message over {MAX_MESSAGE} bytes")]
    MessageTooLong,
    #[error("the connection ended inside a frame")]
    Truncated,
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Frames out of bytes as they arrive: push bytes in, take messages out.
/// Separate from the socket so that the parser is tested and fuzzed
/// without one.
#[derive(Debug)]
pub struct Frames {
    buffer: BytesMut,
    role: Role,
    /// A fragmented message so far: its opcode and payload.
    fragments: Option<(Opcode, BytesMut)>,
}

impl Frames {
    /// Frames read by `role`, starting with bytes already read (what
    /// followed the handshake's answer).
    pub fn new(role: Role, read_ahead: BytesMut) -> Self {
        Self {
            buffer: read_ahead,
            role,
            fragments: None,
        }
    }

    /// The buffer to read into, with room for at least one whole frame:
    /// the same buffer again once no message read into it is held any more
    /// (`reserve` reclaims it), else a new one. A stream may hold up to its
    /// window of messages, so buffers are freed in bulk while others fill;
    /// `switchyard_carrier::allocator` keeps the allocator from handing their pages
    /// back to the kernel each time.
    pub fn buffer(&mut self) -> &mut BytesMut {
        if self.buffer.capacity() - self.buffer.len() < MAX_HEAD + MAX_MESSAGE {
            self.buffer.reserve(READ_AHEAD);
        }
        &mut self.buffer
    }

    /// Whether bytes of an unfinished frame or message are held.
    pub fn is_mid_message(&self) -> bool {
        !self.buffer.is_empty() || self.fragments.is_some()
    }

    /// The next whole message in what was pushed; `None` until one is.
    pub fn next_message(&mut self) -> Result<Option<Message>, ReadError> {
        loop {
            let Some(head) = frame::parse_head(&self.buffer, self.role, MAX_MESSAGE)? else {
                return Ok(None);
            };
            if self.buffer.len() < head.size + head.length {
                return Ok(None);
            }
            let payload = self.take(head);
            if let Some(message) = self.assemble(head, payload)? {
                return Ok(Some(message));
            }
        }
    }

    fn take(&mut self, head: Head) -> BytesMut {
        self.buffer.advance(head.size);
        let mut payload = self.buffer.split_to(head.length);
        if let Some(key) = head.mask {
            frame::apply_mask(&mut payload, key, 0);
        }
        payload
    }

    /// A frame's part of a message: the message once it is whole.
    fn assemble(&mut self, head: Head, payload: BytesMut) -> Result<Option<Message>, ReadError> {
        let whole = match head.opcode {
            Opcode::Ping => return Ok(Some(Message::Ping(payload.freeze()))),
            Opcode::Pong => return Ok(Some(Message::Pong)),
            Opcode::Close => return Ok(Some(Message::Close)),
            Opcode::Text | Opcode::Binary if self.fragments.is_some() => {
                return Err(FrameError::Fragments.into());
            }
            Opcode::Text | Opcode::Binary if !head.fin => {
                // A buffer of its own, sized to it: the payload is a slice
                // of a read buffer, and growing that allocates the whole
                // buffer's remembered capacity (64 KiB), however short the
                // message (a finding of the `websocket_frames` fuzz target).
                self.fragments = Some((head.opcode, BytesMut::from(&payload[..])));
                return Ok(None);
            }
            Opcode::Text | Opcode::Binary => (head.opcode, payload),
            Opcode::Continuation => {
                let Some((opcode, mut so_far)) = self.fragments.take() else {
                    return Err(FrameError::Fragments.into());
                };
                if so_far.len() + payload.len() > MAX_MESSAGE {
                    return Err(ReadError::MessageTooLong);
                }
                so_far.extend_from_slice(&payload);
                if !head.fin {
                    self.fragments = Some((opcode, so_far));
                    return Ok(None);
                }
                (opcode, so_far)
            }
        };
        Ok(Some(match whole {
            (Opcode::Text, payload) => Message::Text(payload.freeze()),
            (_, payload) => Message::Binary(payload.freeze()),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fragments_join_and_controls_pass_between_them() {
        let mut frames = Frames::new(Role::Client, BytesMut::new());
        // "ab" (text, no FIN), a ping, "cd" (continuation, FIN).
        frames.buffer().extend_from_slice(&[0x01, 2, b'a', b'b']);
        frames.buffer().extend_from_slice(&[0x89, 1, b'p']);
        frames.buffer().extend_from_slice(&[0x80, 2, b'c', b'd']);
        assert_eq!(
            frames.next_message().unwrap(),
            Some(Message::Ping(Bytes::from_static(b"p")))
        );
        assert_eq!(
            frames.next_message().unwrap(),
            Some(Message::Text(Bytes::from_static(b"abcd")))
        );
        assert_eq!(frames.next_message().unwrap(), None);
    }

    #[test]
    fn a_continuation_without_a_start_and_a_message_inside_another_are_refused() {
        let mut frames = Frames::new(Role::Client, BytesMut::new());
        frames.buffer().extend_from_slice(&[0x80, 0]);
        assert!(matches!(
            frames.next_message(),
            Err(ReadError::Frame(FrameError::Fragments))
        ));
        let mut frames = Frames::new(Role::Client, BytesMut::new());
        frames.buffer().extend_from_slice(&[0x02, 1, 0, 0x82, 1, 0]);
        assert!(matches!(
            frames.next_message(),
            Err(ReadError::Frame(FrameError::Fragments))
        ));
    }

    #[test]
    fn a_fragmented_message_over_the_limit_is_refused() {
        let mut frames = Frames::new(Role::Client, BytesMut::new());
        let piece = vec![0u8; 60_000];
        for first in [true, false] {
            let opcode = if first { 0x02 } else { 0x00 };
            frames.buffer().extend_from_slice(&[opcode, 126]);
            frames
                .buffer()
                .extend_from_slice(&(piece.len() as u16).to_be_bytes());
            frames.buffer().extend_from_slice(&piece);
        }
        assert!(matches!(
            frames.next_message(),
            Err(ReadError::MessageTooLong)
        ));
    }
}
