//! What `serve` is configured with (merged by the CLI from flags, environment and a TOML file).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use switchyard_runtime::RuntimeConfig;

/// A replica's configuration.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Address of the HTTP API.
    pub listen: SocketAddr,
    /// PostgreSQL; `None` starts the embedded default under `data_dir`.
    pub database_url: Option<String>,
    /// Private state: the embedded PostgreSQL and the compile cache.
    pub data_dir: PathBuf,
    /// Chosen admin token at first start (otherwise one is minted and printed).
    pub admin_token: Option<String>,
    /// Plugin limits.
    pub runtime: RuntimeConfig,
    /// How often the replica checks for new generations without a hint.
    pub poll_interval: Duration,
    /// Approve registering workers at once instead of leaving them pending.
    pub auto_approve: bool,
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            database_url: None,
            data_dir: PathBuf::from("./switchyard-data"),
            admin_token: None,
            runtime: RuntimeConfig::default(),
            poll_interval: Duration::from_secs(1),
            auto_approve: false,
        }
    }
}
