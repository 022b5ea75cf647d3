//! The work-queue seam: a unit goes to exactly one consumer of its kind, at
//! least once, deduplicated by unit id.
//!
//! One mechanism on any carrier that serves queue groups and requests:
//! - `submit` is a request on `work.<kind>` with the `switchyard-unit-id`
//!   header, repeated with the same id until answered. A durable queue
//!   (pgbus's claim table) answers once the unit is stored; NATS answers
//!   when a consumer acknowledged it.
//! - a consumer subscribes with the kind as queue group; after handling a
//!   unit it publishes an empty message to the unit's reply subject (pgbus
//!   deletes the claimed row; on NATS the producer's request is answered).
//!   A unit it already handled (a redelivery) is acknowledged again without
//!   running twice.
//!
//! Like the fan-out holder, the queue keeps its consumers in a registry:
//! during a carrier change each consumes from both carriers ([`WorkQueue::listen`],
//! [`WorkQueue::release`]), and a unit is acknowledged on the carrier it came from.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use arc_swap::ArcSwap;
use bytes::Bytes;
use tokio::sync::mpsc;

use crate::client::{Carrier, Subscription};
use crate::message::{Message, SendError};

/// The header naming a unit.
pub const UNIT_ID_HEADER: &str = "switchyard-unit-id";
/// How many handled unit ids a consumer remembers.
const REMEMBERED: usize = 65_536;
/// Tries of one submit before giving up.
const SUBMIT_TRIES: u32 = 5;

/// The subject units of `kind` travel on.
pub fn queue_subject(kind: &str) -> String {
    format!("work.{kind}")
}

/// The work-queue holder: calls go to the carrier the pointer names.
pub struct WorkQueue {
    active: ArcSwap<Carrier>,
    answer_within: Duration,
    /// The consumers, each owned by its [`Units`] (dropping those ends it).
    consumers: Mutex<Vec<Weak<Mutex<Consumer>>>>,
}

/// A unit as it arrived, with the carrier it arrived on.
type Arrival = (Arc<Carrier>, Message);

struct Consumer {
    kind: String,
    units: mpsc::Sender<Arrival>,
    /// One subscription per carrier it consumes from.
    on: Vec<(Arc<Carrier>, Subscription)>,
}

/// Subscribes `units` to `kind` on `carrier`: a small task tags each
/// message with its carrier (it ends when the subscription is dropped).
async fn consume_on(
    carrier: &Arc<Carrier>,
    kind: &str,
    units: mpsc::Sender<Arrival>,
) -> Result<Subscription, SendError> {
    let (subscription, mut messages) = carrier.subscribe(&queue_subject(kind), Some(kind)).await?;
    let from = carrier.clone();
    tokio::spawn(async move {
        while let Some(message) = messages.recv().await {
            if units.send((from.clone(), message)).await.is_err() {
                return;
            }
        }
    });
    Ok(subscription)
}

impl std::fmt::Debug for WorkQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkQueue")
            .field("active", &self.active.load().name())
            .finish()
    }
}

impl WorkQueue {
    /// A queue over `carrier`; each try of a submit waits `answer_within`.
    pub fn new(carrier: Arc<Carrier>, answer_within: Duration) -> Self {
        Self {
            active: ArcSwap::new(carrier),
            answer_within,
            consumers: Mutex::new(Vec::new()),
        }
    }

    /// The consumers still alive (those whose [`Units`] were dropped are forgotten).
    fn live_consumers(&self) -> Vec<Arc<Mutex<Consumer>>> {
        let mut consumers = self.consumers.lock().expect("consumers lock");
        consumers.retain(|c| c.strong_count() > 0);
        consumers.iter().filter_map(Weak::upgrade).collect()
    }

    /// Makes every consumer consume from a second carrier as well.
    pub async fn listen(&self, second: &Arc<Carrier>) -> Result<(), SendError> {
        for consumer in self.live_consumers() {
            let (kind, units) = {
                let c = consumer.lock().expect("consumer lock");
                if c.on.iter().any(|(on, _)| Arc::ptr_eq(on, second)) {
                    continue;
                }
                (c.kind.clone(), c.units.clone())
            };
            let subscription = consume_on(second, &kind, units).await?;
            consumer
                .lock()
                .expect("consumer lock")
                .on
                .push((second.clone(), subscription));
        }
        Ok(())
    }

    /// Stops every consumer consuming from `carrier` (units it handed out
    /// are still acknowledged on it).
    pub fn release(&self, carrier: &Arc<Carrier>) {
        for consumer in self.live_consumers() {
            consumer
                .lock()
                .expect("consumer lock")
                .on
                .retain(|(on, _)| !Arc::ptr_eq(on, carrier));
        }
    }

