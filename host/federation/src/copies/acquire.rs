//! The grantee's acquisition of one copy, on the replica that runs it.
//!
//! A pass rechecks access (the grant refreshed from the owner, the owner's
//! manifest against the one the copy started with, the grant's bytes left
//! against the bytes still to come), then fetches each file in ranges from
//! its durable offset, fsyncing and recording the offset after each range.
//! A complete file whose SHA-256 is the declared one moves into the
//! library; when all are in, the revision is registered.
//!
//! A lost link is retried at most three times per acquisition, after
//! waits of 1, 2 and 4 s (state `waiting`); each reconnect gives the link
//! [`RECONNECT_DEADLINE`] to carry the access check again. After the third
//! the copy is `interrupted` and only an explicit resume goes on. A
//! revocation, a pause, a deletion or another replica's takeover ends the
//! run at once, whatever it is doing.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use switchyard_protocol::copies::{
    CopyFile, CopyRecord, CopyState, MAX_RANGE, ModelManifest, RangeRequest,
};
use switchyard_protocol::federation::LinkCall;
use switchyard_protocol::models::ModelRevision;
use switchyard_store::federation::CopyRun;
use tokio::sync::watch;

use super::fetch::RangeError;
use super::partial::{Partial, partial_path};
use crate::{Federation, FederationError};

/// The waits before the automatic reconnects of one acquisition.
pub(crate) const RECONNECT_WAITS: [Duration; 3] = [
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(4),
];
/// How long one reconnect waits for the link to carry the access check
/// (the keeper redials a lost link within a second or two).
const RECONNECT_DEADLINE: Duration = Duration::from_secs(5);
/// How often a reconnect tries the link within its deadline.
const RETRY: Duration = Duration::from_millis(200);
/// How often the runner says it still runs the copy (and learns of a
/// pause or takeover made on another replica).
const HOLD_EVERY: Duration = Duration::from_millis(500);

/// How an acquisition ended.
#[derive(Debug)]
enum Outcome {
    /// Every file is in the library and the revision registered.
    Complete,
    /// Stopped for a reason a reconnect does not mend.
    Stop(String, String),
    /// The reconnect allowance is spent.
    Interrupted(String),
    /// The grant was revoked.
    Revoked,
    /// Paused, deleted, taken over, or this replica stops: the state is
    /// someone else's to set.
    Ended,
}

/// Why a pass did not complete the copy.
#[derive(Debug)]
enum Pass {
    Lost(String),
    Stop(String, String),
}

impl From<FederationError> for Pass {
    /// A peer or link that cannot answer now is a lost link; any other
    /// refusal stops the copy with its code.
    fn from(e: FederationError) -> Self {
        match e.status {
            503 => Pass::Lost(e.message),
            _ => Pass::Stop(e.code, e.message),
        }
    }
}

fn storage(e: std::io::Error) -> Pass {
    tracing::warn!(error = %e, "a model copy's partial bytes could not be written");
    Pass::Stop(
        "storage_error".into(),
        "the library's disk failed while copying; see the server log".into(),
    )
}

impl Federation {
    /// Runs copy `id` here until it completes, stops or ends.
    pub(crate) async fn acquire(self: Arc<Self>, id: String, mut ended: watch::Receiver<bool>) {
        let me = self.config.instance_id.clone();
        let run = match self.store.copy(&id).await {
            Ok(Some(run)) if run.record.state.is_active() => run,
            Ok(_) => return,
            Err(e) => {
                tracing::warn!(copy = %id, error = %e, "a copy was not read; another pass takes it over");
                return;
            }
        };
        let mut revocation = self.inflight().enter(&run.record.grant);
        tracing::info!(copy = %id, peer = %run.record.peer, model = %run.record.model,
            revision = %run.record.revision, "model copy running");
        let outcome = tokio::select! {
            biased;
            _ = revocation.revoked() => Outcome::Revoked,
            _ = ended.wait_for(|e| *e) => Outcome::Ended,
            _ = self.hold_copy(&id) => Outcome::Ended,
            outcome = self.acquisition(&run) => outcome,
        };
        let (state, why) = match &outcome {
            Outcome::Complete => (CopyState::Complete, None),
            Outcome::Stop(code, message) => {
                (CopyState::Stopped, Some((code.as_str(), message.as_str())))
            }
            Outcome::Interrupted(message) => (
                CopyState::Interrupted,
                Some(("reconnects_exhausted", message.as_str())),
            ),
            Outcome::Revoked => (
                CopyState::Stopped,
                Some(("grant_revoked", "the grant was revoked")),
            ),
            Outcome::Ended => return,
        };
        tracing::info!(copy = %id, state = %state, code = why.map(|w| w.0), "model copy ended");
        if let Err(e) = self.store.set_copy_state(&id, &me, state, why).await {
            tracing::warn!(copy = %id, error = %e, "a copy's end was not recorded");
        }
    }

