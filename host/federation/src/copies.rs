//! Verified model copies between clusters.
//!
//! The owner serves the manifest of a revision its `models:transfer`
//! grant lists and an offer publishes, and ranges of its files on the bulk
//! lane (`serve`). The grantee keeps a copy record per revision and peer
//! (`/api/federation/copies`) and runs each active copy on one replica
//! (`acquire`): ranges of at most 64 MiB appended to a partial file under
//! the library (`partial`), fsync'd before the durable offset advances,
//! verified whole before the file enters the library.
//!
//! A replica says every half second that it still runs its copies; a copy
//! left active by a replica silent for [`ORPHANED_AFTER`] (a dead one, or
//! this one before a restart) is taken over by the next replica whose
//! keeper looks.
//!
//! # Layout
//! - `serve`: the owner's manifest and range service.
//! - `fetch`: one range, on the grantee.
//! - `partial`: a file's partial bytes and their running SHA-256.
//! - `acquire`: one copy's acquisition, with its reconnect rule.

mod acquire;
mod fetch;
mod partial;
pub(crate) mod serve;

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use switchyard_protocol::federation::GrantStanding;

use switchyard_protocol::copies::{CopyFile, CopyRecord, CopyState, ModelManifest, NewCopy};
use switchyard_protocol::federation::{Direction, GrantRecord, LinkCall, Operation};
use switchyard_runtime::admission::{Caller, TransferRequest};
use switchyard_store::federation::{CopyInsert, NewCopyRow};
use tokio::sync::watch;

use crate::{FedResult, Federation, FederationError};

/// Free space the library's disk keeps beside a copy's bytes still to
/// come, as a worker's placement cache does: a full disk stalls every
/// other writer on it.
pub const DISK_RESERVE: u64 = 512 << 20;
/// An active copy whose runner has been silent this long is taken over.
pub const ORPHANED_AFTER: Duration = Duration::from_secs(10);
/// How often the keeper looks for orphaned copies.
const KEEPER_TICK: Duration = Duration::from_secs(2);

/// The copies running on this replica, each with its end signal.
#[derive(Debug, Default)]
pub(crate) struct Runners {
    running: Mutex<HashMap<String, (u64, watch::Sender<bool>)>>,
    next: AtomicU64,
}

impl Runners {
    /// Registers a run of `id`; `None` when one runs here already.
    fn begin(&self, id: &str) -> Option<(u64, watch::Receiver<bool>)> {
        let mut running = self.running.lock().expect("runners lock");
        if running.contains_key(id) {
            return None;
        }
        let token = self.next.fetch_add(1, Ordering::Relaxed);
        let (sender, receiver) = watch::channel(false);
        running.insert(id.to_string(), (token, sender));
        Some((token, receiver))
    }

    fn end(&self, id: &str, token: u64) {
        let mut running = self.running.lock().expect("runners lock");
        if running.get(id).is_some_and(|(t, _)| *t == token) {
            running.remove(id);
        }
    }

    /// Ends the run of `id` here, if any, at once.
    fn stop(&self, id: &str) {
        if let Some((_, sender)) = self.running.lock().expect("runners lock").remove(id) {
            sender.send_replace(true);
        }
    }
}

/// What a copy's start answers: whether it is new, and the record.
#[derive(Debug, Clone)]
pub struct Started {
    /// A new copy (202) rather than one resumed or already complete (200).
    pub created: bool,
    /// The record.
    pub record: CopyRecord,
}

fn copy_not_found(id: &str) -> FederationError {
    FederationError::new(404, "copy_not_found", format!("no copy '{id}'"))
}

impl Federation {
    /// The incoming grant from `peer` that lets this cluster copy
    /// `model@revision`.
    async fn transfer_grant(
        &self,
        peer: &str,
        model: &str,
        revision: &str,
    ) -> FedResult<GrantRecord> {
        let named = format!("{model}@{revision}");
        self.store
            .grants()
            .await?
            .into_iter()
            .find(|g| {
                g.direction == Direction::Incoming
                    && g.peer == peer
                    && g.status == GrantStanding::Active
                    && g.terms.operations.contains(&Operation::ModelsTransfer)
                    && g.terms.models.contains(&named)
            })
            .ok_or_else(|| {
                FederationError::new(
                    403,
                    "no_grant",
                    format!("peer '{peer}' has granted this cluster no copy of {named}"),
                )
            })
    }

