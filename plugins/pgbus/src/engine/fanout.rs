//! Fan-out: publishing (inline, batched or spilled), hearing notifications,
//! reading spilled rows on the readers, and delivering in arrival order.

use crate::action::{
    Action, CarrierError, Cell, CellRow, Delivery, Handle, Header, Held, LogLevel, Notification,
    Param, Payload, Reply, Row,
};
use crate::arrivals::Body;
use crate::notification::{self, Envelope, Message, Notice, PG_NOTIFY_LIMIT};
use crate::sql;

use super::links::{LISTENER, PUBLISHER};
use super::{Engine, MAX_KEPT_READ_BYTES, MAX_KEPT_READS, MAX_PAYLOAD, Pending};

impl Engine {
    /// Checks and sends one message (a publish or a request).
    pub(super) fn send(
        &mut self,
        subject: &str,
        reply_to: Option<&str>,
        headers: &[Header],
        payload: Payload,
        out: &mut Vec<Action>,
    ) -> Result<(), CarrierError> {
        let invalid = |e: crate::subject::SubjectError| CarrierError::InvalidSubject(e.to_string());
        self.config.policy.check(subject, false).map_err(invalid)?;
        if let Some(reply_to) = reply_to {
            self.config.policy.check(reply_to, false).map_err(invalid)?;
        }
        let size = payload.len();
        if size > MAX_PAYLOAD {
            return Err(CarrierError::PayloadTooLarge(size, MAX_PAYLOAD));
        }
        if !self.ready {
            return Err(CarrierError::NotConnected);
        }
        let envelope = Envelope::new(subject, reply_to, headers);
        // A held payload is at least `hold_from` long, so it spills anyway.
        let inline = match &payload {
            Payload::Bytes(bytes) => envelope.inline_len(bytes.len()) < self.config.spill_threshold,
            Payload::Held(_) => false,
        };
        if let (true, Payload::Bytes(bytes)) = (inline, &payload) {
            self.notify(envelope.inline(bytes), out);
        } else {
            let marker = envelope.marker_len();
            if marker >= PG_NOTIFY_LIMIT {
                return Err(CarrierError::Refused(format!(
                    "the subject, reply-to and headers take {marker} bytes of notification; PostgreSQL carries fewer than {PG_NOTIFY_LIMIT}"
                )));
            }
            self.spill(subject, envelope.marker_tail(), payload, out);
            self.counters.spilled += 1;
        }
        self.counters.published += 1;
        Ok(())
    }

    /// The publisher's handle; only called while ready.
    pub(super) fn publisher(&self) -> Handle {
        self.links[PUBLISHER]
            .handle()
            .expect("a ready carrier has a publisher")
    }

    /// Whether nothing is in flight or waiting on the publisher: a message
    /// may go out at once.
    fn publisher_idle(&self) -> bool {
        self.publishes_in_flight == 0 && self.batch.is_empty() && self.spills.is_empty()
    }

    /// Sends an inline notification now, or batches it behind the publish
    /// queries in flight (after the spills waiting before it).
    fn notify(&mut self, text: String, out: &mut Vec<Action>) {
        if self.publisher_idle() {
            let handle = self.publisher();
            let query = self.query(
                Pending::Publish {
                    handle,
                    messages: 1,
                },
                sql::NOTIFY,
                vec![Param::Text(self.config.channel.clone()), Param::Text(text)],
            );
            out.push(query);
            self.publishes_in_flight += 1;
            return;
        }
        self.flush_spills(out);
        if !self.batch.fits(&text) {
            self.flush_batch(out);
        }
        self.batch.push(&text);
        if self.batch.is_full() {
            self.flush_batch(out);
        }
    }

    /// Spills a message now (its row and its marker in one statement), or
    /// batches it behind the publish queries in flight (after the inline
    /// messages waiting before it): a burst of spills commits a few at a
    /// time instead of once per message.
    /// A held payload that waits is kept in the host until it goes out (or
    /// is released if the waiting spills are discarded).
    fn spill(&mut self, subject: &str, tail: String, payload: Payload, out: &mut Vec<Action>) {
        let len = payload.len() as usize;
        let (payload, held) = match payload {
            Payload::Bytes(bytes) => (Param::Bytes(bytes), None),
            Payload::Held(Held { id, .. }) => (Param::Payload(id), Some(id)),
        };
        if self.publisher_idle() {
            let handle = self.publisher();
            let query = self.query(
                Pending::Publish {
                    handle,
                    messages: 1,
                },
                sql::SPILL,
                vec![
                    Param::Text(subject.to_owned()),
                    payload,
                    Param::Text(self.config.channel.clone()),
                    Param::Text(tail),
                ],
            );
            out.push(query);
            self.publishes_in_flight += 1;
            return;
        }
        self.flush_batch(out);
        if !self.spills.fits(len) {
            self.flush_spills(out);
        }
        if let Some(id) = held {
            out.push(Action::Keep(id));
        }
        self.spills.push(&tail, payload, len);
        if self.spills.is_full() {
            self.flush_spills(out);
        }
    }

