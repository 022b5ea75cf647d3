//! Two tunnel sessions over a real websocket on loopback: the frontend's
//! side and a worker's, as `switchyard worker` would dial it.

use std::sync::Arc;

use switchyard_carrier::streams::Acceptor;
use switchyard_carrier::tunnel::{Lane, TunnelSession, TunnelSpec, loopback};
use switchyard_runtime::Runtime;

use crate::plugins;

/// The tunnel component `scripts/build-guests.sh` built.
pub fn spec() -> TunnelSpec {
    let bytes = plugins::component("tunnel");
    TunnelSpec {
        name: "tunnel".into(),
        version: "0.1.0".into(),
        sha256: plugins::sha256(&bytes),
        bytes: bytes.into(),
    }
}

/// A frontend session and a worker session on one loopback websocket.
pub async fn pair(
    runtime: &Arc<Runtime>,
    lane: Lane,
    worker_services: Acceptor,
) -> (TunnelSession, TunnelSession) {
    let (listener, address) = loopback::listen().await.expect("bind");
    loopback::pair(runtime, &spec(), listener, &address, lane, worker_services)
        .await
        .expect("a session pair")
}
