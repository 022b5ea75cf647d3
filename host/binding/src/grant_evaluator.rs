//! The grant evaluator this replica runs: which component judges whether a
//! federated call is inside its grant, and what it charges.
//!
//! One evaluator is bound per cluster (plugin, version, settings): a slot
//! bound with generations ([`crate::bound`]) under the name [`POINT`], as a
//! chain of one entry pinned to its digest, beside the admission points.
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

use std::sync::Arc;
use std::time::Duration;

use switchyard_protocol::plugin::{FailMode, Mode};
use switchyard_runtime::PluginKind;
use switchyard_runtime::grant::{Charge, FederatedCall, Grant, GrantDecision, GrantPlugin, Usage};
use switchyard_runtime::inline::InlineGate;
use switchyard_store::admission::{BoundComponent, Generation, ReplicaStatus};
use switchyard_store::{Store, StoreError};
use tokio::sync::watch;

use crate::bound::{Generations, Kind, Loader, RollbackRefused, Serving};

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
pub struct Active {
    generation: i64,
    /// `None` only while generation 0's shipped evaluator is missing.
    plugin: Option<Arc<GrantPlugin>>,
    /// Whether its calls still run on the caller's task.
    inline: InlineGate,
}

impl Serving for Active {
    fn generation(&self) -> i64 {
        self.generation
    }

    fn set_generation(&mut self, generation: i64) {
        self.generation = generation;
    }

    fn ready(&self) -> bool {
        self.plugin.is_some()
    }
}

/// The grant evaluator as a slot bound with generations: one component,
/// the shipped one when the generation binds none.
#[derive(Debug, Clone, Copy)]
pub struct EvaluatorSlot;

impl Kind for EvaluatorSlot {
    type Built = Active;
    type Error = EvaluatorError;

    fn describe(&self) -> String {
        "the grant evaluator".into()
    }

    async fn build(
        &self,
        loader: &Loader,
        generation: &Generation,
    ) -> Result<Active, EvaluatorError> {
        let stored = bound(loader.store(), generation).await?;
        let plugin = loader.load::<GrantPlugin>(&stored).await?;
        Ok(Active {
            generation: generation.generation,
            plugin: Some(plugin),
            inline: InlineGate::default(),
        })
    }

    fn nothing_to_restore(&self, why: RollbackRefused) -> EvaluatorError {
        EvaluatorError::NothingToRollback(match why {
            RollbackRefused::FirstActive => {
                "the shipped grant-standard of generation 0 is in force already"
            }
            _ => "no grant evaluator was ever bound",
        })
    }
}

/// This replica's evaluator and where it came from.
pub struct GrantEvaluator {
    slot: Generations<EvaluatorSlot>,
    loader: Arc<Loader>,
}

impl std::fmt::Debug for GrantEvaluator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (generation, label) = self.serving();
        f.debug_struct("GrantEvaluator")
            .field("generation", &generation)
            .field("plugin", &label)
            .finish()
    }
}

/// An evaluator's entry: its deny always counts and its error refuses
/// (the chain entry's modes, fixed).
fn entry(
    plugin: String,
    version: String,
    sha256: String,
    settings: serde_json::Value,
) -> BoundComponent {
    BoundComponent {
        plugin,
        version,
        sha256,
        settings,
        mode: Mode::Enforce,
        fail: FailMode::Closed,
        log: Default::default(),
    }
}

/// What a generation binds: its one entry, or the shipped evaluator with
/// `{}` settings for an empty one (generation 0, a rollback to it).
pub async fn bound(
    store: &Store,
    generation: &Generation,
) -> Result<BoundComponent, EvaluatorError> {
    if let Some(entry) = generation.policies.first() {
        return Ok(entry.clone());
    }
    let record = store
        .plugins(Some(SHIPPED))
        .await?
        .into_iter()
        .rfind(|r| r.kind == PluginKind::Grant)
        .ok_or(EvaluatorError::NoShipped)?;
    Ok(entry(
        record.name,
        record.version,
        record.sha256,
        serde_json::json!({}),
    ))
}

impl GrantEvaluator {
    /// Nothing loaded until the first sync: every call is refused until then.
    pub fn new(loader: Arc<Loader>) -> Self {
        let nothing = Active {
            generation: 0,
            plugin: None,
            inline: InlineGate::default(),
        };
        Self {
            slot: Generations::new(EvaluatorSlot, POINT, nothing, loader.clone()),
            loader,
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
        let active = self.slot.serving();
        let Some(plugin) = active.plugin.clone() else {
            return Err(Refusal::failed(
                "no grant evaluator is loaded on this replica; the call is refused",
            ));
        };
        let label = plugin.label().clone();
        let decision = match active
            .inline
            .run("grant evaluator", || plugin.evaluate(&call, &grant, usage))
        {
            Some(decision) => Ok(decision),
            None => {
                tokio::task::spawn_blocking(move || plugin.evaluate(&call, &grant, usage)).await
            }
        };
        let error = match decision {
            Ok(Ok(GrantDecision::Inside(charge))) => return Ok(charge),
            Ok(Ok(GrantDecision::Outside(denial))) => {
                return Err(Refusal {
                    code: denial.code,
                    message: denial.message,
                });
            }
            Ok(Err(error)) => error.to_string(),
            Err(error) => error.to_string(),
        };
        // The detail (a trap, a deadline) is for the operator's log, not
        // for the peer.
        tracing::warn!(evaluator = %label, error = %error, "the grant evaluator failed; call refused");
        Err(Refusal::failed(format!(
            "the grant evaluator {label} failed; the call is refused"
        )))
    }

    /// The generation this replica serves and the evaluator's label.
    pub fn serving(&self) -> (i64, Option<Arc<str>>) {
        let active = self.slot.serving();
        (
            active.generation,
            active.plugin.as_ref().map(|p| p.label().clone()),
        )
    }

    /// The newer generation that failed here, and why.
    pub fn failure(&self) -> Option<(i64, String)> {
        self.slot.failure()
    }

    /// The evaluator's generations: commit, roll back.
    pub fn generations(&self) -> &Generations<EvaluatorSlot> {
        &self.slot
    }

    /// Pins a binding to its registered component, which must be a grant
    /// evaluator.
    pub async fn resolve(
        &self,
        binding: EvaluatorBinding,
    ) -> Result<BoundComponent, EvaluatorError> {
        let record = self
            .loader
            .record(&binding.plugin, &binding.version, PluginKind::Grant)
            .await?;
        Ok(entry(
            record.name,
            record.version,
            record.sha256,
            binding.settings,
        ))
    }

    /// What a generation binds (see [`bound`]).
    pub async fn bound(&self, generation: &Generation) -> Result<BoundComponent, EvaluatorError> {
        bound(self.loader.store(), generation).await
    }

    /// Loads the newest generation when this replica serves another (or
    /// nothing yet).
    pub async fn sync(&self) -> Result<(), EvaluatorError> {
        let latest = self.loader.store().latest_generation(POINT).await?;
        self.slot.sync(latest.generation).await
    }

    /// What every live replica serves, as for an admission point.
    pub async fn replicas(&self, latest: i64) -> Result<Vec<ReplicaStatus>, StoreError> {
        self.slot.replicas(latest).await
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
    crate::bound::follow_generations(store, "grant evaluator", poll, shutdown, move || {
        let evaluator = evaluator.clone();
        async move {
            if let Err(e) = evaluator.sync().await {
                tracing::warn!(error = %e, "grant evaluator sync failed");
            }
        }
    })
    .await
}