    /// Sends whatever waits (inline messages or spills: never both), in
    /// order before a statement that must follow them.
    pub(super) fn flush_waiting(&mut self, out: &mut Vec<Action>) {
        self.flush_batch(out);
        self.flush_spills(out);
    }

    /// Sends the waiting inline batch, if any, as one query.
    fn flush_batch(&mut self, out: &mut Vec<Action>) {
        if self.batch.is_empty() {
            return;
        }
        let (count, texts) = self.batch.take();
        let sql = if count == 1 {
            sql::NOTIFY
        } else {
            sql::NOTIFY_BATCH
        };
        let params = vec![Param::Text(self.config.channel.clone()), Param::Text(texts)];
        self.send_publish(count, sql, params, out);
    }

    /// Sends the waiting spills, if any, as one statement.
    fn flush_spills(&mut self, out: &mut Vec<Action>) {
        if self.spills.is_empty() {
            return;
        }
        let (count, spills) = self.spills.take();
        let mut params = Vec::with_capacity(1 + spills.len());
        params.push(Param::Text(self.config.channel.clone()));
        params.extend(spills);
        self.send_publish(count, sql::spill_batch(count), params, out);
    }

    fn send_publish(
        &mut self,
        messages: u64,
        sql: impl Into<std::borrow::Cow<'static, str>>,
        params: Vec<Param>,
        out: &mut Vec<Action>,
    ) {
        let handle = self.publisher();
        let query = self.query(Pending::Publish { handle, messages }, sql, params);
        out.push(query);
        self.publishes_in_flight += 1;
    }

    /// A publish query answered; what waits goes out once none is in flight.
    pub(super) fn publish_answered(
        &mut self,
        messages: u64,
        outcome: Result<Vec<Row>, String>,
        out: &mut Vec<Action>,
    ) {
        self.publishes_in_flight = self.publishes_in_flight.saturating_sub(1);
        if let Err(e) = outcome {
            // The host already answered these publishes as accepted.
            self.counters.failed_publishes += messages;
            out.push(Action::Log(
                LogLevel::Warn,
                format!("pgbus: publishing {messages} message(s) failed: {e}"),
            ));
        }
        if self.publishes_in_flight == 0 && self.links[PUBLISHER].is_usable() {
            self.flush_waiting(out);
        }
    }

    /// Notifications heard: queue what this frontend wants, read spilled
    /// rows, deliver what is ready; wakes lead to claims.
    pub(super) fn hear(
        &mut self,
        handle: Handle,
        notifications: Vec<Notification>,
        dropped: u64,
        now: u64,
        out: &mut Vec<Action>,
    ) {
        if dropped > 0 {
            self.counters.lost += dropped;
            out.push(Action::Log(
                LogLevel::Warn,
                format!("pgbus: the host dropped {dropped} notification(s); lost"),
            ));
            self.wakes_dropped();
        }
        // Only the current listener: anything else is stale.
        if self.links[LISTENER].handle() != Some(handle) {
            return;
        }
        let mut full = 0;
        for n in notifications {
            if n.channel == self.config.wake_channel {
                self.hear_wake(&n.payload);
                continue;
            }
            if n.channel != self.config.channel {
                continue;
            }
            let notice = match notification::decode(&n.payload) {
                Ok(notice) => notice,
                Err(e) => {
                    self.counters.malformed += 1;
                    // Someone else's traffic on the channel must not flood the log.
                    if self.counters.malformed.is_power_of_two() {
                        out.push(Action::Log(
                            LogLevel::Warn,
                            format!(
                                "pgbus: skipped a notification on {} that is not pgbus's ({e}); {} so far",
                                self.config.channel, self.counters.malformed
                            ),
                        ));
                    }
                    continue;
                }
            };
            let subject = match &notice {
                Notice::Inline(m) | Notice::Spilled { message: m, .. } => &m.subject,
            };
            if !self.wants(subject) {
                continue;
            }
            if self.arrivals.is_full() {
                full += 1;
                continue;
            }
            match notice {
                Notice::Inline(message) => self.arrivals.push_ready(message),
                Notice::Spilled { id, message } => self.arrivals.push_spilled(id, message, now),
            }
        }
        if full > 0 {
            self.counters.lost += full;
            out.push(Action::Log(
                LogLevel::Warn,
                format!(
                    "pgbus: {full} message(s) lost: {} wait behind unanswered spill reads",
                    self.arrivals.len()
                ),
            ));
        }
        self.issue_reads(out);
        self.deliver_ready(out);
        self.claim_due(out);
    }

