//! An admission policy ready to call: its pre-linked component, its settings
//! and a small pool of warm instances (a fresh instance costs ~18 us, a
//! reused one ~0.5 us). An instance that failed a call is dropped, never reused.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use wasmtime::Store;

use crate::admission::{AdmissionPoint, AdmissionRequest, Decision};
use crate::bindings::policy::{AdmissionPolicy, AdmissionPolicyPre};
use crate::cache::CompileSource;
use crate::engine::Runtime;
use crate::error::{CallError, LoadError};
use crate::inspect::{PluginKind, inspect};
use crate::metrics::PluginMetrics;
use crate::sandbox::{SandboxState, arm, classify, policy_linker};

/// Warm instances kept per policy; more concurrent callers instantiate fresh ones.
const MAX_IDLE_INSTANCES: usize = 16;

/// What is needed to load one policy.
#[derive(Debug, Clone)]
pub struct PolicySource<'a> {
    /// Plugin name.
    pub name: &'a str,
    /// Plugin version.
    pub version: &'a str,
    /// The component bytes.
    pub bytes: &'a [u8],
    /// The SHA-256 the bytes must have (hex).
    pub sha256: &'a str,
    /// The binding's settings, a JSON document.
    pub settings: &'a str,
}

/// A loaded, configured admission policy.
pub struct PolicyPlugin {
    runtime: Arc<Runtime>,
    pre: AdmissionPolicyPre<SandboxState>,
    label: Arc<str>,
    settings: String,
    points: Vec<AdmissionPoint>,
    idle: Mutex<Vec<Warm>>,
    metrics: Arc<PluginMetrics>,
    compiled_from: CompileSource,
}

impl std::fmt::Debug for PolicyPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyPlugin")
            .field("plugin", &self.label)
            .finish()
    }
}

struct Warm {
    store: Store<SandboxState>,
    bindings: AdmissionPolicy,
}

/// Checks the digest (before anything is compiled), then the world.
pub fn verify(bytes: &[u8], expected_sha256: &str) -> Result<crate::ComponentInfo, LoadError> {
    let actual = hex::encode(Sha256::digest(bytes));
    if !actual.eq_ignore_ascii_case(expected_sha256) {
        return Err(LoadError::DigestMismatch {
            expected: expected_sha256.to_string(),
            actual,
        });
    }
    inspect(bytes)
}

/// A component to load: verified (digest, then world), of the `expected`
/// kind (`what` names it in the error), compiled or taken from the cache.
pub(crate) fn compile(
    runtime: &Runtime,
    name: &str,
    version: &str,
    bytes: &[u8],
    sha256: &str,
    expected: PluginKind,
    what: &str,
) -> Result<(wasmtime::component::Component, crate::cache::CompileSource), LoadError> {
    let info = verify(bytes, sha256)?;
    if info.kind != expected {
        return Err(LoadError::WrongKind(format!(
            "{name}@{version} is a {} plugin, not {what}",
            info.kind.as_str()
        )));
    }
    runtime
        .cache
        .get_or_compile(&runtime.engine, &sha256.to_ascii_lowercase(), bytes)
}

impl PolicyPlugin {
    /// Verifies, compiles (or takes from the cache), instantiates once,
    /// validates the settings and makes the smoke call (`points`).
    pub fn load(runtime: &Arc<Runtime>, source: PolicySource<'_>) -> Result<Arc<Self>, LoadError> {
        let (component, compiled_from) = compile(
            runtime,
            source.name,
            source.version,
            source.bytes,
            source.sha256,
            PluginKind::Policy,
            "an admission policy",
        )?;
        let linker =
            policy_linker(&runtime.engine).map_err(|e| LoadError::Compile(e.to_string()))?;
        let pre = linker
            .instantiate_pre(&component)
            .and_then(AdmissionPolicyPre::new)
            .map_err(|e| LoadError::Compile(format!("{e:#}")))?;
        let mut plugin = Self {
            runtime: runtime.clone(),
            pre,
            label: format!("{}@{}", source.name, source.version).into(),
            settings: source.settings.to_string(),
            points: Vec::new(),
            idle: Mutex::new(Vec::new()),
            metrics: runtime.metrics.plugin(source.name, source.version),
            compiled_from,
        };
        let mut warm = plugin.instantiate()?;
        let points = plugin
            .call_on(&mut warm, |b, s| {
                b.switchyard_policy_admission().call_points(s)
            })
            .0?;
        plugin.points = points.into_iter().map(AdmissionPoint::from).collect();
        plugin.idle.get_mut().expect("idle lock").push(warm);
        Ok(Arc::new(plugin))
    }

