//! [`Carrier`]: what host code holds to publish, subscribe and request.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use switchyard_runtime::Runtime;
use switchyard_runtime::carrier::Endpoint;
use tokio::sync::{mpsc, oneshot, watch};

use crate::component::ComponentSpec;
use crate::message::{CarrierStats, Message, SendError};
use crate::reactor::{self, Core, Counters, Event, Events, PluginState};

/// Messages a subscription's handler may have waiting; beyond that new ones
/// are dropped and counted (fan-out is at most once; a slow handler must
/// not stall the carrier).
pub const SUBSCRIPTION_QUEUE: usize = 65_536;

/// Queued publishes ([`Carrier::publish_queued`]) past which the caller
/// runs the queue itself: what a fast publisher can get ahead of the
/// plugin, about one burst's plugin call.
pub const QUEUED_PUBLISHES: usize = 1_024;

/// A queued publish of a payload this large has its caller run the queue
/// at once: large payloads are not left waiting in numbers.
pub const QUEUED_LARGE_PAYLOAD: usize = 16 << 10;

/// What a carrier runs with besides its component: its configuration and
/// where it may connect.
#[derive(Clone)]
pub struct CarrierSetup {
    /// The carrier's configuration (JSON; may hold credentials, never logged).
    pub config: String,
    /// The database the host dials for the plugin's `database` endpoint
    /// (never shown to the plugin).
    pub database_url: Option<String>,
    /// The only endpoints the plugin may open, from the operator's
    /// configuration (a NATS URL given to the host, its database), never
    /// from the plugin: a plugin's own list would let it name any host.
    /// Anything else it opens is refused before any I/O.
    pub allowed_endpoints: Vec<Endpoint>,
}

impl std::fmt::Debug for CarrierSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CarrierSetup")
            .field("allowed_endpoints", &self.allowed_endpoints)
            .finish_non_exhaustive()
    }
}

/// The endpoints an operator's carrier configuration names: each
/// `host:port` of its `servers` list, and the database when the host gives
/// one. For tools that take a whole configuration file (the conformance
/// command); the server and worker build the list from their own flags.
pub fn endpoints_named_by(config: &str, database_url: Option<&str>) -> Vec<Endpoint> {
    let servers = serde_json::from_str::<serde_json::Value>(config)
        .ok()
        .and_then(|c| c.get("servers").and_then(|s| s.as_array()).cloned())
        .unwrap_or_default();
    let mut endpoints: Vec<Endpoint> = servers
        .iter()
        .filter_map(|s| s.as_str())
        .map(|s| Endpoint::Tcp(s.to_string()))
        .collect();
    if database_url.is_some() {
        endpoints.push(Endpoint::Database);
    }
    endpoints
}

/// A running carrier: a plugin and its connections, run by the tasks that
/// use it. Dropping the last handle stops it.
pub struct Carrier {
    name: String,
    core: Arc<Core>,
    ready: watch::Receiver<bool>,
    counters: Arc<Counters>,
    next_subscription: AtomicU64,
}

impl std::fmt::Debug for Carrier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Carrier")
            .field("name", &self.name)
            .field("ready", &*self.ready.borrow())
            .finish_non_exhaustive()
    }
}

/// A subscription; dropping it unsubscribes.
pub struct Subscription {
    id: u64,
    events: Events,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("id", &self.id)
            .finish()
    }
}

/// Runs the carrier's queue when dropped: the first publish of a burst
/// runs it after yielding, and still runs it if it is cancelled meanwhile.
struct RunsQueue<'a>(&'a Core);

impl Drop for RunsQueue<'_> {
    fn drop(&mut self) {
        self.0.drain();
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let _ = self.events.send(Event::Unsubscribe(self.id));
    }
}

impl Carrier {
    /// Loads the plugin; its I/O runs on the current tokio runtime.
    pub fn start(
        component: ComponentSpec,
        setup: CarrierSetup,
        runtime: Arc<Runtime>,
    ) -> Result<Arc<Self>, SendError> {
        let io = tokio::runtime::Handle::try_current().map_err(|_| {
            SendError::Unavailable("a carrier needs a tokio runtime for its I/O".into())
        })?;
        let (ready_tx, ready) = watch::channel(false);
        let counters = Arc::new(Counters::default());
        let name = component.name.clone();
        let core = reactor::start(component, setup, runtime, io, ready_tx, counters.clone())?;
        Ok(Arc::new(Self {
            name,
            core,
            ready,
            counters,
            next_subscription: AtomicU64::new(1),
        }))
    }

    /// The carrier's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Waits until the carrier is connected; `false` after `timeout`.
    pub async fn wait_ready(&self, timeout: Duration) -> bool {
        self.wait_for(true, timeout).await
    }

    /// Waits until the carrier has lost its connection; `false` after `timeout`.
    pub async fn wait_lost(&self, timeout: Duration) -> bool {
        self.wait_for(false, timeout).await
    }