    /// Says every [`HOLD_EVERY`] that this replica runs the copy; returns
    /// once it no longer does.
    async fn hold_copy(&self, id: &str) {
        loop {
            tokio::time::sleep(HOLD_EVERY).await;
            match self.store.keep_copy(id, &self.config.instance_id).await {
                Ok(true) => {}
                Ok(false) => return,
                Err(e) => tracing::debug!(copy = id, error = %e, "a copy was not kept"),
            }
        }
    }

    async fn acquisition(&self, run: &CopyRun) -> Outcome {
        let id = &run.record.id;
        let Some(peer_id) = run.peer_id.as_deref() else {
            return Outcome::Stop(
                "peer_removed".into(),
                format!("peer '{}' was forgotten", run.record.peer),
            );
        };
        let mut partials: HashMap<String, Partial> = HashMap::new();
        let mut used = run.record.reconnects.len();
        let mut reconnecting = false;
        loop {
            let lost = match self.pass(run, peer_id, &mut partials, reconnecting).await {
                Ok(()) => return Outcome::Complete,
                Err(Pass::Stop(code, message)) => return Outcome::Stop(code, message),
                Err(Pass::Lost(why)) => why,
            };
            let Some(wait) = RECONNECT_WAITS.get(used).copied() else {
                return Outcome::Interrupted(format!(
                    "the link was lost after {} reconnects: {lost}",
                    RECONNECT_WAITS.len()
                ));
            };
            tracing::info!(copy = %id, error = %lost, wait_s = wait.as_secs(), "model copy lost its link; waiting");
            let me = &self.config.instance_id;
            let why = Some(("link_lost", lost.as_str()));
            if !matches!(
                self.store
                    .set_copy_state(id, me, CopyState::Waiting, why)
                    .await,
                Ok(true)
            ) {
                return Outcome::Ended;
            }
            let started = Instant::now();
            tokio::time::sleep(wait).await;
            let waited = started.elapsed().as_millis() as u64;
            if !matches!(
                self.store.note_copy_reconnect(id, me, waited).await,
                Ok(true)
            ) {
                return Outcome::Ended;
            }
            used += 1;
            reconnecting = true;
        }
    }

    /// One pass: access rechecked, then every file still to come.
    async fn pass(
        &self,
        run: &CopyRun,
        peer_id: &str,
        partials: &mut HashMap<String, Partial>,
        reconnecting: bool,
    ) -> Result<(), Pass> {
        let record = &run.record;
        // A reconnect gives the link a while to carry the first calls (the
        // keeper redials the inference lane first, the bulk lane after it).
        let deadline = Instant::now()
            + if reconnecting {
                RECONNECT_DEADLINE
            } else {
                Duration::ZERO
            };
        let manifest = self.recheck(record, peer_id, partials, deadline).await?;
        let root = self.ports.blobs.partial_dir();
        for file in &record.files {
            // The library holds it (this copy put it there, or another import did).
            if self.ports.blobs.has_blob(&file.sha256, file.size) {
                self.store
                    .advance_copy_file(&record.id, &file.path, file.size, true)
                    .await
                    .map_err(FederationError::from)?;
                continue;
            }
            if !partials.contains_key(&file.path) {
                let path = partial_path(&root, &record.id, &file.sha256);
                let durable = self.durable(record, &file.path).await?;
                let partial = Partial::open(path, durable).await.map_err(storage)?;
                if partial.held() < durable {
                    // Kept on another replica's disk, or lost: from what is here.
                    self.store
                        .advance_copy_file(&record.id, &file.path, partial.held(), false)
                        .await
                        .map_err(FederationError::from)?;
                }
                partials.insert(file.path.clone(), partial);
            }
            let partial = partials.get_mut(&file.path).expect("opened above");
            self.fetch_file(record, peer_id, file, partial, deadline)
                .await?;
            let partial = partials
                .remove(&file.path)
                .expect("the partial was just used");
            self.verify(record, file, partial).await?;
        }
        self.register_copy(record, manifest, &root).await
    }

