//! Federation between independently run Switchyard clusters.
//!
//! Two clusters pair explicitly and share exactly what one grants the
//! other. Every federated call travels over one authenticated link between
//! their frontends; there is no other path. The server routes to
//! [`Federation`]; what federation needs of the server it asks through
//! four small [`ports`]: the grant evaluator, this cluster's own chains and
//! `/v1` path, the links' transport, and the model library's blobs.
//!
//! # Layout
//! - [`identity`]: the cluster's ed25519 key, kept in a private file.
//! - `cluster`: this replica's key against the stored public key.
//! - [`proof`]: what each side of a link signs.
//! - [`handshake`]: the link's opening exchange, both keys proved.
//! - `links`: the links this replica holds, dialled and accepted.
//! - `join`: joining a peer with its join token.
//! - `gate`: who may start a link handshake (per replica, per address, join guesses).
//! - `pairing`: requests, approvals, shares, completion and revocation.
//! - `calls`: the calls a peer makes over the link, answered here.
//! - `changes`: revocations and removals other replicas made, acted on here.
//! - `incoming`: a call's head line and bounded body, as a peer sends them.
//! - `remote`: remote inference, both sides.
//! - [`copies`]: verified model copies, both sides.
//! - `manage`: managed services on the owner, with operation receipts.
//! - `jobs`: batch jobs across clusters, forwarded to their one owner.
//! - `status`: what `GET /api/federation/status` shows.
//! - `recent`: peers, grants and offers read lately, for the hot path.
//! - [`inflight`]: operations in flight under each grant, ended by a revocation.
//! - `metrics`: federation's Prometheus series.
//! - [`receipt`]: a grant's acceptance receipt, signed by both keys.
//! - [`error`]: what an action answers when it does not go ahead.
//! - [`ports`]: what federation asks of the server, one trait per capability.

mod calls;
mod changes;
mod cluster;
pub mod copies;
pub mod error;
pub mod gate;
pub mod handshake;
pub mod identity;
mod incoming;
pub mod inflight;
mod jobs;
mod join;
mod links;
mod manage;
mod metrics;
mod pairing;
pub mod ports;
pub mod proof;
pub mod receipt;
mod recent;
mod remote;
mod status;

pub use ports::{BlobStore, GrantJudge, LinkTransport, LocalService, Ports};

use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use switchyard_protocol::answer::Answer;
use switchyard_store::Store;

pub use cluster::Cluster;
pub use error::{FedResult, FederationError};
pub use jobs::{LocalJob, MAX_JOB_INPUT};
pub use join::Joined;
pub use links::Links;
pub use remote::{RemoteTarget, revoked_event};

/// Whether `label` can name a cluster: 1 to 64 letters, digits, `-`, `_`
/// or `.`, not starting with `.`.
pub fn valid_label(label: &str) -> bool {
    join::valid_name("label", label).is_ok()
}

/// What a replica's federation is configured with.
#[derive(Debug, Clone)]
pub struct FederationConfig {
    /// The key file (`--federation-key`, default under the data directory).
    pub key_path: PathBuf,
    /// The label peers see at the first start.
    pub label: String,
    /// Where peers reach this cluster's frontend (`http://host:port`).
    pub url: String,
    /// This replica's id in `instances`.
    pub instance_id: String,
}

/// A denial: a stable code and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied {
    /// The HTTP status.
    pub status: u16,
    /// A stable code.
    pub code: String,
    /// For the caller.
    pub message: String,
}

/// This cluster's answer to a peer's inference call: the inference core's
/// [`Answer`] as it comes (the same type the engine's answer is from the
/// worker to the link), and whether the call was admitted.
#[derive(Debug)]
pub struct LocalAnswer {
    /// The answer, its body streaming behind its head.
    pub answer: Answer,
    /// Whether this cluster's own chains admitted the call; `false` when
    /// the answer is their refusal (the grant's charge is then refunded).
    pub admitted: bool,
}

