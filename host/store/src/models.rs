//! Model revisions and their files.

pub use switchyard_protocol::models::{ModelFile, ModelRevision, ModelSummary};

use crate::{Store, StoreError};

/// What an insert found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RevisionInsert {
    /// Stored.
    Created,
    /// The same manifest was there already.
    Same,
    /// Another manifest has this id and revision.
    Conflict,
}

const TIME: &str = "'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'";

impl Store {
    /// Stores a manifest (its files in one transaction).
    pub async fn insert_model_revision(
        &self,
        revision: &ModelRevision,
        by: &str,
    ) -> Result<RevisionInsert, StoreError> {
        if let Some(existing) = self
            .model_revision(&revision.id, &revision.revision)
            .await?
        {
            let mut mine = revision.files.clone();
            let mut theirs = existing.files.clone();
            mine.sort_by(|a, b| a.path.cmp(&b.path));
            theirs.sort_by(|a, b| a.path.cmp(&b.path));
            return Ok(if mine == theirs && existing.licence == revision.licence {
                RevisionInsert::Same
            } else {
                RevisionInsert::Conflict
            });
        }
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let inserted = tx
            .execute(
                "INSERT INTO model_revisions (model_id, revision, licence, imported_by)
                 VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                &[&revision.id, &revision.revision, &revision.licence, &by],
            )
            .await?;
        if inserted == 0 {
            return Ok(RevisionInsert::Conflict);
        }
        for file in &revision.files {
            tx.execute(
                "INSERT INTO model_files (model_id, revision, path, size, sha256)
                 VALUES ($1, $2, $3, $4, $5)",
                &[
                    &revision.id,
                    &revision.revision,
                    &file.path,
                    &file.size,
                    &file.sha256,
                ],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(RevisionInsert::Created)
    }

    /// The size a registered manifest gives the blob `sha256`, if any names it.
    pub async fn manifest_blob_size(&self, sha256: &str) -> Result<Option<i64>, StoreError> {
        let row = self
            .conn()
            .await?
            .query_opt(
                "SELECT size FROM model_files WHERE sha256 = $1 LIMIT 1",
                &[&sha256],
            )
            .await?;
        Ok(row.map(|r| r.get(0)))
    }

    /// Every blob some manifest names (the library keeps these).
    pub async fn referenced_blobs(&self) -> Result<std::collections::HashSet<String>, StoreError> {
        let rows = self
            .conn()
            .await?
            .query("SELECT DISTINCT sha256 FROM model_files", &[])
            .await?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    /// One manifest.
    pub async fn model_revision(
        &self,
        id: &str,
        revision: &str,
    ) -> Result<Option<ModelRevision>, StoreError> {
        let conn = self.conn().await?;
        let Some(row) = conn
            .query_opt(
                &format!(
                    "SELECT licence, imported_by, to_char(imported_at AT TIME ZONE 'UTC', {TIME})
                     FROM model_revisions WHERE model_id = $1 AND revision = $2"
                ),
                &[&id, &revision],
            )
            .await?
        else {
            return Ok(None);
        };
        let files = conn
            .query(
                "SELECT path, size, sha256 FROM model_files
                 WHERE model_id = $1 AND revision = $2 ORDER BY path",
                &[&id, &revision],
            )
            .await?
            .iter()
            .map(|f| ModelFile {
                path: f.get(0),
                size: f.get(1),
                sha256: f.get(2),
            })
            .collect();
        Ok(Some(ModelRevision {
            id: id.to_string(),
            revision: revision.to_string(),
            licence: row.get(0),
            imported_by: row.get(1),
            imported_at: row.get(2),
            files,
        }))
    }

    /// Every revision, without its files.
    pub async fn model_revisions(&self) -> Result<Vec<ModelSummary>, StoreError> {
        let rows = self
            .conn()
            .await?
            .query(
                &format!(
                    "SELECT r.model_id, r.revision, r.licence, count(f.path), coalesce(sum(f.size), 0)::bigint,
                            to_char(r.imported_at AT TIME ZONE 'UTC', {TIME})
                     FROM model_revisions r LEFT JOIN model_files f USING (model_id, revision)
                     GROUP BY r.model_id, r.revision ORDER BY r.model_id, r.revision"
                ),
                &[],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| ModelSummary {
                id: r.get(0),
                revision: r.get(1),
                licence: r.get(2),
                files: r.get(3),
                size: r.get(4),
                imported_at: r.get(5),
            })
            .collect())
    }

    /// Deletes a revision; returns the digests no other revision uses (their
    /// blobs may go).
    pub async fn delete_model_revision(
        &self,
        id: &str,
        revision: &str,
    ) -> Result<Option<Vec<String>>, StoreError> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        let digests: Vec<String> = tx
            .query(
                "SELECT DISTINCT sha256 FROM model_files WHERE model_id = $1 AND revision = $2",
                &[&id, &revision],
            )
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect();
        let deleted = tx
            .execute(
                "DELETE FROM model_revisions WHERE model_id = $1 AND revision = $2",
                &[&id, &revision],
            )
            .await?;
        if deleted == 0 {
            return Ok(None);
        }
        let still_used: Vec<String> = tx
            .query(
                "SELECT DISTINCT sha256 FROM model_files WHERE sha256 = ANY($1)",
                &[&digests],
            )
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect();
        tx.commit().await?;
        Ok(Some(
            digests
                .into_iter()
                .filter(|d| !still_used.contains(d))
                .collect(),
        ))
    }
}
