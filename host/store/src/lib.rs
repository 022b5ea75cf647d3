//! Switchyard's state in PostgreSQL.
//!
//! # Layout
//! - [`embedded`]: the private PostgreSQL started under the data directory when no URL is given.
//! - [`migrations`]: versioned schema changes, applied at start under an advisory lock.
//! - [`plugins`]: the content-addressed component registry.
//! - [`trust`]: the keys trusted to sign plugins.
//! - [`keys`]: the admin token and API keys (SHA-256 only).
//! - [`admission`]: admission generations and each replica's status.
//! - [`admission_decisions`]: the admission decision log: batched writes, queries, pruning.
//! - [`instances`]: frontend replica membership.
//! - [`batches`]: OpenAI batches: uploaded files, batches and one row per line.
//! - [`nodes`]: registration tokens, workers and their credentials, connection claims.
//! - [`federation`]: this cluster's identity, peers, offers, requests, grants
//!   and their counters, operation receipts and managed services.
//! - [`error`]: the store's error type.
//! - [`database_url`]: a database URL parsed once; every connection is made from it.
//! - `tls`: TLS to PostgreSQL as libpq's `sslmode`, `sslrootcert`, `sslcert`
//!   and `sslkey` ask.

pub mod admission;
pub mod admission_decisions;
pub mod audit;
pub mod batched;
pub mod batches;
pub mod carrier_switch;
pub mod cluster;
pub mod console_sessions;
pub mod database_url;
pub mod deployments;
pub mod embedded;
pub mod error;
pub mod federation;
pub mod instances;
pub mod keys;
pub mod migrations;
pub mod models;
pub mod nodes;
pub mod plugins;
pub mod teams;
mod tls;
pub mod trust;
pub mod usage;

use std::time::Duration;

pub use database_url::DatabaseUrl;
pub use error::StoreError;

/// A state column (text) as its enum. Every state is written from the
/// enum's own text (and `nodes.state` and `cluster_carrier.state` have a
/// `CHECK` listing it), so text that parses to no state is a broken
/// database, not a value to carry on with.
pub(crate) fn state_column<T>(row: &tokio_postgres::Row, index: usize) -> T
where
    T: std::str::FromStr<Err = switchyard_protocol::UnknownText>,
{
    let text: &str = row.get(index);
    text.parse()
        .unwrap_or_else(|e| panic!("column {index} of a stored row: {e}"))
}

/// Connections a replica keeps open to PostgreSQL.
const POOL_SIZE: usize = 16;

/// How long the pool waits on the database before a request is answered
/// 503 `database_unavailable`. Without a bound, a PostgreSQL that stalls
/// (a full disk, a lock, a network partition) holds every request open
/// until its client gives up; with one, clients and load balancers learn
/// at once and retry elsewhere (what PgBouncer's `query_wait_timeout` and
/// HikariCP's `connectionTimeout` do).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolTimeouts {
    /// For a free connection when all are in use.
    pub wait: Duration,
    /// To open a new connection (TCP, TLS, startup and authentication).
    pub create: Duration,
    /// To check a returned connection before it is handed out again.
    pub recycle: Duration,
}

impl Default for PoolTimeouts {
    fn default() -> Self {
        // A healthy database answers all three in milliseconds; a few
        // seconds absorb a busy moment without holding requests for long.
        Self {
            wait: Duration::from_secs(5),
            create: Duration::from_secs(5),
            recycle: Duration::from_secs(5),
        }
    }
}

/// The channel on which a change of admission bindings is announced.
pub const ADMISSION_CHANNEL: &str = "switchyard_admission";

/// A pool of connections to Switchyard's database.
#[derive(Clone)]
pub struct Store {
    pool: deadpool_postgres::Pool,
    url: DatabaseUrl,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").finish_non_exhaustive()
    }
}

impl Store {
    /// Connects, checks the connection and applies pending migrations.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::connect_with(url, PoolTimeouts::default()).await
    }

    /// [`Store::connect`] with other pool timeouts.
    pub async fn connect_with(url: &str, timeouts: PoolTimeouts) -> Result<Self, StoreError> {
        let store = Self::connect_lazily(url, timeouts)?;
        migrations::apply(&store).await?;
        Ok(store)
    }

    /// A pool that connects on first use: nothing is checked or migrated.
    /// For what must run without a database (the router's own tests, where
    /// a request that reaches it is answered 503 `database_unavailable`).
    pub fn connect_lazily(url: &str, timeouts: PoolTimeouts) -> Result<Self, StoreError> {
        let mut url = DatabaseUrl::parse(url)?;
        url.default_connect_timeout(timeouts.create);
        let manager = deadpool_postgres::Manager::new(url.config().clone(), url.tls());
        let pool = deadpool_postgres::Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(timeouts.wait))
            .create_timeout(Some(timeouts.create))
            .recycle_timeout(Some(timeouts.recycle))
            .build()
            .map_err(|e| StoreError::Config(e.to_string()))?;
        Ok(Self { pool, url })
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
        self.listen_queued(channel, 64).await
    }

    /// [`Store::listen`], holding up to `queue` notifications that the
    /// reader has not taken yet (more are dropped).
    pub async fn listen_queued(
        &self,
        channel: &str,
        queue: usize,
    ) -> Result<(tokio_postgres::Client, tokio::sync::mpsc::Receiver<String>), StoreError> {
        use futures::StreamExt;
        let (client, mut connection) = self.url.connect().await?;
        let (tx, rx) = tokio::sync::mpsc::channel(queue);
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

    /// The URL this store connects to, for connections of its own.
    pub fn url(&self) -> &DatabaseUrl {
        &self.url
    }

    /// Whether the database answers.
    pub async fn ping(&self) -> Result<(), StoreError> {
        self.conn().await?.simple_query("SELECT 1").await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_database_that_never_answers_is_unavailable_within_the_timeouts() {
        // Connections are accepted (into the kernel's backlog) and never answered.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = silent.local_addr().unwrap().port();
        let quick = PoolTimeouts {
            wait: Duration::from_millis(300),
            create: Duration::from_millis(300),
            recycle: Duration::from_millis(300),
        };
        let url = format!("host=127.0.0.1 port={port} user=switchyard dbname=switchyard");
        let connected =
            tokio::time::timeout(Duration::from_secs(10), Store::connect_with(&url, quick))
                .await
                .expect("connecting hung past its timeouts");
        assert!(
            matches!(connected, Err(StoreError::Pool(_))),
            "{:?}",
            connected.err()
        );
    }
}
