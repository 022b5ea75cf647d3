//! A shaped link as a TCP proxy: every connection through it shares one
//! queue per direction, drained at a fixed rate, and each chunk arrives a
//! fixed delay after it left the queue. This kernel has no netem qdisc, so
//! the link is built in user space; tokio's timers tick in milliseconds, so
//! the pacing keeps a virtual clock and the delay is accurate to about 1 ms.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// How much a reader takes from a socket at once.
const CHUNK: usize = 16 * 1024;

struct Chunk {
    data: Bytes,
    to: mpsc::UnboundedSender<Bytes>,
}

/// One shaped link with a queue per direction.
pub struct Link {
    /// Dialler to listener.
    up: mpsc::Sender<Chunk>,
    /// Listener to dialler.
    down: mpsc::Sender<Chunk>,
}

impl Link {
    /// A link of `bytes_per_second`, `delay` each way, and a queue of about
    /// `queue_bytes` per direction that every connection shares.
    pub fn new(bytes_per_second: f64, delay: Duration, queue_bytes: usize) -> Arc<Self> {
        let slots = (queue_bytes / CHUNK).max(1);
        let (up, up_queue) = mpsc::channel(slots);
        let (down, down_queue) = mpsc::channel(slots);
        tokio::spawn(drain(up_queue, bytes_per_second, delay));
        tokio::spawn(drain(down_queue, bytes_per_second, delay));
        Arc::new(Self { up, down })
    }

    /// A proxy to `upstream` through this link; returns its address.
    pub async fn proxy(self: &Arc<Self>, upstream: String) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address").to_string();
        let link = self.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(&upstream).await else {
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                let to_server = writer(server_write);
                let to_client = writer(client_write);
                tokio::spawn(reader(client_read, link.up.clone(), to_server));
                tokio::spawn(reader(server_read, link.down.clone(), to_client));
            }
        });
        address
    }
}

fn writer(mut socket: tokio::net::tcp::OwnedWriteHalf) -> mpsc::UnboundedSender<Bytes> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Bytes>();
    tokio::spawn(async move {
        while let Some(data) = rx.recv().await {
            if socket.write_all(&data).await.is_err() {
                return;
            }
        }
        let _ = socket.shutdown().await;
    });
    tx
}

async fn reader(
    mut socket: tokio::net::tcp::OwnedReadHalf,
    queue: mpsc::Sender<Chunk>,
    to: mpsc::UnboundedSender<Bytes>,
) {
    loop {
        let mut buffer = BytesMut::with_capacity(CHUNK);
        match socket.read_buf(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                let chunk = Chunk {
                    data: buffer.freeze(),
                    to: to.clone(),
                };
                if queue.send(chunk).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// Serialises chunks at the link's rate, then delivers each after the delay.
async fn drain(mut queue: mpsc::Receiver<Chunk>, bytes_per_second: f64, delay: Duration) {
    let (deliver, mut deliveries) = mpsc::unbounded_channel::<(Instant, Chunk)>();
    tokio::spawn(async move {
        while let Some((at, chunk)) = deliveries.recv().await {
            tokio::time::sleep_until(at).await;
            let _ = chunk.to.send(chunk.data);
        }
    });
    let mut next_free = Instant::now();
    while let Some(chunk) = queue.recv().await {
        let now = Instant::now();
        // A link idle for a while starts afresh; a late wake-up keeps its credit.
        if next_free + Duration::from_millis(2) < now {
            next_free = now;
        }
        next_free += Duration::from_secs_f64(chunk.data.len() as f64 / bytes_per_second);
        if next_free > now + Duration::from_millis(1) {
            tokio::time::sleep_until(next_free).await;
        }
        if deliver.send((next_free + delay, chunk)).is_err() {
            return;
        }
    }
}
