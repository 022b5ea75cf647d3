//! What the store can fail with.

use thiserror::Error;

/// A store failure.
#[derive(Debug, Error)]
pub enum StoreError {
    /// A query failed.
    #[error("database error: {0}")]
    Db(#[from] tokio_postgres::Error),
    /// No connection could be had from the pool.
    #[error("database unavailable: {0}")]
    Pool(#[from] deadpool_postgres::PoolError),
    /// A configuration problem (a bad URL, missing binaries).
    #[error("{0}")]
    Config(String),
    /// The embedded PostgreSQL could not be started or stopped.
    #[error("embedded PostgreSQL: {0}")]
    Embedded(String),
    /// A row that should be there is not.
    #[error("not found: {0}")]
    NotFound(String),
    /// A stored value could not be decoded.
    #[error("corrupt row: {0}")]
    Corrupt(String),
}
