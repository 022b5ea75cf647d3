//! The command line.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

pub mod batch;
pub mod federation;

/// Switchyard: a control plane for LLM inference on GPU fleets.
#[derive(Debug, Parser)]
#[command(name = "switchyard", version)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a frontend replica.
    Serve(ServeArgs),
    /// A whole cluster on this machine: the embedded PostgreSQL, a frontend,
    /// a worker with a declared GPU, the reference engine serving a demo
    /// model. Prints a working request. Ctrl-C stops all of it.
    Up(UpArgs),
    /// Run a worker: register with a frontend and heartbeat.
    Worker(WorkerArgs),
    /// Workers (nodes) and registration tokens.
    #[command(subcommand)]
    Node(NodeCommand),
    /// The model library.
    #[command(subcommand)]
    Model(ModelCommand),
    /// Deployments of models on engines.
    #[command(subcommand)]
    Deployment(DeploymentCommand),
    /// Engines the worker starts (not usually run by hand).
    #[command(subcommand)]
    Engine(EngineCommand),
    /// The cluster's carrier set: its status, a live switch, an abort; and
    /// a carrier component's conformance suite, offline.
    #[command(subcommand)]
    Carrier(CarrierCommand),
    /// The cluster's settings.
    #[command(subcommand)]
    Cluster(ClusterCommand),
    /// Admission policies, offline.
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// The plugin registry.
    #[command(subcommand)]
    Plugin(PluginCommand),
    /// The keys this cluster trusts to sign plugins (admin only), and
    /// making a signing key.
    #[command(subcommand)]
    Trust(TrustCommand),
    /// Admission chains.
    #[command(subcommand)]
    Admission(AdmissionCommand),
    /// API keys.
    #[command(subcommand)]
    Key(KeyCommand),
    /// Federation with other clusters: the cluster key, joining, pairing,
    /// grants, remote managed services and status.
    #[command(subcommand)]
    Federation(federation::FederationCommand),
    /// OpenAI batches: upload a JSONL file and run it, watch, cancel, read the output.
    #[command(subcommand)]
    Batch(batch::BatchCommand),
}

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
}

/// A `key=value` label or selector pair, checked as the server checks it.
fn label(pair: &str) -> Result<(String, String), String> {
    switchyard_server::labels::parse_pair(pair).map_err(|e| e.to_string())
}