    /// Whether a subscription here or a waiting request wants `subject`.
    fn wants(&self, subject: &str) -> bool {
        self.subscriptions.wants(subject) || self.requests.answered_by(subject).is_some()
    }

    /// Starts spill reads on idle readers, round robin, one per reader.
    pub(super) fn issue_reads(&mut self, out: &mut Vec<Action>) {
        let readers = self.links.len() - (LISTENER + 1);
        loop {
            let Some(link) = (0..readers)
                .map(|i| LISTENER + 1 + (self.next_reader + i) % readers)
                .find(|&link| self.links[link].is_usable() && !self.links[link].busy)
            else {
                return;
            };
            let Some((seq, id)) = self.arrivals.take_unissued() else {
                return;
            };
            self.next_reader = (link - LISTENER) % readers;
            self.links[link].busy = true;
            let handle = self.links[link]
                .handle()
                .expect("a usable link has a handle");
            let held = self.may_hold_read(seq);
            let mut query = self.query(
                Pending::Read {
                    link,
                    handle,
                    seq,
                    held,
                },
                sql::READ_SPILL,
                vec![Param::Int(id)],
            );
            if let (true, Action::Query(query)) = (held, &mut query) {
                query.hold_column = Some(0);
            }
            out.push(query);
        }
    }

    /// Whether the read of `seq` may leave its payload in the host: its
    /// message has one recipient here (a held payload is used once), and
    /// what the engine keeps, with every held read in flight counted as the
    /// largest payload, stays within [`MAX_KEPT_READ_BYTES`] and
    /// [`MAX_KEPT_READS`]. Otherwise the payload comes as bytes.
    fn may_hold_read(&self, seq: u64) -> bool {
        let Some(subject) = self.arrivals.subject_of(seq) else {
            return false;
        };
        let recipients = self.subscriptions.matching(subject).len()
            + usize::from(self.requests.answered_by(subject).is_some());
        if recipients != 1 {
            return false;
        }
        let reading = self
            .queries
            .values()
            .filter(|p| matches!(p, Pending::Read { held: true, .. }))
            .count()
            + 1;
        let kept: u64 = self.kept.values().sum();
        self.kept.len() + reading <= MAX_KEPT_READS
            && kept + reading as u64 * MAX_PAYLOAD <= MAX_KEPT_READ_BYTES
    }

    /// A spill read answered: the row's payload (bytes, or held by the
    /// host), or a loss. A held payload that must wait behind earlier
    /// arrivals is kept in the host until it is delivered.
    pub(super) fn read_answered(
        &mut self,
        link: usize,
        handle: Handle,
        seq: u64,
        outcome: Result<Vec<CellRow>, String>,
        out: &mut Vec<Action>,
    ) {
        if self.links[link].handle() == Some(handle) {
            self.links[link].busy = false;
        }
        let payload = match outcome {
            Ok(rows) => rows
                .into_iter()
                .next()
                .and_then(|row| row.into_iter().next().flatten())
                .map(|cell| match cell {
                    Cell::Bytes(bytes) => Body::Bytes(bytes),
                    Cell::Held(held) => Body::Held(held),
                }),
            Err(e) => {
                out.push(Action::Log(
                    LogLevel::Warn,
                    format!("pgbus: reading a spilled message failed: {e}"),
                ));
                None
            }
        };
        let found = payload.is_some();
        let held = match &payload {
            Some(Body::Held(held)) => Some(*held),
            _ => None,
        };
        let completed = self.arrivals.complete(seq, payload);
        if completed && !found {
            // The row expired (or the read failed) before it was read.
            self.counters.lost += 1;
        }
        self.issue_reads(out);
        self.deliver_ready(out);
        // A read that timed out left nothing to deliver: its cell is dropped.
        if let Some(held) = held
            && completed
            && self.arrivals.is_queued(seq)
        {
            out.push(Action::Keep(held.id));
            self.kept.insert(held.id, held.len);
        }
    }

