//! `policy` (write and test a policy without a cluster), `plugin` (the
//! registry and signing) and `trust` (the keys signatures are checked
//! against).

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::ApiArgs;

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
