//! The fan-out holder: host code publishes and subscribes through it, never
//! through a carrier. Publish goes to the carrier an atomic pointer names
//! (one load per call, no lock). Subscriptions are kept in a registry so
//! that, while the carrier changes, every handler listens on both carriers.
//! Carriers are told apart by identity, not by name: a version upgrade runs
//! two `nats` carriers side by side.
//!
//! Two carriers on one server (a `nats` upgrade: both subscribed to the
//! same subject) deliver a broadcast twice; every publish carries an id
//! ([`BROADCAST_ID_HEADER`]) and a handler's [`Broadcasts`] drops an id it
//! has just seen, so a broadcast is heard once whatever the overlap.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use bytes::Bytes;
use tokio::sync::mpsc;

use crate::client::{Carrier, SUBSCRIPTION_QUEUE, Subscription};
use crate::message::{Message, SendError};

/// The header naming a broadcast, for deduplication across carriers.
pub const BROADCAST_ID_HEADER: &str = "switchyard-broadcast-id";
/// How many broadcast ids a handler remembers: far more than two carriers
/// can put between the two copies of one broadcast.
const REMEMBERED: usize = 4096;

struct Registered {
    subject: String,
    queue_group: Option<String>,
    handler: mpsc::Sender<Message>,
    /// One subscription per carrier it listens on.
    on: Vec<(Arc<Carrier>, Subscription)>,
}

/// The fan-out seam.
pub struct FanOut {
    active: ArcSwap<Carrier>,
    registry: Mutex<Vec<Registered>>,
}

impl std::fmt::Debug for FanOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FanOut")
            .field("active", &self.active.load().name())
            .finish()
    }
}

impl FanOut {
    /// A holder over `carrier`.
    pub fn new(carrier: Arc<Carrier>) -> Self {
        Self {
            active: ArcSwap::new(carrier),
            registry: Mutex::new(Vec::new()),
        }
    }

    /// The carrier publish goes to.
    pub fn active(&self) -> Arc<Carrier> {
        self.active.load_full()
    }

    /// Publishes on the active carrier.
    pub async fn publish(&self, subject: &str, payload: Bytes) -> Result<(), SendError> {
        let carrier = self.active.load_full();
        let id = format!("{:016x}", rand::random::<u64>());
        carrier
            .publish_with_headers(subject, vec![(BROADCAST_ID_HEADER.into(), id)], payload)
            .await
    }

    /// Subscribes on every carrier the holder listens on; messages from all
    /// of them arrive on the returned [`Broadcasts`], each once.
    pub async fn subscribe(
        &self,
        subject: &str,
        queue_group: Option<&str>,
    ) -> Result<Broadcasts, SendError> {
        let (handler, messages) = mpsc::channel(SUBSCRIPTION_QUEUE);
        let carrier = self.active.load_full();
        let subscription = carrier
            .subscribe_into(subject, queue_group, handler.clone())
            .await?;
        self.registry
            .lock()
            .expect("registry lock")
            .push(Registered {
                subject: subject.into(),
                queue_group: queue_group.map(str::to_string),
                handler,
                on: vec![(carrier, subscription)],
            });
        Ok(Broadcasts {
            messages,
            seen: HashSet::new(),
            order: VecDeque::new(),
        })
    }

    /// Attaches every registered subscription to a second carrier as well.
    pub async fn listen(&self, second: &Arc<Carrier>) -> Result<(), SendError> {
        let wanted: Vec<(usize, String, Option<String>, mpsc::Sender<Message>)> = self
            .registry
            .lock()
            .expect("registry lock")
            .iter()
            .enumerate()
            .filter(|(_, r)| !r.on.iter().any(|(on, _)| Arc::ptr_eq(on, second)))
            .map(|(i, r)| {
                (
                    i,
                    r.subject.clone(),
                    r.queue_group.clone(),
                    r.handler.clone(),
                )
            })
            .collect();
        for (i, subject, queue_group, handler) in wanted {
            let subscription = second
                .subscribe_into(&subject, queue_group.as_deref(), handler)
                .await?;
            if let Some(r) = self.registry.lock().expect("registry lock").get_mut(i) {
                r.on.push((second.clone(), subscription));
            }
        }
        Ok(())
    }

    /// Makes `carrier` the one publish goes to.
    pub fn swap(&self, carrier: Arc<Carrier>) {
        self.active.store(carrier);
    }

    /// Detaches every subscription from `carrier` (the holder keeps no
    /// handle to it: once its other holders drop theirs, it stops).
    pub fn release(&self, carrier: &Arc<Carrier>) {
        for r in self.registry.lock().expect("registry lock").iter_mut() {
            r.on.retain(|(on, _)| !Arc::ptr_eq(on, carrier));
        }
    }
}

/// A handler's broadcasts, from every carrier it listens on, each once.
pub struct Broadcasts {
    messages: mpsc::Receiver<Message>,
    seen: HashSet<String>,
    order: VecDeque<String>,
}

impl std::fmt::Debug for Broadcasts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broadcasts").finish_non_exhaustive()
    }
}

impl Broadcasts {
    /// The next broadcast not heard before; `None` once the holder is gone.
    pub async fn recv(&mut self) -> Option<Message> {
        loop {
            let message = self.messages.recv().await?;
            let Some(id) = message
                .headers
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case(BROADCAST_ID_HEADER))
                .map(|(_, id)| id.clone())
            else {
                // Published around the holder (another tool): nothing to
                // deduplicate by.
                return Some(message);
            };
            if !self.seen.insert(id.clone()) {
                continue;
            }
            self.order.push_back(id);
            if self.order.len() > REMEMBERED
                && let Some(old) = self.order.pop_front()
            {
                self.seen.remove(&old);
            }
            return Some(message);
        }
    }
}