    /// The carrier submits go to.
    pub fn active(&self) -> Arc<Carrier> {
        self.active.load_full()
    }

    /// Points new calls at `carrier`.
    pub fn swap(&self, carrier: Arc<Carrier>) {
        self.active.store(carrier);
    }

    /// Submits a unit; returns once it is safe (stored, or handled), after
    /// retrying with the same id when a try went unanswered.
    pub async fn submit(&self, kind: &str, unit_id: &str, payload: Bytes) -> Result<(), SendError> {
        let subject = queue_subject(kind);
        let mut backoff = Duration::from_millis(50);
        let mut last = SendError::Timeout;
        for _ in 0..SUBMIT_TRIES {
            let carrier = self.active.load_full();
            let headers = vec![(UNIT_ID_HEADER.to_string(), unit_id.to_string())];
            match carrier
                .request_with_headers(&subject, headers, payload.clone(), self.answer_within)
                .await
            {
                Ok(_) => return Ok(()),
                Err(
                    e @ (SendError::Timeout | SendError::NoResponders | SendError::NotConnected),
                ) => {
                    last = e;
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                }
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }

    /// Becomes a consumer of `kind` (on every carrier the queue consumes from).
    pub async fn consume(&self, kind: &str) -> Result<Units, SendError> {
        let carrier = self.active.load_full();
        let (units, arrivals) = mpsc::channel(crate::client::SUBSCRIPTION_QUEUE);
        let subscription = consume_on(&carrier, kind, units.clone()).await?;
        let consumer = Arc::new(Mutex::new(Consumer {
            kind: kind.to_string(),
            units,
            on: vec![(carrier, subscription)],
        }));
        self.consumers
            .lock()
            .expect("consumers lock")
            .push(Arc::downgrade(&consumer));
        Ok(Units {
            arrivals,
            handled: Arc::new(Mutex::new(Handled::default())),
            _consumer: consumer,
        })
    }
}

/// Unit ids already handled, oldest forgotten first.
#[derive(Default)]
struct Handled {
    ids: HashSet<String>,
    order: VecDeque<String>,
}

impl Handled {
    fn insert(&mut self, id: String) {
        if self.ids.insert(id.clone()) {
            self.order.push_back(id);
            if self.order.len() > REMEMBERED
                && let Some(old) = self.order.pop_front()
            {
                self.ids.remove(&old);
            }
        }
    }
}

/// A consumer's units, in the order they arrive.
pub struct Units {
    arrivals: mpsc::Receiver<Arrival>,
    handled: Arc<Mutex<Handled>>,
    /// Its subscriptions: they last as long as the consumer, not the queue.
    _consumer: Arc<Mutex<Consumer>>,
}

impl std::fmt::Debug for Units {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Units").finish_non_exhaustive()
    }
}

impl Units {
    /// The next unit not handled before; `None` once the queue is gone.
    pub async fn next(&mut self) -> Option<Unit> {
        loop {
            let (carrier, message) = self.arrivals.recv().await?;
            let id = message
                .headers
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case(UNIT_ID_HEADER))
                .map(|(_, value)| value.clone())
                .unwrap_or_default();
            let unit = Unit {
                id,
                payload: message.payload,
                reply_to: message.reply_to,
                carrier,
                handled: self.handled.clone(),
            };
            let seen = self
                .handled
                .lock()
                .expect("handled lock")
                .ids
                .contains(&unit.id);
            if !seen {
                return Some(unit);
            }
            // A redelivery of a unit already handled: acknowledge it again.
            if let Err(e) = unit.done().await {
                tracing::debug!(error = %e, "a redelivered unit's acknowledgement failed");
            }
        }
    }
}

/// One unit of work.
pub struct Unit {
    /// The producer's id.
    pub id: String,
    /// What to do.
    pub payload: Bytes,
    reply_to: Option<String>,
    carrier: Arc<Carrier>,
    handled: Arc<Mutex<Handled>>,
}

impl std::fmt::Debug for Unit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Unit")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Unit {
    /// Handled: acknowledge it. A unit dropped without `done` comes back
    /// (after the claim's lease on pgbus; on NATS the producer retries).
    pub async fn done(self) -> Result<(), SendError> {
        self.handled
            .lock()
            .expect("handled lock")
            .insert(self.id.clone());
        match &self.reply_to {
            Some(reply_to) => self.carrier.publish(reply_to, Bytes::new()).await,
            None => Ok(()),
        }
    }
}