    /// Hands the messages no read holds up to their subscriptions and requests.
    pub(super) fn deliver_ready(&mut self, out: &mut Vec<Action>) {
        for (message, held) in self.arrivals.pop_ready() {
            self.dispatch(message, held, out);
        }
    }

    /// Hands a message to its recipients; a held payload goes to one
    /// recipient (the read was held only for one): if there are more now,
    /// the others miss it and are counted lost; if none, it is dropped.
    fn dispatch(&mut self, message: Message, held: Option<Held>, out: &mut Vec<Action>) {
        let kept = held.is_some_and(|held| self.kept.remove(&held.id).is_some());
        let ids = self.subscriptions.matching(&message.subject);
        self.counters.delivered += ids.len() as u64;
        let request = self.requests.answered_by(&message.subject);
        if let Some(request) = request {
            self.requests.finish(request);
        }
        let mut recipients: Vec<Recipient> = ids
            .into_iter()
            .map(Recipient::Subscription)
            .chain(request.map(Recipient::Request))
            .collect();
        // The last recipient takes the message; the others get copies.
        let Some(last) = recipients.pop() else {
            if let (Some(held), true) = (held, kept) {
                out.push(Action::Release(held.id));
            }
            return;
        };
        if let Some(held) = held {
            if !recipients.is_empty() {
                self.counters.lost += recipients.len() as u64;
                out.push(Action::Log(
                    LogLevel::Warn,
                    format!(
                        "pgbus: a spilled message read for one subscription now has {}; the others miss it",
                        recipients.len() + 1
                    ),
                ));
            }
            out.push(last.action(message, Some(held.id)));
            return;
        }
        for recipient in recipients {
            out.push(recipient.action(message.clone(), None));
        }
        out.push(last.action(message, None));
    }

    /// Deletes expired spill rows, unless the last deletion still runs.
    pub(super) fn expire_spill_rows(&mut self, out: &mut Vec<Action>) {
        if self.retention_in_flight || !self.links[PUBLISHER].is_usable() {
            return;
        }
        let Some(handle) = self.links[PUBLISHER].handle() else {
            return;
        };
        let seconds = i64::try_from(self.config.retention_seconds).unwrap_or(i64::MAX);
        let query = self.query(
            Pending::Retention { handle },
            sql::EXPIRE_SPILL,
            vec![Param::Int(seconds)],
        );
        out.push(query);
        self.retention_in_flight = true;
    }

    pub(super) fn retention_answered(
        &mut self,
        outcome: Result<Vec<Row>, String>,
        out: &mut Vec<Action>,
    ) {
        self.retention_in_flight = false;
        match outcome {
            Ok(rows) => {
                let deleted = rows
                    .first()
                    .and_then(|row| row.first().cloned().flatten())
                    .map(|count| String::from_utf8_lossy(&count).into_owned())
                    .unwrap_or_default();
                out.push(Action::Log(
                    LogLevel::Debug,
                    format!("pgbus: deleted {deleted} expired spill row(s)"),
                ));
            }
            Err(e) => out.push(Action::Log(
                LogLevel::Warn,
                format!("pgbus: deleting expired spill rows failed: {e}"),
            )),
        }
    }
}

/// Who a heard message goes to.
#[derive(Debug, Clone, Copy)]
enum Recipient {
    /// A subscription of the host.
    Subscription(u64),
    /// A waiting request (the reply's delivery names subscription 0).
    Request(u64),
}

impl Recipient {
    fn action(self, message: Message, held: Option<u64>) -> Action {
        let delivery = |subscription| Delivery {
            subscription,
            subject: message.subject,
            reply_to: message.reply_to,
            headers: message.headers,
            payload: message.payload,
            held,
        };
        match self {
            Recipient::Subscription(id) => Action::Deliver(delivery(id)),
            Recipient::Request(request) => Action::Reply(Reply {
                request,
                outcome: Ok(delivery(0)),
            }),
        }
    }
}
