//! The grant evaluator this replica runs: which component judges whether a
//! federated call is inside its grant, and what it charges.
//!
//! One evaluator is bound per cluster (plugin, version, settings), with
//! generations exactly as an admission chain: the same table
//! (`admission_generations`, under the name [`POINT`], as a chain of one
//! entry pinned to its digest), the same NOTIFY hint and follower loop
//! ([`crate::admission::follow_generations`]), the same replica reports
//! (`admission_replica_status`), the same rollback rule
//! ([`crate::admission::rollback_target`]). A new binding is loaded and its
//! settings validated on the replica that takes the request before it is
//! stored (make before break); the other replicas follow the row, and one
//! that cannot build it keeps serving the previous generation and says so.
//!
//! Generation 0 (nothing ever bound, or a rollback to it) is the shipped
//! `grant-standard` with `{}` settings: the newest version of it the plugin
//! registry holds (the binary seeds it at start).
//!
//! [`GrantEvaluator::judge`] is what federation calls for every incoming
//! call: it runs the component on the blocking pool, and an evaluator that
//! is missing, errs or traps refuses the call (`evaluator_failed`): a
//! grant is an authorisation, so it fails closed, as an authorisation
//! webhook that cannot be reached denies by default.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use switchyard_protocol::plugin::{FailMode, Mode};
use switchyard_runtime::grant::{
    Charge, FederatedCall, Grant, GrantDecision, GrantPlugin, GrantSource, Usage,
};
use switchyard_runtime::inline::InlineGate;
use switchyard_runtime::loader::ComponentSource;
use switchyard_runtime::{PluginKind, Runtime};
use switchyard_store::admission::{Generation, ReplicaStatus, StoredPolicy, rollback_note};
use switchyard_store::{Store, StoreError};
use tokio::sync::watch;

use crate::admission::{RollbackRefused, follow_generations, rollback_target};

mod error;
pub use error::EvaluatorError;

/// The name the evaluator's generations are kept under, beside the
/// admission points.
pub const POINT: &str = "grant-evaluator";

/// The evaluator in force when nothing is bound.
pub const SHIPPED: &str = "grant-standard";

/// The code of a call refused because the evaluator could not judge it.
pub const EVALUATOR_FAILED: &str = "evaluator_failed";

/// How many generations `GET /api/federation/evaluator` lists.
pub const HISTORY: i64 = 20;

/// A call the evaluator put outside its grant, or could not judge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The evaluator's code (`grant_expired`, ...) or [`EVALUATOR_FAILED`].
    pub code: String,
    /// For the caller.
    pub message: String,
}

impl Refusal {
    fn failed(message: impl Into<String>) -> Self {
        Self {
            code: EVALUATOR_FAILED.into(),
            message: message.into(),
        }
    }
}

impl From<EvaluatorError> for crate::error::ApiError {
    fn from(e: EvaluatorError) -> Self {
        use axum::http::StatusCode;
        let message = e.to_string();
        let (status, code) = match e {
            EvaluatorError::PluginNotFound { .. } => (StatusCode::NOT_FOUND, "plugin_not_found"),
            EvaluatorError::WrongKind { .. } => (StatusCode::UNPROCESSABLE_ENTITY, "wrong_kind"),
            // The load error's own status and code (`invalid_settings`: 422).
            EvaluatorError::Load { source, .. } => {
                return Self {
                    message,
                    ..source.into()
                };
            }
            EvaluatorError::NoShipped => (StatusCode::CONFLICT, "no_evaluator"),
            EvaluatorError::NothingToRollback(_) => (StatusCode::CONFLICT, "nothing_to_rollback"),
            EvaluatorError::NotOlder { .. } => (StatusCode::BAD_REQUEST, "invalid_request"),
            EvaluatorError::UnknownGeneration(_) => (StatusCode::NOT_FOUND, "not_found"),
            EvaluatorError::Signature(e) => return e.into(),
            EvaluatorError::Store(e) => return e.into(),
            EvaluatorError::Task(_) => return Self::internal(message),
        };
        Self::new(status, code, message)
    }
}

/// A binding as an admin asks for it.
#[derive(Debug, Clone, PartialEq)]
pub struct EvaluatorBinding {
    /// Plugin name.
    pub plugin: String,
    /// Plugin version.
    pub version: String,
    /// Settings, checked by the plugin's own `validate-settings`.
    pub settings: serde_json::Value,
}

