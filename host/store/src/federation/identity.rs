//! This cluster's identity: its id, label and public key (the private key
//! is in a file, never here), and the join token's SHA-256.

use switchyard_protocol::federation::Identity;

use crate::{Store, StoreError};

impl Store {
    /// The identity, made with a random cluster id and `label` at the first
    /// call; `true` when this call made it.
    pub async fn ensure_federation_identity(
        &self,
        label: &str,
    ) -> Result<(Identity, bool), StoreError> {
        let id = crate::keys::random_id("cluster");
        let conn = self.conn().await?;
        let made = conn
            .execute(
                "INSERT INTO federation_identity (cluster_id, label) VALUES ($1, $2) \
                 ON CONFLICT (singleton) DO NOTHING",
                &[&id, &label],
            )
            .await?;
        let identity = self
            .federation_identity()
            .await?
            .ok_or_else(|| StoreError::NotFound("federation identity".into()))?;
        Ok((identity, made == 1))
    }

    /// The identity, if made.
    pub async fn federation_identity(&self) -> Result<Option<Identity>, StoreError> {
        let row = self
            .conn()
            .await?
            .query_opt(
                "SELECT cluster_id, label, public_key FROM federation_identity",
                &[],
            )
            .await?;
        Ok(row.map(|row| Identity {
            cluster_id: row.get(0),
            label: row.get(1),
            public_key: row.get(2),
        }))
    }

    /// Stores the public key when none is; answers the one stored after.
    pub async fn claim_federation_public_key(
        &self,
        public_key: &str,
    ) -> Result<Option<String>, StoreError> {
        let row = self
            .conn()
            .await?
            .query_opt(
                "UPDATE federation_identity SET public_key = COALESCE(public_key, $1) \
                 RETURNING public_key",
                &[&public_key],
            )
            .await?;
        Ok(row.and_then(|row| row.get(0)))
    }

    /// Replaces the stored public key (an operator configured a new key
    /// after a restore): every peer must pair again, so their links and
    /// grants are no longer usable.
    pub async fn replace_federation_public_key(&self, public_key: &str) -> Result<(), StoreError> {
        self.conn()
            .await?
            .execute(
                "UPDATE federation_identity SET public_key = $1",
                &[&public_key],
            )
            .await?;
        Ok(())
    }

    /// Sets the join token's SHA-256 (the previous token stops working),
    /// valid for `ttl` and `uses` joins.
    pub async fn set_join_token(
        &self,
        sha256: &[u8],
        ttl: std::time::Duration,
        uses: u32,
    ) -> Result<(), StoreError> {
        let uses = i32::try_from(uses).unwrap_or(i32::MAX);
        self.conn()
            .await?
            .execute(
                "UPDATE federation_identity SET join_token_sha256 = $1, join_token_at = now(), \
                 join_token_expires_at = now() + make_interval(secs => $2), \
                 join_token_uses_left = $3",
                &[&sha256, &ttl.as_secs_f64(), &uses],
            )
            .await?;
        Ok(())
    }

    /// The join token's SHA-256, if one was made and it has not expired or
    /// been used up.
    pub async fn join_token_sha256(&self) -> Result<Option<Vec<u8>>, StoreError> {
        let row = self
            .conn()
            .await?
            .query_opt(
                "SELECT join_token_sha256 FROM federation_identity \
                 WHERE join_token_expires_at > now() AND join_token_uses_left > 0",
                &[],
            )
            .await?;
        Ok(row.and_then(|row| row.get(0)))
    }

    /// Spends one use of the join token whose SHA-256 is `sha256`, in one
    /// statement (two joins never share the last use); `false` when it is
    /// not the current token, expired or used up.
    pub async fn use_join_token(&self, sha256: &[u8]) -> Result<bool, StoreError> {
        let used = self
            .conn()
            .await?
            .execute(
                "UPDATE federation_identity SET join_token_uses_left = join_token_uses_left - 1 \
                 WHERE join_token_sha256 = $1 AND join_token_expires_at > now() \
                 AND join_token_uses_left > 0",
                &[&sha256],
            )
            .await?;
        Ok(used == 1)
    }
}
