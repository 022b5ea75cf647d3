//! The reactor: owns the carrier plugin, takes events from the I/O tasks
//! and operations from [`crate::Carrier`] handles, calls the plugin and
//! performs the actions it answers with. It runs on the tasks that hand it
//! events (`reactor/core.rs`), not on a thread of its own.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use switchyard_runtime::carrier::{
    Action, CarrierError, CarrierPlugin, CarrierSource, Header, Notification, PackedBatch,
};
use switchyard_runtime::{CallError, Runtime};
use tokio::sync::{mpsc, oneshot, watch};

use crate::client::CarrierSetup;
use crate::component::ComponentSpec;
use crate::database::DbConnection;
use crate::intake::ReadState;
use crate::io;
use crate::message::{Message, SendError};
use crate::payloads::Payloads;

mod actions;
mod bypass;
mod core;

pub(crate) use core::{Core, Events};

/// The wait before the first retry of a failed rebuild; each failure
/// doubles it, up to [`REBUILD_BACKOFF_MAX`]. A rebuild fails for reasons
/// that may pass (the instance could not be allocated, the configuration
/// call trapped once); giving up would leave the carrier down until the
/// process restarts, retrying at once would spin on a failure that lasts.
const REBUILD_BACKOFF_FIRST: Duration = Duration::from_secs(1);

/// The longest wait between two rebuild tries: a carrier whose plugin
/// comes back is serving again within this long.
const REBUILD_BACKOFF_MAX: Duration = Duration::from_secs(30);

/// Something for the reactor to handle.
pub(crate) enum Event {
    Opened(u64),
    Closed(u64, String),
    Received(u64, Vec<u8>),
    Timer(u64),
    /// Time to try again to rebuild a plugin whose rebuild failed.
    Rebuild,
    Notified(u64, Vec<Notification>, u64),
    /// A query's answer, with the column whose cells the host holds.
    Answered(u64, Option<u32>, Result<Vec<Vec<Option<Vec<u8>>>>, String>),
    Publish {
        subject: String,
        headers: Vec<(String, String)>,
        payload: Bytes,
        /// Where the plugin's verdict goes; `None` for a queued publish
        /// (`Carrier::publish_queued`), whose refusal is only counted.
        done: Option<oneshot::Sender<Result<(), SendError>>>,
    },
    Subscribe {
        id: u64,
        subject: String,
        queue_group: Option<String>,
        handler: mpsc::Sender<Message>,
        done: oneshot::Sender<Result<(), SendError>>,
    },
    Unsubscribe(u64),
    Request {
        subject: String,
        headers: Vec<(String, String)>,
        payload: Bytes,
        timeout_ms: u64,
        done: oneshot::Sender<Result<Message, SendError>>,
    },
    Shutdown,
}

/// Counters shared with the handles.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub published: AtomicU64,
    /// Publishes the plugin refused (or could not take: it was down).
    pub refused: AtomicU64,
    pub delivered: AtomicU64,
    /// Messages the plugin answered as spans of a read (0.4.0).
    pub delivered_in_place: AtomicU64,
    pub dropped: AtomicU64,
    pub reconnects: AtomicU64,
    /// Bytes handed to `received`, and the most in one call.
    pub received_bytes: AtomicU64,
    pub largest_received: AtomicU64,
    /// Incoming payload bytes taken beside the plugin.
    pub claimed_bytes: AtomicU64,
    /// Outgoing payload bytes handed to the plugin inline.
    pub inline_payload_bytes: AtomicU64,
    /// Result-cell bytes handed to the plugin (held cells are not).
    pub cell_bytes: AtomicU64,
    /// The largest payload, as the plugin reports it once connected.
    pub max_payload: AtomicU64,
    /// Rebuilds that failed in a row (0 while the plugin runs).
    pub failed_rebuilds: AtomicU64,
    /// Why the last rebuild failed, while the plugin is down.
    pub rebuild_error: std::sync::Mutex<Option<String>>,
    /// When the next rebuild is tried (ms since the epoch), while the plugin is down.
    pub next_rebuild_ms: AtomicU64,
}

/// The plugin's state as handles see it: running, or down with its retries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginState {
    /// `running`, or `rebuilding` while a failed rebuild waits for its retry.
    pub state: &'static str,
    /// Rebuilds that failed in a row.
    pub failed_rebuilds: u64,
    /// Why the last one failed.
    pub last_error: Option<String>,
    /// When the next try is due (ms since the Unix epoch).
    pub next_retry_unix_ms: Option<u64>,
}