    /// `name@version`.
    pub fn label(&self) -> &Arc<str> {
        &self.label
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
        self.compiled_from
    }

    /// Evaluates one request. Errors are this call's only; the host goes on.
    ///
    /// The call is synchronous and may take up to the call deadline. Call it
    /// from a thread that is not running async tasks (`spawn_blocking`,
    /// `block_in_place`, or a plain thread): WASI's synchronous host calls,
    /// such as a guest writing to stderr, enter tokio themselves.
    pub fn evaluate(&self, request: &AdmissionRequest) -> Result<Decision, CallError> {
        self.evaluate_timed(request).0
    }

    /// [`PolicyPlugin::evaluate`], with the time spent in the call.
    pub fn evaluate_timed(
        &self,
        request: &AdmissionRequest,
    ) -> (Result<Decision, CallError>, Duration) {
        let (decision, elapsed) = self.call(|b, s| {
            let admission = b.switchyard_policy_admission();
            Ok(match request {
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
        });
        if let Ok(Decision::Deny(_)) = decision {
            self.metrics.record_denial();
        }
        (decision, elapsed)
    }

    /// Runs `f` on a warm instance (or a fresh one), under the call limits.
    fn call<T>(
        &self,
        f: impl FnOnce(&AdmissionPolicy, &mut Store<SandboxState>) -> wasmtime::Result<T>,
    ) -> (Result<T, CallError>, Duration) {
        let idle = self.idle.lock().expect("idle lock").pop();
        let mut warm = match idle {
            Some(warm) => warm,
            None => match self.instantiate() {
                Ok(warm) => warm,
                Err(LoadError::Instantiate(call)) => return (Err(call), Duration::ZERO),
                Err(other) => return (Err(CallError::Trap(other.to_string())), Duration::ZERO),
            },
        };
        let (result, elapsed) = self.call_on(&mut warm, f);
        if result.is_ok() {
            let mut idle = self.idle.lock().expect("idle lock");
            if idle.len() < MAX_IDLE_INSTANCES {
                idle.push(warm);
            }
        }
        (result, elapsed)
    }

    /// One call under the limits, recorded in the metrics.
    fn call_on<T>(
        &self,
        warm: &mut Warm,
        f: impl FnOnce(&AdmissionPolicy, &mut Store<SandboxState>) -> wasmtime::Result<T>,
    ) -> (Result<T, CallError>, Duration) {
        self.arm(&mut warm.store);
        let started = Instant::now();
        let result =
            f(&warm.bindings, &mut warm.store).map_err(|e| classify(e, &warm.store, &self.runtime));
        let elapsed = started.elapsed();
        self.metrics.record(elapsed, result.as_ref().map(|_| ()));
        (result, elapsed)
    }

    /// A new instance with its settings validated.
    fn instantiate(&self) -> Result<Warm, LoadError> {
        let mut store = Store::new(
            &self.runtime.engine,
            SandboxState::new(self.label.clone(), &self.runtime),
        );
        store.limiter(|s| &mut s.limiter);
        // The deadline must be set before instantiating: it defaults to "now".
        self.arm(&mut store);
        let bindings = self
            .pre
            .instantiate(&mut store)
            .map_err(|e| LoadError::Instantiate(classify(e, &store, &self.runtime)))?;
        let mut warm = Warm { store, bindings };
        let settings = self.settings.clone();
        self.call_on(&mut warm, |b, s| {
            b.switchyard_policy_admission()
                .call_validate_settings(s, &settings)
        })
        .0?
        .map_err(LoadError::InvalidSettings)?;
        Ok(warm)
    }

    fn arm(&self, store: &mut Store<SandboxState>) {
        arm(&self.runtime, store);
    }
}
