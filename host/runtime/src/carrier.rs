//! A carrier plugin: one stateful instance (a protocol engine holds
//! connection state), called by the host's reactor for every event and
//! operation. A call that traps poisons the instance; the reactor rebuilds
//! the carrier from its source, which reconnects.
//!
//! Components of `switchyard:carrier/carrier@0.4.0`, 0.3.0 and 0.1.0 all
//! load: the version comes from the component's exports. 0.4.0 uses 0.3.0's
//! types and changes two functions (`received` may answer spans,
//! `publish-batch` takes a [`PackedBatch`]), adapted for 0.3.0 in [`v0_3`].
//! A 0.1.0 carrier's types are turned into 0.3.0's in one place, [`v0_1`]:
//! it takes every payload inline and parses every byte it is handed (its
//! [`PayloadRules`] say so), so the host never holds a payload for it.

use std::sync::Arc;

use wasmtime::Store;

use crate::bindings::carrier::Carrier;
use crate::bindings::carrier::switchyard::carrier0_3_0::types;
use crate::bindings::carrier::switchyard::carrier0_4_0::types as packed_types;
use crate::bindings::carrier_v0_1::Carrier as CarrierV0_1;
use crate::bindings::carrier_v0_3::Carrier as CarrierV0_3;
use crate::engine::Runtime;
use crate::error::{CallError, LoadError};
use crate::inspect::{CARRIER_WORLD_V0_1, CARRIER_WORLD_V0_3, PluginKind};
use crate::instance::Instance;
use crate::loader::{CarrierWorld, CarrierWorldV0_1, CarrierWorldV0_3, ComponentSource, compile};
use crate::sandbox::SandboxState;

mod packed;
mod v0_1;
mod v0_3;

use packed::Answers;
pub use packed::PackedBatch;
pub use packed_types::{Intake, PackedOutgoing, PackedPayload, Refusal, Span, SpannedDelivery};
pub use types::{
    Action, Body, BodyClaim, CarrierError, Cell, Delivery, Endpoint, Header, Notification,
    Outgoing, Param, Payload, PayloadRef, PayloadRules, Query, Reply, Segment,
};

/// A batch publish's answer: one result per message, in order, and the
/// actions of all of them.
pub type BatchAnswer = (Vec<Result<(), CarrierError>>, Vec<Action>);

/// One result row: each column's cell, or none for NULL.
pub type Row = Vec<Option<Cell>>;

/// The smallest `peek` the host honours: a plugin must at least see a
/// protocol line's start to claim the body after it.
pub const MIN_PEEK: u32 = 64;

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
    instance: Instance<Exports>,
    endpoints: Vec<Endpoint>,
    max_payload: u64,
    rules: PayloadRules,
}

/// The protocol interface of any served version, answering in 0.4.0's types.
enum Exports {
    Current(Carrier),
    V0_3(CarrierV0_3),
    V0_1(CarrierV0_1),
}

/// Calls `$call` on the 0.4.0 protocol or the 0.3.0 one (a function whose
/// types did not change), or the same function of the 0.1.0 adapter, with
/// the same arguments.
macro_rules! either {
    ($b:expr, $s:expr, $call:ident ( $($arg:expr),* ), $old:ident) => {
        match $b {
            Exports::Current(b) => b.switchyard_carrier0_4_0_protocol().$call($s, $($arg),*),
            Exports::V0_3(b) => b.switchyard_carrier0_3_0_protocol().$call($s, $($arg),*),
            Exports::V0_1(b) => v0_1::$old(b, $s, $($arg),*),
        }
    };
}

