//! Admission generations: every change of a point's chain is a new row, the
//! newest wins, and each replica records which one it serves.

use crate::{ADMISSION_CHANNEL, Store, StoreError};

pub use switchyard_protocol::generations::{BoundComponent, Generation, ReplicaStatus};

/// The note of a generation made by rolling back to `target`.
pub fn rollback_note(target: i64) -> String {
    format!("rollback to {target}")
}

/// The generation a [`rollback_note`] names: whose chain a rollback
/// generation restored. `None` for any other note (`set`).
pub fn rolled_back_to(note: &str) -> Option<i64> {
    note.strip_prefix("rollback to ")?.parse().ok()
}

const COLUMNS: &str = "point, generation, chain, note, created_by, \
     to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')";

fn generation(row: &tokio_postgres::Row) -> Result<Generation, StoreError> {
    let chain: serde_json::Value = row.get(2);
    Ok(Generation {
        point: row.get(0),
        generation: row.get(1),
        policies: serde_json::from_value(chain).map_err(|e| StoreError::Corrupt(e.to_string()))?,
        note: row.get(3),
        created_by: row.get(4),
        created_at: row.get(5),
    })
}

impl Store {
    /// Appends a generation and announces it; returns it.
    pub async fn push_generation(
        &self,
        point: &str,
        policies: &[BoundComponent],
        note: &str,
        created_by: &str,
    ) -> Result<Generation, StoreError> {
        let chain =
            serde_json::to_value(policies).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtext('switchyard:admission:' || $1))",
            &[&point],
        )
        .await?;
        let row = tx
            .query_one(
                &format!(
                    "INSERT INTO admission_generations (point, generation, chain, note, created_by)
                     SELECT $1, coalesce(max(generation), 0) + 1, $2, $3, $4
                     FROM admission_generations WHERE point = $1
                     RETURNING {COLUMNS}"
                ),
                &[&point, &chain, &note, &created_by],
            )
            .await?;
        tx.execute("SELECT pg_notify($1, $2)", &[&ADMISSION_CHANNEL, &point])
            .await?;
        tx.commit().await?;
        generation(&row)
    }

    /// The newest generation of a point (the empty generation 0 when none).
    pub async fn latest_generation(&self, point: &str) -> Result<Generation, StoreError> {
        let row = self
            .conn()
            .await?
            .query_opt(
                &format!("SELECT {COLUMNS} FROM admission_generations WHERE point = $1 ORDER BY generation DESC LIMIT 1"),
                &[&point],
            )
            .await?;
        match row {
            Some(row) => generation(&row),
            None => Ok(empty(point)),
        }
    }

    /// The newest `limit` generations of a point, newest first.
    pub async fn generations(
        &self,
        point: &str,
        limit: i64,
    ) -> Result<Vec<Generation>, StoreError> {
        let rows = self
            .conn()
            .await?
            .query(
                &format!("SELECT {COLUMNS} FROM admission_generations WHERE point = $1 ORDER BY generation DESC LIMIT $2"),
                &[&point, &limit],
            )
            .await?;
        rows.iter().map(generation).collect()
    }

    /// The newest generation number of every point that has one.
    pub async fn latest_generations(&self) -> Result<Vec<(String, i64)>, StoreError> {
        let rows = self
            .conn()
            .await?
            .query(
                "SELECT point, max(generation) FROM admission_generations GROUP BY point",
                &[],
            )
            .await?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    /// One generation (0 is the empty chain).
    pub async fn generation(
        &self,
        point: &str,
        number: i64,
    ) -> Result<Option<Generation>, StoreError> {
        if number == 0 {
            return Ok(Some(empty(point)));
        }
        let row = self
            .conn()
            .await?
            .query_opt(
                &format!("SELECT {COLUMNS} FROM admission_generations WHERE point = $1 AND generation = $2"),
                &[&point, &number],
            )
            .await?;
        row.as_ref().map(generation).transpose()
    }

    /// Records what this replica serves at a point, and the newer generation that failed, if any.
    pub async fn report_admission(
        &self,
        instance: &str,
        point: &str,
        serving: i64,
        failed: Option<(i64, &str)>,
    ) -> Result<(), StoreError> {
        let (failed_generation, error) = failed.map_or((None, None), |(g, e)| (Some(g), Some(e)));
        self.conn()
            .await?
            .execute(
                "INSERT INTO admission_replica_status (instance_id, point, generation, failed_generation, error)
                 VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (instance_id, point) DO UPDATE
                 SET generation = $3, failed_generation = $4, error = $5, updated_at = now()",
                &[&instance, &point, &serving, &failed_generation, &error],
            )
            .await?;
        Ok(())
    }

    /// What every live replica serves at a point.
    pub async fn admission_replicas(
        &self,
        point: &str,
        latest: i64,
    ) -> Result<Vec<ReplicaStatus>, StoreError> {
        let rows = self
            .conn()
            .await?
            .query(
                "SELECT i.id, i.hostname, coalesce(s.generation, 0), s.failed_generation, s.error
                 FROM instances i
                 LEFT JOIN admission_replica_status s ON s.instance_id = i.id AND s.point = $1
                 WHERE i.heartbeat_at > now() - interval '30 seconds'
                 ORDER BY i.started_at",
                &[&point],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| {
                let generation: i64 = r.get(2);
                let failed_generation: Option<i64> = r.get(3);
                let status = match (generation == latest, failed_generation) {
                    (true, _) => "current",
                    (false, Some(f)) if f == latest => "failed",
                    _ => "behind",
                };
                ReplicaStatus {
                    instance: r.get(0),
                    hostname: r.get(1),
                    generation,
                    status: status.into(),
                    failed_generation,
                    error: r.get(4),
                }
            })
            .collect())
    }
}

fn empty(point: &str) -> Generation {
    Generation {
        point: point.to_string(),
        generation: 0,
        policies: Vec::new(),
        note: "no binding yet".into(),
        created_by: String::new(),
        created_at: None,
    }
}

#[cfg(test)]
mod rollback_tests {
    use super::*;

    #[test]
    fn a_rollback_note_names_its_target_and_no_other_note_does() {
        assert_eq!(rolled_back_to(&rollback_note(3)), Some(3));
        assert_eq!(rolled_back_to(&rollback_note(0)), Some(0));
        assert_eq!(rolled_back_to("set"), None);
        assert_eq!(rolled_back_to("rollback to x"), None);
    }
}
