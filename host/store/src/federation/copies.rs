//! Model copies from peers: each copy's state, its files' durable offsets
//! and the replica running it. A runner changes a copy only while it still
//! runs it (`runner` is its instance and the state is active), so a pause
//! or a takeover in between wins over a late write.

use switchyard_protocol::copies::{CopyFile, CopyRecord, CopyState, MAX_COPIES, Reconnect};
use switchyard_protocol::models::ModelFile;
use tokio_postgres::types::Json;

use super::time;
use crate::{Store, StoreError};

/// A copy to record.
#[derive(Debug, Clone)]
pub struct NewCopyRow<'a> {
    /// Its id.
    pub id: &'a str,
    /// The peer's label and id.
    pub peer: (&'a str, &'a str),
    /// The grant.
    pub grant: &'a str,
    /// The model.
    pub model: &'a str,
    /// The revision.
    pub revision: &'a str,
    /// The owner's licence.
    pub licence: Option<&'a str>,
    /// The files, as the owner's manifest lists them.
    pub files: &'a [ModelFile],
    /// The key starting it.
    pub started_by: &'a str,
    /// The replica running it.
    pub runner: &'a str,
}

/// What an insert found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CopyInsert {
    /// Made, running on the runner.
    Done(Box<CopyRecord>),
    /// [`MAX_COPIES`] are kept.
    Full,
    /// An unfinished copy of this revision from this peer exists.
    Exists,
}

/// A copy as its runner needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyRun {
    /// The record.
    pub record: CopyRecord,
    /// The peer's id, while the peer is kept.
    pub peer_id: Option<String>,
    /// The owner's licence.
    pub licence: Option<String>,
    /// The key that started or last resumed it.
    pub started_by: String,
}

const ACTIVE: &str = "('running', 'waiting')";

fn columns() -> String {
    format!(
        "id, peer_label, grant_id, model_id, revision, state, code, message, reconnects, {}, {}, \
         peer_id, licence, started_by",
        time("created_at"),
        time("updated_at")
    )
}

fn state(text: &str) -> Result<CopyState, StoreError> {
    text.parse()
        .map_err(|e: switchyard_protocol::UnknownText| StoreError::Corrupt(e.to_string()))
}

impl Store {
    async fn copy_rows(
        &self,
        filter: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<CopyRun>, StoreError> {
        let conn = self.conn().await?;
        let rows = conn
            .query(
                &format!(
                    "SELECT {} FROM federation_copies {filter} ORDER BY created_at, id",
                    columns()
                ),
                params,
            )
            .await?;
        let mut copies = Vec::with_capacity(rows.len());
        for row in rows {
            let id: String = row.get(0);
            let files: Vec<CopyFile> = conn
                .query(
                    "SELECT path, size, sha256, durable, complete FROM federation_copy_files \
                     WHERE copy_id = $1 ORDER BY path",
                    &[&id],
                )
                .await?
                .iter()
                .map(|f| CopyFile {
                    path: f.get(0),
                    size: f.get::<_, i64>(1).max(0) as u64,
                    sha256: f.get(2),
                    offset: f.get::<_, i64>(3).max(0) as u64,
                    complete: f.get(4),
                })
                .collect();
            let Json(reconnects): Json<Vec<Reconnect>> = row.get(8);
            copies.push(CopyRun {
                record: CopyRecord {
                    peer: row.get(1),
                    grant: row.get(2),
                    model: row.get(3),
                    revision: row.get(4),
                    state: state(row.get(5))?,
                    code: row.get(6),
                    message: row.get(7),
                    bytes_held: files.iter().map(|f| f.offset).sum(),
                    bytes_total: files.iter().map(|f| f.size).sum(),
                    files,
                    reconnects,
                    created_at: row.get(9),
                    updated_at: row.get(10),
                    id,
                },
                peer_id: row.get(11),
                licence: row.get(12),
                started_by: row.get(13),
            });
        }
        Ok(copies)
    }

    /// Records a new copy, running on `runner`.
    pub async fn insert_copy(&self, copy: &NewCopyRow<'_>) -> Result<CopyInsert, StoreError> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        tx.execute(
            "LOCK TABLE federation_copies IN SHARE ROW EXCLUSIVE MODE",
            &[],
        )
        .await?;
        let kept: i64 = tx
            .query_one("SELECT count(*) FROM federation_copies", &[])
            .await?
            .get(0);
        if kept >= MAX_COPIES {
            return Ok(CopyInsert::Full);
        }
        let inserted = tx
            .execute(
                "INSERT INTO federation_copies (id, peer_label, peer_id, grant_id, model_id, \
                   revision, licence, state, started_by, runner, runner_seen_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, 'running', $8, $9, now()) \
                 ON CONFLICT DO NOTHING",
                &[
                    &copy.id,
                    &copy.peer.0,
                    &copy.peer.1,
                    &copy.grant,
                    &copy.model,
                    &copy.revision,
                    &copy.licence,
                    &copy.started_by,
                    &copy.runner,
                ],
            )
            .await?;
        if inserted == 0 {
            return Ok(CopyInsert::Exists);
        }
        for file in copy.files {
            tx.execute(
                "INSERT INTO federation_copy_files (copy_id, path, size, sha256) \
                 VALUES ($1, $2, $3, $4)",
                &[&copy.id, &file.path, &file.size, &file.sha256],
            )
            .await?;
        }
        tx.commit().await?;
        let record = self.copy(copy.id).await?.ok_or_else(|| {
            StoreError::Corrupt(format!("copy {} vanished after its insert", copy.id))
        })?;
        Ok(CopyInsert::Done(Box::new(record.record)))
    }

