//! A tunnel session plugin: one stateful instance per websocket session,
//! called by the host's session driver for every incoming message, every
//! stream operation and the keepalive tick. Stream bodies stay in the host
//! (see the `body-rule` in `wit/deps/carrier@0.2.0/tunnel.wit`).
//!
//! Components of `switchyard:carrier/tunnel@0.2.0` and of 0.1.0 both load:
//! the version comes from the component's exports, and a 0.1.0 session's
//! answers are turned into 0.2.0's in one place, [`v0_1`].

use std::sync::Arc;

use wasmtime::Store;

use crate::bindings::tunnel::Tunnel;
use crate::bindings::tunnel::exports::switchyard::carrier0_2_0::session;
use crate::bindings::tunnel_v0_1::Tunnel as TunnelV0_1;
use crate::engine::Runtime;
use crate::error::{CallError, LoadError};
use crate::inspect::{PluginKind, TUNNEL_WORLD_V0_1};
use crate::instance::Instance;
use crate::loader::{ComponentSource, TunnelWorld, TunnelWorldV0_1, compile};
use crate::sandbox::SandboxState;

mod v0_1;

pub use session::{BodySplit, Event, Lane, Refusal, Side, Step};

/// One session's multiplexer.
#[derive(Debug)]
pub struct TunnelPlugin {
    instance: Instance<Exports>,
    body_rule: BodySplit,
}

/// A call's outcome: the plugin's own refusal inside, a trap outside.
pub type Answer<T> = Result<Result<T, String>, CallError>;

/// The session interface of either version, answering in 0.2.0's types.
enum Exports {
    Current(Tunnel),
    V0_1(TunnelV0_1),
}

impl TunnelPlugin {
    /// Verifies, compiles (or takes from the cache), instantiates and starts
    /// one side of a session; returns the plugin and its first step (HELLO).
    pub fn load(
        runtime: &Arc<Runtime>,
        source: ComponentSource<'_>,
        side: Side,
        lane: Lane,
        now_ms: u64,
    ) -> Result<(Self, Step), LoadError> {
        let compiled = compile(runtime, source, PluginKind::Tunnel)?;
        let instance = if compiled.info.world == TUNNEL_WORLD_V0_1 {
            let prepared = compiled.link::<TunnelWorldV0_1>(runtime, false)?;
            prepared.instance()?.map(Exports::V0_1)
        } else {
            let prepared = compiled.link::<TunnelWorld>(runtime, false)?;
            prepared.instance()?.map(Exports::Current)
        };
        let mut plugin = Self {
            instance,
            body_rule: BodySplit {
                kind_offset: 0,
                kind: 0,
                header_len: 0,
            },
        };
        let step = plugin.call("start", |b, s| match b {
            Exports::Current(b) => b
                .switchyard_carrier0_2_0_session()
                .call_start(s, side, lane, now_ms),
            Exports::V0_1(b) => v0_1::start(b, s, side, lane, now_ms),
        })?;
        plugin.body_rule = plugin.call("body-rule", |b, s| match b {
            Exports::Current(b) => b.switchyard_carrier0_2_0_session().call_body_rule(s),
            Exports::V0_1(b) => v0_1::body_rule(b, s),
        })?;
        Ok((plugin, step))
    }

    /// `name@version`.
    pub fn label(&self) -> &Arc<str> {
        self.instance.label()
    }

    /// Where an incoming message's body starts, if it has one the host keeps.
    pub fn body_offset(&self, message: &[u8]) -> Option<usize> {
        let rule = &self.body_rule;
        let header = rule.header_len as usize;
        (message.get(rule.kind_offset as usize) == Some(&rule.kind) && message.len() >= header)
            .then_some(header)
    }

