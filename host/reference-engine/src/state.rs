//! The state shared by every handler.

use std::sync::{Arc, OnceLock};

use crate::concurrency::{InFlight, Limiter};
use crate::config::ReferenceConfig;
use crate::decode::Pace;
use crate::error::EngineError;
use crate::model::{Model, ModelFile};
use crate::openai::ApiError;
use crate::stats::Stats;

/// The engine's shared state; cheap to clone.
#[derive(Debug, Clone)]
pub struct EngineState {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Empty while the model file is being hashed.
    model: OnceLock<Model>,
    pace: Pace,
    limiter: Limiter,
    stats: Arc<Stats>,
}

impl EngineState {
    /// Opens and hashes the model, then returns a ready state (for
    /// [`router`](crate::router) in tests; [`serve`](crate::serve) answers
    /// health checks while it hashes).
    pub async fn load(config: &ReferenceConfig) -> Result<Self, EngineError> {
        let model = ModelFile::open(config)?.load().await?;
        let state = Self::loading(config);
        state.set_loaded(model);
        Ok(state)
    }

    /// A state whose model is not loaded yet.
    pub(crate) fn loading(config: &ReferenceConfig) -> Self {
        Self {
            inner: Arc::new(Inner {
                model: OnceLock::new(),
                pace: Pace {
                    first_token: config.first_token_delay,
                    per_token: config.token_delay,
                },
                limiter: Limiter::new(config.max_concurrency),
                stats: Arc::default(),
            }),
        }
    }

    pub(crate) fn set_loaded(&self, model: Model) {
        // Only `load` and `serve` call this, once each on a fresh state.
        let _ = self.inner.model.set(model);
    }

    /// The model, once loaded.
    pub fn model(&self) -> Option<&Model> {
        self.inner.model.get()
    }

    /// The model, if `requested` names it.
    pub fn serving(&self, requested: &str) -> Result<&Model, ApiError> {
        let model = self.model().ok_or(ApiError::Loading)?;
        if model.name != requested {
            return Err(ApiError::ModelNotFound {
                requested: requested.to_owned(),
                served: model.name.clone(),
            });
        }
        Ok(model)
    }

    /// Admits a request within `max_concurrency`.
    pub fn admit(&self) -> Result<InFlight, ApiError> {
        self.inner.limiter.admit(self.inner.stats.clone())
    }

    /// How fast to generate.
    pub fn pace(&self) -> Pace {
        self.inner.pace
    }

    /// The counters.
    pub fn stats(&self) -> &Stats {
        &self.inner.stats
    }
}