/// A remote inference call admitted by its grant, to be answered by this
/// cluster's own `/v1` path.
#[derive(Debug, Clone)]
pub struct LocalCall {
    /// The peer's label here.
    pub peer: String,
    /// The grant.
    pub grant: String,
    /// The service id.
    pub service: String,
    /// The model the service's deployment serves.
    pub model: String,
    /// `/v1/chat/completions` and the like.
    pub path: String,
    /// The request body as the client sent it.
    pub body: Bytes,
    /// The caller's span, W3C `traceparent`: the owner's spans go under it.
    pub traceparent: Option<String>,
}

/// A replica's federation: its identity, its links, and every action the
/// API routes to it.
pub struct Federation {
    store: Store,
    config: FederationConfig,
    cluster: Cluster,
    links: Links,
    ports: Ports,
    /// Handshakes answered at once, in all and per address, and the
    /// waits of addresses that guessed join tokens wrong.
    gate: gate::Gate,
    /// Calls judged here, for `/metrics`.
    calls: metrics::CallCounts,
    /// This cluster's peers and grants as read lately (remote calls pick
    /// their grant from here; the owner judges).
    seen: recent::Recent<(), Arc<Seen>>,
    /// The model each service offer's deployment serves, read lately.
    served: recent::Recent<String, String>,
    /// URLs a join is dialling now: the keeper leaves their peers alone
    /// (a second dial would replace the join's own link).
    joining: std::sync::Mutex<std::collections::HashSet<String>>,
    /// Operations in flight under each grant: a revocation ends them.
    inflight: inflight::InFlight,
    /// The model copies this replica runs.
    copy_runners: copies::Runners,
}

/// Peers and grants as read together.
#[derive(Debug)]
struct Seen {
    peers: Vec<switchyard_protocol::federation::Peer>,
    grants: Vec<switchyard_protocol::federation::GrantRecord>,
}

impl std::fmt::Debug for Federation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Federation")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Federation {
    /// Loads the identity (making it on a new cluster) and starts nothing
    /// yet; [`Federation::run`] keeps the links.
    pub async fn start(
        store: Store,
        config: FederationConfig,
        ports: Ports,
    ) -> FedResult<(Arc<Self>, Option<String>)> {
        let (cluster, first_token) = Cluster::load(&store, &config).await?;
        let federation = Arc::new(Self {
            store,
            config,
            cluster,
            links: Links::default(),
            ports,
            gate: Default::default(),
            calls: Default::default(),
            seen: Default::default(),
            served: Default::default(),
            joining: Default::default(),
            inflight: Default::default(),
            copy_runners: Default::default(),
        });
        Ok((federation, first_token))
    }

    /// Peers and grants, as read less than a second ago.
    async fn seen(&self) -> FedResult<Arc<Seen>> {
        if let Some(seen) = self.seen.get(&()) {
            return Ok(seen);
        }
        let seen = Arc::new(Seen {
            peers: self.store.peers().await?,
            grants: self.store.grants().await?,
        });
        self.seen.put((), seen.clone());
        Ok(seen)
    }

    /// Forgets the peers and grants read lately (this replica changed them).
    fn changed(&self) {
        self.seen.clear();
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// A place among the handshakes answered at once for a dialer at
    /// `address`; `Err` when the replica's or the address's are all taken
    /// (the link endpoint answers 503 then).
    pub fn handshake_permit(
        &self,
        address: Option<std::net::IpAddr>,
    ) -> Result<gate::HandshakePermit, gate::Busy> {
        self.gate.enter(address)
    }

    /// The links this replica holds.
    pub fn links(&self) -> &Links {
        &self.links
    }

    /// The operations in flight under each grant on this replica.
    pub fn inflight(&self) -> &inflight::InFlight {
        &self.inflight
    }

    /// This replica's identity.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// Keeps the identity checked and the links this cluster dials up,
    /// and the changes other replicas announce followed, until `stop`.
    pub async fn run(self: Arc<Self>, stop: tokio::sync::watch::Receiver<bool>) {
        let changes = tokio::spawn(changes::follow(self.clone(), stop.clone()));
        let copies = tokio::spawn(copies::keep(self.clone(), stop.clone()));
        links::keep(self, stop).await;
        let _ = changes.await;
        let _ = copies.await;
    }
}
