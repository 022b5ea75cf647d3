//! Batch files: an upload written in chunks as it streams in (invisible
//! until complete), read back chunk by chunk, deleted by its owner or when
//! it expires; output and error files are records whose bytes are their
//! batch's lines.
//!
//! Every read names whose rows it may see ([`Visible`]): a file belongs to
//! the key that uploaded it, and a file of someone else's is not found.

use switchyard_protocol::batch::FileObject;

use crate::{Store, StoreError};

/// Whose files and batches a read may see. The owner is a key id today;
/// this is the one place a team would widen it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visible<'a> {
    /// The rows this owner made.
    Owner(&'a str),
    /// Every row: an admin key, or this cluster's own machinery.
    All,
}

impl<'a> Visible<'a> {
    /// The owner a query is filtered by (`$n::text IS NULL OR owner = $n`).
    pub fn owner(self) -> Option<&'a str> {
        match self {
            Visible::Owner(owner) => Some(owner),
            Visible::All => None,
        }
    }
}

/// How a chunk of an upload was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appended {
    /// Stored; the owner's uploads now hold this many bytes.
    Stored,
    /// Refused: the owner's uploads would hold more than its quota.
    OverQuota {
        /// The bytes its uploads hold now.
        used: i64,
    },
}

/// What [`Store::sweep_batch_files`] deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    /// Uploads past their `expires_at`.
    pub expired: u64,
    /// Uploads abandoned mid-way.
    pub abandoned: u64,
}

const FILE_COLUMNS: &str = "id, purpose, filename, bytes, extract(epoch FROM created_at)::bigint,
    kind, batch_id, extract(epoch FROM expires_at)::bigint";

/// A file this read may see: complete and not expired.
const LIVE: &str = "complete AND (expires_at IS NULL OR expires_at > now())";

/// A stored file and, for an output or error file, its batch and kind.
#[derive(Debug, Clone)]
pub struct StoredFile {
    /// As the API shows it.
    pub file: FileObject,
    /// `upload`, `output` or `error`.
    pub kind: String,
    /// An output or error file's batch.
    pub batch_id: Option<String>,
}

fn file(row: &tokio_postgres::Row) -> StoredFile {
    StoredFile {
        file: FileObject {
            id: row.get(0),
            object: "file".into(),
            purpose: row.get(1),
            filename: row.get(2),
            bytes: row.get(3),
            created_at: row.get(4),
            expires_at: row.get(7),
        },
        kind: row.get(5),
        batch_id: row.get(6),
    }
}

/// A per-owner lock for the quota check: two chunks of one owner's
/// uploads are counted one after the other, so together they cannot pass
/// the quota that each alone keeps to.
const QUOTA_LOCK: &str =
    "SELECT pg_advisory_xact_lock(hashtextextended('batch_files:' || $1::text, 0))";

impl Store {
    /// Starts an upload owned by `owner`: a row no read sees until
    /// [`Store::complete_batch_file`].
    pub async fn begin_batch_file(
        &self,
        id: &str,
        owner: &str,
        filename: &str,
    ) -> Result<(), StoreError> {
        self.conn()
            .await?
            .execute(
                "INSERT INTO batch_files (id, purpose, filename, bytes, kind, owner, complete)
                 VALUES ($1, 'batch', $2, 0, 'upload', $3, false)",
                &[&id, &filename, &owner],
            )
            .await?;
        Ok(())
    }

