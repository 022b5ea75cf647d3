//! The state of one plugin store: a memory limiter, WASI with an empty
//! context (clocks and random only: no files, no environment, no network),
//! and the host imports every plugin kind gets (log, clock).
//!
//! A call's deadline is enforced twice: epoch interruption stops wasm code,
//! and WASI's blocking `wasi:io/poll` (a sleep, a wait on a clock) is replaced
//! by one that returns at the deadline with a trap, since epoch interruption
//! cannot stop a guest parked in a host call.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use wasmtime::ResourceLimiter;
use wasmtime::component::{HasData, Linker, Resource, ResourceTable};
use wasmtime_wasi::p2::DynPollable;
use wasmtime_wasi::p2::bindings::io::poll as async_poll;
use wasmtime_wasi::p2::bindings::sync::io::poll as sync_poll;
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
    /// When the current call must end; set by [`arm`] before every call.
    deadline: Instant,
    /// The host's usage counters (`switchyard:policy/usage`).
    pub(crate) usage: Arc<crate::usage::UsageSlot>,
    /// Counts this store among its runtime's live instances while it lives.
    _live: LiveInstance,
}

/// One live store of a runtime, counted in [`crate::Runtime::live_instances`].
struct LiveInstance(Arc<AtomicU64>);

impl Drop for LiveInstance {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl SandboxState {
    pub(crate) fn new(plugin: Arc<str>, runtime: &crate::Runtime) -> Self {
        let memory_limit_bytes = runtime.config.memory_limit_bytes;
        runtime.live.fetch_add(1, Ordering::Relaxed);
        Self {
            wasi: WasiCtx::builder().build(),
            table: ResourceTable::new(),
            limiter: MemoryCap {
                limit: memory_limit_bytes,
                hit: false,
            },
            plugin,
            started: Instant::now(),
            // Nothing may block before the first `arm`.
            deadline: Instant::now(),
            usage: runtime.usage.clone(),
            _live: LiveInstance(runtime.live.clone()),
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

impl crate::bindings::policy_types_v0_2::Host for SandboxState {}

impl crate::bindings::grant::switchyard::grant::types::Host for SandboxState {}

impl crate::bindings::carrier_v0_1::switchyard::carrier0_1_0::types::Host for SandboxState {}

impl crate::bindings::carrier::switchyard::carrier0_3_0::types::Host for SandboxState {}
impl crate::bindings::carrier::switchyard::carrier0_4_0::types::Host for SandboxState {}

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

/// A blocking WASI wait (`poll`, `pollable.block`) reached the call's
/// deadline. Returned from the host call, it traps the guest; [`classify`]
/// reports it as the call's timeout, like an epoch interrupt.
#[derive(Debug, thiserror::Error)]
#[error("a blocking WASI wait reached the call deadline")]
pub(crate) struct WaitDeadline;

/// `wasi:io/poll` bounded by the current call's deadline.
///
/// wasmtime-wasi's synchronous poll parks the thread in the host until a
/// pollable is ready: a guest sleeping on a clock subscription would hold
/// the caller for as long as it asks, whatever the epoch deadline. Trusted
/// hosts do the same as this: Spin and wasmtime-serve race every guest call
/// against a host timer (there by dropping the async call); here the wait
/// itself races the deadline, and losing traps, so the store is poisoned and
/// dropped exactly as after an epoch interrupt.
pub(crate) struct BoundedPoll<'a> {
    table: &'a mut ResourceTable,
    deadline: Instant,
}

struct HasBoundedPoll;

impl HasData for HasBoundedPoll {
    type Data<'a> = BoundedPoll<'a>;
}

impl BoundedPoll<'_> {
    /// Runs a wait until it ends or the deadline comes, whichever is first.
    fn bounded<T>(
        deadline: Instant,
        wait: impl Future<Output = wasmtime::Result<T>>,
    ) -> wasmtime::Result<T> {
        wasmtime_wasi::runtime::in_tokio(async move {
            match tokio::time::timeout_at(deadline.into(), wait).await {
                Ok(result) => result,
                Err(_) => Err(wasmtime::Error::new(WaitDeadline)),
            }
        })
    }
}

impl sync_poll::Host for BoundedPoll<'_> {
    fn poll(&mut self, pollables: Vec<Resource<DynPollable>>) -> wasmtime::Result<Vec<u32>> {
        let deadline = self.deadline;
        Self::bounded(
            deadline,
            async_poll::Host::poll(&mut *self.table, pollables),
        )
    }
}

impl sync_poll::HostPollable for BoundedPoll<'_> {
    fn ready(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<bool> {
        // Does not wait: polls the pollable once.
        sync_poll::HostPollable::ready(&mut *self.table, pollable)
    }

    fn block(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<()> {
        let deadline = self.deadline;
        Self::bounded(
            deadline,
            async_poll::HostPollable::block(&mut *self.table, pollable),
        )
    }

    fn drop(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<()> {
        sync_poll::HostPollable::drop(&mut *self.table, pollable)
    }
}

/// A linker with WASI p2 (empty context); each kind adds its world's imports.
///
/// Every WASI p2 interface stays linked (components built from Python or
/// JavaScript import ~25 of them, see DESIGN.md); only `wasi:io/poll` is
/// replaced, by [`BoundedPoll`].
pub(crate) fn base_linker(engine: &wasmtime::Engine) -> wasmtime::Result<Linker<SandboxState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
    linker.allow_shadowing(true);
    sync_poll::add_to_linker::<SandboxState, HasBoundedPoll>(&mut linker, |s| BoundedPoll {
        table: &mut s.table,
        deadline: s.deadline,
    })?;
    linker.allow_shadowing(false);
    Ok(linker)
}

/// Arms a store for one call: the wall-clock deadline, and fuel when metered.
pub(crate) fn arm(runtime: &crate::Runtime, store: &mut wasmtime::Store<SandboxState>) {
    runtime.ticker.wake();
    store.set_epoch_deadline(runtime.deadline_ticks());
    store.data_mut().deadline = deadline_from_now(runtime.config.call_deadline);
    if let Some(fuel) = runtime.config.fuel_per_call {
        // Fuel is enabled on the engine exactly when `fuel_per_call` is set.
        let _ = store.set_fuel(fuel);
    }
}

/// `now + call_deadline`, saturating for deadlines too far to represent.
fn deadline_from_now(call_deadline: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(call_deadline)
        .unwrap_or_else(|| now + Duration::from_secs(86_400 * 365))
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
    if error.downcast_ref::<WaitDeadline>().is_some() {
        return CallError::Timeout(runtime.config.call_deadline.as_millis() as u64);
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
