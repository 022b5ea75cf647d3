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

    /// Removes this replica on a clean shutdown.
    pub async fn remove_instance(&self, id: &str) -> Result<(), StoreError> {
        self.conn()
            .await?
            .execute("DELETE FROM instances WHERE id = $1", &[&id])
            .await?;
        Ok(())
    }
}
