//! The admin token and API keys. Only SHA-256 digests of tokens are stored;
//! a presented token is hashed and compared in constant time.

use rand::RngCore;
use sha2::{Digest, Sha256};

use crate::{Store, StoreError};

/// Random bytes in a minted token (256 bits).
const TOKEN_BYTES: usize = 32;

/// An API key as listed (never its token).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    /// Stable id (`key_...`), safe to log.
    pub id: String,
    /// A label chosen by whoever created it.
    pub name: String,
    /// Granted scopes.
    pub scopes: Vec<String>,
    /// Its team, if any.
    pub team: Option<String>,
    /// When it was created.
    pub created_at: String,
    /// When it was revoked, if it was.
    pub revoked_at: Option<String>,
}

/// A key whose token was presented: who is calling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The key's id.
    pub key_id: String,
    /// Its scopes.
    pub scopes: Vec<String>,
    /// The stored digest, for the constant-time check.
    pub token_sha256: Vec<u8>,
    /// Its team, if any.
    pub team: Option<String>,
}

/// A new random token: `sy_` and 64 hex digits.
pub fn mint_token() -> String {
    let mut bytes = [0u8; TOKEN_BYTES];
    rand::rng().fill_bytes(&mut bytes);
    format!("sy_{}", hex::encode(bytes))
}

/// The digest a token is stored and looked up by.
pub fn token_digest(token: &str) -> Vec<u8> {
    Sha256::digest(token.as_bytes()).to_vec()
}

/// A random id with a readable prefix (`key_...`, `node_...`): 64 bits, safe to log.
pub fn random_id(prefix: &str) -> String {
    let mut bytes = [0u8; 8];
    rand::rng().fill_bytes(&mut bytes);
    format!("{prefix}_{}", hex::encode(bytes))
}

const COLUMNS: &str = "id, name, scopes, team, \
     to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), \
     to_char(revoked_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')";

fn key(row: &tokio_postgres::Row) -> ApiKey {
    ApiKey {
        id: row.get(0),
        name: row.get(1),
        scopes: row.get(2),
        team: row.get(3),
        created_at: row.get(4),
        revoked_at: row.get(5),
    }
}

impl Store {
    /// Creates the admin key on first start. Returns the token when one was
    /// created (`chosen`, or a minted one), `None` when an admin key exists.
    pub async fn ensure_admin_key(
        &self,
        chosen: Option<&str>,
    ) -> Result<Option<String>, StoreError> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        // Two replicas starting at once must not both create one.
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtext('switchyard:admin-key'))",
            &[],
        )
        .await?;
        // The admin key is known by the `bootstrap` mark only this function
        // sets: keys created through the API may take any name, `admin` too.
        let exists = tx
            .query_opt(
                "SELECT 1 FROM api_keys WHERE bootstrap AND revoked_at IS NULL",
                &[],
            )
            .await?
            .is_some();
        if exists {
            return Ok(None);
        }
        let token = chosen.map(str::to_string).unwrap_or_else(mint_token);
        tx.execute(
            "INSERT INTO api_keys (id, name, token_sha256, scopes, bootstrap) \
             VALUES ($1, 'admin', $2, ARRAY['admin'], true)",
            &[&random_id("key"), &token_digest(&token)],
        )
        .await?;
        tx.commit().await?;
        Ok(Some(token))
    }

    /// Creates a key, in `team` when one is named; the token is returned
    /// once and never stored. `None` when the team does not exist.
    pub async fn create_key(
        &self,
        name: &str,
        scopes: &[String],
        team: Option<&str>,
    ) -> Result<Option<(ApiKey, String)>, StoreError> {
        let token = mint_token();
        // The team row is share-locked by the foreign key check, so a
        // deletion waits for this insert and then sees the live key.
        let row = self
            .conn()
            .await?
            .query_opt(
                &format!(
                    "INSERT INTO api_keys (id, name, token_sha256, scopes, team) \
                     SELECT $1, $2, $3, $4, $5 \
                     WHERE $5::text IS NULL OR EXISTS (SELECT 1 FROM teams WHERE name = $5) \
                     RETURNING {COLUMNS}"
                ),
                &[
                    &random_id("key"),
                    &name,
                    &token_digest(&token),
                    &scopes,
                    &team,
                ],
            )
            .await?;
        Ok(row.map(|row| (key(&row), token)))
    }

    /// Revokes a key; `false` when there is no such live key.
    pub async fn revoke_key(&self, id: &str) -> Result<bool, StoreError> {
        let n = self
            .conn()
            .await?
            .execute(
                "UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL",
                &[&id],
            )
            .await?;
        Ok(n == 1)
    }

    /// Every key, newest first.
    pub async fn keys(&self) -> Result<Vec<ApiKey>, StoreError> {
        let rows = self
            .conn()
            .await?
            .query(
                &format!("SELECT {COLUMNS} FROM api_keys ORDER BY created_at DESC"),
                &[],
            )
            .await?;
        Ok(rows.iter().map(key).collect())
    }

    /// The live key whose token has this digest.
    pub async fn principal(&self, digest: &[u8]) -> Result<Option<Principal>, StoreError> {
        let row = self
            .conn()
            .await?
            .query_opt(
                "SELECT id, scopes, token_sha256, team FROM api_keys WHERE token_sha256 = $1 AND revoked_at IS NULL",
                &[&digest],
            )
            .await?;
        Ok(row.map(|r| Principal {
            key_id: r.get(0),
            scopes: r.get(1),
            token_sha256: r.get(2),
            team: r.get(3),
        }))
    }
}
