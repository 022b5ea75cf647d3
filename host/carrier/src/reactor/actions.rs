//! What the reactor does with the actions a plugin call answers: open,
//! write, query, deliver, reply, and the batched publishes and writes it
//! flushes.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use switchyard_runtime::carrier::{Action, Delivery, Endpoint, Segment};
use tokio::sync::mpsc;

use super::bypass::bind_payloads;
use super::{Link, Reactor, now_ms};
use crate::database::DbConnection;
use crate::io;
use crate::message::{Message, SendError};
use crate::payloads::PayloadError;
use switchyard_runtime::CallError;

impl Reactor {
    /// Performs actions in order; actions answered by calls made here (a
    /// refused open) are performed after them.
    pub(super) fn perform(&mut self, actions: Vec<Action>) {
        if let Err(misused) = self.perform_all(actions) {
            self.rebuild(CallError::InvalidAnswer(misused.to_string()));
        }
        // What the call's actions did not use or keep goes now.
        self.payloads.end_call();
    }

    /// [`Reactor::perform`]'s work; stops at the first misused payload.
    fn perform_all(&mut self, actions: Vec<Action>) -> Result<(), PayloadError> {
        let mut queue: VecDeque<Action> = actions.into();
        while let Some(action) = queue.pop_front() {
            match action {
                Action::Open((h, endpoint)) => queue.extend(self.open(h, endpoint)),
                Action::Write((h, segments)) => self.write(h, segments)?,
                Action::Listen((h, channel)) => {
                    if let Some(Link::Database(connection)) = self.connections.get(&h) {
                        connection.listen(channel);
                    }
                }
                Action::Query(mut query) => match self.connections.get(&query.connection) {
                    Some(Link::Database(connection)) => {
                        bind_payloads(&mut self.payloads, &mut query.params)?;
                        connection.query(query)
                    }
                    _ => {
                        let now = now_ms();
                        let outcome = Err(format!(
                            "connection {} is not an open database connection",
                            query.connection
                        ));
                        if let Some(Ok(more)) = self
                            .plugin
                            .as_mut()
                            .map(|p| p.answered(query.id, outcome, now))
                        {
                            queue.extend(more);
                        }
                    }
                },
                Action::Close(h) => {
                    self.reads.remove(&h);
                    if let Some(connection) = self.connections.remove(&h) {
                        connection.close();
                    }
                }
                Action::SetTimer(ms) => {
                    self.timer_generation += 1;
                    io::timer(&self.io, ms, self.timer_generation, self.events.clone());
                }
                Action::Deliver(mut delivery) => {
                    let payload = self.body(&mut delivery)?;
                    self.deliver(delivery.subscription, message(delivery, payload));
                }
                Action::Reply(reply) => {
                    let outcome = match reply.outcome {
                        Ok(mut delivery) => {
                            let payload = self.body(&mut delivery)?;
                            Ok(message(delivery, payload))
                        }
                        Err(e) => Err(SendError::from(e)),
                    };
                    self.answer(reply.request, outcome);
                }
                Action::Keep(id) => self.payloads.keep(id)?,
                Action::Release(id) => self.payloads.release(id)?,
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
                    tracing::warn!(carrier = %self.component.name, %reason, "carrier lost its connection");
                    let _ = self.ready.send(false);
                }
            }
        }
        Ok(())
    }

    /// Opens the connection the plugin asked for, where the operator's
    /// configuration allows it; what a refusal makes the plugin answer.
    fn open(&mut self, h: u64, endpoint: Endpoint) -> Vec<Action> {
        // The operator's list, not the plugin's: see `CarrierSetup::allowed_endpoints`.
        let allowed = self.setup.allowed_endpoints.contains(&endpoint);
        let link = match endpoint {
            _ if !allowed => {
                tracing::warn!(carrier = %self.component.name, ?endpoint, "refused: endpoint not allowed by the operator's configuration");
                return self.refuse(h, "endpoint not allowed by the configuration");
            }
            Endpoint::Tcp(address) => Link::Tcp(io::Connection::dial(
                &self.io,
                h,
                address,
                self.events.clone(),
            )),
            Endpoint::Database => match &self.setup.database_url {
                Some(url) => Link::Database(DbConnection::dial(
                    &self.io,
                    h,
                    url.clone(),
                    self.events.clone(),
                )),
                None => {
                    return self.refuse(h, "this host has no database for carriers");
                }
            },
        };
        self.reads.remove(&h);
        if let Some(old) = self.connections.insert(h, link) {
            old.close();
        }
        Vec::new()
    }

    /// Gathers what the plugin wrote to a connection until the flush; a
    /// payload is taken even for a closed connection (it is used).
    fn write(&mut self, h: u64, segments: Vec<Segment>) -> Result<(), PayloadError> {
        let open = matches!(self.connections.get(&h), Some(Link::Tcp(_)));
        let out = self.pending_writes.entry(h).or_default();
        for segment in segments {
            // A payload is taken even for a closed connection: it is used.
            let bytes = match segment {
                Segment::Bytes(bytes) => Bytes::from(bytes),
                Segment::Payload(id) => self.payloads.take(id)?,
            };
            if !open {
                continue;
            }
            if out.is_empty() {
                // The first bytes of a write become its buffer, not a copy.
                *out = bytes::BytesMut::from(bytes);
            } else {
                out.extend_from_slice(&bytes);
            }
        }
        if !open {
            self.pending_writes.remove(&h);
        }

        Ok(())
    }

    /// Hands a message to its subscription's handler.
    pub(super) fn deliver(&mut self, subscription: u64, message: Message) {
        let Some(subscription) = self.subscriptions.get(&subscription) else {
            return;
        };
        match subscription.handler.try_send(message) {
            Ok(()) => self.counters.delivered.fetch_add(1, Ordering::Relaxed),
            // A handler that falls behind loses messages, counted, never silently.
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.counters.dropped.fetch_add(1, Ordering::Relaxed)
            }
            Err(mpsc::error::TrySendError::Closed(_)) => 0,
        };
    }

    /// Completes a request.
    pub(super) fn answer(&mut self, request: u64, outcome: Result<Message, SendError>) {
        if let Some(done) = self.requests.remove(&request) {
            let _ = done.send(outcome);
        }
    }

    /// Publishes what was gathered: one plugin call for the whole batch.
    pub(super) fn flush_publishes(&mut self) {
        if self.pending_publishes.is_empty() {
            return;
        }
        // The batch's memory is kept for the next burst: a burst of small
        // publishes packs tens of kilobytes, which glibc would otherwise
        // hand out and take back (consolidating its free lists) each time.
        let waiting = std::mem::take(&mut self.publishers);
        let now = now_ms();
        let batch = &self.pending_publishes;
        let answered = self.plugin.as_mut().map(|p| p.publish_batch(batch, now));
        self.pending_publishes.clear();
        let answers = match answered {
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
            match &answer {
                Ok(()) => self.counters.published.fetch_add(1, Ordering::Relaxed),
                Err(_) => self.counters.refused.fetch_add(1, Ordering::Relaxed),
            };
            match done {
                Some(done) => {
                    let _ = done.send(answer);
                }
                None => {
                    if let Err(refused) = answer {
                        tracing::debug!(carrier = %self.component.name, error = %refused, "a queued publish was refused");
                    }
                }
            }
        }
    }

    /// Hands each connection what was written to it since the last flush.
    pub(super) fn flush_writes(&mut self) {
        for (h, bytes) in self.pending_writes.drain() {
            if let Some(Link::Tcp(connection)) = self.connections.get(&h) {
                connection.write(bytes.freeze());
            }
        }
    }

    /// Tells the plugin a connection it asked for is closed before it opened.
    pub(super) fn refuse(&mut self, h: u64, reason: &str) -> Vec<Action> {
        let now = now_ms();
        match self.plugin.as_mut().map(|p| p.closed(h, reason, now)) {
            Some(Ok(more)) => more,
            _ => Vec::new(),
        }
    }
}

pub(super) fn message(d: Delivery, payload: Bytes) -> Message {
    Message {
        subject: d.subject,
        reply_to: d.reply_to,
        headers: d.headers.into_iter().map(|h| (h.name, h.value)).collect(),
        payload,
    }
}
