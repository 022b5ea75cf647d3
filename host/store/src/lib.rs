//! Switchyard's state in PostgreSQL.
//!
//! # Layout
//! - [`embedded`]: the private PostgreSQL started under the data directory when no URL is given.
//! - [`migrations`]: versioned schema changes, applied at start under an advisory lock.
//! - [`plugins`]: the content-addressed component registry.
//! - [`keys`]: the admin token and API keys (SHA-256 only).
//! - [`admission`]: admission generations and each replica's status.
//! - [`instances`]: frontend replica membership.
//! - [`nodes`]: registration tokens, workers and their credentials, connection claims.
//! - [`error`]: the store's error type.

pub mod admission;
pub mod cluster;
pub mod deployments;
pub mod embedded;
pub mod error;
pub mod instances;
pub mod keys;
pub mod migrations;
pub mod models;
pub mod nodes;
pub mod plugins;

use std::str::FromStr;

pub use error::StoreError;

/// Connections a replica keeps open to PostgreSQL.
const POOL_SIZE: usize = 16;

/// The channel on which a change of admission bindings is announced.
pub const ADMISSION_CHANNEL: &str = "switchyard_admission";

/// A pool of connections to Switchyard's database.
#[derive(Clone)]
pub struct Store {
    pool: deadpool_postgres::Pool,
    config: tokio_postgres::Config,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").finish_non_exhaustive()
    }
}

impl Store {
    /// Connects, checks the connection and applies pending migrations.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let config = tokio_postgres::Config::from_str(url)
            .map_err(|e| StoreError::Config(format!("invalid database URL: {e}")))?;
        let manager = deadpool_postgres::Manager::new(config.clone(), tokio_postgres::NoTls);
        let pool = deadpool_postgres::Pool::builder(manager)
            .max_size(POOL_SIZE)
            .build()
            .map_err(|e| StoreError::Config(e.to_string()))?;
        let store = Self { pool, config };
        migrations::apply(&store).await?;
        Ok(store)
    }

    /// A pooled connection.
    pub async fn conn(&self) -> Result<deadpool_postgres::Object, StoreError> {
        Ok(self.pool.get().await?)
    }

    /// A dedicated connection (for LISTEN), with its driver task spawned.
    /// Notifications arrive on the returned channel until the connection drops.
    pub async fn listen(
        &self,
        channel: &str,
    ) -> Result<(tokio_postgres::Client, tokio::sync::mpsc::Receiver<String>), StoreError> {
        use futures::StreamExt;
        let (client, mut connection) = self.config.connect(tokio_postgres::NoTls).await?;
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        tokio::spawn(async move {
            let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
            while let Some(Ok(message)) = messages.next().await {
                if let tokio_postgres::AsyncMessage::Notification(n) = message {
                    // A full queue means a wake-up is already pending; dropping is fine.
                    let _ = tx.try_send(n.payload().to_string());
                }
            }
        });
        client.batch_execute(&format!("LISTEN {channel}")).await?;
        Ok((client, rx))
    }

    /// Whether the database answers.
    pub async fn ping(&self) -> Result<(), StoreError> {
        self.conn().await?.simple_query("SELECT 1").await?;
        Ok(())
    }
}
