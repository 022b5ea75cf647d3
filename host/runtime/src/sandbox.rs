//! The state of one plugin store: a memory limiter, WASI with an empty
//! context (clocks and random only: no files, no environment, no network),
//! and the host imports every plugin kind gets (log, clock).

use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use wasmtime::ResourceLimiter;
use wasmtime::component::{HasSelf, Linker, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::CallError;
use crate::bindings::LogLevel;
use crate::bindings::policy::switchyard::plugin::{clock, log, types};

/// Longest log line a plugin may write; the rest is cut so a plugin cannot flood the logs.
const MAX_LOG_LINE: usize = 1024;

/// Per-store state.
pub struct SandboxState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limiter: MemoryCap,
    /// `name@version`, tagged on every log line the plugin writes.
    plugin: Arc<str>,
    started: Instant,
}

impl SandboxState {
    pub(crate) fn new(plugin: Arc<str>, memory_limit_bytes: usize) -> Self {
        Self {
            wasi: WasiCtx::builder().build(),
            table: ResourceTable::new(),
            limiter: MemoryCap {
                limit: memory_limit_bytes,
                hit: false,
            },
            plugin,
            started: Instant::now(),
        }
    }
}

/// Caps linear memory; remembers a refused growth so that the guest's
/// allocation-failure trap is reported as a memory limit, not a bug.
pub(crate) struct MemoryCap {
    limit: usize,
    pub(crate) hit: bool,
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let allowed = desired <= self.limit;
        self.hit |= !allowed;
        Ok(allowed)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // Tables hold function references; 100k entries is far beyond any real plugin.
        Ok(desired <= 100_000)
    }
}

impl WasiView for SandboxState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl types::Host for SandboxState {}

impl crate::bindings::policy_types::Host for SandboxState {}

impl crate::bindings::carrier::switchyard::carrier::types::Host for SandboxState {}

impl log::Host for SandboxState {
    fn log(&mut self, level: LogLevel, message: String) {
        let mut message = message;
        if message.len() > MAX_LOG_LINE {
            let mut cut = MAX_LOG_LINE;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
        }
        let plugin = &*self.plugin;
        match level {
            LogLevel::Trace => tracing::trace!(plugin, "{message}"),
            LogLevel::Debug => tracing::debug!(plugin, "{message}"),
            LogLevel::Info => tracing::info!(plugin, "{message}"),
            LogLevel::Warn => tracing::warn!(plugin, "{message}"),
            LogLevel::Error => tracing::error!(plugin, "{message}"),
        }
    }
}

impl clock::Host for SandboxState {
    fn now_unix_ms(&mut self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    }

    fn monotonic_ns(&mut self) -> u64 {
        self.started.elapsed().as_nanos() as u64
    }
}

/// A linker with WASI p2 (empty context); each kind adds its world's imports.
pub(crate) fn base_linker(engine: &wasmtime::Engine) -> wasmtime::Result<Linker<SandboxState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
    Ok(linker)
}

/// The linker of admission policies.
pub(crate) fn policy_linker(engine: &wasmtime::Engine) -> wasmtime::Result<Linker<SandboxState>> {
    let mut linker = base_linker(engine)?;
    crate::bindings::policy::AdmissionPolicy::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)?;
    Ok(linker)
}

/// The linker of carriers.
pub(crate) fn carrier_linker(engine: &wasmtime::Engine) -> wasmtime::Result<Linker<SandboxState>> {
    let mut linker = base_linker(engine)?;
    crate::bindings::carrier::Carrier::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)?;
    Ok(linker)
}

/// The linker of tunnel sessions.
pub(crate) fn tunnel_linker(engine: &wasmtime::Engine) -> wasmtime::Result<Linker<SandboxState>> {
    let mut linker = base_linker(engine)?;
    crate::bindings::tunnel::Tunnel::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)?;
    Ok(linker)
}

/// Arms a store for one call: the wall-clock deadline, and fuel when metered.
pub(crate) fn arm(runtime: &crate::Runtime, store: &mut wasmtime::Store<SandboxState>) {
    store.set_epoch_deadline(runtime.deadline_ticks());
    if let Some(fuel) = runtime.config.fuel_per_call {
        // Fuel is enabled on the engine exactly when `fuel_per_call` is set.
        let _ = store.set_fuel(fuel);
    }
}

/// Maps a wasmtime error to what the operator should read.
pub(crate) fn classify(
    error: wasmtime::Error,
    store: &wasmtime::Store<SandboxState>,
    runtime: &crate::Runtime,
) -> CallError {
    if store.data().limiter.hit {
        return CallError::MemoryLimit(runtime.config.memory_limit_bytes);
    }
    match error.downcast_ref::<wasmtime::Trap>() {
        Some(wasmtime::Trap::Interrupt) => {
            CallError::Timeout(runtime.config.call_deadline.as_millis() as u64)
        }
        Some(wasmtime::Trap::OutOfFuel) => CallError::FuelExhausted,
        Some(trap) => CallError::Trap(trap.to_string()),
        None => CallError::Trap(format!("{error:#}")),
    }
}
