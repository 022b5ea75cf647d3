//! OpenAI batches: uploaded files, batches, and their lines (one row each).
//!
//! The rows are the truth a batch runs from, whatever the queue does: the
//! replica that holds a batch's driver lease dispatches the lines that are
//! not done and whose lease lapsed ([`Store::dispatch_lines`]); the replica
//! that runs a line claims it and records its outcome with a conditional
//! UPDATE, so that a line has one outcome however often it ran
//! ([`lines`]). Output and error files are served from the lines.
//!
//! Times are the database's clock; the API shows them as unix seconds.

pub mod files;
pub mod lines;

use std::collections::BTreeMap;
use std::time::Duration;

use switchyard_protocol::batch::{Batch, BatchStatus, RequestCounts};

pub use files::{StoredFile, Visible};

use crate::{Store, StoreError};

/// Lines inserted per statement when a batch is created.
const INSERT_CHUNK: usize = 5_000;

/// A batch to store, with its lines.
#[derive(Debug, Clone)]
pub struct NewBatch {
    /// `batch_…`.
    pub id: String,
    /// The endpoint every line calls.
    pub endpoint: String,
    /// The uploaded file.
    pub input_file_id: String,
    /// `24h`.
    pub completion_window: String,
    /// How long the batch may run.
    pub window: Duration,
    /// As given.
    pub metadata: Option<BTreeMap<String, String>>,
    /// The caller's key id.
    pub key_id: String,
    /// The caller's scopes.
    pub scopes: Vec<String>,
    /// The models the lines name.
    pub models: Vec<String>,
    /// `(custom_id, body)` of each line, in file order.
    pub lines: Vec<(String, Vec<u8>)>,
    /// A peer's job: the peer's id and the grant it came under (the
    /// owner answers only that peer about it; revoking the grant cancels it).
    pub peer: Option<(String, String)>,
}

/// What a driver needs of a batch it holds.
#[derive(Debug, Clone)]
pub struct DrivenBatch {
    /// Its id.
    pub id: String,
    /// Where it is.
    pub status: BatchStatus,
    /// The models its lines name.
    pub models: Vec<String>,
    /// Whether its completion window passed.
    pub expired: bool,
    /// Lines without an outcome yet, from the counters (exact while the
    /// batch is in progress: only a cancel ends lines without counting them).
    pub unfinished: i64,
    /// Whether its lines may run: a peer's job, or its key is live and
    /// holds `inference` (or `admin`).
    pub key_live: bool,
}

/// The columns [`batch`] reads, in order.
const BATCH_COLUMNS: &str = "id, endpoint, input_file_id, completion_window, status, metadata,
    output_file_id, error_file_id, total, completed, failed,
    extract(epoch FROM created_at)::bigint, extract(epoch FROM in_progress_at)::bigint,
    extract(epoch FROM finalizing_at)::bigint, extract(epoch FROM completed_at)::bigint,
    extract(epoch FROM failed_at)::bigint, extract(epoch FROM expired_at)::bigint,
    extract(epoch FROM expires_at)::bigint, extract(epoch FROM cancelling_at)::bigint,
    extract(epoch FROM cancelled_at)::bigint, errors";

fn batch(row: &tokio_postgres::Row) -> Batch {
    let metadata: Option<serde_json::Value> = row.get(5);
    Batch {
        id: row.get(0),
        object: "batch".into(),
        endpoint: row.get(1),
        errors: row.get(20),
        input_file_id: row.get(2),
        completion_window: row.get(3),
        status: crate::state_column(row, 4),
        // Written from a map of strings; anything else reads as none.
        metadata: metadata.and_then(|m| serde_json::from_value(m).ok()),
        output_file_id: row.get(6),
        error_file_id: row.get(7),
        request_counts: RequestCounts {
            total: i64::from(row.get::<_, i32>(8)),
            completed: i64::from(row.get::<_, i32>(9)),
            failed: i64::from(row.get::<_, i32>(10)),
        },
        created_at: row.get(11),
        in_progress_at: row.get(12),
        finalizing_at: row.get(13),
        completed_at: row.get(14),
        failed_at: row.get(15),
        expired_at: row.get(16),
        expires_at: row.get(17),
        cancelling_at: row.get(18),
        cancelled_at: row.get(19),
        owner: None,
        owner_available: None,
        projection_level: None,
        projection_stale: None,
        last_synced_at: None,
    }
}