impl CarrierPlugin {
    /// Verifies, compiles (or takes from the cache), instantiates and
    /// configures; returns the plugin and its first actions.
    pub fn load(
        runtime: &Arc<Runtime>,
        source: CarrierSource<'_>,
        now_ms: u64,
    ) -> Result<(Self, Vec<Action>), LoadError> {
        let compiled = compile(runtime, source.component, PluginKind::Carrier)?;
        let instance = if compiled.info.world == CARRIER_WORLD_V0_1 {
            let prepared = compiled.link::<CarrierWorldV0_1>(runtime, false)?;
            prepared.instance()?.map(Exports::V0_1)
        } else if compiled.info.world == CARRIER_WORLD_V0_3 {
            let prepared = compiled.link::<CarrierWorldV0_3>(runtime, false)?;
            prepared.instance()?.map(Exports::V0_3)
        } else {
            let prepared = compiled.link::<CarrierWorld>(runtime, false)?;
            prepared.instance()?.map(Exports::Current)
        };
        let mut plugin = Self {
            instance,
            endpoints: Vec::new(),
            max_payload: 0,
            rules: v0_1::RULES,
        };
        let actions = plugin
            .call("configure", |b, s| {
                either!(
                    b,
                    s,
                    call_configure(source.config, source.seed, now_ms),
                    configure
                )
            })?
            .map_err(LoadError::InvalidSettings)?;
        let rules = plugin.call("rules", |b, s| match b {
            Exports::Current(b) => b.switchyard_carrier0_4_0_protocol().call_rules(s),
            Exports::V0_3(b) => b.switchyard_carrier0_3_0_protocol().call_rules(s),
            Exports::V0_1(_) => Ok(v0_1::RULES),
        })?;
        plugin.rules = PayloadRules {
            inline_below: rules.inline_below,
            peek: rules.peek.max(MIN_PEEK),
        };
        plugin.endpoints = plugin.call("endpoints", |b, s| match b {
            Exports::Current(b) => b.switchyard_carrier0_4_0_protocol().call_endpoints(s),
            Exports::V0_3(b) => b.switchyard_carrier0_3_0_protocol().call_endpoints(s),
            Exports::V0_1(b) => v0_1::endpoints(b, s),
        })?;
        plugin.max_payload()?;
        Ok((plugin, actions))
    }

    /// `name@version`.
    pub fn label(&self) -> &Arc<str> {
        self.instance.label()
    }

    /// How the plugin wants payloads moved (a 0.1.0 carrier: everything inline).
    pub fn rules(&self) -> &PayloadRules {
        &self.rules
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
        self.max_payload = self.call("max-payload", |b, s| match b {
            Exports::Current(b) => b.switchyard_carrier0_4_0_protocol().call_max_payload(s),
            Exports::V0_3(b) => b.switchyard_carrier0_3_0_protocol().call_max_payload(s),
            Exports::V0_1(b) => b.switchyard_carrier0_1_0_protocol().call_max_payload(s),
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
            either!(b, s, call_opened(handle, now_ms), opened)
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
            either!(b, s, call_closed(handle, reason, now_ms), closed)
        })
    }

    /// Bytes arrived on a connection (at most `rules().peek` of them).
    /// Spanned deliveries of the answer are spans of `data`.
    pub fn received(&mut self, handle: u64, data: &[u8], now_ms: u64) -> Result<Intake, CallError> {
        self.call("received", |b, s| match b {
            Exports::Current(b) => b
                .switchyard_carrier0_4_0_protocol()
                .call_received(s, handle, data, now_ms),
            Exports::V0_3(b) => v0_3::received(b, s, handle, data, now_ms),
            Exports::V0_1(b) => v0_1::received(b, s, handle, data, now_ms),
        })
    }