    async fn wait_for(&self, connected: bool, timeout: Duration) -> bool {
        let mut ready = self.ready.clone();
        tokio::time::timeout(timeout, ready.wait_for(|r| *r == connected))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Whether it is connected now.
    pub fn is_ready(&self) -> bool {
        *self.ready.borrow()
    }

    /// Publishes (at most once).
    pub async fn publish(&self, subject: &str, payload: Bytes) -> Result<(), SendError> {
        self.publish_with_headers(subject, Vec::new(), payload)
            .await
    }

    /// Publishes with headers.
    pub async fn publish_with_headers(
        &self,
        subject: &str,
        headers: Vec<(String, String)>,
        payload: Bytes,
    ) -> Result<(), SendError> {
        let (done, answer) = oneshot::channel();
        let first = self.core.defer(Event::Publish {
            subject: subject.into(),
            headers,
            payload,
            done: Some(done),
        }) == 1;
        if first {
            // Yield once before running the queue: the publishes the
            // caller makes meanwhile (a burst, `join_all`) join this one
            // in one plugin call and one write.
            let _runs = RunsQueue(&self.core);
            tokio::task::yield_now().await;
        }
        answer.await.map_err(|_| stopped())?
    }

    /// Publishes without waiting for the plugin's verdict, as a NATS
    /// client's `publish` only queues: the message goes out in order with
    /// every other operation of this carrier, and a refusal (a subject the
    /// protocol rejects, a payload too large, the plugin down) is counted
    /// in [`CarrierStats::refused`] and logged at debug level, not returned.
    ///
    /// The first publish of a burst has the queue run by a task of its own
    /// once this one yields, so that a caller publishing in a loop fills
    /// one plugin call and one write; a caller that gets
    /// [`QUEUED_PUBLISHES`] ahead of the plugin, or queues a payload of
    /// [`QUEUED_LARGE_PAYLOAD`] or more, runs the queue itself, which
    /// bounds what it can queue (about 16 MiB).
    pub async fn publish_queued(&self, subject: &str, payload: Bytes) -> Result<(), SendError> {
        let large = payload.len() >= QUEUED_LARGE_PAYLOAD;
        let queued = self.core.defer(Event::Publish {
            subject: subject.into(),
            headers: Vec::new(),
            payload,
            done: None,
        });
        if queued >= QUEUED_PUBLISHES || large {
            self.core.drain_waiting();
        } else if queued == 1 {
            let core = self.core.clone();
            tokio::spawn(async move { core.drain() });
        }
        // Lets the queue's task (and everything else) run when this
        // caller has used its turn, as awaiting a channel would.
        tokio::task::consume_budget().await;
        Ok(())
    }

    /// Subscribes `handler` to a subject (`*` matches one token); with a queue
    /// group, each message goes to one member of the group.
    pub async fn subscribe_into(
        &self,
        subject: &str,
        queue_group: Option<&str>,
        handler: mpsc::Sender<Message>,
    ) -> Result<Subscription, SendError> {
        let id = self.next_subscription.fetch_add(1, Ordering::Relaxed);
        let (done, answer) = oneshot::channel();
        self.core.submit(Event::Subscribe {
            id,
            subject: subject.into(),
            queue_group: queue_group.map(str::to_string),
            handler,
            done,
        });
        answer.await.map_err(|_| stopped())??;
        Ok(Subscription {
            id,
            events: self.core.events(),
        })
    }

    /// Subscribes with a handler queue of its own.
    pub async fn subscribe(
        &self,
        subject: &str,
        queue_group: Option<&str>,
    ) -> Result<(Subscription, mpsc::Receiver<Message>), SendError> {
        let (handler, messages) = mpsc::channel(SUBSCRIPTION_QUEUE);
        let subscription = self.subscribe_into(subject, queue_group, handler).await?;
        Ok((subscription, messages))
    }

    /// Sends a request and waits for its reply.
    pub async fn request(
        &self,
        subject: &str,
        payload: Bytes,
        timeout: Duration,
    ) -> Result<Message, SendError> {
        self.request_with_headers(subject, Vec::new(), payload, timeout)
            .await
    }

    /// Sends a request with headers and waits for its reply.
    pub async fn request_with_headers(
        &self,
        subject: &str,
        headers: Vec<(String, String)>,
        payload: Bytes,
        timeout: Duration,
    ) -> Result<Message, SendError> {
        let (done, answer) = oneshot::channel();
        self.core.submit(Event::Request {
            subject: subject.into(),
            headers,
            payload,
            timeout_ms: timeout.as_millis() as u64,
            done,
        });
        answer.await.map_err(|_| stopped())?
    }

    /// The largest payload a message may carry (known once connected; 0 before).
    pub fn max_payload(&self) -> u64 {
        self.counters.max_payload.load(Ordering::Relaxed)
    }

    /// Whether the plugin runs, or is down with a failed rebuild waiting
    /// for its next try.
    pub fn plugin_state(&self) -> PluginState {
        self.counters.plugin_state()
    }

    /// The counters now.
    pub fn stats(&self) -> CarrierStats {
        CarrierStats {
            published: self.counters.published.load(Ordering::Relaxed),
            refused: self.counters.refused.load(Ordering::Relaxed),
            delivered: self.counters.delivered.load(Ordering::Relaxed),
            delivered_in_place: self.counters.delivered_in_place.load(Ordering::Relaxed),
            dropped: self.counters.dropped.load(Ordering::Relaxed),
            reconnects: self.counters.reconnects.load(Ordering::Relaxed),
            received_bytes: self.counters.received_bytes.load(Ordering::Relaxed),
            largest_received: self.counters.largest_received.load(Ordering::Relaxed),
            claimed_bytes: self.counters.claimed_bytes.load(Ordering::Relaxed),
            inline_payload_bytes: self.counters.inline_payload_bytes.load(Ordering::Relaxed),
            cell_bytes: self.counters.cell_bytes.load(Ordering::Relaxed),
        }
    }
}

impl Drop for Carrier {
    fn drop(&mut self) {
        self.core.submit(Event::Shutdown);
    }
}

fn stopped() -> SendError {
    SendError::Unavailable("the carrier stopped".into())
}