/// The evaluator a generation names, loaded.
struct Active {
    generation: i64,
    /// `None` only while generation 0's shipped evaluator is missing.
    plugin: Option<Arc<GrantPlugin>>,
    /// Whether its calls still run on the caller's task.
    inline: InlineGate,
}

/// This replica's evaluator and where it came from.
pub struct GrantEvaluator {
    active: ArcSwap<Active>,
    /// The newest generation that failed to build here, and why.
    failed: Mutex<Option<(i64, String)>>,
    /// Component bytes by digest, so a rebuild does not refetch them.
    bytes: crate::component_bytes::ComponentBytes,
    store: Store,
    runtime: Arc<Runtime>,
    instance_id: String,
}

impl std::fmt::Debug for GrantEvaluator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let active = self.active.load();
        f.debug_struct("GrantEvaluator")
            .field("generation", &active.generation)
            .field("plugin", &active.plugin.as_ref().map(|p| p.label()))
            .finish()
    }
}

impl GrantEvaluator {
    /// Nothing loaded until the first sync: every call is refused until then.
    pub fn new(store: Store, runtime: Arc<Runtime>, instance_id: String) -> Self {
        Self {
            active: ArcSwap::from_pointee(Active {
                generation: 0,
                plugin: None,
                inline: InlineGate::default(),
            }),
            failed: Mutex::new(None),
            bytes: crate::component_bytes::ComponentBytes::new(store.clone()),
            store,
            runtime,
            instance_id,
        }
    }

    /// Judges a federated call: `Ok` with what it charges, or the refusal.
    /// The component runs on the caller's task while it stays quick there,
    /// on the blocking pool once it has not (it may hold a call until its
    /// deadline); anything but a decision refuses the call.
    pub async fn judge(
        &self,
        call: FederatedCall,
        grant: Grant,
        usage: Usage,
    ) -> Result<Charge, Refusal> {
        let active = self.active.load_full();
        let Some(plugin) = active.plugin.clone() else {
            return Err(Refusal::failed(
                "no grant evaluator is loaded on this replica; the call is refused",
            ));
        };
        let label = plugin.label().clone();
        // On the caller's task while the evaluator stays quick there, else
        // on the blocking pool (`switchyard_runtime::inline`).
        let decision = match active
            .inline
            .run("grant evaluator", || plugin.evaluate(&call, &grant, usage))
        {
            Some(decision) => Ok(decision),
            None => {
                tokio::task::spawn_blocking(move || plugin.evaluate(&call, &grant, usage)).await
            }
        };
        match decision {
            Ok(Ok(GrantDecision::Inside(charge))) => Ok(charge),
            Ok(Ok(GrantDecision::Outside(denial))) => Err(Refusal {
                code: denial.code,
                message: denial.message,
            }),
            // The detail (a trap, a deadline) is for the operator's log,
            // not for the peer.
            Ok(Err(error)) => {
                tracing::warn!(evaluator = %label, error = %error, "the grant evaluator failed; call refused");
                Err(Refusal::failed(format!(
                    "the grant evaluator {label} failed; the call is refused"
                )))
            }
            Err(error) => {
                tracing::warn!(evaluator = %label, error = %error, "the grant evaluator task failed; call refused");
                Err(Refusal::failed(format!(
                    "the grant evaluator {label} failed; the call is refused"
                )))
            }
        }
    }

    /// The generation this replica serves and the evaluator's label.
    pub fn serving(&self) -> (i64, Option<Arc<str>>) {
        let active = self.active.load();
        (
            active.generation,
            active.plugin.as_ref().map(|p| p.label().clone()),
        )
    }

    /// The newer generation that failed here, and why.
    pub fn failure(&self) -> Option<(i64, String)> {
        self.failed.lock().expect("failed lock").clone()
    }

    /// Pins a binding to its registered component, which must be a grant
    /// evaluator.
    pub async fn resolve(&self, binding: EvaluatorBinding) -> Result<StoredPolicy, EvaluatorError> {
        let record = self
            .store
            .plugin(&binding.plugin, &binding.version)
            .await?
            .ok_or_else(|| EvaluatorError::PluginNotFound {
                plugin: binding.plugin.clone(),
                version: binding.version.clone(),
            })?;
        if record.kind != PluginKind::Grant {
            return Err(EvaluatorError::WrongKind {
                plugin: record.name,
                version: record.version,
                kind: record.kind,
            });
        }
        let required = self.store.cluster_settings().await?.require_signed;
        crate::signing::check_binding(&required, &record)?;
        Ok(StoredPolicy {
            plugin: record.name,
            version: record.version,
            sha256: record.sha256,
            settings: binding.settings,
            // An evaluator's deny always counts and its error refuses: the
            // chain entry's modes, fixed.
            mode: Mode::Enforce,
            fail: FailMode::Closed,
            log: Default::default(),
        })
    }