    /// The timer fired.
    pub fn timer(&mut self, now_ms: u64) -> Result<Vec<Action>, CallError> {
        self.call("timer", |b, s| either!(b, s, call_timer(now_ms), timer))
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
            either!(
                b,
                s,
                call_notified(handle, notifications, dropped, now_ms),
                notified
            )
        })
    }

    /// A query's answer: rows of cells, or the database's error.
    pub fn answered(
        &mut self,
        query: u64,
        outcome: Result<Vec<Row>, String>,
        now_ms: u64,
    ) -> Result<Vec<Action>, CallError> {
        self.call("answered", |b, s| match b {
            Exports::Current(b) => {
                let outcome = outcome.as_ref().map(Vec::as_slice).map_err(String::as_str);
                b.switchyard_carrier0_4_0_protocol()
                    .call_answered(s, query, outcome, now_ms)
            }
            Exports::V0_3(b) => {
                let outcome = outcome.as_ref().map(Vec::as_slice).map_err(String::as_str);
                b.switchyard_carrier0_3_0_protocol()
                    .call_answered(s, query, outcome, now_ms)
            }
            // Taken by value: a 0.1.0 carrier's rows are moved, not copied.
            Exports::V0_1(b) => v0_1::answered(b, s, query, outcome, now_ms),
        })
    }

    /// Publishes a message.
    pub fn publish(
        &mut self,
        subject: &str,
        reply_to: Option<&str>,
        headers: &[Header],
        payload: &Payload,
        now_ms: u64,
    ) -> Result<Result<Vec<Action>, CarrierError>, CallError> {
        self.call("publish", |b, s| {
            either!(
                b,
                s,
                call_publish(subject, reply_to, headers, payload, now_ms),
                publish
            )
        })
    }

    /// Publishes several messages in one call; one answer per message, in order.
    pub fn publish_batch(
        &mut self,
        batch: &PackedBatch,
        now_ms: u64,
    ) -> Result<BatchAnswer, CallError> {
        let (answers, actions) = self.call("publish-batch", |b, s| match b {
            Exports::Current(b) => {
                let (data, messages) = batch.parts();
                b.switchyard_carrier0_4_0_protocol()
                    .call_publish_batch(s, data, messages, now_ms)
                    .map(|(refused, actions)| (Answers::Refused(refused), actions))
            }
            Exports::V0_3(b) => b
                .switchyard_carrier0_3_0_protocol()
                .call_publish_batch(s, &batch.unpack(), now_ms)
                .map(|(each, actions)| (Answers::Each(each), actions)),
            // Taken by value: a 0.1.0 carrier's inline payloads are moved, not copied.
            Exports::V0_1(b) => v0_1::publish_batch(b, s, batch.unpack(), now_ms)
                .map(|(each, actions)| (Answers::Each(each), actions)),
        })?;
        Ok((answers.per_message(batch.len())?, actions))
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
            either!(
                b,
                s,
                call_subscribe(id, subject, queue_group, now_ms),
                subscribe
            )
        })
    }

    /// Removes a subscription.
    pub fn unsubscribe(&mut self, id: u64, now_ms: u64) -> Result<Vec<Action>, CallError> {
        self.call("unsubscribe", |b, s| {
            either!(b, s, call_unsubscribe(id, now_ms), unsubscribe)
        })
    }

    /// Sends a request; the reply comes back as an action (or a claimed body).
    pub fn request(
        &mut self,
        id: u64,
        subject: &str,
        headers: &[Header],
        payload: &Payload,
        timeout_ms: u64,
        now_ms: u64,
    ) -> Result<Result<Vec<Action>, CarrierError>, CallError> {
        self.call("request", |b, s| match b {
            Exports::Current(b) => b
                .switchyard_carrier0_4_0_protocol()
                .call_request(s, id, subject, headers, payload, timeout_ms, now_ms),
            Exports::V0_3(b) => b
                .switchyard_carrier0_3_0_protocol()
                .call_request(s, id, subject, headers, payload, timeout_ms, now_ms),
            Exports::V0_1(b) => {
                let headers = v0_1::old_headers(headers);
                let payload = v0_1::inline(payload)?;
                let answer = v0_1::protocol(b)
                    .call_request(s, id, subject, &headers, payload, timeout_ms, now_ms)?;
                Ok(v0_1::operation(answer))
            }
        })
    }

    fn call<T>(
        &mut self,
        function: &'static str,
        f: impl FnOnce(&Exports, &mut Store<SandboxState>) -> wasmtime::Result<T>,
    ) -> Result<T, CallError> {
        self.instance.call(function, f)
    }
}
