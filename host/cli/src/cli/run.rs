//! The processes the CLI runs in the foreground: `serve` (a frontend
//! replica), `up` (a whole cluster on this machine) and `worker`.

use std::path::PathBuf;

use clap::Args;

use super::label;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// A TOML file with any of: listen, database_url, data_dir, memory_limit_mib, call_deadline_ms, fuel_per_call, poll_interval_ms.
    #[arg(long, env = "SWITCHYARD_CONFIG")]
    pub config: Option<PathBuf>,
    /// Address of the HTTP API [default: 127.0.0.1:8080].
    #[arg(long, env = "SWITCHYARD_LISTEN")]
    pub listen: Option<String>,
    /// PostgreSQL URL; without one, a private PostgreSQL runs under --data-dir.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// Private state [default: ./switchyard-data].
    #[arg(long, env = "SWITCHYARD_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Memory a plugin instance may use, in MiB [default: 64].
    #[arg(long)]
    pub memory_limit_mib: Option<usize>,
    /// Deadline of one plugin call, in ms [default: 100].
    #[arg(long)]
    pub call_deadline_ms: Option<u64>,
    /// Fuel per plugin call [default: off].
    #[arg(long)]
    pub fuel_per_call: Option<u64>,
    /// How often to check for new generations without a hint, in ms [default: 1000].
    #[arg(long)]
    pub poll_interval_ms: Option<u64>,
    /// Approve registering workers at once instead of leaving them pending.
    #[arg(long)]
    pub auto_approve: bool,
    /// The NATS server of the `nats` carrier set; a new cluster given one uses `nats`, else `tunnel`.
    #[arg(long, env = "SWITCHYARD_NATS_URL", hide_env_values = true)]
    pub nats_url: Option<String>,
    /// A folder of carrier components (nats.wasm, pgbus.wasm, tunnel.wasm)
    /// to run instead of the ones built into this binary.
    #[arg(long, env = "SWITCHYARD_PLUGINS_DIR")]
    pub carrier_plugins: Option<PathBuf>,
    /// The URL other replicas reach this one at [default: http://<listen>].
    #[arg(long, env = "SWITCHYARD_ADVERTISE")]
    pub advertise: Option<String>,
    /// The cluster's federation key (the same file on every replica; make
    /// one with `switchyard federation key init`) [default:
    /// <data-dir>/federation/cluster.key, made at the first start].
    #[arg(long, env = "SWITCHYARD_FEDERATION_KEY")]
    pub federation_key: Option<PathBuf>,
    /// The label peers see this cluster by, set at the first start
    /// [default: the host name].
    #[arg(long, env = "SWITCHYARD_FEDERATION_LABEL")]
    pub federation_label: Option<String>,
    /// The model library's folder on storage every replica mounts (NFS, a
    /// shared volume) [default: <data-dir>/library, and a replica fetches a
    /// file it lacks from another replica].
    #[arg(long, env = "SWITCHYARD_LIBRARY_DIR")]
    pub library_dir: Option<PathBuf>,
    /// How long a node may be silent before its replicas move, in ms [default: 30000].
    #[arg(long)]
    pub node_grace_ms: Option<u64>,
    /// Silence in a streamed answer before an SSE keep-alive comment, in ms [default: 15000].
    #[arg(long)]
    pub sse_keepalive_ms: Option<u64>,
    /// Ask for an API key with the `metrics:read` scope (or `admin`) on
    /// `/metrics` [default: off, `/metrics` is anonymous].
    #[arg(long)]
    pub metrics_auth: bool,
    /// A host (HOST or HOST:PORT; IPv6 in brackets) that model fetches may
    /// reach though it is loopback or private; repeatable. Without one,
    /// fetches reach public addresses only.
    #[arg(long = "fetch-allow-host", value_name = "HOST[:PORT]")]
    pub fetch_allow_hosts: Vec<String>,
    /// Connections the HTTP API holds open at once [default: 1024]. Three
    /// quarters of them may be anonymous; past that an anonymous newcomer
    /// closes the longest idle anonymous one. Only when every connection
    /// showed a credential do more wait to be accepted.
    #[arg(long)]
    pub max_connections: Option<usize>,
    /// Time for a request's headers to arrive (also how long an idle
    /// keep-alive connection stays open), in ms [default: 15000].
    #[arg(long)]
    pub header_read_timeout_ms: Option<u64>,
    /// Longest silence of a request body being read, in ms [default: 30000].
    /// Besides, a body must average 16 KiB/s after its first 10 s.
    #[arg(long)]
    pub body_idle_timeout_ms: Option<u64>,
    /// The largest model file the library takes, uploaded or fetched, in bytes [default: 256 GiB].
    #[arg(long)]
    pub max_blob_bytes: Option<u64>,
    /// The bytes of batch files (`/v1/files`) one API key may keep at once, in bytes [default: 512 MiB].
    #[arg(long)]
    pub batch_storage_quota_bytes: Option<u64>,
    /// Admission decision records kept, the newest, across all points [default: 100000].
    #[arg(long)]
    pub decisions_keep: Option<u64>,
    /// Admission decision records older than this are deleted, in hours [default: 168].
    #[arg(long)]
    pub decisions_max_age_hours: Option<u64>,
    /// How often the decision log is pruned, in ms [default: 60000].
    #[arg(long)]
    pub decisions_prune_interval_ms: Option<u64>,
    /// Admin audit records older than this are deleted, in days [default: 365].
    #[arg(long)]
    pub audit_max_age_days: Option<u64>,
    /// Usage rolled up by hour older than this is deleted, in days: the
    /// horizon of reports by hour and day [default: 400].
    #[arg(long)]
    pub usage_max_age_days: Option<u64>,
    /// Usage events (one an answer) older than this are deleted, in days:
    /// the horizon of reports by minute [default: 35].
    #[arg(long)]
    pub usage_events_max_age_days: Option<u64>,
    /// Do not meter usage (`/api/usage` then reports nothing new).
    #[arg(long)]
    pub no_usage_metering: bool,
    /// Export the `/v1` spans (GenAI conventions, policy calls beneath)
    /// to this OTLP/HTTP collector, e.g. `http://127.0.0.1:4318`.
    #[arg(long, env = "SWITCHYARD_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,
}

