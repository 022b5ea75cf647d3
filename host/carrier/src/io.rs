//! Connection tasks and the timer, on tokio; they only move bytes and tell
//! the reactor thread what happened.

use std::sync::mpsc as std_mpsc;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

use crate::reactor::Event;

/// Bytes read per `received` call at most: a whole read, many frames.
const READ_BUFFER: usize = 64 * 1024;

/// Queued writes are coalesced up to this many bytes per write.
const COALESCE_LIMIT: usize = 256 * 1024;

/// One connection: a writer channel and the task that owns the socket.
pub(crate) struct Connection {
    writes: mpsc::UnboundedSender<Bytes>,
    task: tokio::task::JoinHandle<()>,
}

impl Connection {
    /// Dials `address`; reports `Opened`, then `Received`s, then one `Closed`.
    pub(crate) fn dial(
        io: &tokio::runtime::Handle,
        handle: u64,
        address: String,
        events: std_mpsc::Sender<Event>,
    ) -> Self {
        let (writes, mut outbox) = mpsc::unbounded_channel::<Bytes>();
        let task = io.spawn(async move {
            let stream = match tokio::net::TcpStream::connect(&address).await {
                Ok(stream) => stream,
                Err(e) => {
                    let _ = events.send(Event::Closed(
                        handle,
                        format!("connecting to {address}: {e}"),
                    ));
                    return;
                }
            };
            let _ = stream.set_nodelay(true);
            let (mut reader, mut writer) = stream.into_split();
            let _ = events.send(Event::Opened(handle));
            let mut buffer = vec![0u8; READ_BUFFER];
            let reason = loop {
                tokio::select! {
                    read = reader.read(&mut buffer) => match read {
                        Ok(0) => break "closed by the peer".to_string(),
                        Ok(n) => {
                            if events.send(Event::Received(handle, buffer[..n].to_vec())).is_err() {
                                return;
                            }
                        }
                        Err(e) => break format!("read: {e}"),
                    },
                    bytes = outbox.recv() => match bytes {
                        Some(first) => {
                            // Coalesce what is queued into one write: one syscall
                            // for many small frames.
                            let mut pending = bytes::BytesMut::from(&first[..]);
                            while pending.len() < COALESCE_LIMIT {
                                match outbox.try_recv() {
                                    Ok(more) => pending.extend_from_slice(&more),
                                    Err(_) => break,
                                }
                            }
                            if let Err(e) = writer.write_all(&pending).await {
                                break format!("write: {e}");
                            }
                        }
                        // The engine closed the connection.
                        None => return,
                    },
                }
            };
            let _ = events.send(Event::Closed(handle, reason));
        });
        Self { writes, task }
    }

    /// Queues one write.
    pub(crate) fn write(&self, bytes: Bytes) {
        let _ = self.writes.send(bytes);
    }

    /// Closes the connection without reporting it back.
    pub(crate) fn close(self) {
        self.task.abort();
    }
}

/// Reports `Timer(generation)` after `ms`.
pub(crate) fn timer(
    io: &tokio::runtime::Handle,
    ms: u64,
    generation: u64,
    events: std_mpsc::Sender<Event>,
) {
    io.spawn(async move {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        let _ = events.send(Event::Timer(generation));
    });
}
