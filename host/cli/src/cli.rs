//! The command line.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

pub mod accounts;
pub mod batch;
pub mod federation;
mod plugins;
mod run;

pub use plugins::*;
pub use run::*;

/// Switchyard: a control plane for LLM inference on GPU fleets.
#[derive(Debug, Parser)]
#[command(name = "switchyard", version)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

// Parsed once at start; the size of the largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
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
    /// Teams: the unit keys are grouped in for usage and budgets.
    #[command(subcommand)]
    Team(accounts::TeamCommand),
    /// The admin audit trail: every change, who made it, and its chain of digests.
    #[command(subcommand)]
    Audit(accounts::AuditCommand),
    /// Tokens metered per answer, summed by team, key, model, peer or node.
    Usage(accounts::UsageArgs),
    /// Federation with other clusters: the cluster key, joining, pairing,
    /// grants, remote managed services and status.
    #[command(subcommand)]
    Federation(federation::FederationCommand),
    /// OpenAI batches: upload a JSONL file and run it, watch, cancel, read the output.
    #[command(subcommand)]
    Batch(batch::BatchCommand),
}

/// A `key=value` label or selector pair, checked as the server checks it.
fn label(pair: &str) -> Result<(String, String), String> {
    switchyard_protocol::labels::parse_pair(pair).map_err(|e| e.to_string())
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
        /// The team it belongs to (`switchyard team create` first).
        #[arg(long)]
        team: Option<String>,
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
