//! One slot's generations on this replica: what it serves, the newest that
//! failed to build here, and the moves that change them (commit, roll
//! back, follow).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use arc_swap::ArcSwap;
use switchyard_store::StoreError;
use switchyard_store::admission::{
    BoundComponent, Generation, ReplicaStatus, rollback_note, rolled_back_to,
};

use super::{BindError, Kind, Loader, Serving};

/// A slot bound with generations.
pub struct Generations<K: Kind> {
    kind: K,
    /// The name its generations are stored under.
    slot: String,
    serving: ArcSwap<K::Built>,
    /// The newest generation that failed to build here, and why.
    failed: Mutex<Option<(i64, String)>>,
    loader: Arc<Loader>,
}

impl<K: Kind> std::fmt::Debug for Generations<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Generations")
            .field("slot", &self.slot)
            .field("generation", &self.serving.load().generation())
            .finish()
    }
}

impl<K: Kind> Generations<K> {
    /// Serves `first` until the first sync.
    pub fn new(kind: K, slot: impl Into<String>, first: K::Built, loader: Arc<Loader>) -> Self {
        Self {
            kind,
            slot: slot.into(),
            serving: ArcSwap::from_pointee(first),
            failed: Mutex::new(None),
            loader,
        }
    }

    /// What this replica serves now (one atomic load, no lock).
    pub fn serving(&self) -> Arc<K::Built> {
        self.serving.load_full()
    }

    /// The newer generation that failed here, and why.
    pub fn failure(&self) -> Option<(i64, String)> {
        self.failed.lock().expect("failed lock").clone()
    }

    /// The kind's own part.
    pub fn kind(&self) -> &K {
        &self.kind
    }

    /// Makes a new generation binding `policies`, make before break: it is
    /// built (every setting validated) here before it is stored, then
    /// swapped in; the other replicas follow the row.
    pub async fn commit(
        &self,
        policies: &[BoundComponent],
        note: &str,
        by: &str,
    ) -> Result<Generation, K::Error> {
        let candidate = Generation {
            point: self.slot.clone(),
            generation: 0,
            policies: policies.to_vec(),
            note: note.into(),
            created_by: by.into(),
            created_at: None,
        };
        let mut built = self.kind.build(&self.loader, &candidate).await?;
        let store = self.loader.store();
        let generation = store
            .push_generation(&self.slot, policies, note, by)
            .await
            .map_err(BindError::from)?;
        built.set_generation(generation.generation);
        self.activate(built).await;
        Ok(generation)
    }

    /// A new generation with an older binding: generation `to`, or the one
    /// before the generation whose binding is in force (the rule of
    /// [`rollback_target`]). Returns it and the generation it restored.
    pub async fn roll_back(
        &self,
        to: Option<i64>,
        by: &str,
    ) -> Result<(Generation, i64), K::Error> {
        let store = self.loader.store();
        let latest = store
            .latest_generation(&self.slot)
            .await
            .map_err(BindError::from)?;
        let target = match rollback_target(&latest, to) {
            Ok(target) => target,
            Err(RollbackRefused::NotOlder { newest, target }) => {
                return Err(BindError::NotOlder { newest, target }.into());
            }
            Err(why) => return Err(self.kind.nothing_to_restore(why)),
        };
        let previous = store
            .generation(&self.slot, target)
            .await
            .map_err(BindError::from)?
            .ok_or_else(|| BindError::UnknownGeneration {
                slot: self.kind.describe(),
                generation: target,
            })?;
        // A rollback binds anew: its components meet today's requirement.
        crate::signing::check_stored::<BindError>(store, &previous.policies).await?;
        let note = rollback_note(previous.generation);
        let generation = self.commit(&previous.policies, &note, by).await?;
        Ok((generation, previous.generation))
    }

    /// Builds and serves generation `newest` unless this replica serves it
    /// already, or failed to build it already (generation 0 is retried:
    /// what it needs may be seeded by a replica starting later).
    pub async fn sync(&self, newest: i64) -> Result<(), K::Error> {
        let serving = self.serving.load();
        let current = serving.generation() == newest && serving.ready();
        let already_failed = newest != 0 && self.failure().is_some_and(|(g, _)| g == newest);
        if current || already_failed {
            return Ok(());
        }
        let started = Instant::now();
        let generation = self
            .loader
            .store()
            .latest_generation(&self.slot)
            .await
            .map_err(BindError::from)?;
        match self.kind.build(&self.loader, &generation).await {
            Ok(built) => {
                self.activate(built).await;
                tracing::info!(slot = %self.slot, generation = generation.generation,
                    activation_ms = started.elapsed().as_secs_f64() * 1e3, "generation active");
            }
            Err(e) => {
                let failure = Some((generation.generation, e.to_string()));
                // Said once, not once a poll.
                if self.failure() == failure {
                    return Ok(());
                }
                tracing::warn!(slot = %self.slot, generation = generation.generation, error = %e,
                    "generation failed here; still serving the previous one");
                *self.failed.lock().expect("failed lock") = failure;
                self.report().await;
            }
        }
        Ok(())
    }

    /// What every live replica serves in this slot.
    pub async fn replicas(&self, latest: i64) -> Result<Vec<ReplicaStatus>, StoreError> {
        self.loader
            .store()
            .admission_replicas(&self.slot, latest)
            .await
    }

    /// Swaps a built generation in and records it; an older generation
    /// never replaces a newer one (save generation 0: the database was
    /// reset under this replica).
    async fn activate(&self, built: K::Built) {
        let generation = built.generation();
        if self.serving.load().generation() > generation && generation != 0 {
            return;
        }
        self.serving.store(Arc::new(built));
        {
            let mut failed = self.failed.lock().expect("failed lock");
            if failed.as_ref().is_some_and(|(g, _)| *g <= generation) {
                *failed = None;
            }
        }
        self.report().await;
    }

    async fn report(&self) {
        let serving = self.serving.load().generation();
        let failure = self.failure();
        self.loader
            .report(&self.slot, serving, failure.as_ref())
            .await;
    }
}

/// Why [`rollback_target`] found nothing to restore.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RollbackRefused {
    /// Nothing was ever set.
    NoGeneration,
    /// `target` is not older than `newest`.
    NotOlder {
        /// The newest generation.
        newest: i64,
        /// The one asked for.
        target: i64,
    },
    /// What runs is generation 0's already.
    FirstActive,
}

/// Which generation a rollback restores, given the newest one: `to`, or the
/// one before the generation whose content is active (the newest, or the
/// one it restored).
///
/// A rollback walks back: after `1, 2, 3`, the first rollback restores 2's
/// binding and the second 1's, not 3's again. (Undoing the last change, as
/// `kubectl rollout undo` does, flaps between two bindings when repeated;
/// an operator who rolls back twice means two steps back.)
pub fn rollback_target(latest: &Generation, to: Option<i64>) -> Result<i64, RollbackRefused> {
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
