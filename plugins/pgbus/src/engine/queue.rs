//! The claim queue on the engine: queueing units (publish and request on a
//! queued subject), consuming (the wake LISTEN, claims and their
//! deliveries), and acknowledging. Every statement runs on the publisher,
//! in order with the fan-out publishes, so a claim sent after an
//! acknowledgement finds its row gone.

use crate::action::{
    Action, CarrierError, Cell, CellRow, Delivery, Header, LogLevel, Param, Payload, Reply, Row,
};
use crate::notification::{decode_headers, encode_headers};
use crate::queue::{self, CLAIM_BATCH, CLAIM_INTERVAL_MS, CLAIM_PREFIX, Route, UNIT_ID_HEADER};
use crate::subject::validate_subject;

use super::links::{LISTENER, PUBLISHER};
use super::{Engine, MAX_PAYLOAD, Pending};

/// One claimed row: its id, unit id, headers field and payload (bytes, or
/// the host's held cell).
type Unit = (i64, String, String, Cell);

/// The claim statement's payload column, which the host holds.
const CLAIM_PAYLOAD_COLUMN: u32 = 3;

impl Engine {
    /// Where `subject` goes: an acknowledgement, a queued subject (literal
    /// only), or fan-out (checked by fan-out's own rules).
    pub(super) fn route(&self, subject: &str) -> Result<Route, CarrierError> {
        if let Some(row) = queue::ack_row(subject) {
            return row.map(Route::Ack);
        }
        if !self.config.is_queued(subject) {
            return Ok(Route::FanOut);
        }
        validate_subject(subject, false)
            .map_err(|e| CarrierError::InvalidSubject(e.to_string()))?;
        Ok(Route::Queued)
    }

    /// Checks and queues one unit; `request` is the host's request to answer
    /// once the table holds it.
    pub(super) fn enqueue(
        &mut self,
        subject: &str,
        reply_to: Option<&str>,
        headers: &[Header],
        payload: Payload,
        request: Option<u64>,
        out: &mut Vec<Action>,
    ) -> Result<(), CarrierError> {
        if reply_to.is_some() {
            return Err(CarrierError::Refused(format!(
                "a work unit carries no reply-to: its consumer answers on `{CLAIM_PREFIX}<row id>`"
            )));
        }
        let size = payload.len();
        if size > MAX_PAYLOAD {
            return Err(CarrierError::PayloadTooLarge(size, MAX_PAYLOAD));
        }
        let unit_id = queue::unit_id(headers)?.to_owned();
        if !self.ready {
            return Err(CarrierError::NotConnected);
        }
        // Fan-out messages published earlier go first.
        self.flush_waiting(out);
        let handle = self.publisher();
        let query = self.query(
            Pending::Enqueue {
                handle,
                request: request.map(|id| (id, subject.to_owned())),
            },
            self.statements.enqueue.clone(),
            vec![
                Param::Text(unit_id),
                Param::Text(subject.to_owned()),
                Param::Text(encode_headers(headers)),
                match payload {
                    Payload::Bytes(bytes) => Param::Bytes(bytes),
                    Payload::Held(held) => Param::Payload(held.id),
                },
                Param::Text(self.config.wake_channel.clone()),
            ],
        );
        out.push(query);
        self.counters.published += 1;
        Ok(())
    }

    /// A unit's insert answered: a request learns that its unit is safe.
    pub(super) fn enqueue_answered(
        &mut self,
        request: Option<(u64, String)>,
        outcome: Result<Vec<Row>, String>,
        out: &mut Vec<Action>,
    ) {
        let outcome = match outcome {
            Ok(rows) => {
                let new = rows.first().and_then(|row| row.first());
                if matches!(new, Some(Some(count)) if count.as_slice() == b"1") {
                    self.counters.queued += 1;
                }
                Ok(())
            }
            Err(e) => {
                out.push(Action::Log(
                    LogLevel::Warn,
                    format!("pgbus: queueing a work unit failed: {e}"),
                ));
                Err(CarrierError::Refused(format!(
                    "queueing the unit failed: {e}"
                )))
            }
        };
        match request {
            Some((id, subject)) => self.reply_queued(id, subject, outcome, out),
            None if outcome.is_err() => self.counters.failed_publishes += 1,
            None => {}
        }
    }

