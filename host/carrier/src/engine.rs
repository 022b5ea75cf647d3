//! The engine thread: owns the carrier plugin, takes events from the I/O
//! tasks and operations from [`crate::Carrier`] handles, calls the plugin and
//! performs the actions it answers with.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc as std_mpsc;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use switchyard_runtime::carrier::{
    Action, CarrierError, CarrierPlugin, CarrierSource, Endpoint, Header, Notification, Outgoing,
};
use switchyard_runtime::{CallError, Runtime};
use tokio::sync::{mpsc, oneshot, watch};

use crate::client::CarrierSpec;
use crate::database::DbConnection;
use crate::io;
use crate::message::{Message, SendError};

/// Events handled before the gathered writes go out, so that a steady
/// stream of events cannot hold writes back indefinitely.
const EVENTS_PER_FLUSH: usize = 256;

/// Something for the engine thread to handle.
pub(crate) enum Event {
    Opened(u64),
    Closed(u64, String),
    Received(u64, Vec<u8>),
    Timer(u64),
    Notified(u64, Vec<Notification>, u64),
    Answered(u64, Result<Vec<Vec<Option<Vec<u8>>>>, String>),
    Publish {
        subject: String,
        headers: Vec<(String, String)>,
        payload: Bytes,
        done: oneshot::Sender<Result<(), SendError>>,
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
    pub delivered: AtomicU64,
    pub dropped: AtomicU64,
    pub reconnects: AtomicU64,
    /// The largest payload, as the plugin reports it once connected.
    pub max_payload: AtomicU64,
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

struct Engine {
    spec: CarrierSpec,
    runtime: Arc<Runtime>,
    plugin: Option<CarrierPlugin>,
    events: std_mpsc::Sender<Event>,
    io: tokio::runtime::Handle,
    connections: HashMap<u64, Link>,
    /// Publishes gathered while handling a burst of events, with their answer channels.
    pending_publishes: Vec<(Outgoing, oneshot::Sender<Result<(), SendError>>)>,
    /// Writes gathered while handling a burst of events, sent once per connection.
    pending_writes: HashMap<u64, bytes::BytesMut>,
    subscriptions: HashMap<u64, Subscription>,
    requests: HashMap<u64, oneshot::Sender<Result<Message, SendError>>>,
    next_request: u64,
    timer_generation: u64,
    ready: watch::Sender<bool>,
    ever_ready: bool,
    counters: Arc<Counters>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Starts the engine thread; returns its event sender.
pub(crate) fn spawn(
    spec: CarrierSpec,
    runtime: Arc<Runtime>,
    io: tokio::runtime::Handle,
    ready: watch::Sender<bool>,
    counters: Arc<Counters>,
) -> Result<std_mpsc::Sender<Event>, SendError> {
    let (events, inbox) = std_mpsc::channel();
    let mut engine = Engine {
        spec,
        runtime,
        plugin: None,
        events: events.clone(),
        io,
        connections: HashMap::new(),
        pending_writes: HashMap::new(),
        pending_publishes: Vec::new(),
        subscriptions: HashMap::new(),
        requests: HashMap::new(),
        next_request: 0,
        timer_generation: 0,
        ready,
        ever_ready: false,
        counters,
    };
    let first = engine.load().map_err(SendError::Unavailable)?;
    std::thread::Builder::new()
        .name(format!("carrier-{}", engine.spec.name))
        .spawn(move || {
            engine.perform(first);
            engine.flush_writes();
            engine.run(inbox)
        })
        .map_err(|e| SendError::Unavailable(e.to_string()))?;
    Ok(events)
}

impl Engine {
    fn load(&mut self) -> Result<Vec<Action>, String> {
        let seed = now_ms() ^ (u64::from(std::process::id()) << 32);
        let source = CarrierSource {
            name: &self.spec.name,
            version: &self.spec.version,
            bytes: &self.spec.bytes,
            sha256: &self.spec.sha256,
            config: &self.spec.config,
            seed,
        };
        let (plugin, actions) =
            CarrierPlugin::load(&self.runtime, source, now_ms()).map_err(|e| e.to_string())?;
        self.plugin = Some(plugin);
        Ok(actions)
    }

    fn run(mut self, inbox: std_mpsc::Receiver<Event>) {
        'events: while let Ok(first) = inbox.recv() {
            // Handle everything already waiting, then write once per
            // connection: one wake-up of each writer for a whole burst.
            let mut event = Some(first);
            let mut handled = 0;
            while let Some(next) = event.take() {
                if matches!(next, Event::Shutdown) {
                    break 'events;
                }
                self.handle(next);
                handled += 1;
                if handled < EVENTS_PER_FLUSH {
                    event = inbox.try_recv().ok();
                }
            }
            self.flush_publishes();
            self.flush_writes();
        }
        for (_, connection) in self.connections.drain() {
            connection.close();
        }
        let _ = self.ready.send(false);
    }

    fn handle(&mut self, event: Event) {
        // Publishes keep their place among the other operations.
        if !matches!(event, Event::Publish { .. }) {
            self.flush_publishes();
        }
        let now = now_ms();
        match event {
            Event::Opened(h) => self.call(|p| p.opened(h, now)),
            Event::Closed(h, reason) => {
                if self.connections.remove(&h).is_some() {
                    self.call(|p| p.closed(h, &reason, now));
                }
            }
            Event::Received(h, data) => {
                if self.connections.contains_key(&h) {
                    self.call(|p| p.received(h, &data, now));
                }
            }
            Event::Notified(h, notifications, dropped) => {
                if self.connections.contains_key(&h) {
                    self.call(|p| p.notified(h, &notifications, dropped, now));
                }
            }
            Event::Answered(id, outcome) => self.call(|p| p.answered(id, &outcome, now)),
            Event::Timer(generation) => {
                if generation == self.timer_generation {
                    self.call(|p| p.timer(now));
                }
            }
            Event::Publish {
                subject,
                headers,
                payload,
                done,
            } => {
                // Gathered, and handed to the plugin in one call at the end of the burst.
                let message = Outgoing {
                    subject,
                    reply_to: None,
                    headers: wit_headers(headers),
                    payload: payload.to_vec(),
                };
                self.pending_publishes.push((message, done));
            }
            Event::Subscribe {
                id,
                subject,
                queue_group,
                handler,
                done,
            } => {
                let result =
                    self.operation(|p| p.subscribe(id, &subject, queue_group.as_deref(), now));
                if result.is_ok() {
                    self.subscriptions.insert(
                        id,
                        Subscription {
                            subject,
                            queue_group,
                            handler,
                        },
                    );
                }
                let _ = done.send(result);
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
                self.next_request += 1;
                let id = self.next_request;
                let headers = wit_headers(headers);
                self.requests.insert(id, done);
                let result = self
                    .operation(|p| p.request(id, &subject, &headers, &payload, timeout_ms, now));
                if let Err(e) = result
                    && let Some(done) = self.requests.remove(&id)
                {
                    let _ = done.send(Err(e));
                }
            }
            Event::Shutdown => {}
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
            Ok(Err(refused)) => Err(refused.into()),
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

    /// Performs actions in order; actions answered by calls made here (a
    /// refused open) are performed after them.
    fn perform(&mut self, actions: Vec<Action>) {
        let mut queue: VecDeque<Action> = actions.into();
        while let Some(action) = queue.pop_front() {
            match action {
                Action::Open((h, endpoint)) => {
                    let allowed = self.plugin.as_ref().is_some_and(|p| p.allows(&endpoint));
                    let link = match endpoint {
                        _ if !allowed => {
                            tracing::warn!(carrier = %self.spec.name, ?endpoint, "refused: endpoint not in the carrier's configuration");
                            queue.extend(
                                self.refuse(h, "endpoint not allowed by the configuration"),
                            );
                            continue;
                        }
                        Endpoint::Tcp(address) => Link::Tcp(io::Connection::dial(
                            &self.io,
                            h,
                            address,
                            self.events.clone(),
                        )),
                        Endpoint::Database => match &self.spec.database_url {
                            Some(url) => Link::Database(DbConnection::dial(
                                &self.io,
                                h,
                                url.clone(),
                                self.events.clone(),
                            )),
                            None => {
                                queue.extend(
                                    self.refuse(h, "this host has no database for carriers"),
                                );
                                continue;
                            }
                        },
                    };
                    if let Some(old) = self.connections.insert(h, link) {
                        old.close();
                    }
                }
                Action::Write((h, bytes)) => {
                    if let Some(Link::Tcp(_)) = self.connections.get(&h) {
                        self.pending_writes
                            .entry(h)
                            .or_default()
                            .extend_from_slice(&bytes);
                    }
                }
                Action::Listen((h, channel)) => {
                    if let Some(Link::Database(connection)) = self.connections.get(&h) {
                        connection.listen(channel);
                    }
                }
                Action::Query(query) => match self.connections.get(&query.connection) {
                    Some(Link::Database(connection)) => connection.query(query),
                    _ => {
                        let now = now_ms();
                        let outcome = Err(format!(
                            "connection {} is not an open database connection",
                            query.connection
                        ));
                        if let Some(Ok(more)) = self
                            .plugin
                            .as_mut()
                            .map(|p| p.answered(query.id, &outcome, now))
                        {
                            queue.extend(more);
                        }
                    }
                },
                Action::Close(h) => {
                    if let Some(connection) = self.connections.remove(&h) {
                        connection.close();
                    }
                }
                Action::SetTimer(ms) => {
                    self.timer_generation += 1;
                    io::timer(&self.io, ms, self.timer_generation, self.events.clone());
                }
                Action::Deliver(delivery) => {
                    let Some(subscription) = self.subscriptions.get(&delivery.subscription) else {
                        continue;
                    };
                    match subscription.handler.try_send(message(delivery)) {
                        Ok(()) => self.counters.delivered.fetch_add(1, Ordering::Relaxed),
                        // A handler that falls behind loses messages, counted, never silently.
                        Err(mpsc::error::TrySendError::Full(_)) => {
                            self.counters.dropped.fetch_add(1, Ordering::Relaxed)
                        }
                        Err(mpsc::error::TrySendError::Closed(_)) => 0,
                    };
                }
                Action::Reply(reply) => {
                    if let Some(done) = self.requests.remove(&reply.request) {
                        let _ = done.send(reply.outcome.map(message).map_err(SendError::from));
                    }
                }
                Action::Ready => {
                    if let Some(Ok(max)) = self.plugin.as_mut().map(|p| p.max_payload()) {
                        self.counters.max_payload.store(max, Ordering::Relaxed);
                    }
                    if self.ever_ready {
                        self.counters.reconnects.fetch_add(1, Ordering::Relaxed);
                    }
                    self.ever_ready = true;
                    let _ = self.ready.send(true);
                }
                Action::Lost(reason) => {
                    tracing::warn!(carrier = %self.spec.name, %reason, "carrier lost its connection");
                    let _ = self.ready.send(false);
                }
            }
        }
    }

    /// Publishes what was gathered: one plugin call for the whole batch.
    fn flush_publishes(&mut self) {
        if self.pending_publishes.is_empty() {
            return;
        }
        let (messages, waiting): (Vec<Outgoing>, Vec<_>) =
            std::mem::take(&mut self.pending_publishes)
                .into_iter()
                .unzip();
        let now = now_ms();
        let answers = match self
            .plugin
            .as_mut()
            .map(|p| p.publish_batch(&messages, now))
        {
            Some(Ok((answers, actions))) => {
                self.perform(actions);
                answers
                    .into_iter()
                    .map(|a| a.map_err(SendError::from))
                    .collect()
            }
            Some(Err(failed)) => {
                let message = failed.to_string();
                self.rebuild(failed);
                vec![Err(SendError::Unavailable(message)); waiting.len()]
            }
            None => vec![
                Err(SendError::Unavailable(
                    "the carrier plugin is being rebuilt".into()
                ));
                waiting.len()
            ],
        };
        for (done, answer) in waiting.into_iter().zip(answers) {
            if answer.is_ok() {
                self.counters.published.fetch_add(1, Ordering::Relaxed);
            }
            let _ = done.send(answer);
        }
    }

    /// Hands each connection what was written to it since the last flush.
    fn flush_writes(&mut self) {
        for (h, bytes) in self.pending_writes.drain() {
            if let Some(Link::Tcp(connection)) = self.connections.get(&h) {
                connection.write(bytes.freeze());
            }
        }
    }

    /// Tells the plugin a connection it asked for is closed before it opened.
    fn refuse(&mut self, h: u64, reason: &str) -> Vec<Action> {
        let now = now_ms();
        match self.plugin.as_mut().map(|p| p.closed(h, reason, now)) {
            Some(Ok(more)) => more,
            _ => Vec::new(),
        }
    }

    /// The plugin failed (a trap, a deadline, the memory cap): drop it with
    /// its connections, load a fresh instance and subscribe everything again.
    fn rebuild(&mut self, failed: CallError) {
        tracing::error!(carrier = %self.spec.name, error = %failed, "carrier plugin failed; rebuilding it");
        let _ = self.ready.send(false);
        self.plugin = None;
        self.pending_writes.clear();
        for (_, connection) in self.connections.drain() {
            connection.close();
        }
        for (_, done) in self.requests.drain() {
            let _ = done.send(Err(SendError::Unavailable(failed.to_string())));
        }
        let actions = match self.load() {
            Ok(actions) => actions,
            Err(e) => {
                tracing::error!(carrier = %self.spec.name, error = %e, "carrier plugin could not be rebuilt");
                return;
            }
        };
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
                tracing::error!(carrier = %self.spec.name, %subject, error = %e, "could not subscribe again after a rebuild");
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

fn message(d: switchyard_runtime::carrier::Delivery) -> Message {
    Message {
        subject: d.subject,
        reply_to: d.reply_to,
        headers: d.headers.into_iter().map(|h| (h.name, h.value)).collect(),
        payload: Bytes::from(d.payload),
    }
}
