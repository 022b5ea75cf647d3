//! A bound component with generations: the one mechanism behind the
//! admission chains and the grant evaluator, and the next plugin kind's.
//!
//! A *slot* (an admission point, the grant evaluator) binds registered
//! components, each pinned to its digest. Every change is a new
//! *generation*: a row in `admission_generations` under the slot's name,
//! built on the replica that takes the change before it is stored (make
//! before break), swapped in with one atomic store (calls in flight finish
//! on what they loaded), and followed by every other replica through a
//! NOTIFY hint and a poll ([`follow_generations`]). A replica that cannot
//! build the newest generation keeps serving what it has and reports the
//! failure in `admission_replica_status`.
//!
//! What differs per kind is a [`Kind`]: what a generation builds into and
//! how its refusals read. [`Generations`] is the rest.

mod bytes;
mod error;
mod follower;
mod generations;

use std::future::Future;
use std::sync::Arc;

use switchyard_runtime::grant::{GrantPlugin, GrantSource};
use switchyard_runtime::loader::ComponentSource;
use switchyard_runtime::policy::{PolicyPlugin, PolicySource};
use switchyard_runtime::{LoadError, PluginKind, Runtime};
use switchyard_store::Store;
use switchyard_store::admission::{BoundComponent, Generation};
use switchyard_store::plugins::PluginRecord;

pub use error::{BindError, load_message};
pub use follower::follow_generations;
pub use generations::{Generations, RollbackRefused, rollback_target};

/// A component a slot can bind: how it loads (compile, instantiate,
/// validate the settings).
pub trait Loadable: Send + Sync + 'static {
    /// Loads it; synchronous and slow (seconds for a compile).
    fn load(
        runtime: &Arc<Runtime>,
        component: ComponentSource<'_>,
        settings: &str,
    ) -> Result<Arc<Self>, LoadError>;
}

impl Loadable for PolicyPlugin {
    fn load(
        runtime: &Arc<Runtime>,
        component: ComponentSource<'_>,
        settings: &str,
    ) -> Result<Arc<Self>, LoadError> {
        PolicyPlugin::load(
            runtime,
            PolicySource {
                component,
                settings,
            },
        )
    }
}

impl Loadable for GrantPlugin {
    fn load(
        runtime: &Arc<Runtime>,
        component: ComponentSource<'_>,
        settings: &str,
    ) -> Result<Arc<Self>, LoadError> {
        GrantPlugin::load(
            runtime,
            GrantSource {
                component,
                settings,
            },
        )
    }
}

/// What a slot serves: built from one generation.
pub trait Serving: Send + Sync + 'static {
    /// The generation it was built from.
    fn generation(&self) -> i64;
    /// Renumbers a candidate once its generation is stored.
    fn set_generation(&mut self, generation: i64);
    /// Whether it can serve (a slot whose generation 0 needs a component
    /// the registry lacks yet is not).
    fn ready(&self) -> bool {
        true
    }
}

/// What differs between the plugin kinds bound with generations.
pub trait Kind: Send + Sync + 'static {
    /// What a generation builds into.
    type Built: Serving;
    /// Why a binding, build or rollback was refused.
    type Error: From<BindError> + std::fmt::Display + Send;
    /// The slot in words, for logs and messages ("inference", "the grant evaluator").
    fn describe(&self) -> String;
    /// Builds a stored generation (loading runs on the blocking pool).
    fn build(
        &self,
        loader: &Loader,
        generation: &Generation,
    ) -> impl Future<Output = Result<Self::Built, Self::Error>> + Send;
    /// A rollback with nothing to restore, in this kind's words.
    fn nothing_to_restore(&self, why: RollbackRefused) -> Self::Error;
}

/// Resolves and loads the components slots bind; one per replica, shared
/// by every slot.
#[derive(Debug)]
pub struct Loader {
    store: Store,
    runtime: Arc<Runtime>,
    bytes: bytes::ComponentBytes,
    instance_id: String,
}

impl Loader {
    /// A loader reading the registry of `store`; `instance_id` names this
    /// replica in the status it reports.
    pub fn new(store: Store, runtime: Arc<Runtime>, instance_id: String) -> Self {
        Self {
            bytes: bytes::ComponentBytes::new(store.clone()),
            store,
            runtime,
            instance_id,
        }
    }

    /// The database.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The registry's record of `plugin@version`, which must be a `kind`
    /// plugin signed as the cluster requires of that kind.
    pub async fn record(
        &self,
        plugin: &str,
        version: &str,
        kind: PluginKind,
    ) -> Result<PluginRecord, BindError> {
        let record =
            self.store
                .plugin(plugin, version)
                .await?
                .ok_or_else(|| BindError::PluginNotFound {
                    plugin: plugin.into(),
                    version: version.into(),
                })?;
        if record.kind != kind {
            return Err(BindError::WrongKind {
                plugin: record.name,
                version: record.version,
                kind: record.kind,
                wanted: kind,
            });
        }
        let required = self.store.cluster_settings().await?.require_signed;
        crate::signing::check_binding(&required, &record)?;
        Ok(record)
    }

    /// Loads a bound component on the blocking pool.
    pub async fn load<P: Loadable>(&self, stored: &BoundComponent) -> Result<Arc<P>, BindError> {
        let bytes = self.bytes.get(&stored.sha256).await?;
        let runtime = self.runtime.clone();
        let owned = stored.clone();
        tokio::task::spawn_blocking(move || {
            let component = ComponentSource {
                name: &owned.plugin,
                version: &owned.version,
                bytes: &bytes,
                sha256: &owned.sha256,
            };
            P::load(&runtime, component, &owned.settings.to_string())
        })
        .await?
        .map_err(|source| BindError::Load {
            plugin: stored.plugin.clone(),
            version: stored.version.clone(),
            source,
        })
    }

    /// Records what this replica serves in a slot, and what failed there.
    async fn report(&self, slot: &str, serving: i64, failure: Option<&(i64, String)>) {
        let result = self
            .store
            .report_admission(
                &self.instance_id,
                slot,
                serving,
                failure.map(|(g, e)| (*g, e.as_str())),
            )
            .await;
        if let Err(e) = result {
            tracing::warn!(slot, error = %e, "could not record what this replica serves");
        }
    }
}
