//! What `switchyard worker` is configured with.

use std::path::PathBuf;
use std::time::Duration;

/// A worker's configuration.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// The frontend's base URL, e.g. `http://10.0.0.1:8080`.
    pub frontend: String,
    /// The deployment's registration token; used only to register.
    pub registration_token: Option<String>,
    /// Where the node's identity is kept.
    pub data_dir: PathBuf,
    /// The node's name (default: the host name).
    pub name: String,
    /// An address frontends may dial, if the worker has one.
    pub address: Option<String>,
    /// How often to heartbeat.
    pub heartbeat_interval: Duration,
}
