//! A worker's websocket on this replica: the tunnel session on it, its
//! connection claim, and its place in the registry while it lasts.

use std::sync::Arc;

use bytes::BytesMut;
use switchyard_carrier::stream_seam::{Acceptor, Lane};
use switchyard_carrier::tunnel::websocket::frame::Role;
use switchyard_carrier::tunnel::websocket::wire;
use switchyard_carrier::tunnel::{self, TunnelSession};
use switchyard_carrier::{Refusal, Stream};

use super::upgrade::UpgradedSocket;
use crate::state::AppState;

/// Holds a worker's lane until the websocket or the session ends.
pub async fn hold(state: Arc<AppState>, node: String, lane: Lane, socket: UpgradedSocket) {
    let Some(cluster) = state.carriers.clone() else {
        return;
    };
    let Some(spec) = cluster.tunnel.load_full() else {
        return;
    };
    let spec = (*spec).clone();
    let registry = cluster.sessions.clone();
    // A frontend serves no streams to workers.
    let refuse: Acceptor = Arc::new(|_: &str, _: Stream| Err(Refusal::UnknownService));
    // The carriers' runtime, not the policies': a session is a long-lived
    // instance with the carriers' limits (memory, deadline, no pool slot).
    let started = TunnelSession::start(
        cluster.runtime.clone(),
        spec,
        tunnel::Side::Frontend,
        lane,
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
    wire::pump(socket, Role::Server, BytesMut::new(), transport).await;
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