    /// The manifest of a revision `peer` granted, asked over the link.
    pub async fn inspect_model(
        &self,
        peer: &str,
        model: &str,
        revision: &str,
    ) -> FedResult<ModelManifest> {
        model_name("model", model)?;
        model_name("revision", revision)?;
        let peer = self.peer(peer).await?;
        let grant = self.transfer_grant(&peer.label, model, revision).await?;
        self.manifest_from(&peer.id, &grant.id, model, revision)
            .await
    }

    async fn manifest_from(
        &self,
        peer_id: &str,
        grant: &str,
        model: &str,
        revision: &str,
    ) -> FedResult<ModelManifest> {
        let body = self
            .call(
                peer_id,
                &LinkCall::InspectModel {
                    grant: grant.to_string(),
                    model: model.to_string(),
                    revision: revision.to_string(),
                },
            )
            .await?;
        serde_json::from_value(body)
            .map_err(|e| FederationError::new(502, "peer_error", format!("the manifest: {e}")))
    }

    /// Starts copying `model@revision` from a peer, by `key`: a copy of it
    /// not yet complete is resumed, a revision the library holds already
    /// answers as complete.
    pub async fn start_copy(self: &Arc<Self>, new: NewCopy, key: &str) -> FedResult<Started> {
        model_name("model", &new.model)?;
        model_name("revision", &new.revision)?;
        let peer = self.peer(&new.peer).await?;
        let newest = self
            .store
            .copy_of(&peer.label, &new.model, &new.revision)
            .await?;
        if let Some(run) = &newest
            && run.record.state != CopyState::Complete
        {
            let record = self.resume_copy(&run.record.id, key).await?;
            return Ok(Started {
                created: false,
                record,
            });
        }
        if let Some(record) = self
            .in_library(&peer.label, &new, newest.map(|r| r.record))
            .await?
        {
            return Ok(Started {
                created: false,
                record,
            });
        }
        let grant = self
            .transfer_grant(&peer.label, &new.model, &new.revision)
            .await?;
        let manifest = self
            .manifest_from(&peer.id, &grant.id, &new.model, &new.revision)
            .await?;
        let files: Vec<CopyFile> = manifest
            .files
            .iter()
            .map(|f| CopyFile {
                path: f.path.clone(),
                size: f.size.max(0) as u64,
                sha256: f.sha256.clone(),
                offset: 0,
                complete: false,
            })
            .collect();
        if files.iter().any(|f| !valid_digest(&f.sha256)) {
            return Err(FederationError::new(
                502,
                "peer_error",
                "the owner's manifest names a file without a SHA-256",
            ));
        }
        self.disk_check(&files)?;
        let id = switchyard_store::keys::random_id("copy");
        let row = NewCopyRow {
            id: &id,
            peer: (&peer.label, &peer.id),
            grant: &grant.id,
            model: &new.model,
            revision: &new.revision,
            licence: manifest.licence.as_deref(),
            files: &manifest.files,
            started_by: key,
            runner: &self.config.instance_id,
        };
        let record = match self.store.insert_copy(&row).await? {
            CopyInsert::Done(record) => *record,
            CopyInsert::Full => {
                return Err(FederationError::new(
                    409,
                    "limit_reached",
                    format!(
                        "{} copies are kept; delete some to make room",
                        switchyard_protocol::copies::MAX_COPIES
                    ),
                ));
            }
            CopyInsert::Exists => {
                // Another request made it a moment ago: resume that one.
                let run = self
                    .store
                    .copy_of(&peer.label, &new.model, &new.revision)
                    .await?
                    .ok_or_else(|| copy_not_found(&id))?;
                let record = self.resume_copy(&run.record.id, key).await?;
                return Ok(Started {
                    created: false,
                    record,
                });
            }
        };
        self.begin_run(&record, key).await?;
        Ok(Started {
            created: true,
            record: self.copy(&record.id).await?,
        })
    }

