//! The tunnel carrier's host side: a websocket session per worker lane,
//! with the tunnel plugin (one instance per session) multiplexing
//! [`Stream`]s on it.
//!
//! The host owns the websocket (the frontend's connect endpoint or the
//! worker's dialer move its messages); [`TunnelSession::start`] gives back
//! the [`Transport`] to move them through.

mod driver;
pub mod loopback;
pub mod websocket;

use std::sync::Arc;
use std::sync::mpsc as std_mpsc;
use std::time::Instant;

use bytes::Bytes;
use switchyard_runtime::Runtime;
use switchyard_runtime::tunnel::{TunnelPlugin, TunnelSource};
use tokio::sync::{mpsc, oneshot, watch};

use driver::{Command, Driver};
pub use switchyard_runtime::tunnel::{Lane, Side};

use crate::stream::{Refusal, Stream};
use crate::streams::Acceptor;

/// The websocket's message size and buffers: one frame per message, at
/// most 64 KiB.
pub const WEBSOCKET_BUFFER: usize = 64 * 1024;

/// Which component runs the tunnel.
#[derive(Clone)]
pub struct TunnelSpec {
    /// Plugin name.
    pub name: String,
    /// Plugin version.
    pub version: String,
    /// The component bytes.
    pub bytes: Arc<[u8]>,
    /// Their pinned SHA-256.
    pub sha256: String,
}

impl std::fmt::Debug for TunnelSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TunnelSpec")
            .field("name", &self.name)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

/// One side of one websocket session. Cloning shares it.
#[derive(Clone)]
pub struct TunnelSession {
    commands: std_mpsc::Sender<Command>,
    lost: watch::Receiver<Option<String>>,
}

impl std::fmt::Debug for TunnelSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TunnelSession")
            .field("lost", &*self.lost.borrow())
            .finish()
    }
}

/// How the websocket's messages reach the session and leave it.
#[derive(Debug)]
pub struct Transport {
    /// Hand every incoming binary message here, then `closed` at the end.
    pub incoming: Incoming,
    /// Write every message from here as one binary websocket message; the
    /// channel closes when the session has ended (close the websocket then).
    pub outgoing: mpsc::UnboundedReceiver<Bytes>,
}

/// The incoming side of a [`Transport`].
#[derive(Debug, Clone)]
pub struct Incoming {
    commands: std_mpsc::Sender<Command>,
}

impl Incoming {
    /// One binary message arrived. `false` once the session has ended.
    pub fn message(&self, message: Bytes) -> bool {
        self.commands.send(Command::Incoming(message)).is_ok()
    }

    /// The websocket ended.
    pub fn closed(&self, reason: &str) {
        let _ = self
            .commands
            .send(Command::TransportClosed(reason.to_string()));
    }
}

impl TunnelSession {
    /// Loads the plugin on a thread of its own and starts this side of the
    /// session; `acceptor` decides about streams the peer opens.
    pub async fn start(
        runtime: Arc<Runtime>,
        spec: TunnelSpec,
        side: Side,
        lane: Lane,
        acceptor: Acceptor,
    ) -> Result<(Self, Transport), String> {
        let (commands, received) = std_mpsc::channel();
        let (output, outgoing) = mpsc::unbounded_channel();
        let (lost_tx, lost) = watch::channel(None);
        let (loaded_tx, loaded) = oneshot::channel();
        let driver_commands = commands.clone();
        std::thread::Builder::new()
            .name("switchyard-tunnel".into())
            .spawn(move || {
                let epoch = Instant::now();
                let source = TunnelSource {
                    name: &spec.name,
                    version: &spec.version,
                    bytes: &spec.bytes,
                    sha256: &spec.sha256,
                };
                match TunnelPlugin::load(&runtime, source, side, lane, 0) {
                    Ok((plugin, first)) => {
                        let _ = loaded_tx.send(Ok(()));
                        Driver::new(plugin, driver_commands, output, acceptor, epoch, lost_tx)
                            .run(first, received);
                    }
                    Err(e) => {
                        let _ = loaded_tx.send(Err(format!("the tunnel plugin did not load: {e}")));
                    }
                }
            })
            .map_err(|e| format!("cannot start a session thread: {e}"))?;
        loaded
            .await
            .map_err(|_| "the session thread ended".to_string())??;
        let incoming = Incoming {
            commands: commands.clone(),
        };
        Ok((Self { commands, lost }, Transport { incoming, outgoing }))
    }

    /// Opens a stream to the peer's `service`; answers once the peer did.
    pub async fn open(&self, service: &str) -> Result<Stream, Refusal> {
        let (answer, opened) = oneshot::channel();
        self.commands
            .send(Command::Open {
                service: service.to_string(),
                answer,
            })
            .map_err(|_| Refusal::NotDelivered("the session has ended".into()))?;
        opened
            .await
            .unwrap_or_else(|_| Err(Refusal::NotDelivered("the session has ended".into())))
    }

    /// Whether the session has ended.
    pub fn is_lost(&self) -> bool {
        self.lost.borrow().is_some()
    }

    /// Waits until the session has ended; returns why.
    pub async fn lost(&self) -> String {
        let mut lost = self.lost.clone();
        match lost.wait_for(Option::is_some).await {
            Ok(reason) => reason.clone().unwrap_or_default(),
            Err(_) => "the session has ended".into(),
        }
    }

    /// Ends the session (the websocket closes).
    pub fn close(&self) {
        let _ = self
            .commands
            .send(Command::TransportClosed("closed by this side".into()));
    }
}