    /// One copy.
    pub async fn copy(&self, id: &str) -> Result<Option<CopyRun>, StoreError> {
        Ok(self.copy_rows("WHERE id = $1", &[&id]).await?.pop())
    }

    /// The newest copy of `model@revision` from the peer labelled `peer`
    /// (at most one is unfinished, and it is the newest).
    pub async fn copy_of(
        &self,
        peer: &str,
        model: &str,
        revision: &str,
    ) -> Result<Option<CopyRun>, StoreError> {
        Ok(self
            .copy_rows(
                "WHERE peer_label = $1 AND model_id = $2 AND revision = $3",
                &[&peer, &model, &revision],
            )
            .await?
            .pop())
    }

    /// The runner says it still runs copy `id`; answers whether it does
    /// (a pause, a deletion or a takeover ends its run).
    pub async fn keep_copy(&self, id: &str, runner: &str) -> Result<bool, StoreError> {
        let updated = self
            .conn()
            .await?
            .execute(
                &format!(
                    "UPDATE federation_copies SET runner_seen_at = now() \
                     WHERE id = $1 AND runner = $2 AND state IN {ACTIVE}"
                ),
                &[&id, &runner],
            )
            .await?;
        Ok(updated > 0)
    }

    /// Every copy, oldest first.
    pub async fn copies(&self) -> Result<Vec<CopyRecord>, StoreError> {
        Ok(self
            .copy_rows("", &[])
            .await?
            .into_iter()
            .map(|c| c.record)
            .collect())
    }

    /// Every copy not complete.
    pub async fn unfinished_copies(&self) -> Result<Vec<CopyRecord>, StoreError> {
        Ok(self
            .copy_rows("WHERE state <> 'complete'", &[])
            .await?
            .into_iter()
            .map(|c| c.record)
            .collect())
    }

    /// Starts a new acquisition of a copy that is not active nor complete,
    /// on `runner`, by `key`: its reconnects start over. `None` when it is
    /// active or complete (or gone).
    pub async fn resume_copy(
        &self,
        id: &str,
        runner: &str,
        key: &str,
    ) -> Result<Option<CopyRun>, StoreError> {
        let updated = self
            .conn()
            .await?
            .execute(
                &format!(
                    "UPDATE federation_copies SET state = 'running', code = NULL, message = NULL, \
                       reconnects = '[]', runner = $2, runner_seen_at = now(), started_by = $3, \
                       updated_at = now() \
                     WHERE id = $1 AND state NOT IN {ACTIVE} AND state <> 'complete'"
                ),
                &[&id, &runner, &key],
            )
            .await?;
        if updated == 0 {
            return Ok(None);
        }
        self.copy(id).await
    }