    /// The revision as complete when the library holds it already.
    async fn in_library(
        &self,
        peer: &str,
        new: &NewCopy,
        newest: Option<CopyRecord>,
    ) -> FedResult<Option<CopyRecord>> {
        let Some(revision) = self.store.model_revision(&new.model, &new.revision).await? else {
            return Ok(None);
        };
        if !revision
            .files
            .iter()
            .all(|f| self.ports.blobs.has_blob(&f.sha256, f.size.max(0) as u64))
        {
            return Ok(None);
        }
        if let Some(record) = newest {
            return Ok(Some(record));
        }
        let files: Vec<CopyFile> = revision
            .files
            .iter()
            .map(|f| CopyFile {
                path: f.path.clone(),
                size: f.size.max(0) as u64,
                sha256: f.sha256.clone(),
                offset: f.size.max(0) as u64,
                complete: true,
            })
            .collect();
        let total = files.iter().map(|f| f.size).sum();
        // No copy made it (it was imported here): a record for the answer only.
        Ok(Some(CopyRecord {
            id: String::new(),
            peer: peer.to_string(),
            grant: String::new(),
            model: revision.id,
            revision: revision.revision,
            state: CopyState::Complete,
            code: None,
            message: None,
            bytes_held: total,
            bytes_total: total,
            files,
            reconnects: Vec::new(),
            created_at: revision.imported_at.clone(),
            updated_at: revision.imported_at,
        }))
    }

    /// The checks a start or resume makes here, before any byte moves:
    /// the disk reserve, then the `transfer` chain once per file still to
    /// come. A refusal stops the copy with its code.
    async fn begin_run(self: &Arc<Self>, record: &CopyRecord, key: &str) -> FedResult<()> {
        let checked = match self.disk_check(&record.files) {
            Ok(()) => self.transfer_chain(record, key).await,
            Err(e) => Err(e),
        };
        if let Err(refused) = checked {
            self.store
                .set_copy_state(
                    &record.id,
                    &self.config.instance_id,
                    CopyState::Stopped,
                    Some((&refused.code, &refused.message)),
                )
                .await?;
            return Err(refused);
        }
        self.spawn_copy(record.id.clone());
        Ok(())
    }

    /// `insufficient_storage` unless the library's disk has the bytes
    /// still to come and [`DISK_RESERVE`] free.
    fn disk_check(&self, files: &[CopyFile]) -> FedResult<()> {
        let root = self.ports.blobs.partial_dir();
        let to_come: u64 = files
            .iter()
            .filter(|f| !f.complete)
            .map(|f| f.size - f.offset.min(f.size))
            .sum();
        let needed = to_come.saturating_add(DISK_RESERVE);
        let available = available_bytes(&root).map_err(FederationError::internal)?;
        if available < needed {
            return Err(FederationError::new(
                507,
                "insufficient_storage",
                format!(
                    "the library's disk has {available} bytes free; the copy needs {to_come} more beside a reserve of {DISK_RESERVE}"
                ),
            ));
        }
        Ok(())
    }

    /// The `transfer` chain on each file still to come.
    async fn transfer_chain(&self, record: &CopyRecord, key: &str) -> FedResult<()> {
        for file in record.files.iter().filter(|f| !f.complete) {
            let request = TransferRequest {
                caller: Caller {
                    key_id: key.to_string(),
                    project: None,
                    scopes: vec!["models:manage".into()],
                },
                model: record.model.clone(),
                revision: record.revision.clone(),
                file: file.path.clone(),
                size_bytes: file.size,
                source: format!("federation:{}", record.peer),
                destination: "library".into(),
            };
            self.ports
                .local
                .admit_transfer(request)
                .await
                .map_err(|d| FederationError::new(d.status, d.code, d.message))?;
        }
        Ok(())
    }

    /// Runs copy `id` on this replica unless it runs here already.
    fn spawn_copy(self: &Arc<Self>, id: String) {
        let Some((token, ended)) = self.copy_runners.begin(&id) else {
            return;
        };
        let federation = self.clone();
        tokio::spawn(async move {
            federation.clone().acquire(id.clone(), ended).await;
            federation.copy_runners.end(&id, token);
        });
    }

    /// One copy.
    pub async fn copy(&self, id: &str) -> FedResult<CopyRecord> {
        Ok(self
            .store
            .copy(id)
            .await?
            .ok_or_else(|| copy_not_found(id))?
            .record)
    }

    /// Every copy, oldest first.
    pub async fn copies(&self) -> FedResult<Vec<CopyRecord>> {
        Ok(self.store.copies().await?)
    }

    /// Pauses an active copy (a reconnect wait ends at once); a paused
    /// copy answers as it is.
    pub async fn pause_copy(&self, id: &str) -> FedResult<CopyRecord> {
        let paused = self.store.pause_copy(id).await?;
        self.copy_runners.stop(id);
        let record = self.copy(id).await?;
        if !paused && record.state != CopyState::Paused {
            return Err(FederationError::new(
                409,
                "copy_not_running",
                format!("copy '{id}' is {}", record.state),
            ));
        }
        Ok(record)
    }

