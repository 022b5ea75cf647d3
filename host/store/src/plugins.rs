//! The component registry: records by (name, version), bytes by SHA-256.

use serde::Serialize;
use switchyard_protocol::plugin::PluginKind;

use crate::{Store, StoreError};

/// A plugin's record.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct PluginRecord {
    /// Plugin name.
    pub name: String,
    /// Version, as uploaded.
    pub version: String,
    /// What it is (stored as its text).
    pub kind: PluginKind,
    /// The world and version it targets.
    pub world: String,
    /// SHA-256 of the bytes, hex.
    pub sha256: String,
    /// Size in bytes.
    pub size: i64,
    /// The key that uploaded it.
    pub uploaded_by: String,
    /// When, RFC 3339 by the database clock.
    pub uploaded_at: String,
}

/// What an insert did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inserted {
    /// A new record.
    Created(PluginRecord),
    /// The same name, version and digest were already there.
    Existing(PluginRecord),
    /// The name and version exist with another digest.
    Conflict(PluginRecord),
}

const COLUMNS: &str = "name, version, kind, world, sha256, size, uploaded_by, \
     to_char(uploaded_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')";

fn record(row: &tokio_postgres::Row) -> PluginRecord {
    PluginRecord {
        name: row.get(0),
        version: row.get(1),
        kind: crate::state_column(row, 2),
        world: row.get(3),
        sha256: row.get(4),
        size: row.get(5),
        uploaded_by: row.get(6),
        uploaded_at: row.get(7),
    }
}

impl Store {
    /// Stores the bytes (once per digest) and the record (once per name and version).
    pub async fn insert_plugin(
        &self,
        new: &PluginRecord,
        bytes: &[u8],
    ) -> Result<Inserted, StoreError> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        if let Some(row) = tx
            .query_opt(
                &format!(
                    "SELECT {COLUMNS} FROM plugins WHERE name = $1 AND version = $2 FOR UPDATE"
                ),
                &[&new.name, &new.version],
            )
            .await?
        {
            let existing = record(&row);
            return Ok(match existing.sha256 == new.sha256 {
                true => Inserted::Existing(existing),
                false => Inserted::Conflict(existing),
            });
        }
        tx.execute(
            "INSERT INTO plugin_blobs (sha256, bytes, size) VALUES ($1, $2, $3) ON CONFLICT (sha256) DO NOTHING",
            &[&new.sha256, &bytes, &(bytes.len() as i64)],
        )
        .await?;
        let inserted = tx
            .query_opt(
                &format!(
                    "INSERT INTO plugins (name, version, kind, world, sha256, size, uploaded_by)
                     VALUES ($1, $2, $3, $4, $5, $6, $7)
                     ON CONFLICT (name, version) DO NOTHING RETURNING {COLUMNS}"
                ),
                &[
                    &new.name,
                    &new.version,
                    &new.kind.as_str(),
                    &new.world,
                    &new.sha256,
                    &new.size,
                    &new.uploaded_by,
                ],
            )
            .await?;
        tx.commit().await?;
        match inserted {
            Some(row) => Ok(Inserted::Created(record(&row))),
            // Another replica inserted the same name and version between our read and write.
            None => {
                let existing = self
                    .plugin(&new.name, &new.version)
                    .await?
                    .ok_or_else(|| StoreError::NotFound(format!("{}@{}", new.name, new.version)))?;
                Ok(match existing.sha256 == new.sha256 {
                    true => Inserted::Existing(existing),
                    false => Inserted::Conflict(existing),
                })
            }
        }
    }

    /// One version's record.
    pub async fn plugin(
        &self,
        name: &str,
        version: &str,
    ) -> Result<Option<PluginRecord>, StoreError> {
        let row = self
            .conn()
            .await?
            .query_opt(
                &format!("SELECT {COLUMNS} FROM plugins WHERE name = $1 AND version = $2"),
                &[&name, &version],
            )
            .await?;
        Ok(row.as_ref().map(record))
    }

    /// Every record, or every version of one name, oldest first.
    pub async fn plugins(&self, name: Option<&str>) -> Result<Vec<PluginRecord>, StoreError> {
        let rows = self
            .conn()
            .await?
            .query(
                &format!(
                    "SELECT {COLUMNS} FROM plugins WHERE $1::text IS NULL OR name = $1 ORDER BY name, uploaded_at"
                ),
                &[&name],
            )
            .await?;
        Ok(rows.iter().map(record).collect())
    }

    /// The bytes of a digest.
    pub async fn plugin_bytes(&self, sha256: &str) -> Result<Vec<u8>, StoreError> {
        let row = self
            .conn()
            .await?
            .query_opt(
                "SELECT bytes FROM plugin_blobs WHERE sha256 = $1",
                &[&sha256],
            )
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("component {sha256}")))?;
        Ok(row.get(0))
    }
}