    /// Pauses an active copy; answers whether it was active.
    pub async fn pause_copy(&self, id: &str) -> Result<bool, StoreError> {
        let updated = self
            .conn()
            .await?
            .execute(
                &format!(
                    "UPDATE federation_copies SET state = 'paused', code = NULL, message = NULL, \
                       runner = NULL, updated_at = now() WHERE id = $1 AND state IN {ACTIVE}"
                ),
                &[&id],
            )
            .await?;
        Ok(updated > 0)
    }

    /// The runner moves its copy to `to` (with why, for `stopped` and
    /// `interrupted`); answers whether it still ran it (a pause or a
    /// takeover in between wins).
    pub async fn set_copy_state(
        &self,
        id: &str,
        runner: &str,
        to: CopyState,
        why: Option<(&str, &str)>,
    ) -> Result<bool, StoreError> {
        let (code, message) = why.unzip();
        let updated = self
            .conn()
            .await?
            .execute(
                &format!(
                    "UPDATE federation_copies SET state = $3, code = $4, message = $5, \
                       runner = CASE WHEN $3 IN {ACTIVE} THEN runner END, \
                       runner_seen_at = now(), updated_at = now() \
                     WHERE id = $1 AND runner = $2 AND state IN {ACTIVE}"
                ),
                &[&id, &runner, &to.as_str(), &code, &message],
            )
            .await?;
        Ok(updated > 0)
    }

    /// The runner records an automatic reconnect after a wait of `waited_ms`.
    pub async fn note_copy_reconnect(
        &self,
        id: &str,
        runner: &str,
        waited_ms: u64,
    ) -> Result<bool, StoreError> {
        let waited = i64::try_from(waited_ms).unwrap_or(i64::MAX);
        let updated = self
            .conn()
            .await?
            .execute(
                &format!(
                    "UPDATE federation_copies SET reconnects = reconnects || jsonb_build_array( \
                       jsonb_build_object('at', to_char(now() AT TIME ZONE 'UTC', \
                         'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), 'waited_ms', $3::bigint)), \
                       state = 'running', runner_seen_at = now(), updated_at = now() \
                     WHERE id = $1 AND runner = $2 AND state IN {ACTIVE}"
                ),
                &[&id, &runner, &waited],
            )
            .await?;
        Ok(updated > 0)
    }

    /// Records a file's durable offset (its bytes are fsync'd) and whether
    /// it is verified and in the library.
    pub async fn advance_copy_file(
        &self,
        id: &str,
        path: &str,
        durable: u64,
        complete: bool,
    ) -> Result<(), StoreError> {
        let durable = i64::try_from(durable).unwrap_or(i64::MAX);
        self.conn()
            .await?
            .execute(
                "UPDATE federation_copy_files SET durable = $3, complete = $4 \
                 WHERE copy_id = $1 AND path = $2",
                &[&id, &path, &durable, &complete],
            )
            .await?;
        Ok(())
    }

    /// Forgets a file's bytes (a digest mismatch discarded them).
    pub async fn reset_copy_file(&self, id: &str, path: &str) -> Result<(), StoreError> {
        self.advance_copy_file(id, path, 0, false).await
    }

    /// Takes over active copies whose runner has been silent for
    /// `silent_s` seconds (a dead replica, or this one's previous run);
    /// answers their ids.
    pub async fn claim_orphaned_copies(
        &self,
        runner: &str,
        silent_s: f64,
    ) -> Result<Vec<String>, StoreError> {
        let rows = self
            .conn()
            .await?
            .query(
                &format!(
                    "UPDATE federation_copies SET runner = $1, runner_seen_at = now(), \
                       state = 'running', updated_at = now() \
                     WHERE state IN {ACTIVE} AND (runner IS NULL OR runner_seen_at IS NULL \
                       OR runner_seen_at < now() - make_interval(secs => $2)) \
                     RETURNING id"
                ),
                &[&runner, &silent_s],
            )
            .await?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    /// Deletes a copy that is not active; answers whether it was deleted.
    pub async fn delete_copy(&self, id: &str) -> Result<bool, StoreError> {
        let deleted = self
            .conn()
            .await?
            .execute(
                &format!("DELETE FROM federation_copies WHERE id = $1 AND state NOT IN {ACTIVE}"),
                &[&id],
            )
            .await?;
        Ok(deleted > 0)
    }
}
