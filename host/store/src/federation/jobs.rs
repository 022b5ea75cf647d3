//! Batch jobs across clusters: the peer and grant of a job a peer made
//! here, the projections of jobs this cluster made on its peers, and
//! whether peers may choose this cluster as the owner of new jobs.

use switchyard_protocol::batch::Batch;
use switchyard_protocol::jobs::{Eligibility, JobProjections, OwnerEligibility};
use tokio_postgres::types::Json;

use super::time;
use crate::batches::Visible;
use crate::{Store, StoreError};

/// Projections kept; the oldest ended ones go first beyond it.
pub const MAX_PROJECTIONS: i64 = 10_000;

/// A job this cluster made on a peer, as last synced.
#[derive(Debug, Clone)]
pub struct Projection {
    /// The owner's id here.
    pub peer_id: String,
    /// The owner's label here.
    pub peer: String,
    /// The batch as the owner last answered it.
    pub summary: Batch,
    /// Unix seconds of the last sync.
    pub synced_at: i64,
}

const PROJECTION_COLUMNS: &str =
    "j.peer_id, p.label, j.summary, extract(epoch FROM j.synced_at)::bigint";

fn projection(row: &tokio_postgres::Row) -> Option<Projection> {
    let summary: Json<serde_json::Value> = row.get(2);
    Some(Projection {
        peer_id: row.get(0),
        peer: row.get(1),
        // Written from a Batch; one that no longer reads is no projection.
        summary: serde_json::from_value(summary.0).ok()?,
        synced_at: row.get(3),
    })
}

/// A batch's output and error files.
fn files(batch: &Batch) -> Vec<String> {
    [&batch.output_file_id, &batch.error_file_id]
        .into_iter()
        .flatten()
        .cloned()
        .collect()
}

impl Store {
    /// The peer that made a job here, if a peer did (`None` for a job of
    /// this cluster's own clients or none).
    pub async fn batch_peer(&self, id: &str) -> Result<Option<String>, StoreError> {
        let row = self
            .conn()
            .await?
            .query_opt("SELECT peer_id FROM batches WHERE id = $1", &[&id])
            .await?;
        Ok(row.and_then(|row| row.get(0)))
    }

    /// The peer whose job a file (an upload, output or error file) is part of.
    pub async fn batch_file_peer(&self, file: &str) -> Result<Option<String>, StoreError> {
        let row = self
            .conn()
            .await?
            .query_opt(
                "SELECT b.peer_id FROM batch_files f \
                 JOIN batches b ON b.id = f.batch_id OR b.input_file_id = f.id \
                 WHERE f.id = $1 LIMIT 1",
                &[&file],
            )
            .await?;
        Ok(row.and_then(|row| row.get(0)))
    }

    /// The jobs a grant made that have not ended.
    pub async fn grant_batches(&self, grant_id: &str) -> Result<Vec<String>, StoreError> {
        let rows = self
            .conn()
            .await?
            .query(
                "SELECT id FROM batches WHERE grant_id = $1 \
                   AND status IN ('validating', 'in_progress', 'finalizing', 'cancelling')",
                &[&grant_id],
            )
            .await?;
        Ok(rows.iter().map(|row| row.get(0)).collect())
    }

    /// Jobs this cluster owns that have not ended.
    pub async fn active_jobs(&self) -> Result<i64, StoreError> {
        let row = self
            .conn()
            .await?
            .query_one(
                "SELECT count(*) FROM batches \
                 WHERE status IN ('validating', 'in_progress', 'finalizing', 'cancelling')",
                &[],
            )
            .await?;
        Ok(row.get(0))
    }

    /// Keeps what the owner answered about a job this cluster made on it;
    /// a new projection belongs to `key_id` (the local key that made the
    /// job), and a later answer never changes whose it is.
    pub async fn put_projection(
        &self,
        peer_id: &str,
        batch: &Batch,
        key_id: Option<&str>,
    ) -> Result<(), StoreError> {
        let conn = self.conn().await?;
        let active = !batch.status.is_final();
        conn.execute(
            "INSERT INTO federation_job_projections (id, peer_id, summary, files, active, created_at, key_id) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) \
             ON CONFLICT (id) DO UPDATE SET summary = $3, files = $4, active = $5, synced_at = now() \
               WHERE federation_job_projections.peer_id = $2",
            &[
                &batch.id,
                &peer_id,
                &Json(batch),
                &files(batch),
                &active,
                &batch.created_at,
                &key_id,
            ],
        )
        .await?;
        conn.execute(
            "DELETE FROM federation_job_projections WHERE id IN ( \
               SELECT id FROM federation_job_projections WHERE NOT active \
               ORDER BY created_at DESC, id DESC OFFSET $1)",
            &[&MAX_PROJECTIONS],
        )
        .await?;
        Ok(())
    }

