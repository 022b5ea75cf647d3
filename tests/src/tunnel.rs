//! Two tunnel sessions over a real websocket on loopback: the frontend's
//! side and a worker's, as `switchyard worker` would dial it.

use std::sync::Arc;

use switchyard_carrier::ComponentSpec;
use switchyard_carrier::stream_seam::Acceptor;
use switchyard_carrier::tunnel::{Lane, TunnelSession, loopback};
use switchyard_runtime::Runtime;

use crate::plugins;

/// The tunnel component `scripts/build-guests.sh` built.
pub fn spec() -> ComponentSpec {
    ComponentSpec::new("tunnel", "0.2.0", plugins::component("tunnel"))
}

/// The committed `switchyard:carrier/tunnel@0.1.0` component
/// (`tests/fixtures/tunnel-0.1.0`), which the host must keep loading.
pub fn spec_v0_1() -> ComponentSpec {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/tunnel-0.1.0/tunnel.wasm"
    );
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    ComponentSpec::new("tunnel", "0.1.0", bytes)
}

/// A frontend session and a worker session on one loopback websocket.
pub async fn pair(
    runtime: &Arc<Runtime>,
    lane: Lane,
    worker_services: Acceptor,
) -> (TunnelSession, TunnelSession) {
    pair_of(runtime, &spec(), lane, worker_services).await
}

/// [`pair`], both sides running `spec`.
pub async fn pair_of(
    runtime: &Arc<Runtime>,
    spec: &ComponentSpec,
    lane: Lane,
    worker_services: Acceptor,
) -> (TunnelSession, TunnelSession) {
    let (listener, address) = loopback::listen().await.expect("bind");
    loopback::pair(runtime, spec, listener, &address, lane, worker_services)
        .await
        .expect("a session pair")
}
