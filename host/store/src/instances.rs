//! Frontend replica membership, stamped by the database clock.

use crate::{Store, StoreError};

impl Store {
    /// Registers this replica, or refreshes its heartbeat.
    pub async fn heartbeat_instance(&self, id: &str, hostname: &str) -> Result<(), StoreError> {
        self.conn()
            .await?
            .execute(
                "INSERT INTO instances (id, hostname) VALUES ($1, $2)
                 ON CONFLICT (id) DO UPDATE SET heartbeat_at = now()",
                &[&id, &hostname],
            )
            .await?;
        Ok(())
    }

    /// Where the other replicas are reached (`instances.address`), those
    /// whose heartbeat is younger than `fresh`, the most recent first.
    pub async fn peer_addresses(
        &self,
        me: &str,
        fresh: std::time::Duration,
    ) -> Result<Vec<String>, StoreError> {
        let rows = self
            .conn()
            .await?
            .query(
                "SELECT address FROM instances
                 WHERE id <> $1 AND address IS NOT NULL
                    AND heartbeat_at > now() - make_interval(secs => $2)
                 ORDER BY heartbeat_at DESC",
                &[&me, &fresh.as_secs_f64()],
            )
            .await?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    /// Removes this replica on a clean shutdown.
    pub async fn remove_instance(&self, id: &str) -> Result<(), StoreError> {
        self.conn()
            .await?
            .execute("DELETE FROM instances WHERE id = $1", &[&id])
            .await?;
        Ok(())
    }
}
