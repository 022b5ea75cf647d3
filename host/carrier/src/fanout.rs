//! The fan-out holder: host code publishes and subscribes through it, never
//! through a carrier. Publish goes to the carrier an atomic pointer names
//! (one load per call, no lock). Subscriptions are kept in a registry so
//! that, while the carrier changes, every handler listens on both carriers.

use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use bytes::Bytes;
use tokio::sync::mpsc;

use crate::client::{Carrier, SUBSCRIPTION_QUEUE, Subscription};
use crate::message::{Message, SendError};

struct Registered {
    subject: String,
    queue_group: Option<String>,
    handler: mpsc::Sender<Message>,
    /// One subscription per carrier it listens on, by carrier name.
    on: Vec<(String, Subscription)>,
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
        carrier.publish(subject, payload).await
    }

    /// Subscribes on every carrier the holder listens on; messages from all
    /// of them arrive on the returned receiver.
    pub async fn subscribe(
        &self,
        subject: &str,
        queue_group: Option<&str>,
    ) -> Result<mpsc::Receiver<Message>, SendError> {
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
                on: vec![(carrier.name().to_string(), subscription)],
            });
        Ok(messages)
    }

    /// Attaches every registered subscription to a second carrier as well.
    pub async fn listen(&self, second: &Arc<Carrier>) -> Result<(), SendError> {
        let wanted: Vec<(usize, String, Option<String>, mpsc::Sender<Message>)> = self
            .registry
            .lock()
            .expect("registry lock")
            .iter()
            .enumerate()
            .filter(|(_, r)| !r.on.iter().any(|(name, _)| name == second.name()))
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
                r.on.push((second.name().to_string(), subscription));
            }
        }
        Ok(())
    }

    /// Makes `carrier` the one publish goes to.
    pub fn swap(&self, carrier: Arc<Carrier>) {
        self.active.store(carrier);
    }

    /// Detaches every subscription from the carrier named `name`.
    pub fn release(&self, name: &str) {
        for r in self.registry.lock().expect("registry lock").iter_mut() {
            r.on.retain(|(on, _)| on != name);
        }
    }
}