    /// Appends chunk `seq` of an upload, unless the owner's uploads (this
    /// one so far included) would then hold more than `quota` bytes.
    pub async fn append_batch_file(
        &self,
        id: &str,
        owner: &str,
        seq: i32,
        data: &[u8],
        quota: i64,
    ) -> Result<Appended, StoreError> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        tx.execute(QUOTA_LOCK, &[&owner]).await?;
        let used: i64 = tx
            .query_one(
                "SELECT coalesce(sum(bytes), 0)::bigint FROM batch_files
                  WHERE owner = $1 AND kind = 'upload'
                    AND (expires_at IS NULL OR expires_at > now())",
                &[&owner],
            )
            .await?
            .get(0);
        if used + data.len() as i64 > quota {
            return Ok(Appended::OverQuota { used });
        }
        tx.execute(
            "INSERT INTO batch_file_chunks (file_id, seq, data) VALUES ($1, $2, $3)",
            &[&id, &seq, &data],
        )
        .await?;
        tx.execute(
            "UPDATE batch_files SET bytes = bytes + $2 WHERE id = $1",
            &[&id, &(data.len() as i64)],
        )
        .await?;
        tx.commit().await?;
        Ok(Appended::Stored)
    }

    /// Makes an upload visible, expiring `expires_after` seconds after its
    /// creation.
    pub async fn complete_batch_file(
        &self,
        id: &str,
        purpose: &str,
        expires_after: i64,
    ) -> Result<FileObject, StoreError> {
        let row = self
            .conn()
            .await?
            .query_one(
                &format!(
                    "UPDATE batch_files SET complete = true, purpose = $2,
                            expires_at = created_at + make_interval(secs => $3)
                      WHERE id = $1 RETURNING {FILE_COLUMNS}"
                ),
                &[&id, &purpose, &(expires_after as f64)],
            )
            .await?;
        Ok(file(&row).file)
    }

    /// A file's record, if `visible` may see it.
    pub async fn batch_file(
        &self,
        id: &str,
        visible: Visible<'_>,
    ) -> Result<StoredFile, StoreError> {
        self.conn()
            .await?
            .query_opt(
                &format!(
                    "SELECT {FILE_COLUMNS} FROM batch_files
                      WHERE id = $1 AND ($2::text IS NULL OR owner = $2) AND {LIVE}"
                ),
                &[&id, &visible.owner()],
            )
            .await?
            .map(|row| file(&row))
            .ok_or_else(|| StoreError::NotFound(format!("file {id}")))
    }

    /// Up to `limit` chunks of an upload after chunk `after` (-1: from the
    /// start), in order: `(seq, bytes)`.
    pub async fn batch_file_chunks(
        &self,
        id: &str,
        after: i32,
        limit: i64,
    ) -> Result<Vec<(i32, Vec<u8>)>, StoreError> {
        let rows = self
            .conn()
            .await?
            .query(
                "SELECT seq, data FROM batch_file_chunks
                  WHERE file_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
                &[&id, &after, &limit],
            )
            .await?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    /// Deletes a file `visible` may see (its chunks with it); `false`: none.
    pub async fn delete_batch_file(
        &self,
        id: &str,
        visible: Visible<'_>,
    ) -> Result<bool, StoreError> {
        let deleted = self
            .conn()
            .await?
            .execute(
                &format!(
                    "DELETE FROM batch_files
                      WHERE id = $1 AND ($2::text IS NULL OR owner = $2) AND {LIVE}"
                ),
                &[&id, &visible.owner()],
            )
            .await?;
        Ok(deleted == 1)
    }

    /// Deletes an upload that did not complete (refused, or its client
    /// went away).
    pub async fn discard_batch_file(&self, id: &str) -> Result<(), StoreError> {
        self.conn()
            .await?
            .execute(
                "DELETE FROM batch_files WHERE id = $1 AND NOT complete",
                &[&id],
            )
            .await?;
        Ok(())
    }

    /// Deletes up to `limit` expired uploads, and uploads still incomplete
    /// after `abandoned_after` (their replica died mid-way).
    pub async fn sweep_batch_files(
        &self,
        abandoned_after: std::time::Duration,
        limit: i64,
    ) -> Result<Swept, StoreError> {
        let conn = self.conn().await?;
        let expired = conn
            .execute(
                "DELETE FROM batch_files WHERE id IN (
                     SELECT id FROM batch_files WHERE expires_at <= now() LIMIT $1)",
                &[&limit],
            )
            .await?;
        let abandoned = conn
            .execute(
                "DELETE FROM batch_files WHERE id IN (
                     SELECT id FROM batch_files
                      WHERE NOT complete AND created_at < now() - make_interval(secs => $1)
                      LIMIT $2)",
                &[&abandoned_after.as_secs_f64(), &limit],
            )
            .await?;
        Ok(Swept { expired, abandoned })
    }
}
