//! Two tunnel sessions over a real websocket on loopback: the frontend's
//! side and a worker's, as `switchyard worker` would dial it.

use std::sync::Arc;

use switchyard_carrier::streams::Acceptor;
use switchyard_carrier::tunnel::{Lane, Side, TunnelSession, TunnelSpec, websocket};
use switchyard_carrier::{Refusal, Stream};
use switchyard_runtime::Runtime;
use tokio::net::TcpListener;

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

/// Refuses every stream (a frontend serves none).
pub fn refuse_all() -> Acceptor {
    Arc::new(|_: &str, _: Stream| Err(Refusal::UnknownService))
}

/// A frontend session and a worker session on one loopback websocket.
pub async fn pair(
    runtime: &Arc<Runtime>,
    lane: Lane,
    worker_services: Acceptor,
) -> (TunnelSession, TunnelSession) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    let frontend_runtime = runtime.clone();
    let frontend = tokio::spawn(async move {
        let (socket, _) = listener.accept().await.expect("accept");
        let websocket =
            tokio_tungstenite::accept_async_with_config(socket, Some(websocket::config()))
                .await
                .expect("websocket handshake");
        let (session, transport) =
            TunnelSession::start(frontend_runtime, spec(), Side::Frontend, lane, refuse_all())
                .await
                .expect("frontend session");
        tokio::spawn(websocket::pump(websocket, transport));
        session
    });
    let (websocket, _) = tokio_tungstenite::connect_async_with_config(
        format!("ws://{address}/"),
        Some(websocket::config()),
        true,
    )
    .await
    .expect("dial");
    let (worker, transport) =
        TunnelSession::start(runtime.clone(), spec(), Side::Worker, lane, worker_services)
            .await
            .expect("worker session");
    tokio::spawn(websocket::pump(websocket, transport));
    (frontend.await.expect("frontend task"), worker)
}
