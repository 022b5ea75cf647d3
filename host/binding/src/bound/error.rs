//! Why a binding was not stored, a generation not built or a rollback not
//! made, for every kind bound with generations.

use switchyard_runtime::{LoadError, PluginKind};
use switchyard_store::StoreError;

/// What every kind bound with generations can refuse.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// The registry holds no such plugin version.
    #[error("no plugin {plugin}@{version}")]
    PluginNotFound {
        /// Its name.
        plugin: String,
        /// Its version.
        version: String,
    },
    /// The plugin is of another kind than the slot binds.
    #[error("{plugin}@{version} is {}, not {}", .kind.with_article(), .wanted.with_article())]
    WrongKind {
        /// Its name.
        plugin: String,
        /// Its version.
        version: String,
        /// What it is.
        kind: PluginKind,
        /// What the slot binds.
        wanted: PluginKind,
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
    /// A rollback to a generation not older than the newest.
    #[error("a rollback restores an older generation: 0 to {}, got {target}", .newest - 1)]
    NotOlder {
        /// The newest generation.
        newest: i64,
        /// The one asked for.
        target: i64,
    },
    /// A rollback to a generation never stored.
    #[error("generation {generation} of {slot} not found")]
    UnknownGeneration {
        /// The slot, in words.
        slot: String,
        /// The generation asked for.
        generation: i64,
    },
    /// A component its kind's `require_signed` refuses: unsigned, or
    /// signed by a key not (or no longer) trusted.
    #[error(transparent)]
    Signature(#[from] crate::signing::SignatureRefusal),
    /// The database.
    #[error("the database: {0}")]
    Store(#[from] StoreError),
    /// A load task panicked or was cancelled.
    #[error("loading a component: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// A load failure's message: the plugin's own for refused settings.
pub fn load_message(plugin: &str, version: &str, source: &LoadError) -> String {
    match source {
        // The plugin's own words, addressed to whoever wrote the settings.
        LoadError::InvalidSettings(_) => source.to_string(),
        _ => format!("{plugin}@{version}: {source}"),
    }
}
