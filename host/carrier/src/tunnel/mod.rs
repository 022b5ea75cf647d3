//! The tunnel carrier's host side: a websocket session per worker lane,
//! with the tunnel plugin (one instance per session) multiplexing
//! [`Stream`]s on it.
//!
//! The host owns the websocket (the frontend's connect endpoint or the
//! worker's dialer move its messages), or the TCP connection of a `nats`
//! set's dialled session ([`tcp`], [`crate::dialled`]); [`TunnelSession::start`] gives back
//! the [`Transport`] to move them through. [`TunnelRegistry`] holds the
//! sessions a frontend replica has, whatever carrier set is active.

mod core;
mod driver;
pub mod loopback;
mod registry;
pub mod tcp;
pub mod websocket;

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use switchyard_runtime::Runtime;
use switchyard_runtime::tunnel::TunnelPlugin;
use tokio::sync::{mpsc, oneshot, watch};

use self::core::Core;
use driver::{Command, Driver};
pub use registry::{Relay, TunnelRegistry};
pub use switchyard_runtime::tunnel::Side;

pub use crate::stream_seam::Lane;

use crate::Refusal;
use crate::component::ComponentSpec;
use crate::stream::{Stream, StreamReader};
use crate::stream_seam::Acceptor;

/// The websocket's message size and buffers: one frame per message, at
/// most 64 KiB.
pub const WEBSOCKET_BUFFER: usize = websocket::frame::MAX_MESSAGE;

/// One side of one websocket session. Cloning shares it.
#[derive(Clone)]
pub struct TunnelSession {
    core: Arc<Core>,
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
    pub outgoing: mpsc::UnboundedReceiver<Outbound>,
}

/// One message of the session to write: a frame the plugin wrote whole, or
/// its header with the stream's data behind it. The two travel apart so
/// that the data is never copied to join them ([`websocket::wire`] writes
/// them side by side).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outbound {
    pub head: Bytes,
    pub body: Bytes,
}

impl Outbound {
    /// The message's length on the wire.
    pub fn len(&self) -> usize {
        self.head.len() + self.body.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The message in one piece, for a writer that takes one (a copy when
    /// it has a body).
    pub fn joined(self) -> Bytes {
        if self.body.is_empty() {
            return self.head;
        }
        let mut joined = bytes::BytesMut::with_capacity(self.len());
        joined.extend_from_slice(&self.head);
        joined.extend_from_slice(&self.body);
        joined.freeze()
    }
}

/// The incoming side of a [`Transport`].
#[derive(Debug, Clone)]
pub struct Incoming {
    core: Arc<Core>,
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Core").finish_non_exhaustive()
    }
}

impl Incoming {
    /// One binary message arrived (the plugin sees it before this returns).
    /// `false` once the session has ended.
    pub fn message(&self, message: Bytes) -> bool {
        self.core.submit(Command::Incoming(message));
        self.core.is_running()
    }

    /// The websocket ended.
    pub fn closed(&self, reason: &str) {
        self.core
            .submit(Command::TransportClosed(reason.to_string()));
    }
}

impl TunnelSession {
    /// Loads the plugin (off the async workers: compiling may take a
    /// while) and starts this side of the session; `acceptor` decides about
    /// streams the peer opens.
    pub async fn start(
        runtime: Arc<Runtime>,
        spec: ComponentSpec,
        side: Side,
        lane: Lane,
        acceptor: Acceptor,
    ) -> Result<(Self, Transport), String> {
        let (plugin, first) = tokio::task::spawn_blocking(move || {
            let lane = driver::to_plugin_lane(lane);
            TunnelPlugin::load(&runtime, spec.source(), side, lane, 0)
                .map_err(|e| format!("the tunnel plugin did not load: {e}"))
        })
        .await
        .map_err(|e| format!("loading the tunnel plugin failed: {e}"))??;
        let (output, outgoing) = mpsc::unbounded_channel();
        let (lost_tx, lost) = watch::channel(None);
        let core = Core::new();
        let driver = Driver::new(
            plugin,
            Arc::downgrade(&core),
            output,
            acceptor,
            Instant::now(),
            lost_tx,
        );
        core.install(driver, first);
        tokio::spawn(self::core::keepalive(Arc::downgrade(&core)));
        let incoming = Incoming { core: core.clone() };
        Ok((Self { core, lost }, Transport { incoming, outgoing }))
    }

    /// Opens a stream to the peer's `service`; answers once the peer did.
    pub async fn open(&self, service: &str) -> Result<Stream, Refusal> {
        self.open_with(service, None).await
    }

    /// Opens a stream to `service` with all of `request` sent behind the
    /// OPEN (early data) and this side finished; answers with the reader
    /// once the peer accepted.
    pub async fn call(&self, service: &str, request: Bytes) -> Result<StreamReader, Refusal> {
        let Stream { reader, writer } = self.open_with(service, Some(request)).await?;
        writer.finished_already();
        Ok(reader)
    }

    async fn open_with(&self, service: &str, request: Option<Bytes>) -> Result<Stream, Refusal> {
        let (answer, opened) = oneshot::channel();
        self.core.submit(Command::Open {
            service: service.to_string(),
            request,
            answer,
        });
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
        self.core
            .submit(Command::TransportClosed("closed by this side".into()));
    }
}
