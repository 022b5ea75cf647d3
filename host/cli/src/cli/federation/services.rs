//! `switchyard federation services ...`: the arguments of managed services
//! on a peer.

use clap::{Args, Subcommand};

use super::model_revision;

/// `switchyard federation services ...`: managed services on a peer.
#[derive(Debug, Subcommand)]
pub enum ServicesAction {
    /// The managed services a grant made on the peer.
    List {
        #[command(flatten)]
        target: ManageTarget,
    },
    /// Create a managed service, stopped.
    Create {
        #[command(flatten)]
        target: ManageTarget,
        /// The service id (unique on the owner).
        #[arg(long)]
        service: String,
        #[command(flatten)]
        spec: SpecArgs,
    },
    /// Change a stopped service's configuration.
    Configure {
        #[command(flatten)]
        target: ManageTarget,
        #[command(flatten)]
        revision: Revision,
        #[command(flatten)]
        spec: SpecArgs,
    },
    /// Start its replicas.
    Start(Lifecycle),
    /// Refuse new calls; calls in flight finish.
    Drain(Lifecycle),
    /// Stop its replicas.
    Stop(Lifecycle),
    /// Remove it.
    Remove(Lifecycle),
}

/// The peer and grant a manage call runs under.
#[derive(Debug, Args, Clone)]
pub struct ManageTarget {
    /// The owner (label or id).
    #[arg(long)]
    pub peer: String,
    /// The `inference:manage` grant.
    #[arg(long)]
    pub grant: String,
    /// The operation id [default: a new `op_<16 hex>`]; give the printed
    /// one again to retry exactly.
    #[arg(long)]
    pub operation_id: Option<String>,
}

/// The revision a mutation is made against: given, never looked up, so
/// an exact retry of an operation sends the same request.
#[derive(Debug, Args, Clone)]
pub struct Revision {
    /// The service id.
    #[arg(long)]
    pub service: String,
    /// The service's revision as `services list` shows it.
    #[arg(long)]
    pub revision: i64,
}

/// `start`, `drain`, `stop`, `remove`.
#[derive(Debug, Args, Clone)]
pub struct Lifecycle {
    #[command(flatten)]
    pub target: ManageTarget,
    #[command(flatten)]
    pub revision: Revision,
}

/// A managed service's configuration.
#[derive(Debug, Args, Clone)]
pub struct SpecArgs {
    /// The model revision, `model@revision`, in the grant.
    #[arg(long, value_parser = model_revision)]
    pub model: String,
    /// The runtime offer's id.
    #[arg(long)]
    pub runtime: String,
    /// The machines it may run on, comma-separated (each in the grant).
    #[arg(long, required = true, value_delimiter = ',')]
    pub machines: Vec<String>,
    /// Replicas when started.
    #[arg(long, default_value_t = 1)]
    pub replicas: i32,
}