    /// Answers request `id` for a unit on `subject`, unless it timed out.
    pub(super) fn reply_queued(
        &mut self,
        id: u64,
        subject: String,
        outcome: Result<(), CarrierError>,
        out: &mut Vec<Action>,
    ) {
        if !self.requests.finish(id) {
            return;
        }
        let outcome = outcome.map(|()| Delivery {
            subscription: 0,
            subject,
            reply_to: None,
            headers: Vec::new(),
            payload: Vec::new(),
            held: None,
        });
        out.push(Action::Reply(Reply {
            request: id,
            outcome,
        }));
    }

    /// Deletes the claimed unit in `row`: the host handled it.
    pub(super) fn acknowledge(
        &mut self,
        row: i64,
        out: &mut Vec<Action>,
    ) -> Result<(), CarrierError> {
        if !self.ready {
            return Err(CarrierError::NotConnected);
        }
        let handle = self.publisher();
        let query = self.query(
            Pending::Ack { handle, row },
            self.statements.ack.clone(),
            vec![Param::Int(row)],
        );
        out.push(query);
        self.consumers.acknowledged(row);
        // A claim for the room this makes runs after the delete.
        self.claim_due(out);
        Ok(())
    }

    pub(super) fn ack_answered(
        &mut self,
        row: i64,
        outcome: Result<Vec<Row>, String>,
        out: &mut Vec<Action>,
    ) {
        match outcome {
            Ok(_) => self.counters.acknowledged += 1,
            Err(e) => out.push(Action::Log(
                LogLevel::Warn,
                format!(
                    "pgbus: acknowledging the unit in row {row} failed: {e}; it comes back when its lease ends"
                ),
            )),
        }
    }

    /// Subscription `id` consumes `subject`: listen for wakes and claim.
    pub(super) fn consume(&mut self, id: u64, subject: &str, now: u64, out: &mut Vec<Action>) {
        self.consumers.insert(id, subject);
        if self.claim_at.is_none() {
            self.claim_at = Some(now.saturating_add(CLAIM_INTERVAL_MS));
        }
        self.listen_wake(out);
        self.claim_due(out);
    }

    /// The carrier is ready (again): wakes may have been missed.
    pub(super) fn queue_ready(&mut self, out: &mut Vec<Action>) {
        self.listen_wake(out);
        self.consumers.wake_all();
        self.claim_due(out);
    }

    /// The claim tick: leases that ran out, wakes that were lost.
    pub(super) fn claim_tick(&mut self, now: u64, out: &mut Vec<Action>) {
        self.consumers.expire(now);
        self.consumers.wake_all();
        self.claim_due(out);
    }

    /// A notification on the wake channel: its text is the subject.
    pub(super) fn hear_wake(&mut self, subject: &str) {
        self.consumers.wake(subject);
    }

    /// The host dropped notifications: any of them may have been a wake.
    pub(super) fn wakes_dropped(&mut self) {
        self.consumers.wake_all();
    }

    /// LISTENs on the wake channel, once per listener connection, while
    /// anything is consumed here.
    fn listen_wake(&mut self, out: &mut Vec<Action>) {
        let listener = &self.links[LISTENER];
        if self.consumers.is_empty()
            || !listener.is_usable()
            || self.wake_listener == listener.handle()
        {
            return;
        }
        let Some(handle) = listener.handle() else {
            return;
        };
        self.wake_listener = Some(handle);
        out.push(Action::Listen(handle, self.config.wake_channel.clone()));
    }

    /// Sends the claims that are due.
    pub(super) fn claim_due(&mut self, out: &mut Vec<Action>) {
        if !self.links[PUBLISHER].is_usable() {
            return;
        }
        let Some(handle) = self.links[PUBLISHER].handle() else {
            return;
        };
        let lease = i64::try_from(self.config.lease_seconds).unwrap_or(i64::MAX);
        for subject in self.consumers.due() {
            // The id `query` gives the claim.
            let id = self.next_query;
            let mut query = self.query(
                Pending::Claim {
                    handle,
                    subject: subject.clone(),
                },
                self.statements.claim.clone(),
                vec![
                    Param::Text(subject.clone()),
                    Param::Int(CLAIM_BATCH as i64),
                    Param::Int(lease),
                ],
            );
            // Each unit goes to one subscription, in this call: its payload
            // can stay in the host.
            if let Action::Query(query) = &mut query {
                query.hold_column = Some(CLAIM_PAYLOAD_COLUMN);
            }
            out.push(query);
            self.consumers.claiming(&subject, id);
        }
    }

