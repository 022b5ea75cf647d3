//! What the store can fail with.

use thiserror::Error;

/// A store failure.
#[derive(Debug, Error)]
pub enum StoreError {
    /// A query failed.
    #[error("database error: {}", with_cause(.0))]
    Db(#[from] tokio_postgres::Error),
    /// No connection could be had from the pool (with every cause: "server
    /// does not support TLS" is in the driver error's source).
    #[error("database unavailable: {}", chain(.0))]
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

/// A driver error with its cause: `tokio_postgres::Error` shows only its
/// kind ("db error"), and the database's own message (which constraint, which
/// value) is in its source, which a log line would otherwise lose.
fn with_cause(e: &tokio_postgres::Error) -> String {
    match std::error::Error::source(e) {
        Some(cause) => format!("{e}: {cause}"),
        None => e.to_string(),
    }
}

impl StoreError {
    /// The SQLSTATE the database answered a failed statement with (`23505`
    /// for a unique violation), so that callers can tell a client's bad
    /// input from a fault of the system.
    pub fn sqlstate(&self) -> Option<&str> {
        match self {
            StoreError::Db(e) => e.code().map(tokio_postgres::error::SqlState::code),
            _ => None,
        }
    }

    /// The constraint a failed statement broke, if the database named one.
    pub fn constraint(&self) -> Option<&str> {
        match self {
            StoreError::Db(e) => e.as_db_error().and_then(|db| db.constraint()),
            _ => None,
        }
    }
}

/// An error and each of its causes, `: `-separated.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        // A wrapper that already shows its cause (deadpool's) is not repeated.
        let said = cause.to_string();
        if !text.ends_with(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        source = cause.source();
    }
    text
}
