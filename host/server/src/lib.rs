//! A Switchyard frontend replica (`switchyard serve`).
//!
//! # Layout
//! - [`config`]: what `serve` is configured with.
//! - [`server`]: start-up, background tasks and graceful shutdown (`run`).
//! - [`edge`]: the accept loop, the connection pools (anonymous connections yield to proven ones) and the header and body clocks.
//! - [`state`]: the shared state handed to every handler.
//! - [`auth`]: API keys and scopes.
//! - [`carriers`]: this replica's carrier set (started from the plugin registry, which the
//!   replica seeds with its carrier components), its seams, worker sessions and the relay.
//! - [`labels`]: node labels and deployments' node selectors.
//! - [`error`]: `ApiError`, and the one mapping from each domain's error to an HTTP status
//!   and a stable code (the domain modules know nothing of HTTP).
//! - [`extract`]: the caller (with its scope), JSON body, query and path extractors whose
//!   rejections are `ApiError`s.
//! - [`routes`]: the HTTP API, one file per area (`routes/openai` is the inference core's
//!   HTTP edge); [`routes::app`] builds the router.
//! - [`openapi`]: the OpenAPI document of the admin API.
//!
//! The components bound with generations (admission chains, the grant evaluator) and the
//! signature rules they pass are `switchyard-binding`'s.
//!
//! The web console is its own crate (`switchyard-console`), mounted by the binary through
//! [`ServeConfig::pages`]: it calls this API in-process as the session's key.

pub mod auth;
pub mod carriers;
pub mod config;
pub mod edge;
pub mod error;
pub mod extract;
pub mod federation;
pub mod jobs;
/// Node labels and selectors, as the API takes them.
pub use switchyard_protocol::labels;
pub mod openapi;
pub mod routes;
pub mod server;
pub mod state;

pub use config::ServeConfig;
pub use server::{run, run_on};
pub use switchyard_carrier_set::seed::SeedComponent;