    /// One incoming message: its header and the length of the kept body.
    pub fn frame(&mut self, header: &[u8], body_len: u32, now_ms: u64) -> Answer<Step> {
        self.call("frame", |b, s| match b {
            Exports::Current(b) => b
                .switchyard_carrier0_2_0_session()
                .call_frame(s, header, body_len, now_ms),
            Exports::V0_1(b) => v0_1::frame(b, s, header, body_len, now_ms),
        })
    }

    /// The keepalive tick.
    pub fn tick(&mut self, now_ms: u64) -> Result<Step, CallError> {
        self.call("tick", |b, s| match b {
            Exports::Current(b) => b.switchyard_carrier0_2_0_session().call_tick(s, now_ms),
            Exports::V0_1(b) => v0_1::tick(b, s, now_ms),
        })
    }

    /// When to tick next.
    pub fn next_tick(&mut self) -> Result<Option<u64>, CallError> {
        self.call("next-tick", |b, s| match b {
            Exports::Current(b) => b.switchyard_carrier0_2_0_session().call_next_tick(s),
            Exports::V0_1(b) => b.switchyard_carrier0_1_0_session().call_next_tick(s),
        })
    }

    /// Opens a stream to the peer's `service`; a refusal says why not.
    pub fn open(&mut self, service: &str) -> Result<Result<(u32, Step), Refusal>, CallError> {
        self.call("open", |b, s| match b {
            Exports::Current(b) => b.switchyard_carrier0_2_0_session().call_open(s, service),
            Exports::V0_1(b) => v0_1::open(b, s, service),
        })
    }

    /// Accepts a stream the peer opened.
    pub fn accept(&mut self, stream: u32) -> Answer<Step> {
        self.call("accept", |b, s| match b {
            Exports::Current(b) => b.switchyard_carrier0_2_0_session().call_accept(s, stream),
            Exports::V0_1(b) => {
                v0_1::steps(b.switchyard_carrier0_1_0_session().call_accept(s, stream))
            }
        })
    }

    /// Refuses a stream the peer opened.
    pub fn refuse(&mut self, stream: u32, refusal: &Refusal) -> Answer<Step> {
        self.call("refuse", |b, s| match b {
            Exports::Current(b) => b
                .switchyard_carrier0_2_0_session()
                .call_refuse(s, stream, refusal),
            Exports::V0_1(b) => v0_1::refuse(b, s, stream, refusal),
        })
    }

    /// Reserves credit for one data message: its header and the granted length.
    pub fn send(&mut self, stream: u32, len: u32) -> Answer<(Vec<u8>, u32)> {
        self.call("send", |b, s| match b {
            Exports::Current(b) => b
                .switchyard_carrier0_2_0_session()
                .call_send(s, stream, len),
            Exports::V0_1(b) => b
                .switchyard_carrier0_1_0_session()
                .call_send(s, stream, len),
        })
    }

    /// The application took `n` delivered bytes.
    pub fn consumed(&mut self, stream: u32, n: u32) -> Answer<Step> {
        self.call("consumed", |b, s| match b {
            Exports::Current(b) => b
                .switchyard_carrier0_2_0_session()
                .call_consumed(s, stream, n),
            Exports::V0_1(b) => v0_1::steps(
                b.switchyard_carrier0_1_0_session()
                    .call_consumed(s, stream, n),
            ),
        })
    }

    /// Half-close.
    pub fn finish(&mut self, stream: u32) -> Answer<Step> {
        self.call("finish", |b, s| match b {
            Exports::Current(b) => b.switchyard_carrier0_2_0_session().call_finish(s, stream),
            Exports::V0_1(b) => {
                v0_1::steps(b.switchyard_carrier0_1_0_session().call_finish(s, stream))
            }
        })
    }

    /// Abandons a stream.
    pub fn reset(&mut self, stream: u32) -> Answer<Step> {
        self.call("reset", |b, s| match b {
            Exports::Current(b) => b.switchyard_carrier0_2_0_session().call_reset(s, stream),
            Exports::V0_1(b) => {
                v0_1::steps(b.switchyard_carrier0_1_0_session().call_reset(s, stream))
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