    /// A claim answered: each unit goes to one subscription of `subject`,
    /// with the reply-to that acknowledges it (a held payload is named by
    /// the delivery; an orphan's is dropped by the host after the call).
    pub(super) fn claim_answered(
        &mut self,
        query: u64,
        subject: &str,
        outcome: Result<Vec<CellRow>, String>,
        now: u64,
        out: &mut Vec<Action>,
    ) {
        let rows = match outcome {
            Ok(rows) => rows,
            Err(e) => {
                out.push(Action::Log(
                    LogLevel::Warn,
                    format!("pgbus: claiming units of {subject} failed: {e}"),
                ));
                self.consumers.claimed(subject, query, false);
                return;
            }
        };
        let full = rows.len() as u64 >= CLAIM_BATCH;
        self.counters.claimed += rows.len() as u64;
        let mut units: Vec<Unit> = rows.into_iter().filter_map(unit).collect();
        units.sort_unstable_by_key(|unit| unit.0);
        let until = now.saturating_add(self.config.lease_seconds.saturating_mul(1000));
        let mut orphans = 0;
        for (row, unit_id, field, payload) in units {
            let Some(subscription) = self.consumers.take(subject, row, until) else {
                orphans += 1;
                continue;
            };
            let (payload, held) = match payload {
                Cell::Bytes(bytes) => (bytes, None),
                Cell::Held(cell) => (Vec::new(), Some(cell.id)),
            };
            let mut headers = decode_headers(&field).unwrap_or_else(|e| {
                out.push(Action::Log(
                    LogLevel::Warn,
                    format!("pgbus: the headers of the unit in row {row} are unreadable ({e}); delivered without them"),
                ));
                Vec::new()
            });
            if !headers.iter().any(|h| h.name == UNIT_ID_HEADER) {
                headers.push(Header::new(UNIT_ID_HEADER, unit_id));
            }
            self.counters.delivered += 1;
            out.push(Action::Deliver(Delivery {
                subscription,
                subject: subject.to_owned(),
                reply_to: Some(format!("{CLAIM_PREFIX}{row}")),
                headers,
                payload,
                held,
            }));
        }
        if orphans > 0 {
            out.push(Action::Log(
                LogLevel::Info,
                format!(
                    "pgbus: {orphans} unit(s) of {subject} claimed after its last consumer left; they come back when their lease ends"
                ),
            ));
        }
        self.consumers.claimed(subject, query, full);
        self.claim_due(out);
    }

    /// A request's insert or a claim died with the publisher.
    pub(super) fn queue_query_lost(&mut self, query: u64, pending: Pending, out: &mut Vec<Action>) {
        match pending {
            // Queued or not: the host retries with the same unit id.
            Pending::Enqueue {
                request: Some((id, subject)),
                ..
            } => self.reply_queued(id, subject, Err(CarrierError::NotConnected), out),
            // Units it claimed come back when their lease ends; claim again
            // once ready.
            Pending::Claim { subject, .. } => self.consumers.claimed(&subject, query, true),
            _ => {}
        }
    }
}

/// Reads a claimed row; `None` for a row the claim statement cannot answer.
fn unit(row: CellRow) -> Option<Unit> {
    let [Some(id), Some(unit_id), Some(headers), Some(payload)]: [Option<Cell>; 4] =
        row.try_into().ok()?
    else {
        return None;
    };
    let text = |cell: Cell| match cell {
        Cell::Bytes(bytes) => String::from_utf8(bytes).ok(),
        Cell::Held(_) => None,
    };
    let id = text(id)?.parse().ok()?;
    Some((id, text(unit_id)?, text(headers)?, payload))
}
