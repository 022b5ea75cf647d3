//! A worker's websocket on this replica: the tunnel session on it, its
//! connection claim, and its place in the registry while it lasts.

use std::sync::Arc;

use axum::extract::ws::{Message, WebSocket};
use futures::{SinkExt, StreamExt};
use switchyard_carrier::streams::{Acceptor, Lane};
use switchyard_carrier::tunnel::{self, Transport, TunnelSession};
use switchyard_carrier::{Refusal, Stream};

use crate::state::AppState;

/// Holds a worker's lane until the websocket or the session ends.
pub async fn hold(state: Arc<AppState>, node: String, lane: Lane, socket: WebSocket) {
    let Some(cluster) = state.cluster.clone() else {
        return;
    };
    let Some((registry, spec)) = cluster.tunnel.clone() else {
        return;
    };
    // A frontend serves no streams to workers.
    let refuse: Acceptor = Arc::new(|_: &str, _: Stream| Err(Refusal::UnknownService));
    let side_lane = match lane {
        Lane::Inference => tunnel::Lane::Inference,
        Lane::Bulk => tunnel::Lane::Bulk,
    };
    let started = TunnelSession::start(
        state.runtime.clone(),
        spec,
        tunnel::Side::Frontend,
        side_lane,
        refuse,
    )
    .await;
    let (session, transport) = match started {
        Ok(started) => started,
        Err(e) => {
            tracing::error!(node, lane = lane.as_str(), error = %e, "the tunnel session did not start");
            return;
        }
    };
    // Held before the claim and before the first frame leaves: once the
    // worker hears this side's HELLO, its bulk lane finds the inference lane here.
    let id = registry.insert(&node, lane, session);
    let epoch = match state
        .store
        .claim_connection(&node, lane.as_str(), &state.instance_id)
        .await
    {
        Ok(epoch) => epoch,
        Err(e) => {
            tracing::error!(node, error = %e, "the connection claim failed; closing the session");
            registry.remove(&node, lane, id);
            return;
        }
    };
    tracing::info!(node, lane = lane.as_str(), epoch, "worker session held");
    pump(socket, transport).await;
    registry.remove(&node, lane, id);
    match state
        .store
        .release_connection(&node, lane.as_str(), &state.instance_id, epoch)
        .await
    {
        Ok(_) => tracing::info!(node, lane = lane.as_str(), epoch, "worker session ended"),
        Err(e) => tracing::warn!(node, error = %e, "the connection claim was not released"),
    }
}

/// Moves an axum websocket's messages through a session's transport.
async fn pump(socket: WebSocket, transport: Transport) {
    let Transport {
        incoming,
        mut outgoing,
    } = transport;
    let (mut sink, mut source) = socket.split();
    let writer = tokio::spawn(async move {
        while let Some(message) = outgoing.recv().await {
            if sink.feed(Message::Binary(message)).await.is_err() {
                return;
            }
            while let Ok(more) = outgoing.try_recv() {
                if sink.feed(Message::Binary(more)).await.is_err() {
                    return;
                }
            }
            if sink.flush().await.is_err() {
                return;
            }
        }
        let _ = sink.close().await;
    });
    let reason = loop {
        match source.next().await {
            Some(Ok(Message::Binary(message))) => {
                if !incoming.message(message) {
                    break "the session has ended".to_string();
                }
            }
            Some(Ok(Message::Close(_))) | None => break "the worker closed the websocket".into(),
            Some(Ok(_)) => {}
            Some(Err(e)) => break format!("websocket error: {e}"),
        }
    };
    incoming.closed(&reason);
    let _ = writer.await;
}
