//! The HTTP edge: the accept loop and the limits every connection lives
//! under. `axum::serve` sets none of them, so a client could hold a
//! connection forever by sending its headers, or its body, a byte at a
//! time, and any number of clients could hold one each.
//!
//! - A connection limit by class ([`pool`]): a hard cap on open sockets
//!   (an upgraded websocket included), under which the replica never stops
//!   accepting. Anonymous connections share a pool of their own; when it is
//!   full the longest idle (else longest busy) of them is closed for the
//!   newcomer, so connections that showed a credential, and health checks,
//!   keep their share whatever anonymous clients do. Only when every
//!   socket is a proven one does the replica stop accepting; new
//!   connections then wait in the kernel's backlog (what nginx's
//!   `worker_connections` and mini-redis's `MAX_CONNECTIONS` do).
//! - A header read timeout: a request's head must arrive whole within it,
//!   or the connection is closed (hyper's `header_read_timeout`; nginx's
//!   `client_header_timeout`, Go's `ReadHeaderTimeout`).
//! - Body clocks ([`body`]): a body that is silent for the idle timeout,
//!   or slower than a minimum rate after a grace period, fails
//!   ([`BodyTimeout`]); the handler answers and the connection is closed.
//! - An answer given before the request's body was read says
//!   `Connection: close`: hyper closes such a connection rather than read
//!   a body no one wants, and a client told so does not send its next
//!   request on a socket about to close.

mod body;
mod pool;

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use hyper::body::{Body as HttpBody, Incoming};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tower::ServiceExt;

pub use body::BodyTimeout;
pub use pool::{Connection, ThisConnection};

/// Sockets open at once, by default (the hard cap): well above what a
/// frontend's clients and workers hold (each worker keeps a few), well
/// below the file descriptors a process gets (the common soft limit is
/// 1024 plus headroom set by systemd units).
pub const MAX_CONNECTIONS: usize = 1024;
/// Connections that showed no credential yet, by default: three quarters
/// of the cap, so a quarter (256) is always left to callers with a key, a
/// session or a node's credential, however many anonymous sockets arrive.
pub const MAX_UNPROVEN: usize = MAX_CONNECTIONS / 4 * 3;
/// Connections that made only health checks, by default: a load balancer
/// keeps one or two per replica; more is someone else using the probe's
/// reserve to hold sockets.
pub const MAX_PROBES: usize = 32;
/// Time for a request's head to arrive, by default: a client on a slow
/// link sends a few hundred bytes of headers in well under a second.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(15);
/// Longest silence of a request body a handler waits on, by default: an
/// upload on a congested link pauses for seconds, not half a minute.
pub const BODY_IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// Time a body gets before its rate counts, by default: the whole deadline
/// of a form or a JSON body (kilobytes arrive in milliseconds on any link
/// that is not stalled), and the ramp-up of a large upload.
pub const BODY_GRACE: Duration = Duration::from_secs(10);
/// Slowest average a body may arrive at after the grace, by default, in
/// bytes a second: 16 KiB/s is a poor mobile link; the largest body we take
/// (a 64 MiB component) then gets over an hour, while a client sending a
/// byte every few seconds is cut off after the grace.
pub const BODY_MIN_RATE: u64 = 16 << 10;

/// The limits connections live under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EdgeLimits {
    /// See [`MAX_CONNECTIONS`].
    pub max_connections: usize,
    /// See [`MAX_UNPROVEN`].
    pub max_unproven: usize,
    /// See [`MAX_PROBES`].
    pub max_probes: usize,
    /// See [`HEADER_READ_TIMEOUT`].
    pub header_read: Duration,
    /// See [`BODY_IDLE_TIMEOUT`].
    pub body_idle: Duration,
    /// See [`BODY_GRACE`].
    pub body_grace: Duration,
    /// See [`BODY_MIN_RATE`].
    pub body_min_rate: u64,
}

impl Default for EdgeLimits {
    fn default() -> Self {
        Self {
            max_connections: MAX_CONNECTIONS,
            max_unproven: MAX_UNPROVEN,
            max_probes: MAX_PROBES,
            header_read: HEADER_READ_TIMEOUT,
            body_idle: BODY_IDLE_TIMEOUT,
            body_grace: BODY_GRACE,
            body_min_rate: BODY_MIN_RATE,
        }
    }
}