impl Counters {
    pub(crate) fn plugin_state(&self) -> PluginState {
        let failed_rebuilds = self.failed_rebuilds.load(Ordering::Relaxed);
        let last_error = self
            .rebuild_error
            .lock()
            .expect("rebuild error lock")
            .clone();
        match last_error {
            None => PluginState {
                state: "running",
                failed_rebuilds,
                last_error: None,
                next_retry_unix_ms: None,
            },
            Some(error) => PluginState {
                state: "rebuilding",
                failed_rebuilds,
                last_error: Some(error),
                next_retry_unix_ms: Some(self.next_rebuild_ms.load(Ordering::Relaxed)),
            },
        }
    }
}

/// The wait before the next rebuild try after `failures` failed ones in a
/// row (at least 1): 1 s, 2 s, 4 s ... capped at 30 s.
fn rebuild_backoff(failures: u64) -> Duration {
    let doublings = failures.saturating_sub(1).min(16) as u32;
    REBUILD_BACKOFF_FIRST
        .saturating_mul(1 << doublings)
        .min(REBUILD_BACKOFF_MAX)
}

struct Subscription {
    subject: String,
    queue_group: Option<String>,
    handler: mpsc::Sender<Message>,
}

/// A connection the plugin opened: a socket or a database session.
enum Link {
    Tcp(io::Connection),
    Database(DbConnection),
}

impl Link {
    fn close(self) {
        match self {
            Link::Tcp(c) => c.close(),
            Link::Database(c) => c.close(),
        }
    }
}

struct Reactor {
    component: ComponentSpec,
    setup: CarrierSetup,
    runtime: Arc<Runtime>,
    plugin: Option<CarrierPlugin>,
    events: Events,
    /// Set once the carrier is dropped: later events are ignored.
    stopped: bool,
    io: tokio::runtime::Handle,
    connections: HashMap<u64, Link>,
    /// Publishes gathered while handling a burst of events, packed for one
    /// plugin call, and their answer channels in the same order.
    pending_publishes: PackedBatch,
    publishers: Vec<Option<oneshot::Sender<Result<(), SendError>>>>,
    /// Writes gathered while handling a burst of events, sent once per connection.
    pending_writes: HashMap<u64, bytes::BytesMut>,
    /// Payloads held for the plugin (0.3.0): named by id, used once.
    payloads: Payloads,
    /// Each TCP connection's unparsed bytes and claimed body.
    reads: HashMap<u64, ReadState>,
    subscriptions: HashMap<u64, Subscription>,
    requests: HashMap<u64, oneshot::Sender<Result<Message, SendError>>>,
    next_request: u64,
    timer_generation: u64,
    ready: watch::Sender<bool>,
    ever_ready: bool,
    /// Plugins dropped for failing: an answer whose actions made the
    /// plugin fail is not acted on further.
    failures: u64,
    counters: Arc<Counters>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Loads the plugin and performs its first actions; the reactor then runs
/// on the tasks that hand it events.
pub(crate) fn start(
    component: ComponentSpec,
    setup: CarrierSetup,
    runtime: Arc<Runtime>,
    io: tokio::runtime::Handle,
    ready: watch::Sender<bool>,
    counters: Arc<Counters>,
) -> Result<Arc<Core>, SendError> {
    let core =
        Core::new(|events| Reactor::new(component, setup, runtime, io, ready, counters, events));
    core.with(|reactor| {
        let first = reactor.load()?;
        reactor.perform(first);
        reactor.flush_writes();
        Ok(())
    })
    .map_err(SendError::Unavailable)?;
    Ok(core)
}

impl Reactor {
    fn new(
        component: ComponentSpec,
        setup: CarrierSetup,
        runtime: Arc<Runtime>,
        io: tokio::runtime::Handle,
        ready: watch::Sender<bool>,
        counters: Arc<Counters>,
        events: Events,
    ) -> Self {
        Reactor {
            component,
            setup,
            runtime,
            plugin: None,
            events,
            stopped: false,
            io,
            connections: HashMap::new(),
            pending_writes: HashMap::new(),
            pending_publishes: PackedBatch::default(),
            publishers: Vec::new(),
            payloads: Payloads::default(),
            reads: HashMap::new(),
            subscriptions: HashMap::new(),
            requests: HashMap::new(),
            next_request: 0,
            timer_generation: 0,
            ready,
            ever_ready: false,
            failures: 0,
            counters,
        }
    }

