//! The admission chains this replica serves: each point is a slot bound
//! with generations ([`crate::bound`]) whose generation builds into a
//! [`Chain`] (compile, validate settings, smoke call). A chain judges on its
//! caller's task while it stays quick there, on the blocking pool once it
//! has not ([`evaluate`]).

pub mod decisions;
pub mod dry_run;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use switchyard_protocol::decisions::DecisionLogging;
use switchyard_runtime::PluginKind;
use switchyard_runtime::admission::{
    AdmissionPoint, AdmissionRequest, Chain, ChainEntry, FailMode, Mode, Verdict,
};
use switchyard_runtime::policy::PolicyPlugin;
use switchyard_store::StoreError;
use switchyard_store::admission::{BoundComponent, Generation};
use tokio::sync::watch;

use crate::bound::{BindError, Generations, Kind, Loader, RollbackRefused, Serving};

/// Why a chain was not built, bound or committed.
#[derive(Debug, thiserror::Error)]
pub enum AdmissionError {
    /// A point name that is none of [`AdmissionPoint::ALL`].
    #[error("no admission point '{0}'; points: inference, deploy, transfer, federation")]
    UnknownPoint(String),
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
    /// What every bound kind can refuse.
    #[error(transparent)]
    Bind(#[from] BindError),
}

impl From<StoreError> for AdmissionError {
    fn from(e: StoreError) -> Self {
        Self::Bind(e.into())
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

impl From<switchyard_protocol::admin::PolicyBinding> for Binding {
    fn from(b: switchyard_protocol::admin::PolicyBinding) -> Self {
        Binding {
            plugin: b.plugin,
            version: b.version,
            settings: b.settings,
            mode: b.mode,
            fail: b.fail,
            log: b.log,
        }
    }
}

/// An admission point as a slot bound with generations: a chain of
/// policies, each of which must judge the point.
#[derive(Debug, Clone, Copy)]
pub struct PointChain(pub AdmissionPoint);

impl Serving for Chain {
    fn generation(&self) -> i64 {
        self.generation
    }

    fn set_generation(&mut self, generation: i64) {
        self.generation = generation;
    }
}

impl Kind for PointChain {
    type Built = Chain;
    type Error = AdmissionError;

    fn describe(&self) -> String {
        self.0.to_string()
    }

    async fn build(
        &self,
        loader: &Loader,
        generation: &Generation,
    ) -> Result<Chain, AdmissionError> {
        let point = self.0;
        let mut entries = Vec::with_capacity(generation.policies.len());
        for stored in &generation.policies {
            let policy = loader.load::<PolicyPlugin>(stored).await?;
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

    fn nothing_to_restore(&self, why: RollbackRefused) -> AdmissionError {
        match why {
            RollbackRefused::FirstActive => AdmissionError::EmptyChainActive(self.0),
            _ => AdmissionError::NoGeneration(self.0),
        }
    }
}

/// The chains of every point, and where they came from.
pub struct Admission {
    points: [Generations<PointChain>; 4],
    loader: Arc<Loader>,
    /// Where judged requests leave their records ([`Admission::judge`]).
    recorder: Arc<decisions::Recorder>,
    /// Set once the first sync of every point finished (readiness waits
    /// for it: a replica serving empty chains must not take traffic).
    synced: AtomicBool,
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admission")
            .field("points", &self.points)
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
    pub fn new(loader: Arc<Loader>) -> Self {
        Self {
            points: AdmissionPoint::ALL.map(|p| {
                Generations::new(PointChain(p), p.as_str(), Chain::empty(p), loader.clone())
            }),
            loader,
            recorder: Default::default(),
            synced: AtomicBool::new(false),
        }
    }

    /// Whether the first sync of every point finished.
    pub fn synced(&self) -> bool {
        self.synced.load(Ordering::Relaxed)
    }

    /// Marks the chains as synced without a sync (tests of a router
    /// whose chains are empty on purpose).
    pub fn mark_synced(&self) {
        self.synced.store(true, Ordering::Relaxed);
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

    /// A point's generations.
    pub fn point(&self, point: AdmissionPoint) -> &Generations<PointChain> {
        &self.points[index(point)]
    }

    /// The chain serving a point now (one atomic load, no lock).
    pub fn chain(&self, point: AdmissionPoint) -> Arc<Chain> {
        self.point(point).serving()
    }

    /// The newer generation that failed here, and why.
    pub fn failure(&self, point: AdmissionPoint) -> Option<(i64, String)> {
        self.point(point).failure()
    }

    /// Pins each binding to its registered component: the plugin must
    /// exist, be an admission policy, and be signed by a trusted key where
    /// the cluster requires signed policies.
    pub async fn resolve(
        &self,
        bindings: Vec<Binding>,
    ) -> Result<Vec<BoundComponent>, AdmissionError> {
        let mut policies = Vec::with_capacity(bindings.len());
        for binding in bindings {
            let record = self
                .loader
                .record(&binding.plugin, &binding.version, PluginKind::Policy)
                .await?;
            policies.push(BoundComponent {
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

    /// Builds and serves the newest generation of every point this replica
    /// is behind on (one query for all four).
    pub async fn sync(&self) -> Result<(), AdmissionError> {
        let latest: HashMap<String, i64> = self
            .loader
            .store()
            .latest_generations()
            .await?
            .into_iter()
            .collect();
        for point in AdmissionPoint::ALL {
            let newest = latest.get(point.as_str()).copied().unwrap_or(0);
            self.point(point).sync(newest).await?;
        }
        Ok(())
    }
}

/// Follows every point's generations until shutdown.
pub async fn follow(admission: Arc<Admission>, poll: Duration, shutdown: watch::Receiver<bool>) {
    let store = admission.loader.store().clone();
    crate::bound::follow_generations(store, "admission", poll, shutdown, move || {
        let admission = admission.clone();
        async move {
            match admission.sync().await {
                Ok(()) => admission.synced.store(true, Ordering::Relaxed),
                Err(e) => tracing::warn!(error = %e, "admission sync failed"),
            }
        }
    })
    .await
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

fn list(points: &[AdmissionPoint]) -> String {
    let names: Vec<&str> = points.iter().map(|p| p.as_str()).collect();
    if names.is_empty() {
        "no point".into()
    } else {
        names.join(", ")
    }
}
