//! The keys a cluster trusts to sign plugins (`trusted_keys`). Who signed
//! a version is kept on its `plugins` row by public key, so what the
//! registry shows of a signer is read against this set every time.

use switchyard_protocol::signing::{MAX_TRUSTED_KEYS, TrustedKey};

use crate::{Store, StoreError};

const COLUMNS: &str = "id, name, public_key, comment, added_by, \
     to_char(added_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')";

fn key(row: &tokio_postgres::Row) -> TrustedKey {
    TrustedKey {
        id: row.get(0),
        name: row.get(1),
        public_key: row.get(2),
        comment: row.get(3),
        added_by: row.get(4),
        added_at: row.get(5),
    }
}

/// What adding a key did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Added {
    /// It is trusted now.
    Created(TrustedKey),
    /// It was trusted already (its name and comment unchanged).
    Existing(TrustedKey),
    /// The set holds [`MAX_TRUSTED_KEYS`] already.
    Full,
}

impl Store {
    /// Every trusted key, oldest first.
    pub async fn trusted_keys(&self) -> Result<Vec<TrustedKey>, StoreError> {
        let rows = self
            .conn()
            .await?
            .query(
                &format!("SELECT {COLUMNS} FROM trusted_keys ORDER BY added_at, id"),
                &[],
            )
            .await?;
        Ok(rows.iter().map(key).collect())
    }

    /// The trusted key with this public key, if it is trusted.
    pub async fn trusted_key(&self, public_key: &str) -> Result<Option<TrustedKey>, StoreError> {
        let row = self
            .conn()
            .await?
            .query_opt(
                &format!("SELECT {COLUMNS} FROM trusted_keys WHERE public_key = $1"),
                &[&public_key],
            )
            .await?;
        Ok(row.as_ref().map(key))
    }

    /// Trusts a key. The count is checked under a table lock so that two
    /// replicas adding at once cannot pass the bound together.
    pub async fn add_trusted_key(&self, new: &TrustedKey) -> Result<Added, StoreError> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        tx.execute("LOCK TABLE trusted_keys IN SHARE ROW EXCLUSIVE MODE", &[])
            .await?;
        if let Some(row) = tx
            .query_opt(
                &format!("SELECT {COLUMNS} FROM trusted_keys WHERE public_key = $1"),
                &[&new.public_key],
            )
            .await?
        {
            return Ok(Added::Existing(key(&row)));
        }
        let count: i64 = tx
            .query_one("SELECT count(*) FROM trusted_keys", &[])
            .await?
            .get(0);
        if count >= MAX_TRUSTED_KEYS as i64 {
            return Ok(Added::Full);
        }
        let row = tx
            .query_one(
                &format!(
                    "INSERT INTO trusted_keys (id, name, public_key, comment, added_by)
                     VALUES ($1, $2, $3, $4, $5) RETURNING {COLUMNS}"
                ),
                &[
                    &new.id,
                    &new.name,
                    &new.public_key,
                    &new.comment,
                    &new.added_by,
                ],
            )
            .await?;
        tx.commit().await?;
        Ok(Added::Created(key(&row)))
    }

    /// Stops trusting a key; the removed key, or `None` when no key has
    /// this id. Versions it signed keep their signature and show as signed
    /// by a key no longer trusted.
    pub async fn remove_trusted_key(&self, id: &str) -> Result<Option<TrustedKey>, StoreError> {
        let row = self
            .conn()
            .await?
            .query_opt(
                &format!("DELETE FROM trusted_keys WHERE id = $1 RETURNING {COLUMNS}"),
                &[&id],
            )
            .await?;
        Ok(row.as_ref().map(key))
    }
}
