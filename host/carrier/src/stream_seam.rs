//! The streams seam: a byte stream to a service on a worker, on the
//! inference lane (model calls, control) or the bulk lane (file transfer).
//!
//! - [`crate::tunnel::TunnelRegistry`]: the `tunnel` set. The worker's
//!   websocket sessions this replica holds, and a relay to the replica that
//!   holds the others.
//! - [`crate::dialled::DialledSessions`]: the `nats` set. Tunnel sessions
//!   over TCP connections the frontend dials to the worker's address, one
//!   per worker and lane.

use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;

use crate::Refusal;
use crate::stream::{Stream, StreamReader};

/// Which of a worker's two lanes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lane {
    /// Model calls, health and control: small windows, never stuck behind a file.
    Inference,
    /// File transfer: large windows.
    Bulk,
}

impl Lane {
    /// `inference` or `bulk`.
    pub fn as_str(self) -> &'static str {
        match self {
            Lane::Inference => "inference",
            Lane::Bulk => "bulk",
        }
    }

    /// Parses [`Lane::as_str`]'s output.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "inference" => Some(Lane::Inference),
            "bulk" => Some(Lane::Bulk),
            _ => None,
        }
    }
}

/// Decides about a stream a peer opened: take it (and serve it on a task of
/// its own) or refuse. It must not block.
pub type Acceptor = Arc<dyn Fn(&str, Stream) -> Result<(), Refusal> + Send + Sync>;

/// The streams seam.
pub trait StreamsSeam: Send + Sync {
    /// Opens a stream to `service` on `node`'s `lane`.
    fn open(
        &self,
        node: &str,
        lane: Lane,
        service: &str,
    ) -> BoxFuture<'static, Result<Stream, Refusal>>;

    /// A request and its answer: opens a stream to `service`, sends all of
    /// `request`, finishes, and gives back the answer's reader. A carrier
    /// that can send the request with the open, without waiting a round
    /// trip for the accept, does (then a `NotDelivered` refusal may come
    /// after the service saw the request).
    fn call(
        &self,
        node: &str,
        lane: Lane,
        service: &str,
        request: Bytes,
    ) -> BoxFuture<'static, Result<StreamReader, Refusal>> {
        Box::pin(send_after_open(self.open(node, lane, service), request))
    }
}

/// [`StreamsSeam::call`] for a carrier that must wait for the accept.
pub(crate) async fn send_after_open(
    opened: BoxFuture<'static, Result<Stream, Refusal>>,
    request: Bytes,
) -> Result<StreamReader, Refusal> {
    let Stream { reader, mut writer } = opened.await?;
    writer
        .write(request)
        .await
        .map_err(|e| Refusal::NotDelivered(e.to_string()))?;
    writer.finish();
    Ok(reader)
}
