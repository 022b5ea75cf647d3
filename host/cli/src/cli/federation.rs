//! `switchyard federation ...`: the arguments. Each command is a thin
//! client of `/api/federation/` (`key init` aside, which runs locally);
//! the commands live in `commands/federation*.rs`.
//!
//! `--json` prints the API's JSON as it is, as `carrier status --json` and
//! `cluster settings show --json` do; without it the commands print lines
//! for a person.

use std::path::PathBuf;

use clap::{ArgGroup, Args, Subcommand};
use switchyard_protocol::federation::Operation;

use super::ApiArgs;

mod services;
pub use services::*;

/// `switchyard federation`.
#[derive(Debug, Subcommand)]
pub enum FederationCommand {
    /// The cluster's federation key file, offline.
    #[command(subcommand)]
    Key(KeyFileCommand),
    /// This cluster's id, label and public key; `--adopt` makes this
    /// replica's key file the cluster's key.
    Identity {
        /// Make the key file this replica was given the cluster's key (after
        /// a restore or a lost key). Every peer refuses the new key: each
        /// must be forgotten and joined again, on both sides.
        #[arg(long)]
        adopt: bool,
        #[command(flatten)]
        out: Output,
    },
    /// Make a new join token (shown once; the previous one stops working)
    /// and print the command another cluster joins this one with.
    Token {
        /// Make a new token (a token is kept only as a hash, so the current
        /// one cannot be shown again).
        #[arg(long)]
        rotate: bool,
        /// How long the token works, in seconds (default a day, at most 30 days).
        #[arg(long)]
        ttl_s: Option<u64>,
        /// How many clusters may join with it (default one).
        #[arg(long)]
        uses: Option<u32>,
        #[command(flatten)]
        out: Output,
    },
    /// Join the cluster at URL with its join token.
    Join {
        /// The peer's frontend (`http://host:port`).
        #[arg(long)]
        url: String,
        /// The peer's join token.
        #[arg(long = "token", value_name = "JOIN_TOKEN")]
        join_token: String,
        /// The name this cluster gives the peer.
        #[arg(long)]
        label: String,
        #[command(flatten)]
        out: JoinOutput,
    },
    /// The peers with their links; `show` or `forget` one.
    Peers {
        #[command(subcommand)]
        action: Option<PeersAction>,
        #[command(flatten)]
        out: Output,
    },
    /// Requests for access, both directions; `--discard` one no grant answered.
    Requests {
        /// Discard this request.
        #[arg(long, value_name = "ID")]
        discard: Option<String>,
        #[command(flatten)]
        out: Output,
    },
    /// Ask a peer for operations; its operator reviews the request.
    Request {
        /// The peer (label or id).
        peer: String,
        /// The operations asked for, comma-separated
        /// (`inference`, `inference:manage`, `models:transfer`).
        #[arg(long, required = true, value_delimiter = ',', value_parser = operation)]
        operations: Vec<Operation>,
        /// What for, for the peer's operator.
        #[arg(long, default_value = "")]
        note: String,
        #[command(flatten)]
        out: Output,
    },
    /// Approve a peer's request with exact resources (signed by this
    /// cluster's key and offered to the peer).
    Approve {
        /// The request.
        request: String,
        #[command(flatten)]
        grant: GrantArgs,
        #[command(flatten)]
        out: Output,
    },
    /// Share resources with a peer unprompted.
    Share {
        /// The peer (label or id).
        #[arg(long)]
        peer: String,
        #[command(flatten)]
        grant: GrantArgs,
        #[command(flatten)]
        out: Output,
    },
    /// Grants, both directions; `show`, `refresh` or `retire` one.
    Grants {
        #[command(subcommand)]
        action: Option<GrantsAction>,
        #[command(flatten)]
        out: Output,
    },
    /// Complete a grant a peer offered: this cluster's key signs its terms.
    Complete {
        /// The grant.
        id: String,
        #[command(flatten)]
        out: Output,
    },
    /// Revoke a grant this cluster owns: new calls are refused at once.
    Revoke {
        /// The grant.
        id: String,
        #[command(flatten)]
        out: Output,
    },
    /// This cluster's offers; `publish` or `withdraw` one.
    Offers {
        #[command(subcommand)]
        action: Option<OffersAction>,
        #[command(flatten)]
        out: Output,
    },
    /// The identity's state, each peer's link and grants, and the bounds.
    Status(Output),
    /// The remote services this cluster may call (as `/v1` model names);
    /// managed services on a peer.
    Services {
        #[command(subcommand)]
        action: Option<ServicesAction>,
        #[command(flatten)]
        out: Output,
    },
    /// The cluster's grant evaluator: `show`, `set` or `rollback`.
    Evaluator {
        #[command(subcommand)]
        action: EvaluatorAction,
        #[command(flatten)]
        out: Output,
    },
    /// The owner's receipt of an operation: inspect an uncertain outcome
    /// before acting again.
    Operations {
        /// The owner (label or id).
        peer: String,
        /// The operation id.
        id: String,
        #[command(flatten)]
        out: Output,
    },
    /// Copies a model revision a peer granted into this cluster's library
    /// (or resumes the copy of it not yet complete) and draws its progress
    /// until it completes or stops; `copy list|pause|resume|delete` manage
    /// copies.
    #[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
    Copy {
        #[command(subcommand)]
        action: Option<CopyAction>,
        #[command(flatten)]
        start: CopyStart,
        #[command(flatten)]
        out: Output,
    },
    /// Maintenance: peers may not choose this cluster as the owner of new
    /// jobs (running jobs go on here; nothing moves); `--disable` ends it.
    Maintenance {
        /// End maintenance: peers may choose this cluster again.
        #[arg(long)]
        disable: bool,
        #[command(flatten)]
        change: EligibilityChange,
    },
    /// Drain: peers may not choose this cluster as the owner of new jobs;
    /// `--wait` returns once every job this cluster owns has ended.
    Drain {
        /// Wait until this cluster's jobs have ended.
        #[arg(long)]
        wait: bool,
        #[command(flatten)]
        change: EligibilityChange,
    },
    /// Undrain: peers may choose this cluster as the owner of new jobs again.
    Undrain {
        #[command(flatten)]
        change: EligibilityChange,
    },
    /// The manifest of a model revision a peer granted: licence, files,
    /// sizes and SHA-256 digests.
    Model {
        /// The owner (label or id).
        peer: String,
        /// The model.
        model: String,
        /// The revision.
        revision: String,
        #[command(flatten)]
        out: Output,
    },
}

