//! The one way every plugin kind is loaded: check the digest (before
//! anything is compiled), check the world with [`inspect`], compile through
//! the cache, pre-link once (`InstancePre`), then make as many instances
//! (`instance.rs`) as the kind needs (a policy's pool, a carrier's one, a
//! tunnel session's one).
//!
//! Each world the host serves is a `World`: its kind, its imports and its
//! pre-instantiated bindings. Nothing else in the crate compiles or links.

use std::sync::Arc;

use sha2::{Digest, Sha256};
use wasmtime::Store;
use wasmtime::component::{Component, HasSelf, InstancePre, Linker};

use crate::cache::CompileSource;
use crate::engine::Runtime;
use crate::error::LoadError;
use crate::inspect::{ComponentInfo, PluginKind, inspect};
use crate::instance::{Instance, PluginId};
use crate::metrics::PluginMetrics;
use crate::sandbox::{SandboxState, base_linker};

/// The component to load: what every kind's source has in common.
#[derive(Debug, Clone, Copy)]
pub struct ComponentSource<'a> {
    /// Plugin name.
    pub name: &'a str,
    /// Plugin version.
    pub version: &'a str,
    /// The component bytes.
    pub bytes: &'a [u8],
    /// The SHA-256 the bytes must have (hex).
    pub sha256: &'a str,
}

/// One world the host serves: how its imports are linked and how its
/// bindings are made from a pre-linked component.
pub(crate) trait World {
    /// The kind a component must be to be loaded as this world.
    const KIND: PluginKind;
    /// The world's pre-instantiated bindings (`FooPre`).
    type Pre;
    /// One instance's bindings.
    type Bindings;
    /// Adds the world's own imports (WASI is already linked).
    fn link(linker: &mut Linker<SandboxState>) -> wasmtime::Result<()>;
    /// The typed bindings of a pre-linked component.
    fn pre(pre: InstancePre<SandboxState>) -> wasmtime::Result<Self::Pre>;
    /// A new instance in `store`.
    fn instantiate(
        pre: &Self::Pre,
        store: &mut Store<SandboxState>,
    ) -> wasmtime::Result<Self::Bindings>;
}

/// Implements [`World`] for `bindgen!` worlds: marker, kind, bindings, pre.
macro_rules! served_worlds {
    ($($marker:ident: $kind:expr, $world:ty, $pre:ty;)*) => {$(
        pub(crate) struct $marker;

        impl World for $marker {
            const KIND: PluginKind = $kind;
            type Pre = $pre;
            type Bindings = $world;
            fn link(linker: &mut Linker<SandboxState>) -> wasmtime::Result<()> {
                <$world>::add_to_linker::<_, HasSelf<_>>(linker, |s| s)
            }
            fn pre(pre: InstancePre<SandboxState>) -> wasmtime::Result<Self::Pre> {
                <$pre>::new(pre)
            }
            fn instantiate(
                pre: &Self::Pre,
                store: &mut Store<SandboxState>,
            ) -> wasmtime::Result<Self::Bindings> {
                pre.instantiate(store)
            }
        }
    )*};
}

use crate::bindings::{
    carrier, carrier_v0_1, carrier_v0_3, grant, policy, policy_v0_1, tunnel, tunnel_v0_1,
};

served_worlds! {
    PolicyWorld: PluginKind::Policy, policy::AdmissionPolicy, policy::AdmissionPolicyPre<SandboxState>;
    PolicyWorldV0_1: PluginKind::Policy, policy_v0_1::AdmissionPolicy, policy_v0_1::AdmissionPolicyPre<SandboxState>;
    GrantWorld: PluginKind::Grant, grant::GrantEvaluator, grant::GrantEvaluatorPre<SandboxState>;
    CarrierWorld: PluginKind::Carrier, carrier::Carrier, carrier::CarrierPre<SandboxState>;
    CarrierWorldV0_3: PluginKind::Carrier, carrier_v0_3::Carrier, carrier_v0_3::CarrierPre<SandboxState>;
    CarrierWorldV0_1: PluginKind::Carrier, carrier_v0_1::Carrier, carrier_v0_1::CarrierPre<SandboxState>;
    TunnelWorld: PluginKind::Tunnel, tunnel::Tunnel, tunnel::TunnelPre<SandboxState>;
    TunnelWorldV0_1: PluginKind::Tunnel, tunnel_v0_1::Tunnel, tunnel_v0_1::TunnelPre<SandboxState>;
}

/// Checks the digest (before anything is compiled), then the world.
pub fn verify(bytes: &[u8], expected_sha256: &str) -> Result<ComponentInfo, LoadError> {
    let actual = hex::encode(Sha256::digest(bytes));
    if !actual.eq_ignore_ascii_case(expected_sha256) {
        return Err(LoadError::DigestMismatch {
            expected: expected_sha256.to_string(),
            actual,
        });
    }
    inspect(bytes)
}

