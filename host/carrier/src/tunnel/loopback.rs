//! Two ends of a tunnel session over a real websocket (the tunnel's own
//! framing, as a worker and its frontend run it), for tests and
//! benchmarks: the frontend's side accepts on `address` (loopback, or a
//! proxy in front of it), the worker's side dials `dial`.

use std::sync::Arc;

use switchyard_runtime::Runtime;
use tokio::net::TcpListener;

use super::websocket::frame::Role;
use super::websocket::{handshake, wire};
use super::{Lane, Side, TunnelSession};
use crate::component::ComponentSpec;
use crate::stream_seam::Acceptor;
use crate::{Refusal, Stream};

/// Refuses every stream (a frontend serves none).
pub fn refuse_all() -> Acceptor {
    Arc::new(|_: &str, _: Stream| Err(Refusal::UnknownService))
}

/// A listener for the frontend's side on 127.0.0.1, and its address.
pub async fn listen() -> std::io::Result<(TcpListener, String)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?.to_string();
    Ok((listener, address))
}

/// Accepts one websocket on `listener` as the frontend while a worker dials
/// `dial` (the listener's address, or a proxy to it); returns the
/// frontend's session and the worker's.
pub async fn pair(
    runtime: &Arc<Runtime>,
    spec: &ComponentSpec,
    listener: TcpListener,
    dial: &str,
    lane: Lane,
    worker_services: Acceptor,
) -> Result<(TunnelSession, TunnelSession), String> {
    let (frontend_runtime, frontend_spec) = (runtime.clone(), spec.clone());
    let frontend = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.map_err(|e| e.to_string())?;
        let _ = socket.set_nodelay(true);
        let read_ahead = handshake::accept(&mut socket).await?;
        let (session, transport) = TunnelSession::start(
            frontend_runtime,
            frontend_spec,
            Side::Frontend,
            lane,
            refuse_all(),
        )
        .await?;
        tokio::spawn(wire::pump(socket, Role::Server, read_ahead, transport));
        Ok::<_, String>(session)
    });
    let (socket, read_ahead) = handshake::dial(&format!("ws://{dial}/"), &[])
        .await
        .map_err(|e| e.to_string())?;
    let (worker, transport) = TunnelSession::start(
        runtime.clone(),
        spec.clone(),
        Side::Worker,
        lane,
        worker_services,
    )
    .await?;
    tokio::spawn(wire::pump(socket, Role::Client, read_ahead, transport));
    let frontend = frontend.await.map_err(|e| e.to_string())??;
    Ok((frontend, worker))
}