#[derive(Debug, Args)]
pub struct UpArgs {
    /// Address of the HTTP API.
    #[arg(long, env = "SWITCHYARD_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: std::net::SocketAddr,
    /// The cluster's state (PostgreSQL, library, worker).
    #[arg(long, env = "SWITCHYARD_DATA_DIR", default_value = "./switchyard-data")]
    pub data_dir: PathBuf,
    /// A folder of carrier components (nats.wasm, pgbus.wasm, tunnel.wasm)
    /// to run instead of the ones built into this binary.
    #[arg(long, env = "SWITCHYARD_PLUGINS_DIR")]
    pub carrier_plugins: Option<PathBuf>,
    /// The local worker's GPUs (declared; this machine may have none).
    #[arg(long = "gpu", default_value = "name=Demo GPU,memory=24GiB")]
    pub gpus: Vec<switchyard_gpu::GpuSpec>,
    /// The demo engine's delay per token, in ms.
    #[arg(long, default_value_t = 20)]
    pub token_delay_ms: i32,
    /// A NATS server: a new cluster then runs the `nats` carrier set (the
    /// worker serves its streams on a loopback port) instead of `tunnel`.
    #[arg(long, env = "SWITCHYARD_NATS_URL", hide_env_values = true)]
    pub nats_url: Option<String>,
    /// Do not meter usage (the benchmark compares the two).
    #[arg(long)]
    pub no_usage_metering: bool,
    /// Export the frontend's and the worker's spans to this OTLP/HTTP
    /// collector, e.g. `http://127.0.0.1:4318`.
    #[arg(long, env = "SWITCHYARD_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,
}

#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// The frontend's URL.
    #[arg(long, env = "SWITCHYARD_FRONTEND")]
    pub frontend: String,
    /// The deployment's registration token (only used to register).
    #[arg(long, env = "SWITCHYARD_REGISTRATION_TOKEN", hide_env_values = true)]
    pub registration_token: Option<String>,
    /// Where the node's identity is kept [default: ./switchyard-worker].
    #[arg(
        long,
        env = "SWITCHYARD_WORKER_DIR",
        default_value = "./switchyard-worker"
    )]
    pub data_dir: PathBuf,
    /// The node's name [default: the host name].
    #[arg(long)]
    pub name: Option<String>,
    /// An address frontends may dial (host:port), if this machine has one;
    /// the nats carrier set's streams are served there (without it this
    /// worker reports that it cannot follow the cluster to nats).
    #[arg(long)]
    pub address: Option<String>,
    /// Heartbeat interval in ms.
    #[arg(long, default_value_t = 3000)]
    pub heartbeat_ms: u64,
    /// A folder of carrier components (tunnel.wasm, nats.wasm), used only
    /// with a frontend that names none; a current frontend names the
    /// components and the worker fetches them from it, checking their SHA-256.
    #[arg(long, env = "SWITCHYARD_PLUGINS_DIR")]
    pub carrier_plugins: Option<PathBuf>,
    /// The NATS server, for the nats carrier set; wins over the cluster's
    /// setting (`worker_nats_url`, else `nats_url`), used without it.
    #[arg(long, env = "SWITCHYARD_NATS_URL", hide_env_values = true)]
    pub nats_url: Option<String>,
    /// Declare GPUs instead of detecting them: `name=H200,memory=141GiB[,count=2]`, repeatable.
    #[arg(long = "gpu")]
    pub gpus: Vec<switchyard_gpu::GpuSpec>,
    /// Declare GPUs from a JSON file: `[{"name": "H200", "memory": "141GiB", "count": 2}]`.
    #[arg(long)]
    pub gpu_file: Option<PathBuf>,
    /// Disk kept free when model files arrive, in MiB.
    #[arg(long, default_value_t = 1024)]
    pub disk_reserve_mib: u64,
    /// A label deployments' node selectors match: `key=value`, repeatable
    /// (e.g. `--label zone=eu-west-1a --label gpu=h100`).
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = label)]
    pub labels: Vec<(String, String)>,
    /// An engine argument an `engine.start` may append (exact string),
    /// repeatable; none by default.
    #[arg(
        long = "allow-engine-arg",
        value_name = "ARG",
        allow_hyphen_values = true
    )]
    pub allow_engine_args: Vec<String>,
    /// An environment variable an `engine.start` may set (name),
    /// repeatable; none by default.
    #[arg(long = "allow-engine-env", value_name = "NAME")]
    pub allow_engine_env: Vec<String>,
    /// A folder an `engine.start` may name a model under by path instead of
    /// by SHA-256 from the placement cache, repeatable; none by default.
    #[arg(long = "allow-engine-model-root", value_name = "DIR")]
    pub allow_engine_model_roots: Vec<PathBuf>,
    /// Export a span per inference stream and per engine call (under the
    /// frontend's, from the stream's `traceparent`) to this OTLP/HTTP
    /// collector, e.g. `http://127.0.0.1:4318`.
    #[arg(long, env = "SWITCHYARD_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,
}
