//! A tunnel session plugin: one stateful instance per websocket session,
//! called by the host's session driver for every incoming message, every
//! stream operation and the keepalive tick. Stream bodies stay in the host
//! (see the `body-rule` in `wit/deps/carrier@0.1.0/tunnel.wit`).

use std::sync::Arc;

use wasmtime::Store;

use crate::bindings::tunnel::exports::switchyard::carrier::session;
use crate::bindings::tunnel::{Tunnel, TunnelPre};
use crate::engine::Runtime;
use crate::error::{CallError, LoadError};
use crate::inspect::PluginKind;
use crate::policy::compile;
use crate::sandbox::{SandboxState, tunnel_linker};
use crate::stateful::Stateful;

pub use session::{BodySplit, Event, Lane, Refusal, Side, Step};

/// What is needed to load the tunnel plugin.
#[derive(Debug, Clone)]
pub struct TunnelSource<'a> {
    /// Plugin name.
    pub name: &'a str,
    /// Plugin version.
    pub version: &'a str,
    /// The component bytes.
    pub bytes: &'a [u8],
    /// The SHA-256 the bytes must have (hex).
    pub sha256: &'a str,
}

/// One session's multiplexer.
pub struct TunnelPlugin {
    instance: Stateful<Tunnel>,
    body_rule: BodySplit,
}

impl std::fmt::Debug for TunnelPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TunnelPlugin")
            .field("plugin", self.instance.label())
            .finish()
    }
}

/// A call's outcome: the plugin's own refusal inside, a trap outside.
pub type Answer<T> = Result<Result<T, String>, CallError>;

impl TunnelPlugin {
    /// Verifies, compiles (or takes from the cache), instantiates and starts
    /// one side of a session; returns the plugin and its first step (HELLO).
    pub fn load(
        runtime: &Arc<Runtime>,
        source: TunnelSource<'_>,
        side: Side,
        lane: Lane,
        now_ms: u64,
    ) -> Result<(Self, Step), LoadError> {
        let (component, _) = compile(
            runtime,
            source.name,
            source.version,
            source.bytes,
            source.sha256,
            PluginKind::Tunnel,
            "a tunnel",
        )?;
        let linker =
            tunnel_linker(&runtime.engine).map_err(|e| LoadError::Compile(e.to_string()))?;
        let pre = linker
            .instantiate_pre(&component)
            .and_then(TunnelPre::new)
            .map_err(|e| LoadError::Compile(format!("{e:#}")))?;
        let label: Arc<str> = format!("{}@{}", source.name, source.version).into();
        let instance = Stateful::new(runtime, label, |store| pre.instantiate(store))?;
        let mut plugin = Self {
            instance,
            body_rule: BodySplit {
                kind_offset: 0,
                kind: 0,
                header_len: 0,
            },
        };
        let step = plugin.call(|b, s| {
            b.switchyard_carrier_session()
                .call_start(s, side, lane, now_ms)
        })?;
        plugin.body_rule = plugin.call(|b, s| b.switchyard_carrier_session().call_body_rule(s))?;
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
        self.call(|b, s| {
            b.switchyard_carrier_session()
                .call_frame(s, header, body_len, now_ms)
        })
    }

    /// The keepalive tick.
    pub fn tick(&mut self, now_ms: u64) -> Result<Step, CallError> {
        self.call(|b, s| b.switchyard_carrier_session().call_tick(s, now_ms))
    }

    /// When to tick next.
    pub fn next_tick(&mut self) -> Result<Option<u64>, CallError> {
        self.call(|b, s| b.switchyard_carrier_session().call_next_tick(s))
    }

    /// Opens a stream to the peer's `service`.
    pub fn open(&mut self, service: &str) -> Answer<(u32, Step)> {
        self.call(|b, s| b.switchyard_carrier_session().call_open(s, service))
    }

    /// Accepts a stream the peer opened.
    pub fn accept(&mut self, stream: u32) -> Answer<Step> {
        self.call(|b, s| b.switchyard_carrier_session().call_accept(s, stream))
    }

    /// Refuses a stream the peer opened.
    pub fn refuse(&mut self, stream: u32, refusal: &Refusal) -> Answer<Step> {
        self.call(|b, s| {
            b.switchyard_carrier_session()
                .call_refuse(s, stream, refusal)
        })
    }

    /// Reserves credit for one data message: its header and the granted length.
    pub fn send(&mut self, stream: u32, len: u32) -> Answer<(Vec<u8>, u32)> {
        self.call(|b, s| b.switchyard_carrier_session().call_send(s, stream, len))
    }

    /// The application took `n` delivered bytes.
    pub fn consumed(&mut self, stream: u32, n: u32) -> Answer<Step> {
        self.call(|b, s| b.switchyard_carrier_session().call_consumed(s, stream, n))
    }

    /// Half-close.
    pub fn finish(&mut self, stream: u32) -> Answer<Step> {
        self.call(|b, s| b.switchyard_carrier_session().call_finish(s, stream))
    }

    /// Abandons a stream.
    pub fn reset(&mut self, stream: u32) -> Answer<Step> {
        self.call(|b, s| b.switchyard_carrier_session().call_reset(s, stream))
    }

    fn call<T>(
        &mut self,
        f: impl FnOnce(&Tunnel, &mut Store<SandboxState>) -> wasmtime::Result<T>,
    ) -> Result<T, CallError> {
        self.instance.call(f)
    }
}
