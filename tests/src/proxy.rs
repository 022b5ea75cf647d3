//! A TCP forwarder on loopback that a test can cut: every connection
//! through it is dropped at once, and new ones are taken again after
//! (unless the test makes it refuse them for a while). It may also hold
//! each direction of each connection to a rate, so that a transfer lasts
//! long enough for a test to act in its middle.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// Forwards `127.0.0.1:<port>` to a target.
pub struct TcpProxy {
    /// Where to connect instead of the target.
    pub addr: SocketAddr,
    connections: Arc<Mutex<Vec<JoinHandle<()>>>>,
    accepting: JoinHandle<()>,
    refusing: Arc<AtomicBool>,
    forwarded: Arc<AtomicU64>,
}

impl TcpProxy {
    /// Starts forwarding to `target`.
    pub async fn start(target: SocketAddr) -> Self {
        Self::start_limited(target, None).await
    }

    /// Starts forwarding to `target`, each direction of each connection at
    /// most `bytes_per_second` when given.
    pub async fn start_limited(target: SocketAddr, bytes_per_second: Option<u64>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let connections: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let refusing = Arc::new(AtomicBool::new(false));
        let forwarded = Arc::new(AtomicU64::new(0));
        let counted = forwarded.clone();
        let held = connections.clone();
        let refused = refusing.clone();
        let accepting = tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                if refused.load(Ordering::SeqCst) {
                    drop(inbound);
                    continue;
                }
                let counted = counted.clone();
                let copy = tokio::spawn(async move {
                    if let Ok(outbound) = TcpStream::connect(target).await {
                        forward(inbound, outbound, bytes_per_second, &counted).await;
                    }
                });
                let mut held = held.lock().unwrap();
                held.retain(|c| !c.is_finished());
                held.push(copy);
            }
        });
        Self {
            addr,
            connections,
            accepting,
            refusing,
            forwarded,
        }
    }

    /// The bytes a rate-limited proxy has forwarded so far, both ways: a
    /// test that must act in the middle of a transfer waits for them to grow.
    pub fn forwarded(&self) -> u64 {
        self.forwarded.load(Ordering::SeqCst)
    }

    /// `http://<addr>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Drops every connection through the proxy now (both ends see a
    /// reset); later connections go through again.
    pub fn cut(&self) {
        for connection in self.connections.lock().unwrap().drain(..) {
            connection.abort();
        }
    }

    /// While `refuse` holds, new connections are closed at once (the link
    /// cannot come back).
    pub fn refuse(&self, refuse: bool) {
        self.refusing.store(refuse, Ordering::SeqCst);
    }
}

async fn forward(
    mut inbound: TcpStream,
    mut outbound: TcpStream,
    rate: Option<u64>,
    counted: &AtomicU64,
) {
    let Some(rate) = rate else {
        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
        return;
    };
    let (in_read, in_write) = inbound.split();
    let (out_read, out_write) = outbound.split();
    // Either direction ending ends both, as a cut does.
    tokio::select! {
        _ = paced(in_read, out_write, rate, counted) => {}
        _ = paced(out_read, in_write, rate, counted) => {}
    }
}

/// Copies `from` to `to` at most `rate` bytes a second (a quiet spell
/// earns no more than [`BURST`] of credit).
async fn paced(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    rate: u64,
    counted: &AtomicU64,
) -> std::io::Result<()> {
    let mut clock = Instant::now();
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let n = from.read(&mut buffer).await?;
        if n == 0 {
            to.shutdown().await?;
            return Ok(());
        }
        to.write_all(&buffer[..n]).await?;
        counted.fetch_add(n as u64, Ordering::SeqCst);
        let now = Instant::now();
        clock = clock.max(now.checked_sub(BURST).unwrap_or(now))
            + Duration::from_secs_f64(n as f64 / rate as f64);
        if clock > now {
            tokio::time::sleep(clock - now).await;
        }
    }
}

/// The most a paced direction sends at once after a quiet spell.
const BURST: Duration = Duration::from_millis(100);

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.accepting.abort();
        self.cut();
    }
}
