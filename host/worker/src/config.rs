//! What `switchyard worker` is configured with.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// A worker's configuration.
#[derive(Clone)]
pub struct WorkerConfig {
    /// The frontend's base URL, e.g. `http://10.0.0.1:8080`.
    pub frontend: String,
    /// The deployment's registration token; used only to register.
    pub registration_token: Option<String>,
    /// Where the node's identity is kept.
    pub data_dir: PathBuf,
    /// The node's name (default: the host name).
    pub name: String,
    /// An address frontends may dial, if the worker has one (`host:port`;
    /// the `nats` set's streams are served there: without it the worker
    /// reports it cannot follow the cluster to `nats`).
    pub address: Option<String>,
    /// How often to heartbeat.
    pub heartbeat_interval: Duration,
    /// A folder of carrier components (`tunnel.wasm`, `nats.wasm`), run only
    /// when the frontend's carrier news names none (an older frontend); a
    /// current frontend names them and the worker fetches them from it.
    pub carrier_plugins: Option<PathBuf>,
    /// The NATS server for the `nats` set (may hold credentials, never
    /// shown); it wins over the one the cluster's carrier news names.
    pub nats_url: Option<String>,
    /// GPUs declared by the operator (`--gpu`, `--gpu-file`); empty: detect.
    pub gpus: Vec<switchyard_gpu::Gpu>,
    /// Disk kept free when model files arrive.
    pub disk_reserve_bytes: u64,
    /// Labels (`--label key=value`) deployments' node selectors match;
    /// reported at registration and in every heartbeat.
    pub labels: BTreeMap<String, String>,
    /// What an `engine.start` may choose beyond the cached model (default:
    /// nothing; `--allow-engine-arg`, `--allow-engine-env`,
    /// `--allow-engine-model-root`).
    pub engine_start: crate::node::EngineStartPolicy,
    /// An OTLP/HTTP collector that gets a span per inference stream and
    /// per engine call (`--otlp-endpoint`).
    pub otlp_endpoint: Option<String>,
}

impl std::fmt::Debug for WorkerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The registration token and the NATS URL's credentials are secrets.
        f.debug_struct("WorkerConfig")
            .field("frontend", &self.frontend)
            .field(
                "registration_token",
                &self.registration_token.as_ref().map(|_| "<set>"),
            )
            .field("data_dir", &self.data_dir)
            .field("name", &self.name)
            .field("address", &self.address)
            .field("heartbeat_interval", &self.heartbeat_interval)
            .field("carrier_plugins", &self.carrier_plugins)
            .field("nats_url", &self.nats_url.as_ref().map(|_| "<set>"))
            .field("gpus", &self.gpus)
            .field("disk_reserve_bytes", &self.disk_reserve_bytes)
            .field("labels", &self.labels)
            .field("engine_start", &self.engine_start)
            .field("otlp_endpoint", &self.otlp_endpoint)
            .finish()
    }
}