    /// The projection of a job, if this cluster made it on a peer and
    /// `visible` may see it.
    pub async fn projection(
        &self,
        id: &str,
        visible: Visible<'_>,
    ) -> Result<Option<Projection>, StoreError> {
        let row = self
            .conn()
            .await?
            .query_opt(
                &format!(
                    "SELECT {PROJECTION_COLUMNS} FROM federation_job_projections j \
                     JOIN federation_peers p ON p.id = j.peer_id \
                     WHERE j.id = $1 AND ($2::text IS NULL OR j.key_id = $2)"
                ),
                &[&id, &visible.owner()],
            )
            .await?;
        Ok(row.as_ref().and_then(projection))
    }

    /// The projection whose job has this output or error file, if
    /// `visible` may see it.
    pub async fn projection_by_file(
        &self,
        file: &str,
        visible: Visible<'_>,
    ) -> Result<Option<Projection>, StoreError> {
        let row = self
            .conn()
            .await?
            .query_opt(
                &format!(
                    "SELECT {PROJECTION_COLUMNS} FROM federation_job_projections j \
                     JOIN federation_peers p ON p.id = j.peer_id \
                     WHERE $1 = ANY (j.files) AND ($2::text IS NULL OR j.key_id = $2) LIMIT 1"
                ),
                &[&file, &visible.owner()],
            )
            .await?;
        Ok(row.as_ref().and_then(projection))
    }

    /// Projections `visible` may see made before `before` (unix seconds;
    /// all when `None`), the newest first, at most `limit`.
    pub async fn projections(
        &self,
        visible: Visible<'_>,
        before: Option<i64>,
        limit: i64,
    ) -> Result<Vec<Projection>, StoreError> {
        let rows = self
            .conn()
            .await?
            .query(
                &format!(
                    "SELECT {PROJECTION_COLUMNS} FROM federation_job_projections j \
                     JOIN federation_peers p ON p.id = j.peer_id \
                     WHERE ($1::bigint IS NULL OR j.created_at < $1) \
                       AND ($3::text IS NULL OR j.key_id = $3) \
                     ORDER BY j.created_at DESC, j.id DESC LIMIT $2"
                ),
                &[&before, &limit, &visible.owner()],
            )
            .await?;
        Ok(rows.iter().filter_map(projection).collect())
    }

    /// The projected jobs of `peer_id` not ended as last synced, the
    /// least recently synced first.
    pub async fn active_projections(
        &self,
        peer_id: &str,
        limit: i64,
    ) -> Result<Vec<String>, StoreError> {
        let rows = self
            .conn()
            .await?
            .query(
                "SELECT id FROM federation_job_projections WHERE peer_id = $1 AND active \
                 ORDER BY synced_at LIMIT $2",
                &[&peer_id, &limit],
            )
            .await?;
        Ok(rows.iter().map(|row| row.get(0)).collect())
    }

    /// Per peer id: its jobs projected here.
    pub async fn projection_counts(
        &self,
    ) -> Result<std::collections::HashMap<String, JobProjections>, StoreError> {
        let rows = self
            .conn()
            .await?
            .query(
                &format!(
                    "SELECT peer_id, count(*), count(*) FILTER (WHERE active), \
                       {} FROM federation_job_projections GROUP BY peer_id",
                    time("min(synced_at) FILTER (WHERE active)")
                ),
                &[],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|row| {
                (
                    row.get(0),
                    JobProjections {
                        jobs: row.get(1),
                        active: row.get(2),
                        oldest_sync: row.get(3),
                    },
                )
            })
            .collect())
    }

    /// Whether peers may choose this cluster as a job's owner (eligible
    /// until an operator says otherwise).
    pub async fn eligibility(&self) -> Result<OwnerEligibility, StoreError> {
        let conn = self.conn().await?;
        let row = conn
            .query_opt(
                &format!(
                    "SELECT state, reason, {} FROM federation_eligibility",
                    time("changed_at")
                ),
                &[],
            )
            .await?;
        let active_jobs = self.active_jobs().await?;
        Ok(match row {
            Some(row) => OwnerEligibility {
                state: crate::state_column(&row, 0),
                reason: row.get(1),
                changed_at: row.get(2),
                active_jobs,
            },
            None => OwnerEligibility {
                state: Eligibility::Eligible,
                reason: String::new(),
                changed_at: String::new(),
                active_jobs,
            },
        })
    }

    /// Says whether peers may choose this cluster as a job's owner.
    pub async fn set_eligibility(
        &self,
        state: Eligibility,
        reason: &str,
    ) -> Result<(), StoreError> {
        self.conn()
            .await?
            .execute(
                "INSERT INTO federation_eligibility (state, reason) VALUES ($1, $2) \
                 ON CONFLICT (singleton) DO UPDATE SET state = $1, reason = $2, changed_at = now()",
                &[&state.as_str(), &reason],
            )
            .await?;
        Ok(())
    }
}