impl Store {
    /// Stores a batch (`validating`) and its lines, in one transaction.
    pub async fn insert_batch(&self, new: &NewBatch) -> Result<Batch, StoreError> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let metadata = new
            .metadata
            .as_ref()
            .map(|m| serde_json::to_value(m).expect("a map of strings serializes"));
        let row = tx
            .query_one(
                &format!(
                    "INSERT INTO batches (id, endpoint, input_file_id, completion_window, status,
                         metadata, key_id, scopes, models, total, expires_at, peer_id, grant_id)
                     VALUES ($1, $2, $3, $4, 'validating', $5, $6, $7, $8, $9,
                         now() + make_interval(secs => $10), $11, $12)
                     RETURNING {BATCH_COLUMNS}"
                ),
                &[
                    &new.id,
                    &new.endpoint,
                    &new.input_file_id,
                    &new.completion_window,
                    &metadata,
                    &new.key_id,
                    &new.scopes,
                    &new.models,
                    &(new.lines.len() as i32),
                    &new.window.as_secs_f64(),
                    &new.peer.as_ref().map(|(peer, _)| peer),
                    &new.peer.as_ref().map(|(_, grant)| grant),
                ],
            )
            .await?;
        let insert = tx
            .prepare(
                "INSERT INTO batch_lines (batch_id, line, custom_id, body)
                 SELECT $1, * FROM unnest($2::integer[], $3::text[], $4::bytea[])",
            )
            .await?;
        for (chunk, lines) in new.lines.chunks(INSERT_CHUNK).enumerate() {
            let first = (chunk * INSERT_CHUNK) as i32;
            let indexes: Vec<i32> = (first..first + lines.len() as i32).collect();
            let ids: Vec<&str> = lines.iter().map(|(id, _)| id.as_str()).collect();
            let bodies: Vec<&[u8]> = lines.iter().map(|(_, body)| body.as_slice()).collect();
            tx.execute(&insert, &[&new.id, &indexes, &ids, &bodies])
                .await?;
        }
        tx.commit().await?;
        Ok(batch(&row))
    }

    /// A batch, if `visible` may see it.
    pub async fn batch(&self, id: &str, visible: Visible<'_>) -> Result<Batch, StoreError> {
        self.conn()
            .await?
            .query_opt(
                &format!(
                    "SELECT {BATCH_COLUMNS} FROM batches
                      WHERE id = $1 AND ($2::text IS NULL OR key_id = $2)"
                ),
                &[&id, &visible.owner()],
            )
            .await?
            .map(|row| batch(&row))
            .ok_or_else(|| StoreError::NotFound(format!("batch {id}")))
    }

    /// The batches `visible` may see, the newest first: `limit` of them
    /// after the batch `after`.
    pub async fn list_batches(
        &self,
        visible: Visible<'_>,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Vec<Batch>, StoreError> {
        let rows = self
            .conn()
            .await?
            .query(
                &format!(
                    "SELECT {BATCH_COLUMNS} FROM batches
                     WHERE ($3::text IS NULL OR key_id = $3)
                       AND ($1::text IS NULL
                        OR (created_at, id) < (SELECT created_at, id FROM batches WHERE id = $1))
                     ORDER BY created_at DESC, id DESC LIMIT $2"
                ),
                &[&after, &limit, &visible.owner()],
            )
            .await?;
        Ok(rows.iter().map(batch).collect())
    }

    /// Moves a running batch `visible` may see to `cancelling`, with
    /// `errors` (OpenAI's list) saying why when not its owner's choice; a
    /// batch already cancelling or cancelled is answered as it is. `None`:
    /// the batch ended otherwise.
    pub async fn cancel_batch(
        &self,
        id: &str,
        visible: Visible<'_>,
        errors: Option<&serde_json::Value>,
    ) -> Result<Option<Batch>, StoreError> {
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                &format!(
                    "UPDATE batches SET status = 'cancelling', cancelling_at = now(),
                            errors = coalesce($3, errors)
                     WHERE id = $1 AND status IN ('validating', 'in_progress')
                       AND ($2::text IS NULL OR key_id = $2)
                     RETURNING {BATCH_COLUMNS}"
                ),
                &[&id, &visible.owner(), &errors],
            )
            .await?;
        if let Some(row) = row {
            return Ok(Some(batch(&row)));
        }
        let now = self.batch(id, visible).await?;
        Ok(matches!(now.status, BatchStatus::Cancelling | BatchStatus::Cancelled).then_some(now))
    }

    /// Takes (or keeps) the driver lease of up to `limit` unfinished
    /// batches whose lease is free, lapsed or `instance`'s own, for `lease`.
    pub async fn claim_batches(
        &self,
        instance: &str,
        lease: Duration,
        limit: i64,
    ) -> Result<Vec<DrivenBatch>, StoreError> {
        let rows = self
            .conn()
            .await?
            .query(
                "UPDATE batches SET driver = $1, driver_until = now() + make_interval(secs => $2)
                 WHERE id IN (
                     SELECT id FROM batches
                      WHERE status IN ('validating', 'in_progress', 'cancelling', 'finalizing')
                        AND (driver IS NULL OR driver = $1 OR driver_until < now())
                      ORDER BY created_at LIMIT $3 FOR UPDATE SKIP LOCKED)
                 RETURNING id, status, models, expires_at < now(), total - completed - failed,
                     batches.peer_id IS NOT NULL OR EXISTS (SELECT 1 FROM api_keys k
                         WHERE k.id = batches.key_id AND k.revoked_at IS NULL
                           AND k.scopes && ARRAY['inference', 'admin'])",
                &[&instance, &lease.as_secs_f64(), &limit],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|row| DrivenBatch {
                id: row.get(0),
                status: crate::state_column(row, 1),
                models: row.get(2),
                expired: row.get(3),
                unfinished: i64::from(row.get::<_, i32>(4)),
                key_live: row.get(5),
            })
            .collect())
    }

    /// Lets go of the batches `instance` drives (a clean shutdown: another
    /// replica takes them over at once).
    pub async fn release_batches(&self, instance: &str) -> Result<(), StoreError> {
        self.conn()
            .await?
            .execute(
                "UPDATE batches SET driver = NULL, driver_until = NULL WHERE driver = $1",
                &[&instance],
            )
            .await?;
        Ok(())
    }

    /// `validating` → `in_progress`.
    pub async fn start_batch(&self, id: &str) -> Result<(), StoreError> {
        self.conn()
            .await?
            .execute(
                "UPDATE batches SET status = 'in_progress', in_progress_at = now()
                 WHERE id = $1 AND status = 'validating'",
                &[&id],
            )
            .await?;
        Ok(())
    }

    /// Ends a batch whose lines are all done: `finalizing`, its output and
    /// error files (only those with lines), then `to` (`completed`,
    /// `cancelled` or `expired`). The files' sizes are given: the caller
    /// measured the lines it will serve.
    pub async fn finish_batch(
        &self,
        id: &str,
        to: BatchStatus,
        output: Option<(&str, i64)>,
        errors: Option<(&str, i64)>,
    ) -> Result<(), StoreError> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let moved = tx
            .execute(
                "UPDATE batches SET status = 'finalizing', finalizing_at = now()
                 WHERE id = $1 AND status IN ('in_progress', 'cancelling', 'validating')",
                &[&id],
            )
            .await?;
        if moved == 0 {
            // Another driver finished it first.
            return Ok(());
        }
        for (file, kind, name) in [
            (output, "output", "batch_output.jsonl"),
            (errors, "error", "batch_errors.jsonl"),
        ] {
            if let Some((file_id, bytes)) = file {
                // The batch's owner owns its output.
                tx.execute(
                    "INSERT INTO batch_files (id, purpose, filename, bytes, batch_id, kind, owner)
                     SELECT $1, 'batch_output', $2, $3, $4, $5, key_id FROM batches WHERE id = $4",
                    &[&file_id, &name, &bytes, &id, &kind],
                )
                .await?;
            }
        }
        let column = match to {
            BatchStatus::Cancelled => "cancelled_at",
            BatchStatus::Expired => "expired_at",
            _ => "completed_at",
        };
        tx.execute(
            &format!(
                "UPDATE batches SET status = $2, {column} = now(), output_file_id = $3,
                     error_file_id = $4, driver = NULL, driver_until = NULL
                 WHERE id = $1"
            ),
            &[
                &id,
                &to.as_str(),
                &output.map(|(f, _)| f),
                &errors.map(|(f, _)| f),
            ],
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }
}
