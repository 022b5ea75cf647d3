//! Fan-out: publishing (inline, batched or spilled), hearing notifications,
//! reading spilled rows on the readers, and delivering in arrival order.

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};

use crate::action::{
    Action, CarrierError, Delivery, Handle, Header, LogLevel, Notification, Param, Reply, Row,
};
use crate::notification::{self, Envelope, Message, Notice, PG_NOTIFY_LIMIT};
use crate::sql;

use super::links::{LISTENER, PUBLISHER};
use super::{Engine, MAX_PAYLOAD, Pending};

/// Most notifications in one batch query.
pub const MAX_BATCH_NOTIFICATIONS: u64 = 256;
/// Most bytes of notification text in one batch query.
pub const MAX_BATCH_BYTES: usize = 1 << 20;

/// Inline notifications waiting while a publish query is in flight. They go
/// out together in one transaction, which takes PostgreSQL's global notify
/// lock once for all of them: under load, messages wait one round trip at
/// most and the database commits far fewer times.
#[derive(Debug, Default)]
pub(super) struct Batch {
    /// The texts, joined by newlines.
    texts: String,
    count: u64,
    /// Hashes of the texts: PostgreSQL delivers identical notifications of
    /// one transaction once, so a repeat starts a new batch.
    seen: HashSet<u64>,
}

impl Batch {
    /// Drops the batch; answers how many messages it held.
    pub(super) fn discard(&mut self) -> u64 {
        let count = self.count;
        *self = Self::default();
        count
    }

    fn fits(&self, text: &str, hash: u64) -> bool {
        self.texts.len() + 1 + text.len() <= MAX_BATCH_BYTES && !self.seen.contains(&hash)
    }

    fn push(&mut self, text: &str, hash: u64) {
        if self.count > 0 {
            self.texts.push('\n');
        }
        self.texts.push_str(text);
        self.count += 1;
        self.seen.insert(hash);
    }
}

fn hash(text: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    text.hash(&mut hasher);
    hasher.finish()
}

impl Engine {
    /// Checks and sends one message (a publish or a request).
    pub(super) fn send(
        &mut self,
        subject: &str,
        reply_to: Option<&str>,
        headers: &[Header],
        payload: Vec<u8>,
        out: &mut Vec<Action>,
    ) -> Result<(), CarrierError> {
        let invalid = |e: crate::subject::SubjectError| CarrierError::InvalidSubject(e.to_string());
        self.config.policy.check(subject, false).map_err(invalid)?;
        if let Some(reply_to) = reply_to {
            self.config.policy.check(reply_to, false).map_err(invalid)?;
        }
        let size = payload.len() as u64;
        if size > MAX_PAYLOAD {
            return Err(CarrierError::PayloadTooLarge(size, MAX_PAYLOAD));
        }
        if !self.ready {
            return Err(CarrierError::NotConnected);
        }
        let envelope = Envelope::new(subject, reply_to, headers);
        if envelope.inline_len(payload.len()) < self.config.spill_threshold {
            self.notify(envelope.inline(&payload), out);
        } else {
            let marker = envelope.marker_len();
            if marker >= PG_NOTIFY_LIMIT {
                return Err(CarrierError::Refused(format!(
                    "the subject, reply-to and headers take {marker} bytes of notification; PostgreSQL carries fewer than {PG_NOTIFY_LIMIT}"
                )));
            }
            // Earlier inline messages go first: the publisher runs queries in order.
            self.flush_batch(out);
            let handle = self.publisher();
            let query = self.query(
                Pending::Publish {
                    handle,
                    messages: 1,
                },
                sql::SPILL,
                vec![
                    Param::Text(subject.to_owned()),
                    Param::Bytes(payload),
                    Param::Text(self.config.channel.clone()),
                    Param::Text(envelope.marker_tail()),
                ],
            );
            out.push(query);
            self.publishes_in_flight += 1;
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

    /// Sends an inline notification now, or batches it behind the publish
    /// queries in flight.
    fn notify(&mut self, text: String, out: &mut Vec<Action>) {
        if self.publishes_in_flight == 0 && self.batch.count == 0 {
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
        let hash = hash(&text);
        if !self.batch.fits(&text, hash) {
            self.flush_batch(out);
        }
        self.batch.push(&text, hash);
        if self.batch.count >= MAX_BATCH_NOTIFICATIONS {
            self.flush_batch(out);
        }
    }

    /// Sends the waiting batch, if any, as one query.
    pub(super) fn flush_batch(&mut self, out: &mut Vec<Action>) {
        let batch = std::mem::take(&mut self.batch);
        if batch.count == 0 {
            return;
        }
        let handle = self.publisher();
        let channel = Param::Text(self.config.channel.clone());
        let sql = if batch.count == 1 {
            sql::NOTIFY
        } else {
            sql::NOTIFY_BATCH
        };
        let query = self.query(
            Pending::Publish {
                handle,
                messages: batch.count,
            },
            sql,
            vec![channel, Param::Text(batch.texts)],
        );
        out.push(query);
        self.publishes_in_flight += 1;
    }

    /// A publish query answered; the batch goes out once none is in flight.
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
            self.flush_batch(out);
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
            let query = self.query(
                Pending::Read { link, handle, seq },
                sql::READ_SPILL,
                vec![Param::Int(id)],
            );
            out.push(query);
        }
    }

    /// A spill read answered: the row's payload, or a loss.
    pub(super) fn read_answered(
        &mut self,
        link: usize,
        handle: Handle,
        seq: u64,
        outcome: Result<Vec<Row>, String>,
        out: &mut Vec<Action>,
    ) {
        if self.links[link].handle() == Some(handle) {
            self.links[link].busy = false;
        }
        let payload = match outcome {
            Ok(rows) => rows
                .into_iter()
                .next()
                .and_then(|row| row.into_iter().next().flatten()),
            Err(e) => {
                out.push(Action::Log(
                    LogLevel::Warn,
                    format!("pgbus: reading a spilled message failed: {e}"),
                ));
                None
            }
        };
        let found = payload.is_some();
        if self.arrivals.complete(seq, payload) && !found {
            // The row expired (or the read failed) before it was read.
            self.counters.lost += 1;
        }
        self.issue_reads(out);
        self.deliver_ready(out);
    }

    /// Hands the messages no read holds up to their subscriptions and requests.
    pub(super) fn deliver_ready(&mut self, out: &mut Vec<Action>) {
        for message in self.arrivals.pop_ready() {
            self.dispatch(message, out);
        }
    }

    fn dispatch(&mut self, message: Message, out: &mut Vec<Action>) {
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
            return;
        };
        for recipient in recipients {
            out.push(recipient.action(message.clone()));
        }
        out.push(last.action(message));
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
    fn action(self, message: Message) -> Action {
        let delivery = |subscription| Delivery {
            subscription,
            subject: message.subject,
            reply_to: message.reply_to,
            headers: message.headers,
            payload: message.payload,
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