    /// The durable offset of a file as the database holds it now.
    async fn durable(&self, record: &CopyRecord, path: &str) -> Result<u64, Pass> {
        let now = self
            .store
            .copy(&record.id)
            .await
            .map_err(FederationError::from)?
            .ok_or(Pass::Stop(
                "copy_deleted".into(),
                "the copy was deleted".into(),
            ))?;
        Ok(now
            .record
            .files
            .iter()
            .find(|f| f.path == path)
            .map_or(0, |f| f.offset))
    }

    /// Access, as the owner says now: the grant refreshed, the manifest the
    /// same, the bytes left enough for the bytes still to come. A
    /// reconnect gives the link [`RECONNECT_DEADLINE`] to come back.
    async fn recheck(
        &self,
        record: &CopyRecord,
        peer_id: &str,
        partials: &HashMap<String, Partial>,
        deadline: Instant,
    ) -> Result<ModelManifest, Pass> {
        let grant = loop {
            match self.refresh(&record.grant).await {
                Ok(grant) => break grant,
                Err(e) if e.status == 503 && Instant::now() < deadline => {
                    tokio::time::sleep(RETRY).await;
                }
                Err(e) => return Err(e.into()),
            }
        };
        let refused = match grant.status.as_str() {
            "active" => None,
            "revoked" => Some("grant_revoked"),
            "expired" => Some("grant_expired"),
            _ => Some("grant_inactive"),
        };
        if let Some(code) = refused {
            return Err(Pass::Stop(
                code.into(),
                format!("grant {} is {}", grant.id, grant.status),
            ));
        }
        let body = self
            .call(
                peer_id,
                &LinkCall::InspectModel {
                    grant: record.grant.clone(),
                    model: record.model.clone(),
                    revision: record.revision.clone(),
                },
            )
            .await?;
        let manifest: ModelManifest = serde_json::from_value(body)
            .map_err(|e| Pass::Lost(format!("the owner's manifest: {e}")))?;
        if !same_files(&manifest, &record.files) {
            return Err(Pass::Stop(
                "content_changed".into(),
                format!(
                    "{}@{} on the owner is not the revision this copy started with",
                    record.model, record.revision
                ),
            ));
        }
        let to_come: u64 = record
            .files
            .iter()
            .filter(|f| !f.complete)
            .map(|f| {
                f.size
                    - partials
                        .get(&f.path)
                        .map_or(f.offset, Partial::held)
                        .min(f.size)
            })
            .sum();
        let left = grant
            .terms
            .max_model_bytes
            .saturating_sub(grant.usage.model_bytes);
        if left < to_come {
            return Err(Pass::Stop(
                "model_bytes_exhausted".into(),
                format!(
                    "grant {} has {left} model bytes left and the copy needs {to_come} more",
                    grant.id
                ),
            ));
        }
        Ok(manifest)
    }

