//! A Switchyard frontend replica (`switchyard serve`), as a shell: the HTTP
//! edge, authentication and the composition of the domain crates
//! (`switchyard-inference`, `-batches`, `-scheduler`, `-library`,
//! `-binding`, `-carrier-set`, `-federation`), each of which returns its own
//! error enum that [`error`] maps to a status and a code once.
//!
//! # Layout
//! - [`config`]: what `serve` is configured with.
//! - [`server`]: start-up, background tasks and graceful shutdown (`run`).
//! - [`edge`]: the accept loop, the connection pools (anonymous connections yield to proven ones) and the header and body clocks.
//! - [`state`]: the shared state handed to every handler.
//! - [`auth`]: API keys and scopes.
//! - [`audit`]: the layer that appends every admin change to the audit trail.
//! - [`carriers`]: the HTTP side of the replica's carrier set: its status and a change's
//!   preflight, worker sessions and their websocket upgrade.
//! - [`federation`]: the ports federation asks the replica through (the grant evaluator,
//!   the inference core and batches, the link's transport, the library).
//! - [`jobs`]: batches across clusters: a job forwarded to its owner, a peer's job run here.
//! - [`error`]: `ApiError`, and the one mapping from each domain's error to an HTTP status
//!   and a stable code (the domain modules know nothing of HTTP).
//! - [`extract`]: the caller (with its scope), JSON body, query and path extractors whose
//!   rejections are `ApiError`s.
//! - [`routes`]: the HTTP API, one file per area (`routes/openai` is the inference core's
//!   HTTP edge); [`routes::app`] builds the router.
//! - [`openapi`]: the OpenAPI document of the admin API.
//!
//! The web console is its own crate (`switchyard-console`), mounted by the binary through
//! [`ServeConfig::pages`]: it calls this API in-process as the session's key.

pub mod audit;
pub mod auth;
pub mod carriers;
pub mod config;
pub mod edge;
pub mod error;
pub mod extract;
pub mod federation;
pub mod jobs;
pub mod openapi;
pub mod routes;
pub mod server;
pub mod state;

pub use config::ServeConfig;
pub use server::{run, run_on};
pub use switchyard_carrier_set::seed::SeedComponent;