    /// Resumes a copy that is paused, interrupted or stopped, by `key`: a
    /// new acquisition with a fresh reconnect allowance, from the durable
    /// offsets. An active or complete copy answers as it is.
    pub async fn resume_copy(self: &Arc<Self>, id: &str, key: &str) -> FedResult<CopyRecord> {
        let record = self.copy(id).await?;
        if record.state.is_active() || record.state == CopyState::Complete {
            return Ok(record);
        }
        self.disk_check(&record.files)?;
        let Some(run) = self
            .store
            .resume_copy(id, &self.config.instance_id, key)
            .await?
        else {
            // Resumed or deleted in between.
            return self.copy(id).await;
        };
        self.begin_run(&run.record, key).await?;
        self.copy(id).await
    }

    /// Deletes a copy that is not running, with its partial bytes (the
    /// files it moved into the library stay).
    pub async fn delete_copy(&self, id: &str) -> FedResult<()> {
        let record = self.copy(id).await?;
        if record.state.is_active() || !self.store.delete_copy(id).await? {
            return Err(FederationError::new(
                409,
                "copy_running",
                format!("copy '{id}' is running; pause it first"),
            ));
        }
        let _ = tokio::fs::remove_dir_all(self.ports.blobs.partial_dir().join(id)).await;
        Ok(())
    }

    /// Copies not complete, for the status.
    pub(crate) async fn unfinished_copies(&self) -> FedResult<Vec<CopyRecord>> {
        Ok(self.store.unfinished_copies().await?)
    }
}

/// Takes over the active copies whose runner went silent, until `stop`.
pub(crate) async fn keep(federation: Arc<Federation>, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(KEEPER_TICK) => {}
        }
        let claimed = federation
            .store
            .claim_orphaned_copies(&federation.config.instance_id, ORPHANED_AFTER.as_secs_f64())
            .await;
        match claimed {
            Ok(ids) => {
                for id in ids {
                    tracing::info!(copy = %id, "taking over a model copy its replica left");
                    federation.spawn_copy(id);
                }
            }
            Err(e) => tracing::warn!(error = %e, "orphaned model copies were not looked for"),
        }
    }
}

/// The longest model id or revision, as the library takes them.
const MAX_MODEL_NAME: usize = 256;

/// A model id or revision as the library names them: 1 to 256 letters,
/// digits, `-`, `_`, `.` or `:`, not starting with `.`.
fn model_name(field: &str, value: &str) -> FedResult<()> {
    let ok = !value.is_empty()
        && value.len() <= MAX_MODEL_NAME
        && !value.starts_with('.')
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b));
    if ok {
        return Ok(());
    }
    Err(FederationError::invalid(format!(
        "{field} must be 1 to {MAX_MODEL_NAME} letters, digits, '-', '_', '.' or ':', not starting with '.'"
    )))
}

/// A lowercase hex SHA-256.
fn valid_digest(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Bytes free to an unprivileged writer on the file system holding `path`.
// The statvfs field types differ by platform (u32 or u64).
#[allow(clippy::unnecessary_cast)]
fn available_bytes(path: &Path) -> Result<u64, String> {
    std::fs::create_dir_all(path).map_err(|e| e.to_string())?;
    let stat = nix::sys::statvfs::statvfs(path).map_err(|e| e.to_string())?;
    Ok(stat.blocks_available() as u64 * stat.fragment_size() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_names_are_the_librarys() {
        assert!(model_name("model", "llama-3:8b_q4.gguf").is_ok());
        assert!(model_name("model", &"m".repeat(256)).is_ok());
        for bad in ["", ".hidden", "a/b", "a b", &"m".repeat(257)] {
            assert_eq!(
                model_name("model", bad).unwrap_err().code,
                "invalid_request"
            );
        }
    }

    #[test]
    fn a_run_registers_once_and_a_stop_ends_it() {
        let runners = Runners::default();
        let (token, mut ended) = runners.begin("copy_1").expect("first");
        assert!(runners.begin("copy_1").is_none(), "one run per copy here");
        runners.stop("copy_1");
        assert!(*ended.borrow_and_update());
        // An old run's end does not forget a newer run.
        let (newer, _) = runners.begin("copy_1").expect("again after the stop");
        runners.end("copy_1", token);
        assert!(runners.begin("copy_1").is_none());
        runners.end("copy_1", newer);
        assert!(runners.begin("copy_1").is_some());
    }
}
