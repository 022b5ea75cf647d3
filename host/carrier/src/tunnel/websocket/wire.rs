//! The websocket of a worker's session with a frontend, read and written
//! here rather than through a message library: the session's throughput
//! is the stream's, and a library that takes one contiguous message and
//! owns its buffers costs two copies and a memset per byte (the tunnel's
//! profile in `docs/benchmarks.md`).
//!
//! Reading fills one buffer without zeroing it and hands each binary
//! message on as a slice of it. A server writes the frame head, the
//! session's header and the stream's data in one vectored write, nothing
//! copied; a client must mask what it writes (RFC 6455 5.3), so it masks
//! as it copies into its write buffer, one pass over the data.

use std::io::IoSlice;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use super::frame::{self, MAX_HEAD, MAX_MESSAGE, Opcode, Role};
use super::frames::{Frames, Message, ReadError};
use crate::tunnel::{Outbound, Transport};

/// Messages gathered into one write.
const BATCH: usize = 64;
/// A client's write buffer is written out once it holds this much.
const WRITE_BUFFER: usize = 4 * MAX_MESSAGE;
/// Masked in pieces this long, so that the copy and the mask pass over
/// bytes still in cache.
const MASK_PIECE: usize = 16 * 1024;
/// Pings waiting for their pong; more are dropped (a pong answers the
/// latest ping only, RFC 6455 5.5.3).
const PONGS_WAITING: usize = 4;

/// The read half: messages from a socket.
pub struct Reader<R> {
    io: R,
    frames: Frames,
}

impl<R: AsyncRead + Unpin> Reader<R> {
    pub fn new(io: R, role: Role, read_ahead: BytesMut) -> Self {
        Self {
            io,
            frames: Frames::new(role, read_ahead),
        }
    }

    /// The next message; `None` when the peer ended the connection
    /// between messages.
    pub async fn next(&mut self) -> Result<Option<Message>, ReadError> {
        loop {
            if let Some(message) = self.frames.next_message()? {
                return Ok(Some(message));
            }
            if self.io.read_buf(self.frames.buffer()).await? == 0 {
                return if self.frames.is_mid_message() {
                    Err(ReadError::Truncated)
                } else {
                    Ok(None)
                };
            }
        }
    }
}

/// The write half: session messages as binary frames, and control frames.
pub struct Writer<W> {
    io: W,
    role: Role,
    /// The frame heads of a vectored write.
    heads: Vec<u8>,
    /// A client's masked frames, or a writer's that cannot write vectored.
    buffer: BytesMut,
}

impl<W: AsyncWrite + Unpin> Writer<W> {
    pub fn new(io: W, role: Role) -> Self {
        Self {
            io,
            role,
            heads: Vec::with_capacity(BATCH * MAX_HEAD),
            buffer: BytesMut::new(),
        }
    }

    /// Writes each message as one binary frame.
    pub async fn write(&mut self, messages: &[Outbound]) -> std::io::Result<()> {
        if self.role == Role::Server && self.io.is_write_vectored() {
            self.write_vectored(messages).await
        } else {
            for message in messages {
                self.buffer_frame(Opcode::Binary, &[&message.head, &message.body]);
                if self.buffer.len() >= WRITE_BUFFER {
                    self.write_buffer().await?;
                }
            }
            self.write_buffer().await
        }
    }

    /// A pong answering a ping's payload.
    pub async fn pong(&mut self, payload: &[u8]) -> std::io::Result<()> {
        self.buffer_frame(Opcode::Pong, &[payload]);
        self.write_buffer().await
    }

    /// A close frame (1000, normal closure), then the connection's end.
    pub async fn close(&mut self) -> std::io::Result<()> {
        self.buffer_frame(Opcode::Close, &[&1000u16.to_be_bytes()]);
        self.write_buffer().await?;
        self.io.shutdown().await
    }

    async fn write_vectored(&mut self, messages: &[Outbound]) -> std::io::Result<()> {
        self.heads.clear();
        let mut sizes = Vec::with_capacity(messages.len());
        for message in messages {
            let mut head = [0u8; MAX_HEAD];
            let size = frame::write_head(&mut head, Opcode::Binary, message.len(), None);
            self.heads.extend_from_slice(&head[..size]);
            sizes.push(size);
        }
        let mut slices = Vec::with_capacity(messages.len() * 3);
        let mut heads = &self.heads[..];
        for (message, size) in messages.iter().zip(sizes) {
            slices.push(IoSlice::new(&heads[..size]));
            heads = &heads[size..];
            for part in [&message.head, &message.body] {
                if !part.is_empty() {
                    slices.push(IoSlice::new(part));
                }
            }
        }
        let mut slices = &mut slices[..];
        while !slices.is_empty() {
            let written = self.io.write_vectored(slices).await?;
            if written == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            IoSlice::advance_slices(&mut slices, written);
        }
        Ok(())
    }