    fn load(&mut self) -> Result<Vec<Action>, String> {
        let seed = now_ms() ^ (u64::from(std::process::id()) << 32);
        let source = CarrierSource {
            component: self.component.source(),
            config: &self.setup.config,
            seed,
        };
        let (plugin, actions) =
            CarrierPlugin::load(&self.runtime, source, now_ms()).map_err(|e| e.to_string())?;
        self.plugin = Some(plugin);
        Ok(actions)
    }

    /// The carrier was dropped: its connections close, its plugin goes,
    /// and what still waits learns that it stopped.
    fn stop(&mut self) {
        self.stopped = true;
        self.plugin = None;
        self.pending_publishes.clear();
        self.publishers.clear();
        self.pending_writes.clear();
        self.payloads.clear();
        self.reads.clear();
        self.subscriptions.clear();
        self.requests.clear();
        for (_, connection) in self.connections.drain() {
            connection.close();
        }
        let _ = self.ready.send(false);
    }

    /// Sends what a burst of events gathered: one plugin call for its
    /// publishes, one write per connection.
    fn flush(&mut self) {
        self.flush_publishes();
        self.flush_writes();
    }

    fn handle(&mut self, event: Event) {
        if self.stopped {
            // Dropping the event answers whoever waits on it.
            return;
        }
        // Publishes keep their place among the other operations; they read
        // no clock (their batch reads it once, in `flush_publishes`).
        let publish = matches!(event, Event::Publish { .. });
        if !publish {
            self.flush_publishes();
        }
        let now = if publish { 0 } else { now_ms() };
        match event {
            Event::Opened(h) => self.call(|p| p.opened(h, now)),
            Event::Closed(h, reason) => {
                self.reads.remove(&h);
                if self.connections.remove(&h).is_some() {
                    self.call(|p| p.closed(h, &reason, now));
                }
            }
            Event::Received(h, data) => {
                if self.connections.contains_key(&h) {
                    self.receive(h, data, now);
                }
            }
            Event::Notified(h, notifications, dropped) => {
                if self.connections.contains_key(&h) {
                    self.call(|p| p.notified(h, &notifications, dropped, now));
                }
            }
            Event::Answered(id, hold, outcome) => {
                let outcome = outcome.map(|rows| self.cells(rows, hold));
                self.call(|p| p.answered(id, outcome, now))
            }
            Event::Timer(generation) => {
                if generation == self.timer_generation {
                    self.call(|p| p.timer(now));
                }
            }
            Event::Rebuild => {
                if self.plugin.is_none() {
                    self.reload();
                }
            }
            Event::Publish {
                subject,
                headers,
                payload,
                done,
            } => {
                // Gathered, and handed to the plugin in one call at the end of the burst.
                self.gather_publish(&subject, wit_headers(headers), payload);
                self.publishers.push(done);
            }
            Event::Subscribe {
                id,
                subject,
                queue_group,
                handler,
                done,
            } => {
                let subscription = Subscription {
                    subject,
                    queue_group,
                    handler,
                };
                self.subscribe(id, subscription, done, now);
            }
            Event::Unsubscribe(id) => {
                if self.subscriptions.remove(&id).is_some() {
                    self.call(|p| p.unsubscribe(id, now));
                }
            }
            Event::Request {
                subject,
                headers,
                payload,
                timeout_ms,
                done,
            } => {
                self.request(&subject, headers, payload, timeout_ms, done, now);
            }
            Event::Shutdown => self.stop(),
        }
    }

    /// A subscription is kept (and so subscribed again after a rebuild)
    /// only once the plugin has accepted it.
    #[inline]
    fn subscribe(
        &mut self,
        id: u64,
        subscription: Subscription,
        done: oneshot::Sender<Result<(), SendError>>,
        now: u64,
    ) {
        let result = self.operation(|p| {
            p.subscribe(
                id,
                &subscription.subject,
                subscription.queue_group.as_deref(),
                now,
            )
        });
        if result.is_ok() {
            self.subscriptions.insert(id, subscription);
        }
        let _ = done.send(result);
    }

    /// The answer channel is registered before the call, as the actions the
    /// call answers with may already reply; a refused request takes it back
    /// and answers it.
    #[inline]
    fn request(
        &mut self,
        subject: &str,
        headers: Vec<(String, String)>,
        payload: Bytes,
        timeout_ms: u64,
        done: oneshot::Sender<Result<Message, SendError>>,
        now: u64,
    ) {
        self.next_request += 1;
        let id = self.next_request;
        let headers = wit_headers(headers);
        let payload = self.payload(payload);
        self.requests.insert(id, done);
        let result =
            self.operation(|p| p.request(id, subject, &headers, &payload, timeout_ms, now));
        if let Err(e) = result
            && let Some(done) = self.requests.remove(&id)
        {
            let _ = done.send(Err(e));
        }
    }