#[derive(Debug, Subcommand)]
pub enum NodeCommand {
    /// List nodes.
    List {
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Approve a pending node.
    Approve {
        /// The node id.
        id: String,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Show a node (inventory, engines).
    Show {
        /// The node id.
        id: String,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// No new placements; its replicas move to other nodes.
    Drain {
        /// The node id.
        id: String,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Back to normal scheduling (ends maintenance too).
    Undrain {
        /// The node id.
        id: String,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// No new placements; its replicas stay.
    Maintenance {
        /// The node id.
        id: String,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Create a registration token (printed once, never shown again).
    Token {
        /// A label.
        #[arg(long, default_value = "workers")]
        name: String,
        /// Seconds it registers workers for; default: until revoked.
        #[arg(long)]
        ttl_seconds: Option<i64>,
        /// How many workers it may register; default: no limit.
        #[arg(long)]
        max_uses: Option<i32>,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// List registration tokens (limits and uses, never the values).
    Tokens {
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Revoke a registration token: it registers no more workers.
    RevokeToken {
        /// The token id (`reg_...`).
        id: String,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Revoke a node's credential and let the next registration of its
    /// name take it over (a worker that lost its identity).
    Release {
        /// The node id.
        id: String,
        #[command(flatten)]
        api: ApiArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum DeploymentCommand {
    /// Deploy a model revision.
    Create {
        /// The model's id in the library.
        #[arg(long)]
        model: String,
        /// Its revision.
        #[arg(long)]
        revision: String,
        /// reference, llama-cpp or vllm.
        #[arg(long, default_value = "reference")]
        engine: String,
        /// The model id clients use [default: the model's id].
        #[arg(long)]
        served_model_name: Option<String>,
        /// Replicas.
        #[arg(long, default_value_t = 1)]
        replicas: i32,
        /// GPUs per replica, on one node.
        #[arg(long, default_value_t = 0)]
        gpus: i32,
        /// Memory each GPU must have, in MiB [default: estimated from the files].
        #[arg(long)]
        gpu_memory_mib: Option<i64>,
        /// Requests one replica serves at once.
        #[arg(long, default_value_t = 8)]
        max_concurrency: i32,
        /// binpack (fill the fullest node) or spread (the emptiest).
        #[arg(long, default_value = "binpack")]
        strategy: String,
        /// Place replicas only on nodes with this label: `key=value`,
        /// repeatable (a node must have every pair).
        #[arg(long = "node-selector", value_name = "KEY=VALUE", value_parser = label)]
        node_selector: Vec<(String, String)>,
        /// Then show each replica's progress until all are ready (exit 0)
        /// or one failed (exit 1).
        #[arg(long)]
        wait: bool,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// List deployments with their replicas.
    List {
        #[command(flatten)]
        api: ApiArgs,
    },
    /// One deployment's status.
    Status {
        /// The deployment id.
        id: String,
        /// Show each replica's progress (a bar while its files are staged)
        /// until all are ready (exit 0) or one failed (exit 1).
        #[arg(long)]
        watch: bool,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Change the replica count.
    Scale {
        /// The deployment id.
        id: String,
        /// Replicas wanted.
        replicas: i32,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Delete a deployment (its engines drain).
    Delete {
        /// The deployment id.
        id: String,
        #[command(flatten)]
        api: ApiArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum EngineCommand {
    /// The reference engine: OpenAI-compatible, deterministic, no GPU.
    Reference {
        /// The model file (its SHA-256 seeds the generator).
        #[arg(long)]
        model: PathBuf,
        /// The model id clients use [default: the file's stem].
        #[arg(long)]
        served_model_name: Option<String>,
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:8000")]
        listen: std::net::SocketAddr,
        /// Delay per generated token, in ms.
        #[arg(long, default_value_t = 0)]
        token_delay_ms: u64,
        /// Delay before the first token, in ms.
        #[arg(long, default_value_t = 0)]
        first_token_delay_ms: u64,
        /// Requests served at once (beyond: 429) [default: no limit].
        #[arg(long)]
        max_concurrency: Option<usize>,
    },
}

#[derive(Debug, Subcommand)]
pub enum ModelCommand {
    /// Hashes local files and registers them as a model revision (uploads
    /// only what the library lacks; nothing is downloaded).
    Import {
        /// A file, or a folder whose files (recursively) make the revision.
        path: PathBuf,
        /// The model's id, e.g. llama-3-8b-instruct.
        #[arg(long)]
        id: String,
        /// The revision, e.g. q4_k_m-2024-05.
        #[arg(long)]
        revision: String,
        /// The licence to record.
        #[arg(long)]
        licence: Option<String>,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Has the server download one file from an http(s) URL and register it
    /// as a model revision; the file is kept only if it hashes to --sha256.
    Fetch {
        /// The file's URL.
        url: String,
        /// The file's SHA-256 (hex), from the publisher.
        #[arg(long)]
        sha256: String,
        /// The model's id, e.g. llama-3-8b-instruct.
        #[arg(long)]
        id: String,
        /// The revision, e.g. q4_k_m-2024-05.
        #[arg(long)]
        revision: String,
        /// The file's name in the revision [default: the URL's last path segment].
        #[arg(long)]
        name: Option<String>,
        /// The licence to record.
        #[arg(long)]
        licence: Option<String>,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// List revisions.
    List {
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Show a revision's manifest.
    Show {
        /// The model's id.
        id: String,
        /// The revision.
        revision: String,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Delete a revision (and the library's blobs no other revision uses).
    Delete {
        /// The model's id.
        id: String,
        /// The revision.
        revision: String,
        #[command(flatten)]
        api: ApiArgs,
    },
}

/// Where the admin API is and who is calling.
#[derive(Debug, Args, Clone)]
pub struct ApiArgs {
    /// The server.
    #[arg(
        long,
        env = "SWITCHYARD_SERVER",
        default_value = "http://127.0.0.1:8080",
        global = true
    )]
    pub server: String,
    /// An API key with the admin scope.
    #[arg(long, env = "SWITCHYARD_TOKEN", hide_env_values = true, global = true)]
    pub token: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum CarrierCommand {
    /// Run the conformance suite on a carrier component against its real
    /// server. Exit 0 when every check passes, 1 otherwise.
    Conformance {
        /// The component.
        component: PathBuf,
        /// The carrier's configuration (JSON); it must allow the subject roots `jobs` and `cache`.
        #[arg(long)]
        config: PathBuf,
        /// The PostgreSQL a carrier's `database` endpoint reaches (pgbus).
        #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
        database_url: Option<String>,
    },
    /// The active set with its plugin versions, a change under way, the
    /// live replicas and the workers.
    Status {
        /// Print the API's JSON as it is.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Move the cluster to another carrier set, or to other versions of its
    /// plugins, while it serves. Shows the preflight first, then asks.
    Switch(SwitchArgs),
    /// Abort the change in prepare (workers let go of the target).
    Abort {
        #[command(flatten)]
        api: ApiArgs,
    },
}

#[derive(Debug, Args)]
pub struct SwitchArgs {
    /// The set to move to (`nats`, `tunnel`).
    #[arg(long = "to", value_name = "SET")]
    pub to: String,
    /// A plugin version to run instead of the newest registered, repeatable
    /// (`--plugin nats@0.2.0`: a version upgrade when the set stays).
    #[arg(long = "plugin", value_name = "NAME@VERSION", value_parser = plugin_version)]
    pub plugins: Vec<(String, String)>,
    /// Show the preflight only; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Go ahead although workers cannot follow (they are demoted until they can).
    #[arg(long)]
    pub force: bool,
    /// Do not ask (required when stdin is not a terminal).
    #[arg(long)]
    pub yes: bool,
    /// Then draw each phase (prepare, commit, stable) until the change
    /// settled on the target (exit 0) or went back (exit 1).
    #[arg(long)]
    pub wait: bool,
    #[command(flatten)]
    pub api: ApiArgs,
}

/// `name@version`, both non-empty.
fn plugin_version(text: &str) -> Result<(String, String), String> {
    match text.split_once('@') {
        Some((name, version)) if !name.is_empty() && !version.is_empty() => {
            Ok((name.to_string(), version.to_string()))
        }
        _ => Err(format!("'{text}' is not NAME@VERSION")),
    }
}

#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// The NATS URLs and the waits of a carrier change.
    #[command(subcommand)]
    Settings(SettingsCommand),
}

#[derive(Debug, Subcommand)]
pub enum SettingsCommand {
    /// Print the settings (passwords in URLs masked).
    Show {
        /// Print the API's JSON as it is.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Change some settings: `window_ms=10000 nats_url=nats://10.0.0.5:4222`
    /// (numbers as numbers, `null` clears a URL). A NATS URL is checked
    /// from the server and used from the next carrier change on.
    Set {
        /// KEY=VALUE, one or more.
        #[arg(required = true, value_name = "KEY=VALUE", value_parser = setting)]
        pairs: Vec<(String, serde_json::Value)>,
        #[command(flatten)]
        api: ApiArgs,
    },
}

/// `key=value`: the value is JSON when it reads as a number, `null`, a
/// boolean, an object (`require_signed={"policy":true}`) or a quoted
/// string, else the text itself (a URL).
pub fn setting(pair: &str) -> Result<(String, serde_json::Value), String> {
    let (key, value) = pair
        .split_once('=')
        .filter(|(key, _)| !key.is_empty())
        .ok_or_else(|| format!("'{pair}' is not KEY=VALUE"))?;
    let value = match serde_json::from_str::<serde_json::Value>(value) {
        Ok(
            json @ (serde_json::Value::Number(_)
            | serde_json::Value::Null
            | serde_json::Value::Bool(_)
            | serde_json::Value::Object(_)),
        ) => json,
        Ok(serde_json::Value::String(text)) => serde_json::Value::String(text),
        _ => serde_json::Value::String(value.to_string()),
    };
    Ok((key.to_string(), value))
}

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Evaluate one component, or a chain of several, on a request file, or one component on a
    /// cases file: no server, no database. Exit 0 allow (or patch) or every case passed, 1 deny or
    /// a case failed, 2 error.
    Test(PolicyTestArgs),
    /// Create a policy project (Rust, Python or JavaScript) that builds and passes its own tests:
    /// settings with validation, one evaluate, fixtures, a cases file, build.sh and a README.
    New(PolicyNewArgs),
}

#[derive(Debug, Args)]
pub struct PolicyNewArgs {
    /// The policy's name (lowercase letters, digits, dashes): the crate, file and plugin name.
    pub name: String,
    /// The language to write it in.
    #[arg(long, value_enum)]
    pub lang: PolicyLang,
    /// Where to create it (must not exist, or be empty) [default: ./NAME].
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// The Rust SDK (`switchyard-sdk`) the project depends on by path [default: the sdk folder
    /// of the checkout this binary was built from].
    #[arg(long)]
    pub sdk: Option<PathBuf>,
}

/// The languages `policy new` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PolicyLang {
    /// Rust, with the switchyard-sdk crate; built by cargo for wasm32-wasip2.
    Rust,
    /// Python, with sdk/python's helper; built by componentize-py.
    Python,
    /// JavaScript, with sdk/js's helper; built by jco.
    Js,
}

impl PolicyLang {
    /// The name as `--lang` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyLang::Rust => "rust",
            PolicyLang::Python => "python",
            PolicyLang::Js => "js",
        }
    }
}

#[derive(Debug, Args)]
pub struct PolicyTestArgs {
    /// The component(s); several form a chain, in order.
    #[arg(required = true)]
    pub components: Vec<PathBuf>,
    /// Evaluate the components as one chain (required with more than one).
    #[arg(long)]
    pub chain: bool,
    /// The admission point: inference, deploy, transfer or federation.
    #[arg(long, required_unless_present = "cases", conflicts_with = "cases")]
    pub point: Option<String>,
    /// Settings JSON file, one per component in order (one file applies to all) [default: {}].
    #[arg(long, conflicts_with = "cases")]
    pub settings: Vec<PathBuf>,
    /// The request record (JSON).
    #[arg(long, required_unless_present = "cases", conflicts_with = "cases")]
    pub request: Option<PathBuf>,
    /// A cases file: named requests with the decision each expects (see docs/policies.md).
    /// Exit 0 when every case passes, 1 when one fails.
    #[arg(long, conflicts_with = "chain")]
    pub cases: Option<PathBuf>,
    /// Run again whenever a component (or the cases file) changes; stop with Ctrl-C.
    #[arg(long)]
    pub watch: bool,
    /// Compile every time instead of using the on-disk compile cache
    /// (`$XDG_CACHE_HOME/switchyard/components`, else `~/.cache/switchyard/components`).
    #[arg(long)]
    pub no_cache: bool,
    /// Deadline of one call, in ms.
    #[arg(long, default_value_t = 100)]
    pub deadline_ms: u64,
    /// Print the verdict as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum PluginCommand {
    /// Upload a component (its SHA-256 is computed and pinned).
    #[command(visible_alias = "upload")]
    Push {
        /// The component.
        file: PathBuf,
        /// Plugin name.
        #[arg(long)]
        name: String,
        /// Version.
        #[arg(long)]
        version: String,
        /// A detached signature for it (`switchyard plugin sign` writes one).
        #[arg(long)]
        signature: Option<PathBuf>,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Sign a component for upload under a name and version: writes a
    /// detached signature (JSON) over its kind, name, version and SHA-256.
    /// Offline; the private key never leaves this machine.
    Sign(PluginSignArgs),
    /// List plugins, or one plugin's versions.
    List {
        /// Only this plugin.
        name: Option<String>,
        #[command(flatten)]
        api: ApiArgs,
    },
}

#[derive(Debug, Args)]
pub struct PluginSignArgs {
    /// The component.
    pub component: PathBuf,
    /// The private signing key (`switchyard trust keygen` makes one).
    #[arg(long)]
    pub key: PathBuf,
    /// The plugin name it will be uploaded as.
    #[arg(long)]
    pub name: String,
    /// The version it will be uploaded as.
    #[arg(long)]
    pub version: String,
    /// Where to write the signature [default: COMPONENT.sig].
    #[arg(long)]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum TrustCommand {
    /// Make a signing key pair: FILE (the private key, mode 0600, never
    /// printed) and FILE.pub (the public key, for `trust add`). Offline.
    Keygen {
        /// The private key file to write (refused if it exists).
        #[arg(long)]
        out: PathBuf,
    },
    /// Trust a public key to sign plugins.
    Add {
        /// The public key file (FILE.pub from `trust keygen`).
        public_key: PathBuf,
        /// What the key is called in listings [default: its id].
        #[arg(long)]
        name: Option<String>,
        /// A note for other admins.
        #[arg(long)]
        comment: Option<String>,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// The trusted keys.
    List {
        /// Print the API's JSON as it is.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Stop trusting a key. Running components it signed keep running and
    /// show as signed by a key no longer trusted.
    Remove {
        /// The key's id (16 hex, from `trust list`).
        id: String,
        #[command(flatten)]
        api: ApiArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum AdmissionCommand {
    /// Replace a point's chain.
    Set {
        /// The point.
        point: String,
        /// A policy as name@version; repeat for a chain, in order.
        #[arg(long = "policy", required = true)]
        policies: Vec<String>,
        /// Settings JSON file, one per policy in order (one file applies to all).
        #[arg(long)]
        settings: Vec<PathBuf>,
        /// enforce or monitor (one per policy, or one for all).
        #[arg(long)]
        mode: Vec<String>,
        /// closed or open (one per policy, or one for all).
        #[arg(long)]
        fail: Vec<String>,
        /// true: the decision log keeps the request record itself, not only
        /// its SHA-256 (one per policy, or one for all) [default: false].
        #[arg(long)]
        log_requests: Vec<bool>,
        /// The decision log records one allow in N; 0 none, 1 all (one per
        /// policy, or one for all) [default: 100].
        #[arg(long)]
        allow_sample: Vec<u32>,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Show a point's chain and each replica's generation.
    Show {
        /// The point.
        point: String,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Go back to the chain before the newest generation.
    Rollback {
        /// The point.
        point: String,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// The decision log: what the point's policies denied, patched, failed
    /// on or would have denied in monitor mode, and a sample of allows.
    Decisions(crate::commands::DecisionsArgs),
    /// Dry-run a request file through the server's chain.
    Evaluate {
        /// The point.
        point: String,
        /// The request record (JSON).
        #[arg(long)]
        request: PathBuf,
        #[command(flatten)]
        api: ApiArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum KeyCommand {
    /// Create a key; its token is printed once.
    Create {
        /// A label.
        #[arg(long)]
        name: String,
        /// Scopes (repeat).
        #[arg(long = "scope", required = true)]
        scopes: Vec<String>,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// List keys.
    List {
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Revoke a key.
    Revoke {
        /// The key id.
        id: String,
        #[command(flatten)]
        api: ApiArgs,
    },
}