    /// Appends one frame of `parts` to the buffer, masked by a client.
    fn buffer_frame(&mut self, opcode: Opcode, parts: &[&[u8]]) {
        let length = parts.iter().map(|p| p.len()).sum();
        let mask = (self.role == Role::Client).then(rand::random::<[u8; 4]>);
        let mut head = [0u8; MAX_HEAD];
        let size = frame::write_head(&mut head, opcode, length, mask);
        self.buffer.reserve(size + length);
        self.buffer.extend_from_slice(&head[..size]);
        let mut phase = 0;
        for part in parts {
            for piece in part.chunks(MASK_PIECE) {
                let start = self.buffer.len();
                self.buffer.extend_from_slice(piece);
                if let Some(key) = mask {
                    frame::apply_mask(&mut self.buffer[start..], key, phase);
                }
                phase = (phase + piece.len()) % 4;
            }
        }
    }

    async fn write_buffer(&mut self) -> std::io::Result<()> {
        if !self.buffer.is_empty() {
            self.io.write_all(&self.buffer).await?;
            self.buffer.clear();
        }
        Ok(())
    }
}

/// Runs a session on `socket`, whose handshake is done and past which
/// `read_ahead` was read, until either end closes: binary messages read go
/// to the session, the session's messages are written; pings are answered.
pub async fn pump<S>(socket: S, role: Role, read_ahead: BytesMut, transport: Transport)
where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let (read, write) = tokio::io::split(socket);
    let mut reader = Reader::new(read, role, read_ahead);
    let Transport { incoming, outgoing } = transport;
    let (pongs, waiting_pongs) = mpsc::channel(PONGS_WAITING);
    let writer = tokio::spawn(write_loop(
        Writer::new(write, role),
        outgoing,
        waiting_pongs,
    ));
    let reason = loop {
        match reader.next().await {
            Ok(Some(Message::Binary(message))) => {
                if !incoming.message(message) {
                    break "the session has ended".to_string();
                }
            }
            Ok(Some(Message::Ping(payload))) => {
                let _ = pongs.try_send(payload);
            }
            Ok(Some(Message::Text(_) | Message::Pong)) => {}
            Ok(Some(Message::Close) | None) => break "the peer closed the websocket".into(),
            Err(e) => break format!("websocket error: {e}"),
        }
    };
    incoming.closed(&reason);
    let _ = writer.await;
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut writer: Writer<W>,
    mut outgoing: mpsc::UnboundedReceiver<Outbound>,
    mut pongs: mpsc::Receiver<Bytes>,
) {
    let mut batch = Vec::with_capacity(BATCH);
    loop {
        tokio::select! {
            biased;
            Some(payload) = pongs.recv() => {
                if writer.pong(&payload).await.is_err() {
                    return;
                }
            }
            message = outgoing.recv() => {
                let Some(message) = message else { break };
                // Write what is already queued in the same write.
                batch.push(message);
                while batch.len() < BATCH
                    && let Ok(more) = outgoing.try_recv()
                {
                    batch.push(more);
                }
                let written = writer.write(&batch).await;
                batch.clear();
                if written.is_err() {
                    return;
                }
            }
        }
    }
    let _ = writer.close().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outbound(head: &[u8], body: &[u8]) -> Outbound {
        Outbound {
            head: Bytes::copy_from_slice(head),
            body: Bytes::copy_from_slice(body),
        }
    }

    /// What `writer_role` writes, as `Frames` of the other role read it.
    async fn written(writer_role: Role, messages: &[Outbound]) -> Vec<Message> {
        let mut wire = Vec::new();
        let mut writer = Writer::new(&mut wire, writer_role);
        writer.write(messages).await.unwrap();
        let reader_role = match writer_role {
            Role::Client => Role::Server,
            Role::Server => Role::Client,
        };
        let mut frames = Frames::new(reader_role, BytesMut::new());
        let mut read = Vec::new();
        // A byte at a time: every split of the wire must parse the same.
        for byte in wire {
            frames.buffer().extend_from_slice(&[byte]);
            while let Some(message) = frames.next_message().unwrap() {
                read.push(message);
            }
        }
        assert!(!frames.is_mid_message());
        read
    }

    #[tokio::test]
    async fn both_roles_write_what_the_other_reads_header_and_body_as_one_message() {
        let body: Vec<u8> = (0..70_000u32).map(|i| (i % 251) as u8).collect();
        let messages = [
            outbound(b"HEAD!", &body[..65_000]),
            outbound(b"whole frame", b""),
            outbound(b"", &body[..3]),
        ];
        for role in [Role::Client, Role::Server] {
            let read = written(role, &messages).await;
            let expected: Vec<Message> = messages
                .iter()
                .map(|m| Message::Binary([&m.head[..], &m.body[..]].concat().into()))
                .collect();
            assert_eq!(read, expected, "written by the {role:?}");
        }
    }
}