/// Why an owner eligibility changes, and where the output goes.
#[derive(Debug, Args, Clone)]
pub struct EligibilityChange {
    /// Why, for the other operators (at most 256 characters).
    #[arg(long, default_value = "")]
    pub reason: String,
    #[command(flatten)]
    pub out: Output,
}

/// `federation copy PEER MODEL REVISION [--detach]`.
#[derive(Debug, Args, Clone)]
pub struct CopyStart {
    /// The owner (label or id).
    #[arg(required = true)]
    pub peer: Option<String>,
    /// The model.
    #[arg(required = true)]
    pub model: Option<String>,
    /// The revision.
    #[arg(required = true)]
    pub revision: Option<String>,
    /// Return once the copy is started instead of drawing its progress.
    #[arg(long)]
    pub detach: bool,
}

/// `federation copy list|pause|resume|delete`.
#[derive(Debug, Subcommand, Clone)]
pub enum CopyAction {
    /// Every copy: state, bytes held of total, why one stopped.
    List,
    /// Pauses a copy (its partial bytes stay).
    Pause {
        /// The copy.
        id: String,
    },
    /// Resumes a paused, interrupted or stopped copy from its durable offsets.
    Resume {
        /// The copy.
        id: String,
    },
    /// Deletes a copy that is not running, with its partial bytes.
    Delete {
        /// The copy.
        id: String,
    },
}

