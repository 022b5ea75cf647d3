//! A carrier plugin: one stateful instance (a protocol engine holds
//! connection state), called by the host's reactor for every event and
//! operation. A call that traps poisons the instance; the reactor rebuilds
//! the carrier from its source, which reconnects.

use std::sync::Arc;

use wasmtime::Store;

use crate::bindings::carrier::Carrier;
use crate::bindings::carrier::switchyard::carrier0_1_0::types;
use crate::engine::Runtime;
use crate::error::{CallError, LoadError};
use crate::instance::Instance;
use crate::loader::{CarrierWorld, ComponentSource, Prepared};
use crate::sandbox::SandboxState;

pub use types::{
    Action, CarrierError, Delivery, Endpoint, Header, Notification, Outgoing, Param, Query, Reply,
};

/// A batch publish's answer: one result per message, in order, and the
/// actions of all of them.
pub type BatchAnswer = (Vec<Result<(), CarrierError>>, Vec<Action>);

/// What is needed to load one carrier.
#[derive(Debug, Clone)]
pub struct CarrierSource<'a> {
    /// The component.
    pub component: ComponentSource<'a>,
    /// The carrier's configuration, a JSON document.
    pub config: &'a str,
    /// Seed of the plugin's randomness.
    pub seed: u64,
}

/// A loaded, configured carrier instance.
#[derive(Debug)]
pub struct CarrierPlugin {
    instance: Instance<Carrier>,
    endpoints: Vec<Endpoint>,
    max_payload: u64,
}

impl CarrierPlugin {
    /// Verifies, compiles (or takes from the cache), instantiates and
    /// configures; returns the plugin and its first actions.
    pub fn load(
        runtime: &Arc<Runtime>,
        source: CarrierSource<'_>,
        now_ms: u64,
    ) -> Result<(Self, Vec<Action>), LoadError> {
        let instance =
            Prepared::<CarrierWorld>::load(runtime, source.component, false)?.instance()?;
        let mut plugin = Self {
            instance,
            endpoints: Vec::new(),
            max_payload: 0,
        };
        let actions = plugin
            .call("configure", |b, s| {
                b.switchyard_carrier0_1_0_protocol().call_configure(
                    s,
                    source.config,
                    source.seed,
                    now_ms,
                )
            })?
            .map_err(LoadError::InvalidSettings)?;
        plugin.endpoints = plugin.call("endpoints", |b, s| {
            b.switchyard_carrier0_1_0_protocol().call_endpoints(s)
        })?;
        plugin.max_payload = plugin.call("max-payload", |b, s| {
            b.switchyard_carrier0_1_0_protocol().call_max_payload(s)
        })?;
        Ok((plugin, actions))
    }

    /// `name@version`.
    pub fn label(&self) -> &Arc<str> {
        self.instance.label()
    }

    /// Whether the configuration allows opening `endpoint`: checked by the
    /// host before any I/O.
    pub fn allows(&self, endpoint: &Endpoint) -> bool {
        self.endpoints.contains(endpoint)
    }

    /// The endpoints of the configuration.
    pub fn endpoints(&self) -> &[Endpoint] {
        &self.endpoints
    }

    /// The largest payload a message may carry (the server's, once connected).
    pub fn max_payload(&mut self) -> Result<u64, CallError> {
        self.max_payload = self.call("max-payload", |b, s| {
            b.switchyard_carrier0_1_0_protocol().call_max_payload(s)
        })?;
        Ok(self.max_payload)
    }

    /// Why the instance can no longer be called, if it cannot.
    pub fn poisoned(&self) -> Option<&CallError> {
        self.instance.poisoned()
    }

    /// A connection opened.
    pub fn opened(&mut self, handle: u64, now_ms: u64) -> Result<Vec<Action>, CallError> {
        self.call("opened", |b, s| {
            b.switchyard_carrier0_1_0_protocol()
                .call_opened(s, handle, now_ms)
        })
    }

    /// A connection closed or could not be opened.
    pub fn closed(
        &mut self,
        handle: u64,
        reason: &str,
        now_ms: u64,
    ) -> Result<Vec<Action>, CallError> {
        self.call("closed", |b, s| {
            b.switchyard_carrier0_1_0_protocol()
                .call_closed(s, handle, reason, now_ms)
        })
    }

