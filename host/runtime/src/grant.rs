//! A grant evaluator ready to call: is a federated call inside the grant it
//! claims? The host keeps the grant's counters and charges them; the
//! evaluator only judges. Loaded like a policy (a pool of warm instances,
//! each validating the binding's settings first).

use std::sync::Arc;

use crate::bindings::grant::switchyard::grant::types;
use crate::cache::CompileSource;
use crate::engine::Runtime;
use crate::error::{CallError, LoadError};
use crate::loader::{ComponentSource, GrantWorld, Prepared};
use crate::pool::Pool;

pub use types::{Charge, FederatedCall, Grant, GrantDecision, Usage};

/// What is needed to load one grant evaluator.
#[derive(Debug, Clone)]
pub struct GrantSource<'a> {
    /// The component.
    pub component: ComponentSource<'a>,
    /// The binding's settings, a JSON document.
    pub settings: &'a str,
}

/// A loaded, configured grant evaluator.
#[derive(Debug)]
pub struct GrantPlugin {
    pool: Pool<GrantWorld>,
}

impl GrantPlugin {
    /// Verifies, compiles (or takes from the cache), instantiates once and
    /// validates the settings.
    pub fn load(runtime: &Arc<Runtime>, source: GrantSource<'_>) -> Result<Arc<Self>, LoadError> {
        let prepared = Prepared::<GrantWorld>::load(runtime, source.component, true)?;
        let (pool, first) = Pool::new(prepared, source.settings)?;
        pool.put(first);
        Ok(Arc::new(Self { pool }))
    }

    /// `name@version`.
    pub fn label(&self) -> &Arc<str> {
        self.pool.prepared().label()
    }

    /// Whether the component came from memory, the disk cache, or a compile.
    pub fn compiled_from(&self) -> CompileSource {
        self.pool.prepared().compiled_from()
    }

    /// Judges one federated call against its grant and what the grant has
    /// used so far. Synchronous, like [`crate::policy::PolicyPlugin::evaluate`]:
    /// call it off the async threads, or through [`crate::inline::InlineGate`].
    pub fn evaluate(
        &self,
        call: &FederatedCall,
        grant: &Grant,
        usage: Usage,
    ) -> Result<GrantDecision, CallError> {
        let (decision, _) = self.pool.call("evaluate", |b, s| {
            b.switchyard_grant_evaluator()
                .call_evaluate(s, call, grant, usage)
        });
        if let (Ok(GrantDecision::Outside(_)), Some(metrics)) =
            (&decision, self.pool.prepared().metrics())
        {
            metrics.record_denial();
        }
        decision
    }
}
