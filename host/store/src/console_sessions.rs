//! Web console sessions (`console_sessions`): a session is found by the
//! SHA-256 of its cookie's id and is live while it has not expired and the
//! API key it was opened with is not revoked.

use std::time::Duration;

use crate::{Store, StoreError};

/// A live session: who it acts as and the token its forms must carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleSession {
    /// The API key the session acts as.
    pub key_id: String,
    /// That key's scopes, read with the session.
    pub scopes: Vec<String>,
    /// The session's anti-forgery token.
    pub csrf_token: String,
}

impl Store {
    /// Opens a session for `key_id` that lasts `lifetime`; drops expired
    /// ones, and the key's oldest beyond the newest `keep` (this one among
    /// them), so a key never holds more than `keep` live sessions.
    pub async fn open_console_session(
        &self,
        id_sha256: &[u8],
        key_id: &str,
        csrf_token: &str,
        lifetime: Duration,
        keep: usize,
    ) -> Result<(), StoreError> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        tx.execute("DELETE FROM console_sessions WHERE expires_at < now()", &[])
            .await?;
        let seconds = lifetime.as_secs_f64();
        tx.execute(
            "INSERT INTO console_sessions (id_sha256, key_id, csrf_token, expires_at) \
             VALUES ($1, $2, $3, now() + make_interval(secs => $4))",
            &[&id_sha256, &key_id, &csrf_token, &seconds],
        )
        .await?;
        // The new row is first whatever the clock says (created_at is the
        // transaction's start, equal for rows of one transaction only).
        let keep = i64::try_from(keep).unwrap_or(i64::MAX);
        tx.execute(
            "DELETE FROM console_sessions WHERE key_id = $1 AND id_sha256 IN ( \
                 SELECT id_sha256 FROM console_sessions WHERE key_id = $1 \
                 ORDER BY (id_sha256 = $2) DESC, created_at DESC OFFSET $3)",
            &[&key_id, &id_sha256, &keep],
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The live session with this id digest: not expired, its key not revoked.
    pub async fn console_session(
        &self,
        id_sha256: &[u8],
    ) -> Result<Option<ConsoleSession>, StoreError> {
        let row = self
            .conn()
            .await?
            .query_opt(
                "SELECT s.key_id, k.scopes, s.csrf_token FROM console_sessions s \
                 JOIN api_keys k ON k.id = s.key_id AND k.revoked_at IS NULL \
                 WHERE s.id_sha256 = $1 AND s.expires_at > now()",
                &[&id_sha256],
            )
            .await?;
        Ok(row.map(|r| ConsoleSession {
            key_id: r.get(0),
            scopes: r.get(1),
            csrf_token: r.get(2),
        }))
    }

    /// Ends a session (signing out); nothing if it is gone already.
    pub async fn close_console_session(&self, id_sha256: &[u8]) -> Result<(), StoreError> {
        self.conn()
            .await?
            .execute(
                "DELETE FROM console_sessions WHERE id_sha256 = $1",
                &[&id_sha256],
            )
            .await?;
        Ok(())
    }
}
