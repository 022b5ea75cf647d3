//! Connection tasks and the timer, on tokio. A connection's task reads and
//! hands what it read to the reactor (running it, when free, on the task
//! itself); the reactor writes the socket directly from whichever task
//! runs it, and leaves the task only what the socket would not take at once.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use tokio::net::TcpStream;
use tokio::sync::Notify;

use crate::reactor::{Event, Events};

/// Bytes read per `received` call at most: a whole read, many frames.
const READ_BUFFER: usize = 64 * 1024;

/// One connection: the socket once it is open, the bytes it has not taken
/// yet, and the task that reads it.
pub(crate) struct Connection {
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

struct Shared {
    stream: OnceLock<Arc<TcpStream>>,
    /// Written bytes the socket has not taken yet, in order. Writers append
    /// here while it is not empty, so nothing overtakes what waits.
    backlog: Mutex<BytesMut>,
    /// Tells the task that the backlog has bytes.
    backlogged: Notify,
}

impl Connection {
    /// Dials `address`; reports `Opened`, then `Received`s, then one `Closed`.
    pub(crate) fn dial(
        io: &tokio::runtime::Handle,
        handle: u64,
        address: String,
        events: Events,
    ) -> Self {
        let shared = Arc::new(Shared {
            stream: OnceLock::new(),
            backlog: Mutex::new(BytesMut::new()),
            backlogged: Notify::new(),
        });
        let task = io.spawn(serve(handle, address, events, shared.clone()));
        Self { shared, task }
    }

    /// Writes `bytes` now if the socket takes them; what it does not take
    /// (or all of it, before the connection is open or while earlier bytes
    /// wait) waits for the connection's task.
    pub(crate) fn write(&self, mut bytes: Bytes) {
        let mut backlog = self.shared.backlog.lock().expect("backlog lock");
        if backlog.is_empty()
            && let Some(stream) = self.shared.stream.get()
        {
            match stream.try_write(&bytes) {
                Ok(n) if n == bytes.len() => return,
                Ok(n) => bytes.advance(n),
                // Full, or failed: the task meets the same error and reports it.
                Err(_) => {}
            }
        }
        backlog.extend_from_slice(&bytes);
        drop(backlog);
        self.shared.backlogged.notify_one();
    }

    /// Closes the connection without reporting it back.
    pub(crate) fn close(self) {
        self.task.abort();
    }
}

/// The connection's task: dials, then reads and drains the backlog until
/// either side ends.
async fn serve(handle: u64, address: String, events: Events, shared: Arc<Shared>) {
    let stream = match TcpStream::connect(&address).await {
        Ok(stream) => Arc::new(stream),
        Err(e) => {
            let _ = events.send(Event::Closed(
                handle,
                format!("connecting to {address}: {e}"),
            ));
            return;
        }
    };
    let _ = stream.set_nodelay(true);
    let _ = shared.stream.set(stream.clone());
    if events.send(Event::Opened(handle)).is_err() {
        return;
    }
    let mut buffer = vec![0u8; READ_BUFFER];
    let reason = loop {
        let waiting = !shared.backlog.lock().expect("backlog lock").is_empty();
        tokio::select! {
            readable = stream.readable() => {
                if let Err(e) = readable {
                    break format!("read: {e}");
                }
                match stream.try_read(&mut buffer) {
                    Ok(0) => break "closed by the peer".to_string(),
                    Ok(n) => {
                        if events.send(Event::Received(handle, buffer[..n].to_vec())).is_err() {
                            return;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) => break format!("read: {e}"),
                }
            }
            writable = stream.writable(), if waiting => {
                if let Err(e) = writable.and_then(|()| drain_backlog(&stream, &shared)) {
                    break format!("write: {e}");
                }
            }
            () = shared.backlogged.notified(), if !waiting => {}
        }
    };
    let _ = events.send(Event::Closed(handle, reason));
}

/// Writes what the backlog holds until it is empty or the socket is full.
fn drain_backlog(stream: &TcpStream, shared: &Shared) -> std::io::Result<()> {
    let mut backlog = shared.backlog.lock().expect("backlog lock");
    while !backlog.is_empty() {
        match stream.try_write(&backlog) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => backlog.advance(n),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reports `Timer(generation)` after `ms`.
pub(crate) fn timer(io: &tokio::runtime::Handle, ms: u64, generation: u64, events: Events) {
    io.spawn(async move {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        let _ = events.send(Event::Timer(generation));
    });
}
