//! The admission chains this replica serves, one atomic pointer per point.
//! A new generation is built beside the old one (compile, validate settings,
//! smoke call) and swapped in; calls in flight finish on the old instances.
//! A chain judges on its caller's task while it stays quick there, on the
//! blocking pool once it has not ([`evaluate`]).

pub mod decisions;
mod follower;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use arc_swap::ArcSwap;
use switchyard_protocol::decisions::DecisionLogging;
use switchyard_runtime::admission::{
    AdmissionPoint, AdmissionRequest, Chain, ChainEntry, FailMode, Mode, Verdict,
};
use switchyard_runtime::loader::ComponentSource;
use switchyard_runtime::policy::{PolicyPlugin, PolicySource};
use switchyard_runtime::{LoadError, PluginKind, Runtime};
use switchyard_store::admission::{Generation, StoredPolicy, rollback_note, rolled_back_to};
use switchyard_store::{Store, StoreError};

pub use follower::{follow, follow_generations};

/// Why a chain was not built, bound or committed.
#[derive(Debug, thiserror::Error)]
pub enum AdmissionError {
    /// A point name that is none of [`AdmissionPoint::ALL`].
    #[error("no admission point '{0}'; points: inference, deploy, transfer, federation")]
    UnknownPoint(String),
    /// A binding names a plugin version the registry does not hold.
    #[error("no plugin {plugin}@{version}")]
    PluginNotFound {
        /// The plugin's name.
        plugin: String,
        /// Its version.
        version: String,
    },
    /// A binding names a plugin that is not an admission policy.
    #[error("{plugin}@{version} is a {kind} plugin, not an admission policy")]
    WrongKind {
        /// The plugin's name.
        plugin: String,
        /// Its version.
        version: String,
        /// What it is.
        kind: PluginKind,
    },
    /// A policy did not load (or refused its settings: that message is the
    /// plugin's own and is passed on as it is).
    #[error("{}", load_message(plugin, version, source))]
    Load {
        /// The plugin's name.
        plugin: String,
        /// Its version.
        version: String,
        /// Why.
        source: LoadError,
    },
    /// A policy bound to a point it does not judge.
    #[error("{policy} judges {judges} and cannot be bound to the {point} point")]
    PointNotSupported {
        /// The policy's label.
        policy: String,
        /// The points it judges.
        judges: String,
        /// The point asked for.
        point: AdmissionPoint,
    },
    /// A rollback with no generation to leave.
    #[error("the {0} point has no generation yet")]
    NoGeneration(AdmissionPoint),
    /// A rollback past the empty chain.
    #[error("the {0} point runs the empty chain of generation 0 already")]
    EmptyChainActive(AdmissionPoint),
    /// A rollback to a generation that is not older than the newest.
    #[error("a rollback restores an older generation: 0 to {}, got {target}", .newest - 1)]
    NotOlder {
        /// The newest generation.
        newest: i64,
        /// The one asked for.
        target: i64,
    },
    /// A rollback to a generation that was never stored.
    #[error("generation {generation} of {point} not found")]
    UnknownGeneration {
        /// The point.
        point: AdmissionPoint,
        /// The generation asked for.
        generation: i64,
    },
    /// A policy its kind's `require_signed` refuses: unsigned, or signed
    /// by a key not (or no longer) trusted.
    #[error(transparent)]
    Signature(#[from] crate::signing::SignatureRefusal),
    /// The database.
    #[error("the database: {0}")]
    Store(#[from] StoreError),
    /// A policy's load task panicked or was cancelled.
    #[error("loading a policy: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// A load failure's message: the plugin's own for refused settings.
pub(crate) fn load_message(plugin: &str, version: &str, source: &LoadError) -> String {
    match source {
        // The plugin's own words, addressed to whoever wrote the settings.
        LoadError::InvalidSettings(_) => source.to_string(),
        _ => format!("{plugin}@{version}: {source}"),
    }
}

/// Parses a point's name.
pub fn point(name: &str) -> Result<AdmissionPoint, AdmissionError> {
    AdmissionPoint::parse(name).ok_or_else(|| AdmissionError::UnknownPoint(name.into()))
}

/// One policy of a chain as a client binds it: the modes parsed already.
#[derive(Debug, Clone, PartialEq)]
pub struct Binding {
    /// Plugin name.
    pub plugin: String,
    /// Plugin version.
    pub version: String,
    /// Settings, checked by the plugin's own `validate-settings`.
    pub settings: serde_json::Value,
    /// Whether its deny counts.
    pub mode: Mode,
    /// What its error means.
    pub fail: FailMode,
    /// What the decision log keeps of its answers.
    pub log: DecisionLogging,
}

/// The chains of every point, and where they came from.
pub struct Admission {
    chains: [ArcSwap<Chain>; 4],
    /// The newest generation that failed to build here, per point.
    failed: Mutex<HashMap<AdmissionPoint, (i64, String)>>,
    /// Component bytes by digest, so a rebuild does not refetch them.
    bytes: crate::component_bytes::ComponentBytes,
    store: Store,
    runtime: Arc<Runtime>,
    instance_id: String,
    /// Where judged requests leave their records ([`Admission::judge`]).
    recorder: Arc<decisions::Recorder>,
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admission")
            .field("instance_id", &self.instance_id)
            .finish()
    }
}

fn index(point: AdmissionPoint) -> usize {
    AdmissionPoint::ALL
        .iter()
        .position(|p| *p == point)
        .expect("every point is in ALL")
}

impl Admission {
    /// Empty chains everywhere until the first sync.
    pub fn new(store: Store, runtime: Arc<Runtime>, instance_id: String) -> Self {
        Self {
            chains: AdmissionPoint::ALL.map(|p| ArcSwap::from_pointee(Chain::empty(p))),
            failed: Mutex::new(HashMap::new()),
            bytes: crate::component_bytes::ComponentBytes::new(store.clone()),
            store,
            runtime,
            instance_id,
            recorder: Default::default(),
        }
    }

    /// The decision log's recorder (its writer and metrics read it).
    pub fn recorder(&self) -> &Arc<decisions::Recorder> {
        &self.recorder
    }

    /// Judges a real request with the chain serving its point and records
    /// the answers that matter in the decision log. (The dry run of
    /// `POST /api/admission/{point}/evaluate` calls [`evaluate`] and
    /// records nothing.)
    pub async fn judge(
        &self,
        request: AdmissionRequest,
    ) -> Result<Verdict, tokio::task::JoinError> {
        let chain = self.chain(request.point());
        let verdict = evaluate(&chain, &request).await?;
        self.recorder.observe(&chain, &request, &verdict);
        Ok(verdict)
    }

    /// The chain serving a point now (one atomic load, no lock).
    pub fn chain(&self, point: AdmissionPoint) -> Arc<Chain> {
        self.chains[index(point)].load_full()
    }

    /// The newer generation that failed here, and why.
    pub fn failure(&self, point: AdmissionPoint) -> Option<(i64, String)> {
        self.failed
            .lock()
            .expect("failed lock")
            .get(&point)
            .cloned()
    }

    /// Pins each binding to its registered component: the plugin must
    /// exist, be an admission policy, and be signed by a trusted key where
    /// the cluster requires signed policies.
    pub async fn resolve(
        &self,
        bindings: Vec<Binding>,
    ) -> Result<Vec<StoredPolicy>, AdmissionError> {
        let required = self.store.cluster_settings().await?.require_signed;
        let mut policies = Vec::with_capacity(bindings.len());
        for binding in bindings {
            let record = self
                .store
                .plugin(&binding.plugin, &binding.version)
                .await?
                .ok_or_else(|| AdmissionError::PluginNotFound {
                    plugin: binding.plugin.clone(),
                    version: binding.version.clone(),
                })?;
            if record.kind != PluginKind::Policy {
                return Err(AdmissionError::WrongKind {
                    plugin: record.name,
                    version: record.version,
                    kind: record.kind,
                });
            }
            crate::signing::check_binding(&required, &record)?;
            policies.push(StoredPolicy {
                plugin: record.name,
                version: record.version,
                sha256: record.sha256,
                settings: binding.settings,
                mode: binding.mode,
                fail: binding.fail,
                log: binding.log,
            });
        }
        Ok(policies)
    }

    /// Builds a stored generation into a callable chain. Loading runs on the
    /// blocking pool: compiling a large component takes seconds.
    pub async fn build(
        &self,
        point: AdmissionPoint,
        generation: &Generation,
    ) -> Result<Chain, AdmissionError> {
        let mut entries = Vec::with_capacity(generation.policies.len());
        for stored in &generation.policies {
            let bytes = self.bytes.get(&stored.sha256).await?;
            let runtime = self.runtime.clone();
            let stored_owned = stored.clone();
            let policy = tokio::task::spawn_blocking(move || {
                PolicyPlugin::load(
                    &runtime,
                    PolicySource {
                        component: ComponentSource {
                            name: &stored_owned.plugin,
                            version: &stored_owned.version,
                            bytes: &bytes,
                            sha256: &stored_owned.sha256,
                        },
                        settings: &stored_owned.settings.to_string(),
                    },
                )
            })
            .await?
            .map_err(|source| AdmissionError::Load {
                plugin: stored.plugin.clone(),
                version: stored.version.clone(),
                source,
            })?;
            if !policy.points().contains(&point) {
                return Err(AdmissionError::PointNotSupported {
                    policy: policy.label().to_string(),
                    judges: list(policy.points()),
                    point,
                });
            }
            entries.push(ChainEntry {
                policy,
                mode: stored.mode,
                fail: stored.fail,
                log: stored.log,
            });
        }
        Ok(Chain::new(point, generation.generation, entries))
    }

    /// Makes a new generation from `policies`, make before break: the chain
    /// is built (and every setting validated) here before the generation is
    /// stored, then it is swapped in; the other replicas follow the row.
    pub async fn commit(
        &self,
        point: AdmissionPoint,
        policies: &[StoredPolicy],
        note: &str,
        by: &str,
    ) -> Result<Generation, AdmissionError> {
        let candidate = Generation {
            point: point.as_str().into(),
            generation: 0,
            policies: policies.to_vec(),
            note: note.into(),
            created_by: by.into(),
            created_at: None,
        };
        let mut chain = self.build(point, &candidate).await?;
        let generation = self
            .store
            .push_generation(point.as_str(), policies, note, by)
            .await?;
        chain.generation = generation.generation;
        self.activate(chain).await;
        Ok(generation)
    }

    /// A new generation with an older chain: generation `to`, or the one
    /// before the generation whose chain is active. Returns the new
    /// generation and the one whose chain it restored.
    ///
    /// A rollback walks back: after `1, 2, 3`, the first rollback restores 2's
    /// chain and the second 1's, not 3's again. (Undoing the last change, as
    /// `kubectl rollout undo` does, flaps between two chains when repeated;
    /// an operator who rolls back twice means two steps back.)
    pub async fn roll_back(
        &self,
        point: AdmissionPoint,
        to: Option<i64>,
        by: &str,
    ) -> Result<(Generation, i64), AdmissionError> {
        let latest = self.store.latest_generation(point.as_str()).await?;
        let target = rollback_target(&latest, to).map_err(|refused| match refused {
            RollbackRefused::NoGeneration => AdmissionError::NoGeneration(point),
            RollbackRefused::NotOlder { newest, target } => {
                AdmissionError::NotOlder { newest, target }
            }
            RollbackRefused::FirstActive => AdmissionError::EmptyChainActive(point),
        })?;
        let previous = self.store.generation(point.as_str(), target).await?.ok_or(
            AdmissionError::UnknownGeneration {
                point,
                generation: target,
            },
        )?;
        // A rollback binds anew: its policies meet today's requirement.
        crate::signing::check_stored::<AdmissionError>(&self.store, &previous.policies).await?;
        let note = rollback_note(previous.generation);
        let generation = self.commit(point, &previous.policies, &note, by).await?;
        Ok((generation, previous.generation))
    }

    /// Swaps a built chain in and records it; an older chain never replaces a newer one.
    pub async fn activate(&self, chain: Chain) {
        let point = chain.point;
        let generation = chain.generation;
        let slot = &self.chains[index(point)];
        if slot.load().generation > generation && generation != 0 {
            return;
        }
        slot.store(Arc::new(chain));
        {
            let mut failed = self.failed.lock().expect("failed lock");
            if failed.get(&point).is_some_and(|(g, _)| *g <= generation) {
                failed.remove(&point);
            }
        }
        self.report(point).await;
    }

    /// Builds and activates the newest generation of every point this replica is behind on.
    pub async fn sync(&self) -> Result<(), AdmissionError> {
        let latest: HashMap<String, i64> =
            self.store.latest_generations().await?.into_iter().collect();
        for point in AdmissionPoint::ALL {
            let newest = latest.get(point.as_str()).copied().unwrap_or(0);
            let serving = self.chain(point).generation;
            let already_failed = self.failure(point).is_some_and(|(g, _)| g == newest);
            if newest == serving || already_failed {
                continue;
            }
            let started = Instant::now();
            let generation = self.store.latest_generation(point.as_str()).await?;
            match self.build(point, &generation).await {
                Ok(chain) => {
                    self.activate(chain).await;
                    tracing::info!(%point, generation = generation.generation,
                        activation_ms = started.elapsed().as_secs_f64() * 1e3, "admission generation active");
                }
                Err(e) => {
                    let message = e.to_string();
                    tracing::warn!(%point, generation = generation.generation, error = %message,
                        "admission generation failed here; still serving the previous one");
                    self.failed
                        .lock()
                        .expect("failed lock")
                        .insert(point, (generation.generation, message));
                    self.report(point).await;
                }
            }
        }
        Ok(())
    }

    async fn report(&self, point: AdmissionPoint) {
        let serving = self.chain(point).generation;
        let failure = self.failure(point);
        let result = self
            .store
            .report_admission(
                &self.instance_id,
                point.as_str(),
                serving,
                failure.as_ref().map(|(g, e)| (*g, e.as_str())),
            )
            .await;
        if let Err(e) = result {
            tracing::warn!(error = %e, "could not record admission status");
        }
    }
}

/// Judges `request` with `chain`: on the caller's task while the chain
/// stays quick there, else on the blocking pool, where a misbehaving policy
/// may hold a call until its deadline (`switchyard_runtime::inline`).
pub async fn evaluate(
    chain: &Arc<Chain>,
    request: &AdmissionRequest,
) -> Result<Verdict, tokio::task::JoinError> {
    if let Some(verdict) = chain.evaluate_here(request) {
        return Ok(verdict);
    }
    let (chain, request) = (chain.clone(), request.clone());
    tokio::task::spawn_blocking(move || chain.evaluate(request)).await
}

/// Why [`rollback_target`] found nothing to restore.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RollbackRefused {
    /// Nothing was ever set.
    NoGeneration,
    /// `target` is not older than `newest`.
    NotOlder { newest: i64, target: i64 },
    /// What runs is generation 0's already.
    FirstActive,
}

/// Which generation a rollback restores, given the newest one: `to`, or the
/// one before the generation whose content is active (the newest, or the
/// one it restored). The one rule of the admission chains and of the grant
/// evaluator's bindings (`crate::grant_evaluator`).
pub(crate) fn rollback_target(
    latest: &Generation,
    to: Option<i64>,
) -> Result<i64, RollbackRefused> {
    if latest.generation == 0 {
        return Err(RollbackRefused::NoGeneration);
    }
    match to {
        Some(target) if !(0..latest.generation).contains(&target) => {
            Err(RollbackRefused::NotOlder {
                newest: latest.generation,
                target,
            })
        }
        Some(target) => Ok(target),
        None => match rolled_back_to(&latest.note).unwrap_or(latest.generation) {
            0 => Err(RollbackRefused::FirstActive),
            active => Ok(active - 1),
        },
    }
}

fn list(points: &[AdmissionPoint]) -> String {
    let names: Vec<&str> = points.iter().map(|p| p.as_str()).collect();
    if names.is_empty() {
        "no point".into()
    } else {
        names.join(", ")
    }
}
