//! The web console at `/console/`: every operator task of the admin API as
//! server-rendered pages (maud), a stylesheet and one small script of our
//! own, all compiled into the binary; nothing is fetched from elsewhere
//! (the pages' Content-Security-Policy says so to the browser).
//!
//! One mechanism: a page or a form calls the API in-process ([`api::Api`])
//! as the session's key, so every scope check, validation and error code is
//! the API's own, and a page shows the API's `code` and `message` when it
//! refuses. Signing in takes the admin token or an API key; the session
//! lives in PostgreSQL ([`session`]), its cookie is HttpOnly and
//! SameSite=Strict, and every form carries the session's CSRF token.

pub mod api;
pub mod assets;
pub mod form;
pub mod page;
pub mod session;
pub mod sign_in;
pub mod sign_in_limit;

mod admission;
mod audit;
mod carrier;
mod deployments;
mod deployments_create;
mod federation;
mod keys;
mod models;
mod models_import;
mod nodes;
mod nodes_tokens;
mod overview;
mod plugins;
mod stats;
mod try_prompt;
mod usage;

use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};

use switchyard_server::state::AppState;

/// What every console route reaches: the replica's state, the API router the
/// pages call in-process, and the request rate the overview draws.
pub struct Console {
    /// The replica's state (the store, the counters).
    pub app: Arc<AppState>,
    /// The API, called in-process as the session's key.
    pub api: Router,
    /// Requests and errors per second, sampled.
    pub stats: stats::Rates,
    /// Model fetches started from the console, followed by this replica.
    pub imports: models_import::Imports,
    /// Sign-in attempts, by address and by key.
    pub sign_ins: sign_in_limit::SignIns,
}

/// Shared with every console handler.
pub type ConsoleState = Arc<Console>;

/// The console's routes (under `/console`), calling `api` in-process.
pub fn router(app: Arc<AppState>, api: Router) -> Router {
    let stats = stats::Rates::default();
    stats::sample(app.clone(), stats.clone());
    let console = Arc::new(Console {
        app,
        api,
        stats,
        imports: Default::default(),
        sign_ins: Default::default(),
    });
    Router::new()
        .route("/console", get(sign_in::to_overview))
        .route("/console/", get(overview::page))
        .route("/console/overview/live", get(overview::live))
        .route("/console/assets/{file}", get(assets::serve))
        .route("/console/sign-in", get(sign_in::form).post(sign_in::submit))
        .route("/console/sign-out", post(sign_in::sign_out))
        .merge(nodes::routes())
        .merge(models::routes())
        .merge(deployments::routes())
        .merge(admission::routes())
        .merge(plugins::routes())
        .merge(keys::routes())
        .merge(audit::routes())
        .merge(usage::routes())
        .merge(carrier::routes())
        .merge(try_prompt::routes())
        .merge(federation::routes())
        // Any other console path is the console's own 404 page (the API's
        // fallback answers JSON everywhere else).
        .route("/console/{*rest}", get(page::not_found))
        .layer(tower_http::trace::TraceLayer::new_for_http())
        .with_state(console)
}
