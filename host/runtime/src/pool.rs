//! Warm instances of a stateless plugin (an admission policy, a grant
//! evaluator): a fresh instance costs ~18 us, a reused one ~0.5 us. Each
//! fresh instance validates the binding's settings first; an instance that
//! failed a call is dropped, never reused.

use std::sync::Mutex;
use std::time::Duration;

use wasmtime::Store;

use crate::error::{CallError, LoadError};
use crate::instance::Instance;
use crate::loader::{GrantWorld, PolicyWorld, PolicyWorldV0_1, Prepared, World};
use crate::sandbox::SandboxState;

/// Warm instances kept per plugin; more concurrent callers instantiate fresh ones.
const MAX_IDLE_INSTANCES: usize = 16;

/// A world whose instances take the binding's settings before any call.
pub(crate) trait Configured: World {
    /// Calls the world's `validate-settings`.
    fn validate_settings(
        bindings: &Self::Bindings,
        store: &mut Store<SandboxState>,
        settings: &str,
    ) -> wasmtime::Result<Result<(), String>>;
}

/// Implements [`Configured`] for worlds whose exported interface (the
/// bindings' accessor) has `validate-settings`.
macro_rules! configured_worlds {
    ($($marker:ty => $interface:ident;)*) => {$(
        impl Configured for $marker {
            fn validate_settings(
                bindings: &Self::Bindings,
                store: &mut Store<SandboxState>,
                settings: &str,
            ) -> wasmtime::Result<Result<(), String>> {
                bindings.$interface().call_validate_settings(store, settings)
            }
        }
    )*};
}

configured_worlds! {
    PolicyWorld => switchyard_policy0_2_0_admission;
    PolicyWorldV0_1 => switchyard_policy0_1_0_admission;
    GrantWorld => switchyard_grant_evaluator;
}

/// A pre-linked plugin, its settings and its idle instances.
pub(crate) struct Pool<W: Configured> {
    prepared: Prepared<W>,
    settings: String,
    idle: Mutex<Vec<Instance<W::Bindings>>>,
}

impl<W: Configured> std::fmt::Debug for Pool<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("plugin", self.prepared.label())
            .finish()
    }
}

impl<W: Configured> Pool<W> {
    /// The pool, and its first instance (settings validated) for the
    /// caller's smoke call; hand it back with [`Pool::put`].
    pub(crate) fn new(
        prepared: Prepared<W>,
        settings: &str,
    ) -> Result<(Self, Instance<W::Bindings>), LoadError> {
        let pool = Self {
            prepared,
            settings: settings.to_string(),
            idle: Mutex::new(Vec::new()),
        };
        let first = pool.fresh()?;
        Ok((pool, first))
    }

    /// The pre-linked plugin.
    pub(crate) fn prepared(&self) -> &Prepared<W> {
        &self.prepared
    }

    /// Runs `f` on an idle instance (or a fresh one), under the call limits.
    pub(crate) fn call<T>(
        &self,
        function: &'static str,
        f: impl FnOnce(&W::Bindings, &mut Store<SandboxState>) -> wasmtime::Result<T>,
    ) -> (Result<T, CallError>, Duration) {
        let idle = self.idle.lock().expect("idle lock").pop();
        let mut instance = match idle {
            Some(instance) => instance,
            None => match self.fresh() {
                Ok(instance) => instance,
                Err(LoadError::Instantiate(call)) => return (Err(call), Duration::ZERO),
                Err(other) => return (Err(CallError::Trap(other.to_string())), Duration::ZERO),
            },
        };
        let answer = instance.call_timed(function, f);
        self.put(instance);
        answer
    }

    /// Keeps `instance` for a later call, unless it failed a call or the
    /// pool is full.
    pub(crate) fn put(&self, instance: Instance<W::Bindings>) {
        if instance.poisoned().is_some() {
            return;
        }
        let mut idle = self.idle.lock().expect("idle lock");
        if idle.len() < MAX_IDLE_INSTANCES {
            idle.push(instance);
        }
    }

    /// A new instance with its settings validated.
    fn fresh(&self) -> Result<Instance<W::Bindings>, LoadError> {
        let mut instance = self.prepared.instance()?;
        instance
            .call("validate-settings", |b, s| {
                W::validate_settings(b, s, &self.settings)
            })?
            .map_err(LoadError::InvalidSettings)?;
        Ok(instance)
    }
}
