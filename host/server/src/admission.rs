//! The admission chains this replica serves, one atomic pointer per point.
//! A new generation is built beside the old one (compile, validate settings,
//! smoke call) and swapped in; calls in flight finish on the old instances.

mod follower;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use arc_swap::ArcSwap;
use axum::http::StatusCode;
use switchyard_runtime::admission::{AdmissionPoint, Chain, ChainEntry, FailMode, Mode};
use switchyard_runtime::policy::{PolicyPlugin, PolicySource};
use switchyard_runtime::{LoadError, Runtime};
use switchyard_store::Store;
use switchyard_store::admission::{Generation, StoredPolicy};

use crate::error::ApiError;

pub use follower::follow;

/// The chains of every point, and where they came from.
pub struct Admission {
    chains: [ArcSwap<Chain>; 4],
    /// The newest generation that failed to build here, per point.
    failed: Mutex<HashMap<AdmissionPoint, (i64, String)>>,
    /// Component bytes by digest, so a rebuild does not refetch them.
    bytes: Mutex<HashMap<String, Arc<Vec<u8>>>>,
    store: Store,
    runtime: Arc<Runtime>,
    instance_id: String,
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
            bytes: Mutex::new(HashMap::new()),
            store,
            runtime,
            instance_id,
        }
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

    /// Builds a stored generation into a callable chain. Loading runs on the
    /// blocking pool: compiling a large component takes seconds.
    pub async fn build(
        &self,
        point: AdmissionPoint,
        generation: &Generation,
    ) -> Result<Chain, ApiError> {
        let mut entries = Vec::with_capacity(generation.policies.len());
        for stored in &generation.policies {
            let bytes = self.component_bytes(&stored.sha256).await?;
            let runtime = self.runtime.clone();
            let stored_owned = stored.clone();
            let policy = tokio::task::spawn_blocking(move || {
                PolicyPlugin::load(
                    &runtime,
                    PolicySource {
                        name: &stored_owned.plugin,
                        version: &stored_owned.version,
                        bytes: &bytes,
                        sha256: &stored_owned.sha256,
                        settings: &stored_owned.settings.to_string(),
                    },
                )
            })
            .await
            .map_err(ApiError::internal)?
            .map_err(|e| describe(stored, e))?;
            if !policy.points().contains(&point) {
                return Err(ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "point_not_supported",
                    format!(
                        "{} judges {} and cannot be bound to the {point} point",
                        policy.label(),
                        list(policy.points())
                    ),
                ));
            }
            entries.push(ChainEntry {
                policy,
                mode: parse_mode(&stored.mode)?,
                fail: parse_fail(&stored.fail)?,
            });
        }
        Ok(Chain {
            point,
            generation: generation.generation,
            entries,
        })
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
    ) -> Result<Generation, ApiError> {
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
    pub async fn sync(&self) -> Result<(), ApiError> {
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
                    tracing::warn!(%point, generation = generation.generation, error = %e.message,
                        "admission generation failed here; still serving the previous one");
                    self.failed
                        .lock()
                        .expect("failed lock")
                        .insert(point, (generation.generation, e.message));
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

    async fn component_bytes(&self, sha256: &str) -> Result<Arc<Vec<u8>>, ApiError> {
        if let Some(bytes) = self.bytes.lock().expect("bytes lock").get(sha256) {
            return Ok(bytes.clone());
        }
        let bytes = Arc::new(self.store.plugin_bytes(sha256).await?);
        self.bytes
            .lock()
            .expect("bytes lock")
            .insert(sha256.to_string(), bytes.clone());
        Ok(bytes)
    }
}

fn describe(stored: &StoredPolicy, e: LoadError) -> ApiError {
    let mut error = ApiError::from(e);
    if error.code != "invalid_settings" {
        error.message = format!("{}@{}: {}", stored.plugin, stored.version, error.message);
    }
    error
}

fn list(points: &[AdmissionPoint]) -> String {
    let names: Vec<&str> = points.iter().map(|p| p.as_str()).collect();
    if names.is_empty() {
        "no point".into()
    } else {
        names.join(", ")
    }
}

/// Parses a binding's `mode`.
pub fn parse_mode(s: &str) -> Result<Mode, ApiError> {
    match s {
        "enforce" => Ok(Mode::Enforce),
        "monitor" => Ok(Mode::Monitor),
        other => Err(ApiError::invalid_request(format!(
            "mode must be 'enforce' or 'monitor', got '{other}'"
        ))),
    }
}

/// Parses a binding's `fail`.
pub fn parse_fail(s: &str) -> Result<FailMode, ApiError> {
    match s {
        "closed" => Ok(FailMode::Closed),
        "open" => Ok(FailMode::Open),
        other => Err(ApiError::invalid_request(format!(
            "fail must be 'closed' or 'open', got '{other}'"
        ))),
    }
}
