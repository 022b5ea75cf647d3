//! The engine: one state machine per carrier instance. Each event or
//! operation of the carrier world is one method here, and each answers the
//! actions for the host, ending with a `SetTimer` whenever the earliest
//! deadline moved closer.
//!
//! The connections (publisher, listener, readers) and their reconnects are
//! in `engine/links.rs`; publishing, hearing, spill reads and delivery in
//! `engine/fanout.rs`, what waits for the publisher in `engine/batch.rs`;
//! the claim queue (queueing, claiming, acknowledging) in `engine/queue.rs`.

mod batch;
mod counters;
mod fanout;
mod links;
mod queue;

use std::borrow::Cow;
use std::collections::HashMap;

use crate::action::{
    Action, CarrierError, Cell, CellRow, Handle, Header, LogLevel, Notification, Param, Payload,
    Query, Reply, Row,
};
use crate::arrivals::Arrivals;
use crate::config::Config;
use crate::notification::Envelope;
use crate::queue::{CLAIM_INTERVAL_MS, Consumers, Route};
use crate::requests::Requests;
use crate::rng::XorShift;
use crate::sql::TableStatements;
use crate::subscriptions::Subscriptions;

use batch::{Batch, Spills};
pub use batch::{MAX_BATCH_BYTES, MAX_BATCH_NOTIFICATIONS, MAX_SPILL_BATCH, MAX_SPILL_BATCH_BYTES};
pub use counters::Counters;
use links::Link;

/// The largest payload a message may carry, the same for every carrier so
/// that a carrier switch changes no caller's limit (and NATS's default
/// `max_payload`). A payload this large is always spilled.
pub const MAX_PAYLOAD: u64 = 1_048_576;

/// Most bytes of read spill payloads the engine keeps in the host (waiting
/// behind earlier reads), counting every held read in flight as a payload of
/// [`MAX_PAYLOAD`]: under the host's 64 MiB of kept payloads, with room for
/// the spills waiting on the publisher ([`MAX_SPILL_BATCH_BYTES`]). A read
/// past it takes its payload as bytes instead.
pub const MAX_KEPT_READ_BYTES: u64 = 48 << 20;
/// Most read spill payloads kept in the host, held reads in flight included
/// (the host keeps at most 4,096 payloads per plugin).
pub const MAX_KEPT_READS: usize = 2048;

/// How often the publisher deletes expired spill rows. Rows live for
/// `retention_seconds` by the database's clock; this only bounds how much
/// longer they may stay.
pub const RETENTION_INTERVAL_MS: u64 = 10_000;

/// What a `subscribe` with a queue group answers outside the queue roots.
pub const QUEUE_GROUPS_REFUSED: &str =
    "queue groups are served by the claim queue, not by pgbus fan-out";

/// A query in flight, by what its answer means.
#[derive(Debug)]
enum Pending {
    /// The publisher's table creation or the listener's LISTEN check.
    Setup { link: usize, handle: Handle },
    /// Notifications (one, a batch, or a spill).
    Publish { handle: Handle, messages: u64 },
    /// A spill read for the arrival `seq`; `held` when the host holds its
    /// payload cell.
    Read {
        link: usize,
        handle: Handle,
        seq: u64,
        held: bool,
    },
    /// Deleting expired spill rows.
    Retention { handle: Handle },
    /// Queueing a unit; for a request, its id and subject.
    Enqueue {
        handle: Handle,
        request: Option<(u64, String)>,
    },
    /// Claiming a batch of `subject`'s units.
    Claim { handle: Handle, subject: String },
    /// Deleting an acknowledged unit.
    Ack { handle: Handle, row: i64 },
}

impl Pending {
    fn handle(&self) -> Handle {
        match *self {
            Pending::Setup { handle, .. }
            | Pending::Publish { handle, .. }
            | Pending::Read { handle, .. }
            | Pending::Retention { handle }
            | Pending::Enqueue { handle, .. }
            | Pending::Claim { handle, .. }
            | Pending::Ack { handle, .. } => handle,
        }
    }
}

