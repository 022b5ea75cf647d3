//! The streams seam: a byte stream to a service on a worker, on the
//! inference lane (model calls, control) or the bulk lane (file transfer).
//!
//! - [`TunnelRegistry`]: the `tunnel` set. The worker's websocket sessions
//!   this replica holds, and a relay to the replica that holds the others.
//! - [`DirectStreams`]: the `nats` set. A TCP connection dialled to the
//!   worker's address per stream (see [`crate::direct`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::future::BoxFuture;

use crate::stream::{Refusal, Stream, StreamReader};
use crate::tunnel::TunnelSession;

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
async fn send_after_open(
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

/// Opens a stream through the replica that holds the node's session.
pub type Relay =
    Arc<dyn Fn(String, Lane, String) -> BoxFuture<'static, Result<Stream, Refusal>> + Send + Sync>;

/// The worker sessions one frontend replica holds.
pub struct TunnelRegistry {
    sessions: Mutex<HashMap<(String, Lane), (u64, TunnelSession)>>,
    next_id: AtomicU64,
    relay: Mutex<Option<Relay>>,
}

impl std::fmt::Debug for TunnelRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let count = self.sessions.lock().map(|s| s.len()).unwrap_or_default();
        f.debug_struct("TunnelRegistry")
            .field("sessions", &count)
            .finish()
    }
}

impl Default for TunnelRegistry {
    fn default() -> Self {
        Self {
            sessions: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            relay: Mutex::new(None),
        }
    }
}

impl TunnelRegistry {
    /// Where streams to nodes held elsewhere go.
    pub fn set_relay(&self, relay: Relay) {
        *self.relay.lock().expect("relay lock") = Some(relay);
    }

    /// Holds `session` for the node's lane; a session it replaces is closed.
    /// Returns the id [`TunnelRegistry::remove`] takes.
    pub fn insert(&self, node: &str, lane: Lane, session: TunnelSession) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let old = self
            .sessions
            .lock()
            .expect("sessions lock")
            .insert((node.to_string(), lane), (id, session));
        if let Some((_, old)) = old {
            old.close();
        }
        id
    }

    /// Forgets the session `id` if it is still the node's (a newer one may
    /// have replaced it).
    pub fn remove(&self, node: &str, lane: Lane, id: u64) {
        let mut sessions = self.sessions.lock().expect("sessions lock");
        let key = (node.to_string(), lane);
        if sessions.get(&key).is_some_and(|(held, _)| *held == id) {
            sessions.remove(&key);
        }
    }

    /// The node's session on `lane`, if this replica holds a live one.
    pub fn local(&self, node: &str, lane: Lane) -> Option<TunnelSession> {
        let sessions = self.sessions.lock().expect("sessions lock");
        sessions
            .get(&(node.to_string(), lane))
            .map(|(_, session)| session.clone())
            .filter(|session| !session.is_lost())
    }

    /// The nodes and lanes held here.
    pub fn held(&self) -> Vec<(String, Lane)> {
        let sessions = self.sessions.lock().expect("sessions lock");
        sessions.keys().cloned().collect()
    }
}

impl StreamsSeam for TunnelRegistry {
    fn open(
        &self,
        node: &str,
        lane: Lane,
        service: &str,
    ) -> BoxFuture<'static, Result<Stream, Refusal>> {
        let service = service.to_string();
        if let Some(session) = self.local(node, lane) {
            return Box::pin(async move { session.open(&service).await });
        }
        let relay = self.relay.lock().expect("relay lock").clone();
        let node = node.to_string();
        Box::pin(async move {
            match relay {
                Some(relay) => relay(node, lane, service).await,
                None => Err(Refusal::NotDelivered(format!(
                    "no session of node {node} on the {} lane",
                    lane.as_str()
                ))),
            }
        })
    }

    fn call(
        &self,
        node: &str,
        lane: Lane,
        service: &str,
        request: Bytes,
    ) -> BoxFuture<'static, Result<StreamReader, Refusal>> {
        let Some(session) = self.local(node, lane) else {
            // Relayed: the other replica's session opens it.
            return Box::pin(send_after_open(self.open(node, lane, service), request));
        };
        let service = service.to_string();
        Box::pin(async move { session.call(&service, request).await })
    }
}
