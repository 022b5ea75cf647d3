//! One long-lived instance that keeps state between calls (a carrier's
//! protocol engine, a tunnel session). A call that traps, runs past its
//! deadline or hits the memory cap poisons it: a trapped store cannot be
//! entered again, so every later call fails with the same error and the
//! owner rebuilds.

use std::sync::Arc;

use wasmtime::Store;

use crate::engine::Runtime;
use crate::error::{CallError, LoadError};
use crate::sandbox::{SandboxState, arm, classify};

pub(crate) struct Stateful<B> {
    runtime: Arc<Runtime>,
    store: Store<SandboxState>,
    bindings: B,
    label: Arc<str>,
    poisoned: Option<CallError>,
}

impl<B> Stateful<B> {
    /// A fresh store (memory cap, deadline armed) and the instance
    /// `instantiate` makes in it.
    pub(crate) fn new(
        runtime: &Arc<Runtime>,
        label: Arc<str>,
        instantiate: impl FnOnce(&mut Store<SandboxState>) -> wasmtime::Result<B>,
    ) -> Result<Self, LoadError> {
        let mut store = Store::new(&runtime.engine, SandboxState::new(label.clone(), runtime));
        store.limiter(|s| &mut s.limiter);
        arm(runtime, &mut store);
        let bindings = instantiate(&mut store)
            .map_err(|e| LoadError::Instantiate(classify(e, &store, runtime)))?;
        Ok(Self {
            runtime: runtime.clone(),
            store,
            bindings,
            label,
            poisoned: None,
        })
    }

    /// `name@version`.
    pub(crate) fn label(&self) -> &Arc<str> {
        &self.label
    }

    /// Why the instance can no longer be called, if it cannot.
    pub(crate) fn poisoned(&self) -> Option<&CallError> {
        self.poisoned.as_ref()
    }

    /// One call, with the deadline (and fuel) armed.
    pub(crate) fn call<T>(
        &mut self,
        f: impl FnOnce(&B, &mut Store<SandboxState>) -> wasmtime::Result<T>,
    ) -> Result<T, CallError> {
        if let Some(e) = &self.poisoned {
            return Err(e.clone());
        }
        arm(&self.runtime, &mut self.store);
        let result =
            f(&self.bindings, &mut self.store).map_err(|e| classify(e, &self.store, &self.runtime));
        if let Err(e) = &result {
            self.poisoned = Some(e.clone());
        }
        result
    }
}
