//! The HTTP edge: the accept loop and the limits every connection lives
//! under. `axum::serve` sets none of them, so a client could hold a
//! connection forever by sending its headers, or its body, a byte at a
//! time, and any number of clients could hold one each.
//!
//! - A connection limit: a permit per open socket, held until the socket
//!   closes (an upgraded websocket included). At the limit the replica stops
//!   accepting; new connections wait in the kernel's backlog rather than
//!   being refused (what nginx's `worker_connections` and mini-redis's
//!   `MAX_CONNECTIONS` do).
//! - A header read timeout: a request's head must arrive whole within it,
//!   or the connection is closed (hyper's `header_read_timeout`; nginx's
//!   `client_header_timeout`, Go's `ReadHeaderTimeout`).
//! - A body idle timeout: a request body that sends nothing for that long
//!   while a handler waits on it fails ([`BodyStalled`]); the handler
//!   answers and the connection is closed (nginx's `client_body_timeout`
//!   measures the same: the time between two reads, not the whole body).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use bytes::Bytes;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};

/// Connections open at once, by default: well above what a frontend's
/// clients and workers hold (each worker keeps a few), well below the file
/// descriptors a process gets (the common soft limit is 1024 plus headroom
/// set by systemd units).
pub const MAX_CONNECTIONS: usize = 1024;
/// Time for a request's head to arrive, by default: a client on a slow
/// link sends a few hundred bytes of headers in well under a second.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(15);
/// Longest silence of a request body a handler waits on, by default: an
/// upload on a congested link pauses for seconds, not half a minute.
pub const BODY_IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// The limits connections live under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EdgeLimits {
    /// See [`MAX_CONNECTIONS`].
    pub max_connections: usize,
    /// See [`HEADER_READ_TIMEOUT`].
    pub header_read: Duration,
    /// See [`BODY_IDLE_TIMEOUT`].
    pub body_idle: Duration,
}

impl Default for EdgeLimits {
    fn default() -> Self {
        Self {
            max_connections: MAX_CONNECTIONS,
            header_read: HEADER_READ_TIMEOUT,
            body_idle: BODY_IDLE_TIMEOUT,
        }
    }
}

/// Serves `app` on `listener` until `shutdown` resolves, then asks every
/// connection to finish its request in flight and close; resolves when all
/// have (the caller bounds that wait).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: EdgeLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let app = with_body_timeout(app, limits.body_idle);
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    // Connections learn of shutdown here; `closed` resolves once they are all gone.
    let (stop_tx, stop_rx) = watch::channel(false);
    let (done_tx, done_rx) = watch::channel(());
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
            () = &mut shutdown => break,
        };
        let (socket, remote) = tokio::select! {
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
        let io = TokioIo::new(Counted {
            socket,
            _permit: permit,
        });
        // The remote address, for routes that bound what one address may
        // hold (the federation link's handshakes).
        let service = TowerToHyperService::new(tower::Layer::layer(
            &axum::Extension(axum::extract::ConnectInfo(remote)),
            app.clone(),
        ));
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

/// A socket that holds its connection permit until it is dropped (after an
/// upgrade, the websocket owns it).
struct Counted {
    socket: TcpStream,
    _permit: OwnedSemaphorePermit,
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

/// Every request's body under the idle timeout.
pub fn with_body_timeout(app: Router, idle: Duration) -> Router {
    app.layer(tower::util::MapRequestLayer::new(
        move |request: Request| request.map(|body| Body::new(IdleBody::new(body, idle))),
    ))
}

/// Why a request body failed: it sent nothing for the idle timeout.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the request body sent nothing for {} s", .0.as_secs_f32())]
pub struct BodyStalled(pub Duration);

impl BodyStalled {
    /// Whether `e` (a body error, as handlers see it) is a stall.
    pub fn is(e: &(dyn std::error::Error + 'static)) -> bool {
        let mut source = Some(e);
        while let Some(current) = source {
            if current.is::<BodyStalled>() {
                return true;
            }
            source = current.source();
        }
        false
    }
}

/// A body that fails once it was waited on for `idle` without a frame.
/// The clock runs only while a handler waits: a handler busy with the last
/// chunk does not count against the client.
struct IdleBody {
    inner: Body,
    idle: Duration,
    /// Set while a poll is pending: when the wait fails.
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl IdleBody {
    fn new(inner: Body, idle: Duration) -> Self {
        Self {
            inner,
            idle,
            deadline: None,
        }
    }
}

impl HttpBody for IdleBody {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                this.deadline = None;
                Poll::Ready(frame.map(|f| f.map_err(Into::into)))
            }
            Poll::Pending => {
                let idle = this.idle;
                let deadline = this
                    .deadline
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(idle)));
                match deadline.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyStalled(idle))))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests;