/// A verified component of the expected kind, compiled (or taken from the
/// cache), not yet linked.
pub(crate) struct Compiled {
    /// The world and version it targets.
    pub(crate) info: ComponentInfo,
    component: Component,
    compiled_from: CompileSource,
    id: Arc<PluginId>,
}

/// Verifies `origin` (digest, then world), refuses any kind but `kind`, and
/// compiles it through the runtime's cache.
pub(crate) fn compile(
    runtime: &Runtime,
    origin: ComponentSource<'_>,
    kind: PluginKind,
) -> Result<Compiled, LoadError> {
    let info = verify(origin.bytes, origin.sha256)?;
    if info.kind != kind {
        return Err(LoadError::WrongKind(format!(
            "{}@{} is a {} plugin, not {}",
            origin.name,
            origin.version,
            info.kind.as_str(),
            kind.with_article()
        )));
    }
    let (component, compiled_from) = runtime.cache.get_or_compile(
        &runtime.engine,
        &origin.sha256.to_ascii_lowercase(),
        origin.bytes,
    )?;
    Ok(Compiled {
        info,
        component,
        compiled_from,
        id: Arc::new(PluginId::new(origin.name, origin.version)),
    })
}

impl Compiled {
    /// Links the component as `W` (WASI and the world's imports) once; every
    /// instance is made from the result. `metrics`: whether its calls are
    /// counted in the runtime's per-plugin metrics.
    pub(crate) fn link<W: World>(
        self,
        runtime: &Arc<Runtime>,
        metrics: bool,
    ) -> Result<Prepared<W>, LoadError> {
        let linked = base_linker(&runtime.engine)
            .and_then(|mut linker| W::link(&mut linker).map(|()| linker))
            .and_then(|linker| linker.instantiate_pre(&self.component))
            .and_then(W::pre)
            .map_err(|e| LoadError::Compile(format!("{e:#}")))?;
        let metrics = metrics.then(|| runtime.metrics.plugin(&self.id.name, &self.id.version));
        Ok(Prepared {
            runtime: runtime.clone(),
            pre: linked,
            id: self.id,
            metrics,
            compiled_from: self.compiled_from,
        })
    }
}

/// A compiled, pre-linked plugin: makes instances.
pub(crate) struct Prepared<W: World> {
    runtime: Arc<Runtime>,
    pre: W::Pre,
    id: Arc<PluginId>,
    metrics: Option<Arc<PluginMetrics>>,
    compiled_from: CompileSource,
}

impl<W: World> Prepared<W> {
    /// Loads `origin` as `W`: [`compile`], then [`Compiled::link`].
    pub(crate) fn load(
        runtime: &Arc<Runtime>,
        origin: ComponentSource<'_>,
        metrics: bool,
    ) -> Result<Self, LoadError> {
        compile(runtime, origin, W::KIND)?.link(runtime, metrics)
    }

    /// A fresh instance in its own store (memory cap, deadline armed).
    pub(crate) fn instance(&self) -> Result<Instance<W::Bindings>, LoadError> {
        Instance::new(
            &self.runtime,
            self.id.clone(),
            self.metrics.clone(),
            |store| W::instantiate(&self.pre, store),
        )
    }

    /// `name@version`.
    pub(crate) fn label(&self) -> &Arc<str> {
        &self.id.label
    }

    /// The metrics its calls are counted in, if they are.
    pub(crate) fn metrics(&self) -> Option<&Arc<PluginMetrics>> {
        self.metrics.as_ref()
    }

    /// Whether the component came from memory, the disk cache, or a compile.
    pub(crate) fn compiled_from(&self) -> CompileSource {
        self.compiled_from
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wrong_digest_is_refused_before_anything_is_read() {
        let err = verify(b"not even a component", &"0".repeat(64)).unwrap_err();
        assert!(matches!(err, LoadError::DigestMismatch { .. }), "{err}");
    }

    #[test]
    fn a_component_of_no_served_world_is_refused_before_its_kind_is_compared() {
        // The smallest valid component exports nothing. (A component of
        // another served kind: `tests/platform/grants.rs`.)
        let component = [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];
        let sha256 = hex::encode(Sha256::digest(component));
        let runtime = Runtime::new(crate::RuntimeConfig {
            pooling: false,
            ..Default::default()
        })
        .unwrap();
        let origin = ComponentSource {
            name: "empty",
            version: "1",
            bytes: &component,
            sha256: &sha256,
        };
        let err = compile(&runtime, origin, PluginKind::Grant).err().unwrap();
        assert!(matches!(err, LoadError::UnsupportedWorld { .. }), "{err}");
    }
}