    /// Fetches a file's ranges from its held offset, recording each as
    /// durable once fsync'd (a broken range keeps what came).
    async fn fetch_file(
        &self,
        record: &CopyRecord,
        peer_id: &str,
        file: &CopyFile,
        partial: &mut Partial,
        deadline: Instant,
    ) -> Result<(), Pass> {
        while partial.held() < file.size {
            let offset = partial.held();
            let request = RangeRequest {
                grant: record.grant.clone(),
                model: record.model.clone(),
                revision: record.revision.clone(),
                path: file.path.clone(),
                sha256: file.sha256.clone(),
                size: file.size,
                offset: partial.held(),
                length: MAX_RANGE.min(file.size - partial.held()),
            };
            let fetched = self.fetch_range(peer_id, &request, partial).await;
            let durable = partial.sync().await.map_err(storage)?;
            self.store
                .advance_copy_file(&record.id, &file.path, durable, false)
                .await
                .map_err(FederationError::from)?;
            match fetched {
                Ok(()) => {}
                // The lane is not back yet: nothing came, and the reconnect has time.
                Err(RangeError::Lost(_))
                    if partial.held() == offset && Instant::now() < deadline =>
                {
                    tokio::time::sleep(RETRY).await;
                }
                Err(RangeError::Lost(why)) => return Err(Pass::Lost(why)),
                Err(RangeError::Refused {
                    status: 503,
                    message,
                    ..
                }) => {
                    return Err(Pass::Lost(message));
                }
                Err(RangeError::Refused { code, message, .. }) => {
                    return Err(Pass::Stop(
                        code,
                        format!("the owner refused a range: {message}"),
                    ));
                }
                Err(RangeError::Local(e)) => return Err(storage(e)),
            }
        }
        Ok(())
    }

    /// Moves a complete file into the library when it hashes to its
    /// declared SHA-256; discards it otherwise.
    async fn verify(
        &self,
        record: &CopyRecord,
        file: &CopyFile,
        partial: Partial,
    ) -> Result<(), Pass> {
        let (digest, path) = partial.finish().await.map_err(storage)?;
        if digest != file.sha256 {
            let _ = tokio::fs::remove_file(&path).await;
            self.store
                .reset_copy_file(&record.id, &file.path)
                .await
                .map_err(FederationError::from)?;
            tracing::warn!(copy = %record.id, path = %file.path, "a copied file did not hash to its declared SHA-256; discarded");
            return Err(Pass::Stop(
                "digest_mismatch".into(),
                format!(
                    "{} does not hash to its declared SHA-256; its bytes were discarded",
                    file.path
                ),
            ));
        }
        self.ports
            .blobs
            .adopt_blob(&file.sha256, &path)
            .map_err(storage)?;
        self.store
            .advance_copy_file(&record.id, &file.path, file.size, true)
            .await
            .map_err(FederationError::from)?;
        Ok(())
    }

    /// Registers the revision once every file is in the library.
    async fn register_copy(
        &self,
        record: &CopyRecord,
        manifest: ModelManifest,
        root: &std::path::Path,
    ) -> Result<(), Pass> {
        let revision = ModelRevision {
            id: manifest.id,
            revision: manifest.revision,
            licence: manifest.licence,
            files: manifest.files,
            imported_by: String::new(),
            imported_at: String::new(),
        };
        let by = format!("federation:{}", record.peer);
        let inserted = self
            .store
            .insert_model_revision(&revision, &by)
            .await
            .map_err(FederationError::from)?;
        if inserted == switchyard_store::models::RevisionInsert::Conflict {
            return Err(Pass::Stop(
                "revision_exists".into(),
                format!(
                    "{}@{} is registered here with other files",
                    record.model, record.revision
                ),
            ));
        }
        let _ = tokio::fs::remove_dir_all(root.join(&record.id)).await;
        Ok(())
    }
}

/// Whether the owner's manifest lists exactly the files the copy started with.
fn same_files(manifest: &ModelManifest, files: &[CopyFile]) -> bool {
    let mut theirs: Vec<(&str, u64, &str)> = manifest
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.size.max(0) as u64, f.sha256.as_str()))
        .collect();
    let mut ours: Vec<(&str, u64, &str)> = files
        .iter()
        .map(|f| (f.path.as_str(), f.size, f.sha256.as_str()))
        .collect();
    theirs.sort_unstable();
    ours.sort_unstable();
    theirs == ours
}
