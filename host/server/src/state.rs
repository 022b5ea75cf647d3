//! The state every handler shares.

use std::sync::Arc;

use switchyard_runtime::Runtime;
use switchyard_store::Store;

use switchyard_binding::admission::Admission;
use switchyard_carrier_set::Carriers;
use switchyard_library::Library;

/// Shared by every handler of a replica.
#[derive(Debug)]
pub struct AppState {
    /// The database.
    pub store: Store,
    /// The plugin runtime.
    pub runtime: Arc<Runtime>,
    /// The chains this replica serves.
    pub admission: Arc<Admission>,
    /// The grant evaluator this replica runs (federation asks it to judge).
    pub grant_evaluator: Arc<switchyard_binding::grant_evaluator::GrantEvaluator>,
    /// This replica's id in `instances`.
    pub instance_id: String,
    /// Approve registering workers at once (`--auto-approve`).
    pub auto_approve: bool,
    /// The inference core (its routing table, its metrics).
    pub inference: Arc<switchyard_inference::Inference>,
    /// API keys looked up lately.
    pub keys: crate::auth::KeyCache,
    /// The model library's bytes.
    pub library: Library,
    /// Hosts a model fetch may reach though they are not public.
    pub fetch_allow: switchyard_library::fetch::AllowList,
    /// OpenAI batches: files, batches, their driver and consumer.
    pub batches: Arc<switchyard_batches::Batches>,
    /// This replica's federation; `None` only in the router's own tests.
    pub federation: Option<Arc<switchyard_federation::Federation>>,
    /// The carrier set and its seams; `None` without carrier components.
    pub carriers: Option<Arc<Carriers>>,
    /// `/metrics` needs a key with `metrics:read` (`--metrics-auth`).
    pub metrics_auth: bool,
}
