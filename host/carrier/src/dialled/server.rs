//! [`SessionServer`]: the worker's listener for the `nats` set's dialled
//! sessions. Every connection that proves itself with the node's stream key
//! and asks for `session:<lane>` runs a worker-side tunnel session whose
//! streams go to the acceptor. One listener serves every version of the
//! set that runs: the newest attached names the tunnel component new
//! sessions run ([`SessionServer::set_component`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use switchyard_runtime::Runtime;
use tokio::net::{TcpListener, TcpStream};

use super::{pump, session_lane};
use crate::Refusal;
use crate::component::ComponentSpec;
use crate::direct;
use crate::stream_seam::Acceptor;
use crate::tunnel::{Side, TunnelSession};

/// The worker's sessions listener.
pub struct SessionServer {
    runtime: Arc<Runtime>,
    key: [u8; 32],
    acceptor: Acceptor,
    component: Mutex<ComponentSpec>,
    /// Connections accepted, whatever became of them.
    accepted: AtomicU64,
    next_id: AtomicU64,
    sessions: Mutex<HashMap<u64, TunnelSession>>,
}

impl std::fmt::Debug for SessionServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key is a secret.
        f.debug_struct("SessionServer")
            .field("accepted", &self.accepted())
            .finish_non_exhaustive()
    }
}

impl SessionServer {
    /// A server for the node whose proofs are made with `key` (its
    /// [`direct::stream_key`]); its sessions run `component` and hand
    /// streams to `acceptor`.
    pub fn new(
        runtime: Arc<Runtime>,
        key: [u8; 32],
        component: ComponentSpec,
        acceptor: Acceptor,
    ) -> Arc<Self> {
        Arc::new(Self {
            runtime,
            key,
            acceptor,
            component: Mutex::new(component),
            accepted: AtomicU64::new(0),
            next_id: AtomicU64::new(1),
            sessions: Mutex::new(HashMap::new()),
        })
    }

    /// The tunnel component sessions accepted from now on run (sessions
    /// already running keep theirs).
    pub fn set_component(&self, component: ComponentSpec) {
        *self.component.lock().expect("component lock") = component;
    }

    /// The connections accepted so far (a frontend dials one per lane).
    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }

    /// The sessions running now.
    pub fn sessions(&self) -> usize {
        self.sessions.lock().expect("sessions lock").len()
    }

    /// Ends every session now (their streams are reset); the listener is
    /// the caller's to stop.
    pub fn close(&self) {
        let sessions = std::mem::take(&mut *self.sessions.lock().expect("sessions lock"));
        for session in sessions.into_values() {
            session.close();
        }
    }

    /// Serves connections to `listener` until it fails.
    pub async fn serve(self: Arc<Self>, listener: TcpListener) {
        loop {
            let Ok((socket, peer)) = listener.accept().await else {
                return;
            };
            self.accepted.fetch_add(1, Ordering::Relaxed);
            let server = self.clone();
            tokio::spawn(async move {
                if let Err(e) = server.answer(socket).await {
                    tracing::debug!(%peer, error = %e, "a session dial was refused");
                }
            });
        }
    }

    async fn answer(self: Arc<Self>, socket: TcpStream) -> std::io::Result<()> {
        let (mut connection, service) = direct::accept(socket, &self.key).await?;
        let Some(lane) = session_lane(&service) else {
            return direct::answer(&mut connection, Err(&Refusal::UnknownService)).await;
        };
        let component = self.component.lock().expect("component lock").clone();
        // The session is started before the answer, so that a component
        // that does not load is a refusal the dialler reads, not a session
        // that ends at once.
        let (session, transport) = match TunnelSession::start(
            self.runtime.clone(),
            component,
            Side::Worker,
            lane,
            self.acceptor.clone(),
        )
        .await
        {
            Ok(started) => started,
            Err(why) => {
                let refusal = Refusal::NotDelivered(why);
                return direct::answer(&mut connection, Err(&refusal)).await;
            }
        };
        direct::answer(&mut connection, Ok(())).await?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.sessions
            .lock()
            .expect("sessions lock")
            .insert(id, session.clone());
        let server = Arc::downgrade(&self);
        tokio::spawn(async move {
            session.lost().await;
            if let Some(server) = server.upgrade() {
                server.sessions.lock().expect("sessions lock").remove(&id);
            }
        });
        pump(transport, connection);
        Ok(())
    }
}