    /// Bytes arrived on a connection.
    pub fn received(
        &mut self,
        handle: u64,
        data: &[u8],
        now_ms: u64,
    ) -> Result<Vec<Action>, CallError> {
        self.call("received", |b, s| {
            b.switchyard_carrier0_1_0_protocol()
                .call_received(s, handle, data, now_ms)
        })
    }

    /// The timer fired.
    pub fn timer(&mut self, now_ms: u64) -> Result<Vec<Action>, CallError> {
        self.call("timer", |b, s| {
            b.switchyard_carrier0_1_0_protocol().call_timer(s, now_ms)
        })
    }

    /// Notifications heard on a database connection, in arrival order.
    pub fn notified(
        &mut self,
        handle: u64,
        notifications: &[Notification],
        dropped: u64,
        now_ms: u64,
    ) -> Result<Vec<Action>, CallError> {
        self.call("notified", |b, s| {
            b.switchyard_carrier0_1_0_protocol().call_notified(
                s,
                handle,
                notifications,
                dropped,
                now_ms,
            )
        })
    }

    /// A query's answer: rows of column bytes, or the database's error.
    pub fn answered(
        &mut self,
        query: u64,
        outcome: &Result<Vec<Vec<Option<Vec<u8>>>>, String>,
        now_ms: u64,
    ) -> Result<Vec<Action>, CallError> {
        let outcome = outcome.as_ref().map(Vec::as_slice).map_err(String::as_str);
        self.call("answered", |b, s| {
            b.switchyard_carrier0_1_0_protocol()
                .call_answered(s, query, outcome, now_ms)
        })
    }

    /// Publishes a message.
    pub fn publish(
        &mut self,
        subject: &str,
        reply_to: Option<&str>,
        headers: &[Header],
        payload: &[u8],
        now_ms: u64,
    ) -> Result<Result<Vec<Action>, CarrierError>, CallError> {
        self.call("publish", |b, s| {
            b.switchyard_carrier0_1_0_protocol()
                .call_publish(s, subject, reply_to, headers, payload, now_ms)
        })
    }

    /// Publishes several messages in one call; one answer per message, in order.
    pub fn publish_batch(
        &mut self,
        messages: &[Outgoing],
        now_ms: u64,
    ) -> Result<BatchAnswer, CallError> {
        self.call("publish-batch", |b, s| {
            b.switchyard_carrier0_1_0_protocol()
                .call_publish_batch(s, messages, now_ms)
        })
    }

    /// Subscribes the host's subscription `id`.
    pub fn subscribe(
        &mut self,
        id: u64,
        subject: &str,
        queue_group: Option<&str>,
        now_ms: u64,
    ) -> Result<Result<Vec<Action>, CarrierError>, CallError> {
        self.call("subscribe", |b, s| {
            b.switchyard_carrier0_1_0_protocol()
                .call_subscribe(s, id, subject, queue_group, now_ms)
        })
    }

    /// Removes a subscription.
    pub fn unsubscribe(&mut self, id: u64, now_ms: u64) -> Result<Vec<Action>, CallError> {
        self.call("unsubscribe", |b, s| {
            b.switchyard_carrier0_1_0_protocol()
                .call_unsubscribe(s, id, now_ms)
        })
    }

    /// Sends a request; the reply comes back as an action.
    pub fn request(
        &mut self,
        id: u64,
        subject: &str,
        headers: &[Header],
        payload: &[u8],
        timeout_ms: u64,
        now_ms: u64,
    ) -> Result<Result<Vec<Action>, CarrierError>, CallError> {
        self.call("request", |b, s| {
            b.switchyard_carrier0_1_0_protocol()
                .call_request(s, id, subject, headers, payload, timeout_ms, now_ms)
        })
    }

    fn call<T>(
        &mut self,
        function: &'static str,
        f: impl FnOnce(&Carrier, &mut Store<SandboxState>) -> wasmtime::Result<T>,
    ) -> Result<T, CallError> {
        self.instance.call(function, f)
    }
}
