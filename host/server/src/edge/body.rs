//! A request body under two clocks: the longest silence, and a minimum
//! rate after a grace period. The silence alone is not enough: a client
//! sending a byte every few seconds is never silent for long and holds its
//! connection for as long as it likes. With the rate, a body may take
//! `grace` plus one second for every `min_rate` bytes it sent: a form or a
//! JSON body (a few kilobytes) has about the grace as its whole deadline,
//! and a large upload has as long as it keeps the rate (nginx's
//! `client_body_timeout` measures only the silence; Apache's
//! `mod_reqtimeout` `body=10,MinRate=…` is this).
//!
//! Both clocks run only while a handler waits on the body: a handler busy
//! writing the last chunk to disk does not count against the client.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use tokio::time::Instant;

/// Why a request body failed.
#[derive(Debug, Clone, Copy, thiserror::Error)]
pub enum BodyTimeout {
    /// It sent nothing for this long.
    #[error("the request body sent nothing for {} s", .0.as_secs_f32())]
    Silent(Duration),
    /// It came slower than the minimum rate after the grace period.
    #[error(
        "the request body came slower than {min_rate} bytes a second after its first {} s",
        .grace.as_secs_f32()
    )]
    TooSlow {
        /// The grace period.
        grace: Duration,
        /// The rate, in bytes a second.
        min_rate: u64,
    },
}

impl BodyTimeout {
    /// Whether `e` (a body error as handlers see it, or a rejection that
    /// wraps one) is a body timeout.
    pub fn is(e: &(dyn std::error::Error + 'static)) -> bool {
        let mut source = Some(e);
        while let Some(current) = source {
            if current.is::<BodyTimeout>() {
                return true;
            }
            source = current.source();
        }
        false
    }
}

/// The clocks a body runs under.
#[derive(Debug, Clone, Copy)]
pub(super) struct Clocks {
    pub(super) idle: Duration,
    pub(super) grace: Duration,
    pub(super) min_rate: u64,
}

/// A body that fails when either clock runs out; `finished` is set once
/// the client's body was read to its end.
pub(super) struct DeadlineBody<B> {
    inner: B,
    clocks: Clocks,
    /// Time spent waiting on the client, before the wait in progress.
    waited: Duration,
    received: u64,
    /// Set while a poll is pending: when the wait began, when it fails and why.
    wait: Option<(Instant, Pin<Box<tokio::time::Sleep>>, BodyTimeout)>,
    finished: Arc<AtomicBool>,
}

impl<B> DeadlineBody<B> {
    pub(super) fn new(inner: B, clocks: Clocks, finished: Arc<AtomicBool>) -> Self {
        Self {
            inner,
            clocks,
            waited: Duration::ZERO,
            received: 0,
            wait: None,
            finished,
        }
    }

    /// Starts the clocks of a wait: the sooner of the idle timeout and what
    /// is left of the allowance the bytes so far earned.
    fn start_wait(&mut self) {
        let Clocks {
            idle,
            grace,
            min_rate,
        } = self.clocks;
        let earned = Duration::from_secs_f64(self.received as f64 / min_rate.max(1) as f64);
        let left = (grace + earned).saturating_sub(self.waited);
        let (limit, why) = if idle <= left {
            (idle, BodyTimeout::Silent(idle))
        } else {
            (left, BodyTimeout::TooSlow { grace, min_rate })
        };
        let now = Instant::now();
        self.wait = Some((now, Box::pin(tokio::time::sleep_until(now + limit)), why));
    }
}

impl<B> HttpBody for DeadlineBody<B>
where
    B: HttpBody<Data = Bytes> + Unpin,
    B::Error: Into<axum::BoxError>,
{
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                if let Some((began, _, _)) = this.wait.take() {
                    this.waited += began.elapsed();
                }
                match &frame {
                    Some(Ok(frame)) => {
                        this.received += frame.data_ref().map_or(0, |d| d.len() as u64);
                    }
                    None => this.finished.store(true, Ordering::Relaxed),
                    Some(Err(_)) => {}
                }
                Poll::Ready(frame.map(|f| f.map_err(Into::into)))
            }
            Poll::Pending => {
                if this.wait.is_none() {
                    this.start_wait();
                }
                let wait = this.wait.as_mut().expect("a wait was just started");
                match wait.1.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(wait.2)))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        let end = self.inner.is_end_stream();
        if end {
            self.finished.store(true, Ordering::Relaxed);
        }
        end
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// `body` under `clocks`, as axum's body type.
pub(super) fn bounded<B>(body: B, clocks: Clocks, finished: Arc<AtomicBool>) -> Body
where
    B: HttpBody<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<axum::BoxError>,
{
    Body::new(DeadlineBody::new(body, clocks, finished))
}