/// Paths a load balancer polls: a request for one proves nothing, but
/// moves its connection to the probes' pool.
const HEALTH_CHECKS: [&str; 2] = ["/healthz", "/readyz"];

/// Serves `app` on `listener` until `shutdown` resolves, then asks every
/// connection to finish its request in flight and close; resolves when all
/// have (the caller bounds that wait).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: EdgeLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let pool = pool::Pool::new(&limits);
    // Connections learn of shutdown here; `closed` resolves once they are all gone.
    let (stop_tx, stop_rx) = watch::channel(false);
    let (done_tx, done_rx) = watch::channel(());
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            () = pool.room() => {}
            () = &mut shutdown => break,
        }
        let (socket, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors and the like: wait a little rather
                    // than spin (what hyper's and axum's accept loops do).
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // Streamed answers and tunnel frames are small writes: without
        // TCP_NODELAY each would wait for the peer's delayed ACK (about 40 ms).
        let _ = socket.set_nodelay(true);
        let Some((connection, closed)) = admit(&pool, &mut shutdown).await else {
            break;
        };
        let io = TokioIo::new(Counted {
            socket,
            _registration: pool::Registration(connection.clone()),
        });
        let app = app.clone();
        let service = hyper::service::service_fn(move |request| {
            let (app, connection) = (app.clone(), connection.clone());
            async move { Ok::<_, Infallible>(answer(app, connection, peer, &limits, request).await) }
        });
        let mut stop = stop_rx.clone();
        let done = done_rx.clone();
        tokio::spawn(async move {
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_read);
            let connection = builder.serve_connection(io, service).with_upgrades();
            let mut connection = std::pin::pin!(connection);
            tokio::select! {
                result = connection.as_mut() => {
                    if let Err(e) = result {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                }
                // Closed to make room: dropped at once, whatever it was doing.
                _ = closed => {}
                () = async { let _ = stop.wait_for(|stop| *stop).await; } => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
            drop(done);
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    drop(done_rx);
    done_tx.closed().await;
}

/// Admits an accepted socket's connection, holding the socket unserved
/// while every connection is proven and the cap is reached (they proved
/// themselves after [`pool::Pool::room`] let it be accepted); `None` on
/// shutdown.
async fn admit<F: Future<Output = ()>>(
    pool: &Arc<pool::Pool>,
    shutdown: &mut Pin<&mut F>,
) -> Option<(Connection, tokio::sync::oneshot::Receiver<()>)> {
    loop {
        if let Some(admitted) = pool.admit() {
            return Some(admitted);
        }
        tokio::select! {
            () = pool.room() => {}
            () = shutdown.as_mut() => return None,
        }
    }
}

/// One request of a connection through `app`: the connection and the
/// client's address as extensions, the body under its clocks, and
/// `Connection: close` on an answer given before the body was read.
async fn answer(
    app: Router,
    connection: Connection,
    peer: SocketAddr,
    limits: &EdgeLimits,
    request: hyper::Request<Incoming>,
) -> Response {
    if HEALTH_CHECKS.contains(&request.uri().path()) {
        connection.probe();
    }
    let _busy = connection.busy();
    let unread = !request.body().is_end_stream();
    let finished = Arc::new(AtomicBool::new(false));
    let clocks = body::Clocks {
        idle: limits.body_idle,
        grace: limits.body_grace,
        min_rate: limits.body_min_rate,
    };
    let mut request = request.map(|b| body::bounded(b, clocks, finished.clone()));
    request.extensions_mut().insert(connection);
    request.extensions_mut().insert(ConnectInfo(peer));
    let mut response = match app.oneshot(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    };
    if unread
        && !finished.load(Ordering::Relaxed)
        && response.status() != StatusCode::SWITCHING_PROTOCOLS
    {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// A socket that holds its place in the pool until it is dropped (after
/// an upgrade, the websocket owns it).
struct Counted {
    socket: TcpStream,
    _registration: pool::Registration,
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.socket).poll_read(cx, buf)
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.socket).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.socket).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.socket).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.socket).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.socket.is_write_vectored()
    }
}

#[cfg(test)]
mod tests;