/// The pgbus carrier, without I/O: see the crate documentation.
#[derive(Debug)]
pub struct Engine {
    config: Config,
    /// The statements on the configured queue table.
    statements: TableStatements,
    /// The publisher, the listener, then the readers.
    links: Vec<Link>,
    /// Current handles to their link; a closed handle is removed.
    by_handle: HashMap<Handle, usize>,
    next_handle: Handle,
    next_query: u64,
    queries: HashMap<u64, Pending>,
    ready: bool,
    ever_ready: bool,
    subscriptions: Subscriptions,
    requests: Requests,
    arrivals: Arrivals,
    /// Inline messages waiting for the publish queries in flight.
    batch: Batch,
    /// Spilled messages waiting for the publish queries in flight (never
    /// at the same time as `batch`).
    spills: Spills,
    /// Publish queries sent and not answered; new messages wait in `batch`
    /// or `spills` while there are any.
    publishes_in_flight: usize,
    /// Where the round robin over readers starts next.
    next_reader: usize,
    retention_at: u64,
    retention_in_flight: bool,
    /// The queued subjects consumed here.
    consumers: Consumers,
    /// The listener the wake channel's LISTEN ran on.
    wake_listener: Option<Handle>,
    /// The next claim tick, while there are consumers.
    claim_at: Option<u64>,
    /// When the host's timer fires, if one is set.
    timer_at: Option<u64>,
    /// Read spill payloads kept in the host while earlier arrivals wait: id
    /// to length.
    kept: HashMap<u64, u64>,
    counters: Counters,
}

impl Engine {
    /// Starts an engine: answers the opening of every connection and the
    /// first timer. `seed` names the request inbox and jitters reconnects.
    pub fn new(config: Config, seed: u64, now_ms: u64) -> (Self, Vec<Action>) {
        Self::starting_at(config, seed, now_ms, 1, 1)
    }

    /// Replaces a running engine (a new configuration): closes its
    /// connections and numbers the new connections and queries after the
    /// old ones, so that a late event or answer is recognised as stale.
    /// Payloads it kept in the host are released.
    pub fn replace(mut self, config: Config, seed: u64, now_ms: u64) -> (Self, Vec<Action>) {
        let mut out: Vec<Action> = self.by_handle.keys().map(|&h| Action::Close(h)).collect();
        out.sort_by_key(|a| match a {
            Action::Close(h) => *h,
            _ => 0,
        });
        let mut kept: Vec<u64> = self.kept.keys().copied().collect();
        kept.sort_unstable();
        out.extend(kept.into_iter().map(Action::Release));
        self.spills.discard(&mut out);
        let (engine, actions) =
            Self::starting_at(config, seed, now_ms, self.next_handle, self.next_query);
        out.extend(actions);
        (engine, out)
    }