    /// What a generation binds: its one entry, or the shipped evaluator
    /// with `{}` settings for an empty one (generation 0, a rollback to it).
    pub async fn bound(&self, generation: &Generation) -> Result<StoredPolicy, EvaluatorError> {
        if let Some(entry) = generation.policies.first() {
            return Ok(entry.clone());
        }
        let record = self
            .store
            .plugins(Some(SHIPPED))
            .await?
            .into_iter()
            .rfind(|r| r.kind == PluginKind::Grant)
            .ok_or(EvaluatorError::NoShipped)?;
        Ok(StoredPolicy {
            plugin: record.name,
            version: record.version,
            sha256: record.sha256,
            settings: serde_json::json!({}),
            mode: Mode::Enforce,
            fail: FailMode::Closed,
            log: Default::default(),
        })
    }

    /// Loads (compile, validate the settings) what a generation binds, on
    /// the blocking pool.
    async fn build(&self, generation: &Generation) -> Result<Active, EvaluatorError> {
        let stored = self.bound(generation).await?;
        let bytes = self.bytes.get(&stored.sha256).await?;
        let runtime = self.runtime.clone();
        let owned = stored.clone();
        let plugin = tokio::task::spawn_blocking(move || {
            GrantPlugin::load(
                &runtime,
                GrantSource {
                    component: ComponentSource {
                        name: &owned.plugin,
                        version: &owned.version,
                        bytes: &bytes,
                        sha256: &owned.sha256,
                    },
                    settings: &owned.settings.to_string(),
                },
            )
        })
        .await?
        .map_err(|source| EvaluatorError::Load {
            plugin: stored.plugin.clone(),
            version: stored.version.clone(),
            source,
        })?;
        Ok(Active {
            generation: generation.generation,
            plugin: Some(plugin),
            inline: InlineGate::default(),
        })
    }

    /// Makes a new generation binding `entry` (`None`: the shipped
    /// evaluator), make before break: it is loaded and its settings
    /// validated here before anything is stored.
    pub async fn commit(
        &self,
        entry: Option<StoredPolicy>,
        note: &str,
        by: &str,
    ) -> Result<Generation, EvaluatorError> {
        let policies: Vec<StoredPolicy> = entry.into_iter().collect();
        let candidate = Generation {
            point: POINT.into(),
            generation: 0,
            policies: policies.clone(),
            note: note.into(),
            created_by: by.into(),
            created_at: None,
        };
        let mut active = self.build(&candidate).await?;
        let generation = self
            .store
            .push_generation(POINT, &policies, note, by)
            .await?;
        active.generation = generation.generation;
        self.activate(active).await;
        Ok(generation)
    }

    /// A new generation with an older binding (the rule of
    /// [`rollback_target`]); returns it and the generation it restored.
    pub async fn roll_back(
        &self,
        to: Option<i64>,
        by: &str,
    ) -> Result<(Generation, i64), EvaluatorError> {
        let latest = self.store.latest_generation(POINT).await?;
        let target = rollback_target(&latest, to).map_err(|refused| match refused {
            RollbackRefused::NoGeneration => {
                EvaluatorError::NothingToRollback("no grant evaluator was ever bound")
            }
            RollbackRefused::NotOlder { newest, target } => {
                EvaluatorError::NotOlder { newest, target }
            }
            RollbackRefused::FirstActive => EvaluatorError::NothingToRollback(
                "the shipped grant-standard of generation 0 is in force already",
            ),
        })?;
        let previous = self
            .store
            .generation(POINT, target)
            .await?
            .ok_or(EvaluatorError::UnknownGeneration(target))?;
        // A rollback binds anew: its component meets today's requirement.
        crate::signing::check_stored::<EvaluatorError>(&self.store, &previous.policies).await?;
        let generation = self
            .commit(
                previous.policies.first().cloned(),
                &rollback_note(previous.generation),
                by,
            )
            .await?;
        Ok((generation, previous.generation))
    }

