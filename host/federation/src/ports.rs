//! What federation asks of the server it runs in, one small trait per
//! capability, so that each is implemented from the few handles it needs
//! (the evaluator, the carriers, the library) and only the one that serves
//! calls with this cluster's own `/v1` path reaches the whole server.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::future::BoxFuture;
use switchyard_carrier::ComponentSpec;
use switchyard_carrier::tunnel::Relay;
use switchyard_runtime::Runtime;
use switchyard_runtime::admission::TransferRequest;
use switchyard_runtime::grant::{Charge, FederatedCall, Grant, Usage};

use switchyard_protocol::answer::Answer;

use crate::{Denied, LocalAnswer, LocalCall, LocalJob};

/// The grant evaluator in force.
pub trait GrantJudge: Send + Sync + 'static {
    /// Judges a call against its grant.
    fn judge(
        &self,
        call: FederatedCall,
        grant: Grant,
        usage: Usage,
    ) -> BoxFuture<'static, Result<Charge, Denied>>;
}

/// This cluster's own admission chains, `/v1` path and batches, for what a
/// peer's grant admits.
pub trait LocalService: Send + Sync + 'static {
    /// Runs the `federation` chain, then the `inference` chain, and routes
    /// the call to the service's deployment.
    fn serve(&self, call: LocalCall) -> BoxFuture<'static, Result<LocalAnswer, Denied>>;

    /// Runs the `federation` chain on a call that is not inference (a
    /// managed service's change): `peer`'s label, the grant, the service
    /// and the model revision it names.
    fn admit(
        &self,
        peer: String,
        grant: String,
        service: String,
        model: Option<String>,
    ) -> BoxFuture<'static, Result<(), Denied>>;

    /// Runs the `transfer` admission chain on one file of a copy.
    fn admit_transfer(&self, request: TransferRequest) -> BoxFuture<'static, Result<(), Denied>>;

    /// Acts on a peer's job call: creates the job (its grant judged
    /// already) or answers about a job that peer made, as the `/v1` route
    /// would.
    fn job(&self, job: LocalJob) -> BoxFuture<'static, Result<Answer, Denied>>;

    /// Cancels the jobs a revoked grant made.
    fn end_grant_jobs(&self, grant: String) -> BoxFuture<'static, ()>;
}

/// What links travel on.
pub trait LinkTransport: Send + Sync + 'static {
    /// The tunnel component links run on, and the runtime it runs in.
    fn tunnel(&self) -> Option<(Arc<Runtime>, ComponentSpec)>;

    /// Streams to a peer whose link another replica of this cluster holds
    /// (keyed by the peer's id).
    fn relay(&self) -> Option<Relay>;
}

/// The model library's blobs, for copies.
pub trait BlobStore: Send + Sync + 'static {
    /// Where partial copies are kept (one folder per copy).
    fn partial_dir(&self) -> PathBuf;

    /// Whether the library holds blob `sha256` of `size` bytes.
    fn has_blob(&self, sha256: &str, size: u64) -> bool;

    /// Moves a file verified against `sha256` into the library's blobs.
    fn adopt_blob(&self, sha256: &str, from: &Path) -> std::io::Result<()>;

    /// The library file holding blob `sha256` (`size` bytes) for a peer's
    /// range, fetched from another replica of this cluster first when this
    /// one lacks it.
    fn blob_for_range(
        &self,
        sha256: String,
        size: u64,
    ) -> BoxFuture<'static, Result<PathBuf, String>>;
}

/// Every port, as federation holds them.
#[derive(Clone)]
pub struct Ports {
    /// The grant evaluator.
    pub judge: Arc<dyn GrantJudge>,
    /// This cluster's chains and `/v1` path.
    pub local: Arc<dyn LocalService>,
    /// The links' transport.
    pub links: Arc<dyn LinkTransport>,
    /// The model library.
    pub blobs: Arc<dyn BlobStore>,
}

impl std::fmt::Debug for Ports {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ports").finish_non_exhaustive()
    }
}
