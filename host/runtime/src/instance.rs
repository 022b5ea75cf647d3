//! One plugin instance in its own store: a policy's pooled instance, a
//! carrier's protocol engine, a tunnel session. Every call is armed (the
//! deadline, fuel), timed, traced and, where the plugin has metrics,
//! counted. A call that traps, runs past its deadline or hits the memory
//! cap poisons the instance: a trapped store cannot be entered again, so
//! every later call fails with the same error and the owner drops it (a
//! pool) or rebuilds (a carrier, a session).

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::Store;

use crate::engine::Runtime;
use crate::error::{CallError, LoadError};
use crate::metrics::PluginMetrics;
use crate::sandbox::{SandboxState, arm, classify};

/// Which plugin an instance is: the two halves for spans, the label for logs.
#[derive(Debug)]
pub(crate) struct PluginId {
    pub(crate) name: Box<str>,
    pub(crate) version: Box<str>,
    /// `name@version`.
    pub(crate) label: Arc<str>,
}

impl PluginId {
    pub(crate) fn new(name: &str, version: &str) -> Self {
        Self {
            name: name.into(),
            version: version.into(),
            label: format!("{name}@{version}").into(),
        }
    }
}

/// One instance and its store.
pub(crate) struct Instance<B> {
    runtime: Arc<Runtime>,
    store: Store<SandboxState>,
    bindings: B,
    id: Arc<PluginId>,
    metrics: Option<Arc<PluginMetrics>>,
    poisoned: Option<CallError>,
}

impl<B> std::fmt::Debug for Instance<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Instance")
            .field("plugin", &self.id.label)
            .field("poisoned", &self.poisoned)
            .finish()
    }
}

impl<B> Instance<B> {
    /// A fresh store (memory cap, deadline armed) and the instance
    /// `instantiate` makes in it.
    pub(crate) fn new(
        runtime: &Arc<Runtime>,
        id: Arc<PluginId>,
        metrics: Option<Arc<PluginMetrics>>,
        instantiate: impl FnOnce(&mut Store<SandboxState>) -> wasmtime::Result<B>,
    ) -> Result<Self, LoadError> {
        let mut store = Store::new(
            &runtime.engine,
            SandboxState::new(id.label.clone(), runtime),
        );
        store.limiter(|s| &mut s.limiter);
        // The deadline must be set before instantiating: it defaults to "now".
        arm(runtime, &mut store);
        let bindings = instantiate(&mut store)
            .map_err(|e| LoadError::Instantiate(classify(e, &store, runtime)))?;
        Ok(Self {
            runtime: runtime.clone(),
            store,
            bindings,
            id,
            metrics,
            poisoned: None,
        })
    }

    /// The same instance behind other bindings (one of a world's versions
    /// behind an enum of them).
    pub(crate) fn map<C>(self, f: impl FnOnce(B) -> C) -> Instance<C> {
        Instance {
            runtime: self.runtime,
            store: self.store,
            bindings: f(self.bindings),
            id: self.id,
            metrics: self.metrics,
            poisoned: self.poisoned,
        }
    }

    /// `name@version`.
    pub(crate) fn label(&self) -> &Arc<str> {
        &self.id.label
    }

    /// Why the instance can no longer be called, if it cannot.
    pub(crate) fn poisoned(&self) -> Option<&CallError> {
        self.poisoned.as_ref()
    }

    /// One call of the plugin's `function`, with the deadline (and fuel) armed.
    pub(crate) fn call<T>(
        &mut self,
        function: &'static str,
        f: impl FnOnce(&B, &mut Store<SandboxState>) -> wasmtime::Result<T>,
    ) -> Result<T, CallError> {
        self.call_timed(function, f).0
    }

    /// [`Instance::call`], with the time spent in the plugin.
    pub(crate) fn call_timed<T>(
        &mut self,
        function: &'static str,
        f: impl FnOnce(&B, &mut Store<SandboxState>) -> wasmtime::Result<T>,
    ) -> (Result<T, CallError>, Duration) {
        if let Some(e) = &self.poisoned {
            return (Err(e.clone()), Duration::ZERO);
        }
        // A disabled span is one check of the callsite's interest: no
        // allocation and no formatting on the hot path (a reused instance's
        // call is about half a microsecond).
        let span = tracing::debug_span!(
            "plugin_call",
            plugin = &*self.id.name,
            version = &*self.id.version,
            function,
            outcome = tracing::field::Empty,
        );
        let _entered = span.enter();
        arm(&self.runtime, &mut self.store);
        let started = Instant::now();
        let result =
            f(&self.bindings, &mut self.store).map_err(|e| classify(e, &self.store, &self.runtime));
        let elapsed = started.elapsed();
        span.record(
            "outcome",
            match &result {
                Ok(_) => "ok",
                Err(e) => e.kind(),
            },
        );
        if let Some(metrics) = &self.metrics {
            metrics.record(elapsed, result.as_ref().map(|_| ()));
        }
        if let Err(e) = &result {
            self.poisoned = Some(e.clone());
        }
        (result, elapsed)
    }
}