    /// Swaps a loaded evaluator in and records it; an older generation
    /// never replaces a newer one. Calls in flight finish on the old one.
    async fn activate(&self, active: Active) {
        let generation = active.generation;
        if self.active.load().generation > generation {
            return;
        }
        self.active.store(Arc::new(active));
        {
            let mut failed = self.failed.lock().expect("failed lock");
            if failed.as_ref().is_some_and(|(g, _)| *g <= generation) {
                *failed = None;
            }
        }
        self.report().await;
    }

    /// Loads the newest generation when this replica serves another (or
    /// nothing yet).
    pub async fn sync(&self) -> Result<(), EvaluatorError> {
        let latest = self.store.latest_generation(POINT).await?;
        let (serving, loaded) = {
            let active = self.active.load();
            (active.generation, active.plugin.is_some())
        };
        let already_failed = self
            .failure()
            .is_some_and(|(g, _)| g == latest.generation && g != 0);
        if (latest.generation == serving && loaded) || already_failed {
            return Ok(());
        }
        let started = Instant::now();
        match self.build(&latest).await {
            Ok(active) => {
                let label = active.plugin.as_ref().map(|p| p.label().to_string());
                self.activate(active).await;
                tracing::info!(generation = latest.generation, evaluator = ?label,
                    activation_ms = started.elapsed().as_secs_f64() * 1e3, "grant evaluator generation active");
            }
            Err(e) => {
                let failure = Some((latest.generation, e.to_string()));
                // Generation 0 is retried on every poll (the shipped
                // evaluator may be seeded by a replica starting later):
                // said once, not once a second.
                if self.failure() == failure {
                    return Ok(());
                }
                tracing::warn!(generation = latest.generation, error = %e,
                    "grant evaluator generation failed here; still serving the previous one");
                *self.failed.lock().expect("failed lock") = failure;
                self.report().await;
            }
        }
        Ok(())
    }

    /// What every live replica serves, as for an admission point.
    pub async fn replicas(&self, latest: i64) -> Result<Vec<ReplicaStatus>, StoreError> {
        self.store.admission_replicas(POINT, latest).await
    }

    async fn report(&self) {
        let serving = self.active.load().generation;
        let failure = self.failure();
        let result = self
            .store
            .report_admission(
                &self.instance_id,
                POINT,
                serving,
                failure.as_ref().map(|(g, e)| (*g, e.as_str())),
            )
            .await;
        if let Err(e) = result {
            tracing::warn!(error = %e, "could not record the grant evaluator's status");
        }
    }
}

/// Follows the evaluator's generations until shutdown, with the admission
/// chains' loop.
pub async fn follow(
    evaluator: Arc<GrantEvaluator>,
    store: Store,
    poll: Duration,
    shutdown: watch::Receiver<bool>,
) {
    follow_generations(store, "grant evaluator", poll, shutdown, move || {
        let evaluator = evaluator.clone();
        async move {
            if let Err(e) = evaluator.sync().await {
                tracing::warn!(error = %e, "grant evaluator sync failed");
            }
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use switchyard_runtime::LoadError;

    use super::*;
    use crate::error::ApiError;

    #[test]
    fn each_error_has_its_status_and_code() {
        let cases: Vec<(EvaluatorError, u16, &str)> = vec![
            (
                EvaluatorError::PluginNotFound {
                    plugin: "x".into(),
                    version: "1".into(),
                },
                404,
                "plugin_not_found",
            ),
            (
                EvaluatorError::WrongKind {
                    plugin: "max-tokens".into(),
                    version: "1".into(),
                    kind: PluginKind::Policy,
                },
                422,
                "wrong_kind",
            ),
            (
                EvaluatorError::Load {
                    plugin: "grant-standard".into(),
                    version: "0.1.0".into(),
                    source: LoadError::InvalidSettings("bad".into()),
                },
                422,
                "invalid_settings",
            ),
            (EvaluatorError::NoShipped, 409, "no_evaluator"),
            (
                EvaluatorError::NothingToRollback("none"),
                409,
                "nothing_to_rollback",
            ),
            (
                EvaluatorError::NotOlder {
                    newest: 2,
                    target: 2,
                },
                400,
                "invalid_request",
            ),
            (EvaluatorError::UnknownGeneration(7), 404, "not_found"),
        ];
        for (error, status, code) in cases {
            let api = ApiError::from(error);
            assert_eq!((api.status.as_u16(), api.code), (status, code));
        }
    }
}