    /// An operation the plugin may refuse; its actions are performed when it accepts.
    fn operation(
        &mut self,
        f: impl FnOnce(&mut CarrierPlugin) -> Result<Result<Vec<Action>, CarrierError>, CallError>,
    ) -> Result<(), SendError> {
        let Some(plugin) = self.plugin.as_mut() else {
            return Err(SendError::Unavailable(
                "the carrier plugin is being rebuilt".into(),
            ));
        };
        match f(plugin) {
            Ok(Ok(actions)) => {
                self.perform(actions);
                Ok(())
            }
            Ok(Err(refused)) => {
                self.payloads.end_call();
                Err(refused.into())
            }
            Err(failed) => {
                let message = failed.to_string();
                self.rebuild(failed);
                Err(SendError::Unavailable(message))
            }
        }
    }

    /// An event call; a failed plugin is rebuilt.
    fn call(&mut self, f: impl FnOnce(&mut CarrierPlugin) -> Result<Vec<Action>, CallError>) {
        let Some(plugin) = self.plugin.as_mut() else {
            return;
        };
        match f(plugin) {
            Ok(actions) => self.perform(actions),
            Err(failed) => self.rebuild(failed),
        }
    }

    /// The plugin failed (a trap, a deadline, the memory cap): drop it with
    /// its connections, load a fresh instance and subscribe everything again.
    fn rebuild(&mut self, failed: CallError) {
        tracing::error!(carrier = %self.component.name, error = %failed, "carrier plugin failed; rebuilding it");
        self.failures += 1;
        let _ = self.ready.send(false);
        self.plugin = None;
        self.pending_writes.clear();
        self.payloads.clear();
        self.reads.clear();
        for (_, connection) in self.connections.drain() {
            connection.close();
        }
        for (_, done) in self.requests.drain() {
            let _ = done.send(Err(SendError::Unavailable(failed.to_string())));
        }
        self.reload();
    }

    /// Loads a fresh instance and subscribes everything again; when the load
    /// fails, tries again after a backoff (the plugin stays down meanwhile,
    /// its state shown to handles).
    fn reload(&mut self) {
        let actions = match self.load() {
            Ok(actions) => actions,
            Err(e) => {
                let failures = self
                    .counters
                    .failed_rebuilds
                    .fetch_add(1, Ordering::Relaxed)
                    + 1;
                let wait = rebuild_backoff(failures);
                tracing::error!(carrier = %self.component.name, error = %e, failures, retry_in_ms = wait.as_millis() as u64, "carrier plugin could not be rebuilt; retrying");
                *self
                    .counters
                    .rebuild_error
                    .lock()
                    .expect("rebuild error lock") = Some(e);
                self.counters
                    .next_rebuild_ms
                    .store(now_ms() + wait.as_millis() as u64, Ordering::Relaxed);
                let events = self.events.clone();
                self.io.spawn(async move {
                    tokio::time::sleep(wait).await;
                    let _ = events.send(Event::Rebuild);
                });
                return;
            }
        };
        if self.counters.failed_rebuilds.swap(0, Ordering::Relaxed) > 0 {
            tracing::info!(carrier = %self.component.name, "carrier plugin rebuilt after failed tries");
        }
        *self
            .counters
            .rebuild_error
            .lock()
            .expect("rebuild error lock") = None;
        self.perform(actions);
        let now = now_ms();
        let subscriptions: Vec<(u64, String, Option<String>)> = self
            .subscriptions
            .iter()
            .map(|(id, s)| (*id, s.subject.clone(), s.queue_group.clone()))
            .collect();
        for (id, subject, queue_group) in subscriptions {
            if let Err(e) =
                self.operation(|p| p.subscribe(id, &subject, queue_group.as_deref(), now))
            {
                tracing::error!(carrier = %self.component.name, %subject, error = %e, "could not subscribe again after a rebuild");
            }
        }
    }
}

fn wit_headers(headers: Vec<(String, String)>) -> Vec<Header> {
    headers
        .into_iter()
        .map(|(name, value)| Header { name, value })
        .collect()
}

#[cfg(test)]
mod tests;