    fn starting_at(
        config: Config,
        seed: u64,
        now_ms: u64,
        first_handle: Handle,
        first_query: u64,
    ) -> (Self, Vec<Action>) {
        let mut rng = XorShift::new(seed);
        let requests = Requests::new(&mut rng);
        let links = (0..2 + config.spill_readers)
            .map(|_| Link::new(rng.next_u64()))
            .collect();
        let mut engine = Self {
            statements: TableStatements::new(&config.queue_table),
            config,
            links,
            by_handle: HashMap::new(),
            next_handle: first_handle,
            next_query: first_query,
            queries: HashMap::new(),
            ready: false,
            ever_ready: false,
            subscriptions: Subscriptions::default(),
            requests,
            arrivals: Arrivals::default(),
            batch: Batch::default(),
            spills: Spills::default(),
            publishes_in_flight: 0,
            next_reader: 0,
            retention_at: now_ms.saturating_add(RETENTION_INTERVAL_MS),
            retention_in_flight: false,
            consumers: Consumers::default(),
            wake_listener: None,
            claim_at: None,
            timer_at: None,
            kept: HashMap::new(),
            counters: Counters::default(),
        };
        let mut out = Vec::new();
        for link in 0..engine.links.len() {
            engine.open(link, &mut out);
        }
        let out = engine.finish(out, now_ms);
        (engine, out)
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The largest payload a message may carry ([`MAX_PAYLOAD`]).
    pub fn max_payload(&self) -> u64 {
        MAX_PAYLOAD
    }

    /// What the engine has counted.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// The shortest payload that always spills, whatever its subject and
    /// headers: the host may hold any payload this long or longer (carrier
    /// world 0.3.0's `inline-below`); shorter ones come as bytes, since
    /// they may go into notification text. A held payload always spills.
    pub fn hold_from(&self) -> u64 {
        let shortest = Envelope::new("x", None, &[]);
        let threshold = self.config.spill_threshold;
        // inline_len grows by 4 every 3 bytes: step to the first that spills.
        let mut len = (threshold.saturating_sub(shortest.inline_len(0)) / 4) * 3;
        while len > 0 && shortest.inline_len(len - 1) >= threshold {
            len -= 1;
        }
        while shortest.inline_len(len) < threshold {
            len += 1;
        }
        len as u64
    }

    /// Whether publishing is possible now.
    pub fn is_ready(&self) -> bool {
        self.ready
    }

    /// A connection the engine asked for is open.
    pub fn opened(&mut self, handle: Handle, now_ms: u64) -> Vec<Action> {
        let mut out = Vec::new();
        self.link_opened(handle, &mut out);
        self.finish(out, now_ms)
    }

    /// A connection closed or could not be opened.
    pub fn closed(&mut self, handle: Handle, reason: &str, now_ms: u64) -> Vec<Action> {
        let mut out = Vec::new();
        if let Some(link) = self.by_handle.get(&handle).copied() {
            self.lose(link, reason, now_ms, &mut out);
        }
        self.finish(out, now_ms)
    }

    /// The timer fired: reopens connections, times out requests and spill
    /// reads, deletes expired spill rows, and claims for the consumers.
    pub fn timer(&mut self, now_ms: u64) -> Vec<Action> {
        self.timer_at = None;
        let mut out = Vec::new();
        self.reopen_due(now_ms, &mut out);
        for request in self.requests.expire(now_ms) {
            out.push(Action::Reply(Reply {
                request,
                outcome: Err(CarrierError::Timeout),
            }));
        }
        let expired = self.arrivals.expire(now_ms) as u64;
        if expired > 0 {
            self.counters.lost += expired;
            out.push(Action::Log(
                LogLevel::Warn,
                format!(
                    "pgbus: {expired} spilled message(s) not read within the read timeout; lost"
                ),
            ));
            self.deliver_ready(&mut out);
        }
        if now_ms >= self.retention_at {
            self.retention_at = now_ms.saturating_add(RETENTION_INTERVAL_MS);
            self.expire_spill_rows(&mut out);
        }
        if self.claim_at.is_some_and(|at| now_ms >= at) {
            self.claim_at = Some(now_ms.saturating_add(CLAIM_INTERVAL_MS));
            self.claim_tick(now_ms, &mut out);
        }
        self.finish(out, now_ms)
    }

    /// Notifications heard on the listener, in arrival order; `dropped`
    /// counts those the host had to drop.
    pub fn notified(
        &mut self,
        handle: Handle,
        notifications: Vec<Notification>,
        dropped: u64,
        now_ms: u64,
    ) -> Vec<Action> {
        let mut out = Vec::new();
        self.hear(handle, notifications, dropped, now_ms, &mut out);
        self.finish(out, now_ms)
    }

    /// A query's answer.
    pub fn answered(
        &mut self,
        query: u64,
        outcome: Result<Vec<Row>, String>,
        now_ms: u64,
    ) -> Vec<Action> {
        let cells = outcome.map(|rows| {
            rows.into_iter()
                .map(|row| row.into_iter().map(|c| c.map(Cell::Bytes)).collect())
                .collect()
        });
        self.answered_cells(query, cells, now_ms)
    }

    /// A query's answer as cells: a spill read's payload may be held by the
    /// host (the only query that names a `hold_column`).
    pub fn answered_cells(
        &mut self,
        query: u64,
        outcome: Result<Vec<CellRow>, String>,
        now_ms: u64,
    ) -> Vec<Action> {
        let mut out = Vec::new();
        if let Some(pending) = self.queries.remove(&query) {
            match pending {
                Pending::Read {
                    link, handle, seq, ..
                } => {
                    self.read_answered(link, handle, seq, outcome, &mut out);
                    return self.finish(out, now_ms);
                }
                Pending::Claim { subject, .. } => {
                    self.claim_answered(query, &subject, outcome, now_ms, &mut out);
                    return self.finish(out, now_ms);
                }
                _ => {}
            }
            // No other query holds a column: a held cell here is read as NULL.
            let outcome = outcome.map(|rows| {
                rows.into_iter()
                    .map(|row| {
                        row.into_iter()
                            .map(|cell| match cell {
                                Some(Cell::Bytes(bytes)) => Some(bytes),
                                _ => None,
                            })
                            .collect()
                    })
                    .collect()
            });
            match pending {
                Pending::Setup { link, handle } => {
                    self.setup_answered(link, handle, outcome, now_ms, &mut out)
                }
                Pending::Publish { messages, .. } => {
                    self.publish_answered(messages, outcome, &mut out)
                }
                Pending::Read { .. } | Pending::Claim { .. } => unreachable!("answered above"),
                Pending::Retention { .. } => self.retention_answered(outcome, &mut out),
                Pending::Enqueue { request, .. } => {
                    self.enqueue_answered(request, outcome, &mut out)
                }
                Pending::Ack { row, .. } => self.ack_answered(row, outcome, &mut out),
            }
        }
        self.finish(out, now_ms)
    }

    /// Publishes a message. On a fanned-out subject, to every frontend's
    /// subscriptions (this one's included, once the database has it);
    /// accepted means handed to the database: fan-out is at most once. On a
    /// queued subject, queues a work unit (see [`crate::queue`]); on
    /// `_claim.<row id>`, acknowledges a claimed unit.
    pub fn publish(
        &mut self,
        subject: &str,
        reply_to: Option<&str>,
        headers: &[Header],
        payload: Vec<u8>,
        now_ms: u64,
    ) -> Result<Vec<Action>, CarrierError> {
        self.publish_payload(subject, reply_to, headers, Payload::Bytes(payload), now_ms)
    }

    /// [`Engine::publish`] of bytes or of a payload the host holds (which
    /// always spills; a work unit binds it into its row). A held payload
    /// not used (refused, or an acknowledgement) is dropped by the host
    /// after the call.
    pub fn publish_payload(
        &mut self,
        subject: &str,
        reply_to: Option<&str>,
        headers: &[Header],
        payload: Payload,
        now_ms: u64,
    ) -> Result<Vec<Action>, CarrierError> {
        let mut out = Vec::new();
        match self.route(subject)? {
            Route::Ack(row) => self.acknowledge(row, &mut out)?,
            Route::Queued => self.enqueue(subject, reply_to, headers, payload, None, &mut out)?,
            Route::FanOut => self.send(subject, reply_to, headers, payload, &mut out)?,
        }
        Ok(self.finish(out, now_ms))
    }

    /// Subscribes the host's subscription `id`. Without a queue group, to a
    /// fanned-out pattern (`*` matches one token), locally: nothing goes to
    /// the database. With one, to a queued subject (literal): this frontend
    /// claims its units and hands each to one of its subscriptions.
    pub fn subscribe(
        &mut self,
        id: u64,
        pattern: &str,
        queue_group: Option<&str>,
        now_ms: u64,
    ) -> Result<Vec<Action>, CarrierError> {
        let route = self.route(pattern)?;
        match (route, queue_group) {
            (Route::Queued, Some(_)) => {}
            (Route::Queued, None) => {
                return Err(CarrierError::InvalidSubject(format!(
                    "`{pattern}` is a work queue: its consumers subscribe with a queue group"
                )));
            }
            (Route::Ack(_), _) => {
                return Err(CarrierError::InvalidSubject(format!(
                    "`{pattern}` is an acknowledgement, not a subject to subscribe to"
                )));
            }
            (Route::FanOut, Some(_)) => {
                return Err(CarrierError::Refused(QUEUE_GROUPS_REFUSED.into()));
            }
            (Route::FanOut, None) => self
                .config
                .policy
                .check(pattern, true)
                .map_err(|e| CarrierError::InvalidSubject(e.to_string()))?,
        }
        if self.subscriptions.contains(id) || self.consumers.contains(id) {
            return Err(CarrierError::Refused(format!(
                "subscription {id} already exists"
            )));
        }
        let mut out = Vec::new();
        match route {
            Route::Queued => self.consume(id, pattern, now_ms, &mut out),
            _ => {
                self.subscriptions.insert(id, pattern);
            }
        }
        Ok(self.finish(out, now_ms))
    }

    /// Removes the subscription `id` (and nothing else); a queued subject's
    /// last subscription stops its claims.
    pub fn unsubscribe(&mut self, id: u64, now_ms: u64) -> Vec<Action> {
        if !self.subscriptions.remove(id) {
            self.consumers.remove(id);
            if self.consumers.is_empty() {
                self.claim_at = None;
            }
        }
        self.finish(Vec::new(), now_ms)
    }

    /// Publishes a request with the reply subject `_INBOX.<token>.<id>`; the
    /// answer comes as a `Reply` for `id`, or `Timeout` after `timeout_ms`.
    /// pgbus cannot detect that nobody serves the subject. On a queued
    /// subject, queues a work unit and replies (an empty payload) once the
    /// queue table holds it.
    pub fn request(
        &mut self,
        id: u64,
        subject: &str,
        headers: &[Header],
        payload: Vec<u8>,
        timeout_ms: u64,
        now_ms: u64,
    ) -> Result<Vec<Action>, CarrierError> {
        let payload = Payload::Bytes(payload);
        self.request_payload(id, subject, headers, payload, timeout_ms, now_ms)
    }

    /// [`Engine::request`] of bytes or of a payload the host holds.
    pub fn request_payload(
        &mut self,
        id: u64,
        subject: &str,
        headers: &[Header],
        payload: Payload,
        timeout_ms: u64,
        now_ms: u64,
    ) -> Result<Vec<Action>, CarrierError> {
        if self.requests.is_waiting(id) {
            return Err(CarrierError::Refused(format!(
                "request {id} is already waiting"
            )));
        }
        let mut out = Vec::new();
        match self.route(subject)? {
            Route::Ack(_) => {
                return Err(CarrierError::InvalidSubject(format!(
                    "`{subject}` is acknowledged with a publish, not a request"
                )));
            }
            Route::Queued => {
                self.enqueue(subject, None, headers, payload, Some(id), &mut out)?;
            }
            Route::FanOut => {
                let inbox = self.requests.inbox(id);
                self.send(subject, Some(&inbox), headers, payload, &mut out)?;
            }
        }
        self.requests.start(id, now_ms.saturating_add(timeout_ms));
        Ok(self.finish(out, now_ms))
    }

    /// A new query id, registered with what its answer means.
    fn query(
        &mut self,
        pending: Pending,
        sql: impl Into<Cow<'static, str>>,
        params: Vec<Param>,
    ) -> Action {
        let id = self.next_query;
        self.next_query += 1;
        let connection = pending.handle();
        self.queries.insert(id, pending);
        Action::Query(Query {
            id,
            connection,
            sql: sql.into(),
            params,
            hold_column: None,
        })
    }

    /// Appends a `SetTimer` when the earliest deadline is sooner than the
    /// timer already set (a later timer firing early costs one empty call).
    fn finish(&mut self, mut out: Vec<Action>, now_ms: u64) -> Vec<Action> {
        let earliest = self
            .links
            .iter()
            .map(Link::reopen_at)
            .chain([
                Some(self.retention_at),
                self.claim_at,
                self.requests.next_deadline(),
                self.arrivals.next_deadline(),
            ])
            .flatten()
            .min();
        if let Some(at) = earliest
            && self.timer_at.is_none_or(|set| at < set)
        {
            self.timer_at = Some(at);
            out.push(Action::SetTimer(at.saturating_sub(now_ms)));
        }
        out
    }
}
