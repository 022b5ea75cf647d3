//! An admission policy ready to call: its pre-linked component, its settings
//! and a small pool of warm instances (a fresh instance costs ~18 us, a
//! reused one ~0.5 us). An instance that failed a call is dropped, never reused.
//!
//! A policy targets `admission-policy@0.2.0` (usage counters, `throttle`
//! and `flag`) or 0.1.0, whose answers are this version's without the two
//! new cases: one pool of either world, the same calls.

use std::sync::Arc;
use std::time::Duration;

use crate::admission::{AdmissionPoint, AdmissionRequest, Decision};
use crate::cache::CompileSource;
use crate::engine::Runtime;
use crate::error::{CallError, LoadError};
use crate::inspect::POLICY_WORLD_V0_1;
use crate::loader::{ComponentSource, PolicyWorld, PolicyWorldV0_1, compile};
use crate::metrics::PluginMetrics;
use crate::pool::Pool;

/// What is needed to load one policy.
#[derive(Debug, Clone)]
pub struct PolicySource<'a> {
    /// The component.
    pub component: ComponentSource<'a>,
    /// The binding's settings, a JSON document.
    pub settings: &'a str,
}

/// The warm instances of a policy of either world.
enum Pools {
    V0_2(Pool<PolicyWorld>),
    V0_1(Pool<PolicyWorldV0_1>),
}

/// One evaluation on a pool of either world: the same calls, each world's
/// bindings (`$admission` names the exported interface's accessor).
macro_rules! evaluate_in {
    ($pool:expr, $point:expr, $request:expr, $admission:ident) => {
        $pool.call($point, |b, s| {
            let admission = b.$admission();
            Ok(match $request {
                AdmissionRequest::Inference(r) => {
                    Decision::from(admission.call_evaluate_inference(s, r)?)
                }
                AdmissionRequest::Deploy(r) => {
                    Decision::from(admission.call_evaluate_deploy(s, r)?)
                }
                AdmissionRequest::Transfer(r) => {
                    Decision::from(admission.call_evaluate_transfer(s, r)?)
                }
                AdmissionRequest::Federation(r) => {
                    Decision::from(admission.call_evaluate_federation(s, r)?)
                }
            })
        })
    };
}

/// A loaded, configured admission policy.
pub struct PolicyPlugin {
    pools: Pools,
    points: Vec<AdmissionPoint>,
    metrics: Arc<PluginMetrics>,
}

impl std::fmt::Debug for PolicyPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyPlugin")
            .field("plugin", self.label())
            .finish()
    }
}

impl PolicyPlugin {
    /// Verifies, compiles (or takes from the cache), instantiates once,
    /// validates the settings and makes the smoke call (`points`).
    pub fn load(runtime: &Arc<Runtime>, source: PolicySource<'_>) -> Result<Arc<Self>, LoadError> {
        let compiled = compile(runtime, source.component, crate::PluginKind::Policy)?;
        let (pools, points) = if compiled.info.world == POLICY_WORLD_V0_1 {
            let (pool, mut first) =
                Pool::<PolicyWorldV0_1>::new(compiled.link(runtime, true)?, source.settings)?;
            let points = first.call("points", |b, s| {
                b.switchyard_policy0_1_0_admission().call_points(s)
            })?;
            pool.put(first);
            (Pools::V0_1(pool), points)
        } else {
            let (pool, mut first) =
                Pool::<PolicyWorld>::new(compiled.link(runtime, true)?, source.settings)?;
            let points = first.call("points", |b, s| {
                b.switchyard_policy0_2_0_admission().call_points(s)
            })?;
            pool.put(first);
            (Pools::V0_2(pool), points)
        };
        let metrics = match &pools {
            Pools::V0_2(pool) => pool.prepared().metrics(),
            Pools::V0_1(pool) => pool.prepared().metrics(),
        };
        let metrics = metrics.expect("policies are counted").clone();
        Ok(Arc::new(Self {
            pools,
            points: points.into_iter().map(AdmissionPoint::from).collect(),
            metrics,
        }))
    }

    /// `name@version`.
    pub fn label(&self) -> &Arc<str> {
        match &self.pools {
            Pools::V0_2(pool) => pool.prepared().label(),
            Pools::V0_1(pool) => pool.prepared().label(),
        }
    }

    /// The points the policy says it judges.
    pub fn points(&self) -> &[AdmissionPoint] {
        &self.points
    }

    /// This plugin's metrics.
    pub fn metrics(&self) -> &PluginMetrics {
        &self.metrics
    }

    /// Whether the component came from memory, the disk cache, or a compile.
    pub fn compiled_from(&self) -> CompileSource {
        match &self.pools {
            Pools::V0_2(pool) => pool.prepared().compiled_from(),
            Pools::V0_1(pool) => pool.prepared().compiled_from(),
        }
    }

    /// Evaluates one request. Errors are this call's only; the host goes on.
    ///
    /// The call is synchronous and may take up to the call deadline. Call it
    /// from a thread that is not running async tasks (`spawn_blocking`,
    /// `block_in_place`, or a plain thread), or through
    /// [`crate::inline::InlineGate`]: WASI's synchronous host calls, such as
    /// a guest writing to stderr, enter tokio themselves.
    pub fn evaluate(&self, request: &AdmissionRequest) -> Result<Decision, CallError> {
        self.evaluate_timed(request).0
    }

    /// [`PolicyPlugin::evaluate`], with the time spent in the call.
    pub fn evaluate_timed(
        &self,
        request: &AdmissionRequest,
    ) -> (Result<Decision, CallError>, Duration) {
        // The span's `function` is the point: `inference`, `deploy`, ...
        let point = request.point().as_str();
        let (decision, elapsed) = match &self.pools {
            Pools::V0_2(pool) => {
                evaluate_in!(pool, point, request, switchyard_policy0_2_0_admission)
            }
            Pools::V0_1(pool) => {
                evaluate_in!(pool, point, request, switchyard_policy0_1_0_admission)
            }
        };
        if let Ok(Decision::Deny(_) | Decision::Throttle(_)) = decision {
            self.metrics.record_denial();
        }
        (decision, elapsed)
    }
}
