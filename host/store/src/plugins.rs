//! The component registry: records by (name, version), bytes by SHA-256,
//! and who signed each version (read against the trust set every time, so
//! a removed key shows at once as no longer trusted).

use switchyard_protocol::signing::{Signer, SignerTrust};

use crate::{Store, StoreError};

pub use switchyard_protocol::plugin::PluginRecord;

/// A verified signature to keep with an upload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedBy {
    /// The key's id.
    pub key_id: String,
    /// The ed25519 public key, hex.
    pub public_key: String,
    /// The signature, hex.
    pub signature: String,
    /// The trusted key's name when the key is trusted at upload.
    pub trusted_name: Option<String>,
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

const COLUMNS: &str = "p.name, p.version, p.kind, p.world, p.sha256, p.size, p.uploaded_by, \
     to_char(p.uploaded_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), \
     p.signer_key_id, COALESCE(t.name, p.signer_name), t.id IS NOT NULL, p.signer_trusted_at_upload";

/// The plugins with their signer's trusted key, if it is still trusted.
const FROM: &str = "plugins p LEFT JOIN trusted_keys t ON t.public_key = p.signer_public_key";

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
        signature: row.get::<_, Option<String>>(8).map(|key_id| {
            let trusted: bool = row.get(10);
            Signer {
                key_id,
                key_name: row.get(9),
                trusted,
                trust: match (trusted, row.get::<_, bool>(11)) {
                    (true, _) => SignerTrust::Trusted,
                    (false, true) => SignerTrust::NoLongerTrusted,
                    (false, false) => SignerTrust::Untrusted,
                },
            }
        }),
    }
}

impl Store {
    /// Stores the bytes (once per digest) and the record (once per name and version).
    pub async fn insert_plugin(
        &self,
        new: &PluginRecord,
        bytes: &[u8],
    ) -> Result<Inserted, StoreError> {
        self.insert_signed_plugin(new, bytes, None).await
    }

    /// [`Store::insert_plugin`] with the upload's verified signature. The
    /// same upload again with a signature signs a version stored unsigned;
    /// a version signed already keeps its first signature.
    pub async fn insert_signed_plugin(
        &self,
        new: &PluginRecord,
        bytes: &[u8],
        signed: Option<&SignedBy>,
    ) -> Result<Inserted, StoreError> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        if let Some(row) = tx
            .query_opt(
                "SELECT sha256, signer_key_id IS NOT NULL FROM plugins
                 WHERE name = $1 AND version = $2 FOR UPDATE",
                &[&new.name, &new.version],
            )
            .await?
        {
            let (sha256, is_signed): (String, bool) = (row.get(0), row.get(1));
            if let Some(signed) = signed.filter(|_| sha256 == new.sha256 && !is_signed) {
                sign(&tx, &new.name, &new.version, signed).await?;
            }
            tx.commit().await?;
            let existing = self
                .plugin(&new.name, &new.version)
                .await?
                .ok_or_else(|| StoreError::NotFound(format!("{}@{}", new.name, new.version)))?;
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
                "INSERT INTO plugins (name, version, kind, world, sha256, size, uploaded_by)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)
                 ON CONFLICT (name, version) DO NOTHING RETURNING name",
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
        if let Some(signed) = signed.filter(|_| inserted.is_some()) {
            sign(&tx, &new.name, &new.version, signed).await?;
        }
        tx.commit().await?;
        match inserted {
            Some(_) => {
                let created = self
                    .plugin(&new.name, &new.version)
                    .await?
                    .ok_or_else(|| StoreError::NotFound(format!("{}@{}", new.name, new.version)))?;
                Ok(Inserted::Created(created))
            }
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
                &format!("SELECT {COLUMNS} FROM {FROM} WHERE p.name = $1 AND p.version = $2"),
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
                    "SELECT {COLUMNS} FROM {FROM} WHERE $1::text IS NULL OR p.name = $1 ORDER BY p.name, p.uploaded_at"
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

/// Keeps a verified signature on a version's row.
async fn sign(
    tx: &tokio_postgres::Transaction<'_>,
    name: &str,
    version: &str,
    signed: &SignedBy,
) -> Result<(), StoreError> {
    tx.execute(
        "UPDATE plugins SET signer_key_id = $3, signer_public_key = $4, signature = $5,
             signer_name = $6, signer_trusted_at_upload = $7
         WHERE name = $1 AND version = $2",
        &[
            &name,
            &version,
            &signed.key_id,
            &signed.public_key,
            &signed.signature,
            &signed.trusted_name,
            &signed.trusted_name.is_some(),
        ],
    )
    .await?;
    Ok(())
}
