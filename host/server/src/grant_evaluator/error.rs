//! Why a grant evaluator binding was not stored, or a rollback not made.

use switchyard_runtime::{LoadError, PluginKind};
use switchyard_store::StoreError;

use super::SHIPPED;
use crate::admission::load_message;

/// Why a binding was not stored, or a rollback not made.
#[derive(Debug, thiserror::Error)]
pub enum EvaluatorError {
    /// The registry holds no such plugin version.
    #[error("no plugin {plugin}@{version}")]
    PluginNotFound {
        /// Its name.
        plugin: String,
        /// Its version.
        version: String,
    },
    /// The plugin is not a grant evaluator.
    #[error("{plugin}@{version} is {}, not a grant evaluator", .kind.with_article())]
    WrongKind {
        /// Its name.
        plugin: String,
        /// Its version.
        version: String,
        /// What it is.
        kind: PluginKind,
    },
    /// It did not load, or refused its settings (that message is the
    /// plugin's own and is passed on as it is).
    #[error("{}", load_message(plugin, version, source))]
    Load {
        /// Its name.
        plugin: String,
        /// Its version.
        version: String,
        /// Why.
        source: LoadError,
    },
    /// Generation 0 runs the shipped evaluator, which the registry lacks.
    #[error(
        "no evaluator is bound and the plugin registry holds no {SHIPPED} grant evaluator (the binary seeds it at start)"
    )]
    NoShipped,
    /// A rollback with nothing to leave, or past generation 0.
    #[error("{0}")]
    NothingToRollback(&'static str),
    /// A rollback to a generation not older than the newest.
    #[error("a rollback restores an older generation: 0 to {}, got {target}", .newest - 1)]
    NotOlder {
        /// The newest generation.
        newest: i64,
        /// The one asked for.
        target: i64,
    },
    /// A rollback to a generation never stored.
    #[error("generation {0} of the grant evaluator not found")]
    UnknownGeneration(i64),
    /// An evaluator `require_signed` refuses: unsigned, or signed by a key
    /// not (or no longer) trusted.
    #[error(transparent)]
    Signature(#[from] crate::signing::SignatureRefusal),
    /// The database.
    #[error("the database: {0}")]
    Store(#[from] StoreError),
    /// The load task panicked or was cancelled.
    #[error("loading the grant evaluator: {0}")]
    Task(#[from] tokio::task::JoinError),
}