/// `--json` and where the API is: every federation command but `key init`.
#[derive(Debug, Args, Clone)]
pub struct Output {
    /// Print the API's JSON as it is.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(flatten)]
    pub api: ApiArgs,
}

/// [`Output`] for `join`, whose `--token` is the peer's join token (the
/// line `serve` and `token --rotate` print): this cluster's API key is
/// `--api-token` or `SWITCHYARD_TOKEN` here.
#[derive(Debug, Args, Clone)]
pub struct JoinOutput {
    /// Print the API's JSON as it is.
    #[arg(long)]
    pub json: bool,
    /// The server.
    #[arg(
        long,
        env = "SWITCHYARD_SERVER",
        default_value = "http://127.0.0.1:8080"
    )]
    pub server: String,
    /// An API key with the admin scope.
    #[arg(long, env = "SWITCHYARD_TOKEN", hide_env_values = true)]
    pub api_token: Option<String>,
}

impl From<JoinOutput> for Output {
    fn from(out: JoinOutput) -> Self {
        Output {
            json: out.json,
            api: ApiArgs {
                server: out.server,
                token: out.api_token,
            },
        }
    }
}

/// `switchyard federation key`.
#[derive(Debug, Subcommand)]
pub enum KeyFileCommand {
    /// Write a new cluster key file (mode 0600; never overwrites one).
    /// Give the same file to every replica with `serve --federation-key`.
    Init {
        /// The file [default: <data-dir>/federation/cluster.key].
        #[arg(long)]
        file: Option<PathBuf>,
        /// The data directory `serve` uses.
        #[arg(long, env = "SWITCHYARD_DATA_DIR", default_value = "./switchyard-data")]
        data_dir: PathBuf,
        /// Print `{path, public_key}` as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `switchyard federation peers show|forget`.
#[derive(Debug, Subcommand)]
pub enum PeersAction {
    /// One peer.
    Show {
        /// Its label or id.
        peer: String,
    },
    /// Forget a peer: its link closes; its requests, grants and operation
    /// receipts are deleted.
    Forget {
        /// Its label or id.
        peer: String,
    },
}

/// `switchyard federation grants show|refresh|retire`.
#[derive(Debug, Subcommand)]
pub enum GrantsAction {
    /// One grant: its terms and both signatures.
    Show {
        /// The grant.
        id: String,
    },
    /// Ask the owner for the grant's state and usage.
    Refresh {
        /// The grant.
        id: String,
    },
    /// Retire a grant that is revoked, expired or never completed.
    Retire {
        /// The grant.
        id: String,
    },
}

/// `switchyard federation evaluator show|set|rollback`.
#[derive(Debug, Subcommand)]
pub enum EvaluatorAction {
    /// The evaluator in force (generation 0: the shipped `grant-standard`),
    /// the newest generations, and what each replica serves.
    Show,
    /// Bind a grant evaluator: a new generation. The server loads it and
    /// checks its settings first; a refusal leaves the one in force serving.
    Set {
        /// The plugin (a `grant` plugin: `grant-standard`).
        #[arg(long)]
        plugin: String,
        /// Its version.
        #[arg(long)]
        version: String,
        /// Its settings: a JSON document, or `@FILE` to read one [default: {}].
        #[arg(long, value_name = "JSON|@FILE")]
        settings: Option<String>,
    },
    /// Bind an older generation's evaluator again, as a new generation:
    /// the one named, or the one before the generation in force.
    Rollback {
        /// The generation to restore (0: the shipped evaluator).
        #[arg(long)]
        generation: Option<i64>,
    },
}

/// What an owner grants (`approve`, `share`).
#[derive(Debug, Args, Clone)]
pub struct GrantArgs {
    /// The operations allowed, comma-separated.
    #[arg(long, required = true, value_delimiter = ',', value_parser = operation)]
    pub operations: Vec<Operation>,
    /// Service ids of this cluster's service offers, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub services: Vec<String>,
    /// Model revisions (`model@revision`), comma-separated.
    #[arg(long, value_delimiter = ',', value_parser = model_revision)]
    pub models: Vec<String>,
    /// Node ids, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub machines: Vec<String>,
    /// How long it lives: seconds, or `30m`, `12h`, `7d` (at most a year).
    #[arg(long, value_parser = lifetime)]
    pub lifetime: i64,
    /// Calls in flight at once.
    #[arg(long)]
    pub max_concurrent: u32,
    /// Calls in all.
    #[arg(long)]
    pub max_requests: u64,
    /// Model bytes copied in all.
    #[arg(long, default_value_t = 0)]
    pub max_model_bytes: u64,
    /// Stop the services created through it when it is revoked.
    #[arg(long)]
    pub stop_on_revoke: bool,
}

/// `switchyard federation offers publish|withdraw`.
#[derive(Debug, Subcommand)]
pub enum OffersAction {
    /// Publish a resource: a deployment as a service, a model revision, a
    /// node, or a runtime for managed services.
    Publish(PublishArgs),
    /// Withdraw an offer.
    Withdraw {
        /// The offer's id.
        id: String,
    },
}

/// One resource to publish: exactly one of `--deployment`, `--model`,
/// `--machine`, `--runtime`.
#[derive(Debug, Args, Clone)]
#[command(group(ArgGroup::new("resource").required(true).multiple(false)))]
pub struct PublishArgs {
    /// The offer's stable id (for a deployment: the service id peers call
    /// it by) [default: the resource's own name].
    #[arg(long = "id", visible_alias = "service", value_name = "ID")]
    pub id: Option<String>,
    /// A deployment, shared as a service.
    #[arg(long, group = "resource")]
    pub deployment: Option<String>,
    /// A model (with `--revision`).
    #[arg(long, group = "resource", requires = "revision")]
    pub model: Option<String>,
    /// The model's revision.
    #[arg(long, requires = "model")]
    pub revision: Option<String>,
    /// A node.
    #[arg(long, group = "resource")]
    pub machine: Option<String>,
    /// An engine kind for managed services (`reference`, `llama-cpp`, `vllm`).
    #[arg(long, group = "resource")]
    pub runtime: Option<String>,
    /// GPUs per replica of the runtime [default: 0].
    #[arg(long)]
    pub gpus: Option<i32>,
}

/// One operation name.
fn operation(text: &str) -> Result<Operation, String> {
    text.parse().map_err(|_| {
        let all: Vec<&str> = Operation::ALL.iter().map(|o| o.as_str()).collect();
        format!("'{text}' is not an operation; one of: {}", all.join(", "))
    })
}

/// `model@revision`, both non-empty.
fn model_revision(text: &str) -> Result<String, String> {
    match text.split_once('@') {
        Some((model, revision)) if !model.is_empty() && !revision.is_empty() => {
            Ok(text.to_string())
        }
        _ => Err(format!("'{text}' is not MODEL@REVISION")),
    }
}

/// A lifetime in seconds: a whole number of seconds, or one with a unit
/// (`s`, `m`, `h`, `d`); positive, at most a year.
pub fn lifetime(text: &str) -> Result<i64, String> {
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, "s"),
    };
    let scale = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => {
            return Err(format!(
                "'{text}' is not a lifetime (e.g. 3600, 30m, 12h, 7d)"
            ));
        }
    };
    let seconds = number
        .parse::<i64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .filter(|s| *s > 0)
        .ok_or_else(|| format!("'{text}' is not a lifetime (e.g. 3600, 30m, 12h, 7d)"))?;
    let max = switchyard_protocol::federation::MAX_GRANT_LIFETIME_S;
    if seconds > max {
        return Err(format!(
            "a grant lives at most a year ({max} s), got {seconds} s"
        ));
    }
    Ok(seconds)
}

#[cfg(test)]
mod tests;
