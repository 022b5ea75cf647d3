//! [`TunnelRegistry`]: the worker sessions one frontend replica holds.
//!
//! The registry belongs to the replica, not to a carrier set: whatever set
//! is active, a worker's session has one place to be held, and the
//! `tunnel` set's streams seam is this registry.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::future::BoxFuture;

use super::TunnelSession;
use crate::Refusal;
use crate::stream::{Stream, StreamReader};
use crate::stream_seam::{Lane, StreamsSeam};

/// Opens a stream through the replica that holds the node's session. With
/// a request (a [`StreamsSeam::call`]), the request rides with the open and
/// this side is finished before the holder answers, as on a session held
/// here; the stream's writer is then spent.
pub type Relay = Arc<
    dyn Fn(String, Lane, String, Option<Bytes>) -> BoxFuture<'static, Result<Stream, Refusal>>
        + Send
        + Sync,
>;

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

    /// Holds `session` for the node's lane. A session it replaces takes no
    /// new streams, but is not closed: streams open on it finish (a worker
    /// moving to a new tunnel version dials beside the old session and
    /// closes that one once nothing runs on it; a dead one ends with its
    /// websocket). Returns the id [`TunnelRegistry::remove`] takes.
    pub fn insert(&self, node: &str, lane: Lane, session: TunnelSession) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.sessions
            .lock()
            .expect("sessions lock")
            .insert((node.to_string(), lane), (id, session));
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
        if let Some(session) = self.local(node, lane) {
            let service = service.to_string();
            return Box::pin(async move { session.open(&service).await });
        }
        self.relayed(node, lane, service, None)
    }

    fn call(
        &self,
        node: &str,
        lane: Lane,
        service: &str,
        request: Bytes,
    ) -> BoxFuture<'static, Result<StreamReader, Refusal>> {
        let Some(session) = self.local(node, lane) else {
            // Relayed: the other replica's session opens it, the request
            // riding with the open.
            let relayed = self.relayed(node, lane, service, Some(request));
            return Box::pin(async move {
                let Stream { reader, writer } = relayed.await?;
                writer.finished_already();
                Ok(reader)
            });
        };
        let service = service.to_string();
        Box::pin(async move { session.call(&service, request).await })
    }
}

impl TunnelRegistry {
    /// Opens through the relay, with `request` riding along if given.
    fn relayed(
        &self,
        node: &str,
        lane: Lane,
        service: &str,
        request: Option<Bytes>,
    ) -> BoxFuture<'static, Result<Stream, Refusal>> {
        let relay = self.relay.lock().expect("relay lock").clone();
        let (node, service) = (node.to_string(), service.to_string());
        Box::pin(async move {
            match relay {
                Some(relay) => relay(node, lane, service, request).await,
                None => Err(Refusal::NotDelivered(format!(
                    "no session of node {node} on the {} lane",
                    lane.as_str()
                ))),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use tokio::sync::mpsc::error::TryRecvError;

    use super::*;
    use crate::stream::{TransportEnds, channel_stream};

    type Asked = (String, Lane, String, Option<Bytes>);

    #[tokio::test]
    async fn a_relayed_call_sends_its_request_with_the_open() {
        let registry = TunnelRegistry::default();
        let asked: Arc<Mutex<Vec<Asked>>> = Arc::default();
        let transports: Arc<Mutex<Vec<TransportEnds>>> = Arc::default();
        let (record, keep) = (asked.clone(), transports.clone());
        registry.set_relay(Arc::new(move |node, lane, service, request| {
            record.lock().unwrap().push((node, lane, service, request));
            let (stream, transport) = channel_stream(1024);
            keep.lock().unwrap().push(transport);
            Box::pin(async move { Ok(stream) })
        }));
        let request = Bytes::from_static(b"{\"replica\":\"r1\"}\n{}");
        let _reader = registry
            .call("n1", Lane::Inference, "inference", request.clone())
            .await
            .unwrap();
        let _stream = registry.open("n1", Lane::Bulk, "blob").await.unwrap();
        assert_eq!(
            *asked.lock().unwrap(),
            [
                (
                    "n1".into(),
                    Lane::Inference,
                    "inference".into(),
                    Some(request)
                ),
                ("n1".into(), Lane::Bulk, "blob".into(), None),
            ]
        );
        // The call's side ended with the open: its writer sends nothing
        // more (no second finish).
        let mut transports = transports.lock().unwrap();
        assert!(matches!(
            transports[0].ops.try_recv(),
            Err(TryRecvError::Disconnected)
        ));
    }
}
