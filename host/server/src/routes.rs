//! The HTTP API, one file per area.

pub mod admission;
pub mod admission_decisions;
pub mod audit;
pub mod batches;
pub mod cluster;
pub mod deployment_preview;
pub mod deployments;
pub mod diagnostics;
pub mod federation;
pub mod federation_copies;
pub mod federation_evaluator;
pub mod federation_grants;
pub mod federation_jobs;
pub mod federation_services;
pub mod health;
pub mod keys;
pub mod metrics;
pub mod model_fetch;
pub mod models;
pub mod nodes;
pub mod openai;
pub mod peer_blobs;
pub mod plugins;
pub mod relay;
pub mod settings;
pub mod teams;
#[cfg(test)]
mod tests;
pub mod trust;
pub mod usage;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post, put};
use switchyard_protocol::limits::MAX_REQUEST_BODY;

use crate::state::AppState;

/// The largest component accepted: components built from Python are ~18 MB,
/// from JavaScript up to 12 MB.
pub const MAX_COMPONENT_BYTES: usize = 64 << 20;

/// Pages served beside the API, given the replica's state and the API
/// router they call in-process: the web console (`switchyard_console`).
pub type Pages = fn(Arc<AppState>, Router) -> Router;

/// Every route of a replica: the API, and the pages that call it.
pub fn app(state: Arc<AppState>, pages: Option<Pages>) -> Router {
    let api = api(state.clone());
    match pages {
        Some(pages) => api.clone().merge(pages(state, api)),
        None => api,
    }
}

/// The API (everything but the console).
pub fn api(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/metrics", get(metrics::metrics))
        .route("/api/openapi.json", get(crate::openapi::serve))
        .route(
            "/api/plugins",
            post(plugins::upload)
                .get(plugins::list)
                .layer(DefaultBodyLimit::max(MAX_COMPONENT_BYTES)),
        )
        .route("/api/plugins/{name}", get(plugins::show))
        .route(
            "/api/plugins/{name}/{version}/component",
            get(plugins::component),
        )
        .route(
            "/api/admission/{point}",
            put(admission::set).get(admission::show),
        )
        .route("/api/admission/{point}/rollback", post(admission::rollback))
        .route("/api/admission/{point}/evaluate", post(admission::evaluate))
        .route(
            "/api/admission/{point}/decisions",
            get(admission_decisions::decisions),
        )
        .route(
            "/api/federation/evaluator",
            put(federation_evaluator::set).get(federation_evaluator::show),
        )
        .route(
            "/api/federation/evaluator/rollback",
            post(federation_evaluator::rollback),
        )
        .route("/api/federation/identity", get(federation::identity))
        .route("/api/federation/identity/adopt", post(federation::adopt))
        .route("/api/federation/join-token", post(federation::join_token))
        .route("/api/federation/link", get(federation::link))
        .route("/api/federation/status", get(federation::status))
        .route(
            "/api/federation/eligibility",
            get(federation_jobs::show).put(federation_jobs::set),
        )
        .route(
            "/api/federation/peers",
            post(federation::join).get(federation::peers),
        )
        .route(
            "/api/federation/peers/{peer}",
            get(federation::peer).delete(federation::forget),
        )
        .route(
            "/api/federation/peers/{peer}/requests",
            post(federation_grants::request),
        )
        .route(
            "/api/federation/peers/{peer}/services",
            post(federation_services::manage).get(federation_services::peer_services),
        )
        .route(
            "/api/federation/peers/{peer}/operations/{id}",
            get(federation_services::operation),
        )
        .route(
            "/api/federation/offers",
            post(federation::publish).get(federation::offers),
        )
        .route(
            "/api/federation/offers/{id}",
            axum::routing::delete(federation::withdraw),
        )
        .route("/api/federation/requests", get(federation_grants::requests))
        .route(
            "/api/federation/requests/{id}",
            axum::routing::delete(federation_grants::discard),
        )
        .route(
            "/api/federation/requests/{id}/approve",
            post(federation_grants::approve),
        )
        .route(
            "/api/federation/grants",
            post(federation_grants::share).get(federation_grants::grants),
        )
        .route(
            "/api/federation/grants/{id}",
            get(federation_grants::grant).delete(federation_grants::retire),
        )
        .route(
            "/api/federation/grants/{id}/complete",
            post(federation_grants::complete),
        )
        .route(
            "/api/federation/grants/{id}/revoke",
            post(federation_grants::revoke),
        )
        .route(
            "/api/federation/grants/{id}/refresh",
            post(federation_grants::refresh),
        )
        .route(
            "/api/federation/services",
            get(federation_services::remote_services),
        )
        .route(
            "/api/federation/peers/{peer}/models/{model}/{revision}",
            get(federation_copies::manifest),
        )
        .route(
            "/api/federation/copies",
            post(federation_copies::start).get(federation_copies::list),
        )
        .route(
            "/api/federation/copies/{id}",
            get(federation_copies::show).delete(federation_copies::delete),
        )
        .route(
            "/api/federation/copies/{id}/pause",
            post(federation_copies::pause),
        )
        .route(
            "/api/federation/copies/{id}/resume",
            post(federation_copies::resume),
        )
        .route("/api/keys", post(keys::create).get(keys::list))
        .route("/api/keys/{id}", axum::routing::delete(keys::revoke))
        .route("/api/teams", post(teams::create).get(teams::list))
        .route("/api/teams/{name}", axum::routing::delete(teams::delete))
        .route("/api/audit", get(audit::list))
        .route("/api/audit/verify", get(audit::verify))
        .route("/api/usage", get(usage::usage))
        .route("/api/trust/keys", post(trust::add).get(trust::list))
        .route("/api/trust/keys/{id}", axum::routing::delete(trust::remove))
        .route(
            "/api/library/blobs/{sha256}",
            put(models::put_blob)
                .get(models::blob)
                .layer(DefaultBodyLimit::disable()),
        )
        .route("/api/models", post(models::register).get(models::list))
        .route("/api/models/fetch", post(model_fetch::fetch))
        .route(
            "/api/models/{id}/{revision}",
            get(models::show).delete(models::delete),
        )
        .route(
            "/api/deployments",
            post(deployments::create).get(deployments::list),
        )
        .route(
            "/api/deployments/{id}",
            get(deployments::show).delete(deployments::delete),
        )
        .route("/api/deployments/{id}/replicas", put(deployments::scale))
        .route(
            "/api/deployments/preview",
            post(deployment_preview::preview),
        )
        .route("/v1/models", get(openai::models))
        // A request body at most MAX_REQUEST_BODY; a batch's line is held to it at upload.
        .route(
            "/v1/chat/completions",
            post(openai::chat).layer(DefaultBodyLimit::max(MAX_REQUEST_BODY)),
        )
        .route(
            "/v1/completions",
            post(openai::completions).layer(DefaultBodyLimit::max(MAX_REQUEST_BODY)),
        )
        .route(
            "/v1/embeddings",
            post(openai::embeddings).layer(DefaultBodyLimit::max(MAX_REQUEST_BODY)),
        )
        .route(
            "/v1/files",
            post(batches::upload).layer(DefaultBodyLimit::max(batches::MAX_UPLOAD_BODY)),
        )
        .route(
            "/v1/files/{id}",
            get(batches::show_file).delete(batches::delete_file),
        )
        .route("/v1/files/{id}/content", get(batches::file_content))
        .route("/v1/batches", post(batches::create).get(batches::list))
        .route("/v1/batches/{id}", get(batches::show))
        .route("/v1/batches/{id}/cancel", post(batches::cancel))
        .route("/api/nodes", get(nodes::list))
        .route(
            "/api/nodes/registration-tokens",
            post(nodes::create_registration_token).get(nodes::registration_tokens),
        )
        .route(
            "/api/nodes/registration-tokens/{id}",
            axum::routing::delete(nodes::revoke_registration_token),
        )
        .route("/api/nodes/register", post(nodes::register))
        .route("/api/nodes/{id}", get(nodes::show))
        .route("/api/nodes/{id}/approve", post(nodes::approve))
        .route("/api/nodes/{id}/release", post(nodes::release))
        .route("/api/nodes/{id}/drain", post(nodes::drain))
        .route("/api/nodes/{id}/undrain", post(nodes::undrain))
        .route("/api/nodes/{id}/maintenance", post(nodes::maintenance))
        .route("/api/nodes/{id}/heartbeat", post(nodes::heartbeat))
        .route("/api/cluster/connect", get(cluster::connect))
        .route("/api/cluster/relay", get(relay::relay))
        .route("/api/cluster/library/blobs/{sha256}", get(peer_blobs::blob))
        .route(
            "/api/cluster/carrier",
            get(cluster::carrier).post(cluster::change),
        )
        .route(
            "/api/cluster/settings",
            get(settings::show).put(settings::update),
        )
        .route(
            "/api/cluster/probe",
            post(diagnostics::probe).get(diagnostics::probes),
        )
        .route(
            "/api/cluster/nodes/{id}/control/{verb}",
            post(diagnostics::control),
        )
        .route(
            "/api/cluster/nodes/{id}/streams/{service}",
            post(diagnostics::stream).layer(DefaultBodyLimit::max(64 << 20)),
        )
        // Every path parameter is a checked name before a handler sees it.
        .route_layer(axum::middleware::from_fn(crate::extract::check_path))
        // Every change a key makes leaves a record in the audit trail.
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::audit::record,
        ))
        .layer(tower_http::trace::TraceLayer::new_for_http())
        // Probes are added after the trace layer: polled every few seconds,
        // and a 503 from /readyz while a replica starts is its answer, not
        // a fault to log in red.
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        // axum's own 404 and 405 have empty bodies; every answer of this API
        // is JSON (405 keeps its `Allow` header).
        .fallback(unknown_route)
        .method_not_allowed_fallback(method_not_allowed)
        // OpenAI's `type` and `param` on every `/v1` error.
        .layer(axum::middleware::from_fn(
            openai::error_shape::openai_errors,
        ))
        .with_state(state)
}

async fn unknown_route() -> crate::error::ApiError {
    crate::error::ApiError::new(
        axum::http::StatusCode::NOT_FOUND,
        "unknown_route",
        "no such route; see /api/openapi.json",
    )
}

async fn method_not_allowed() -> crate::error::ApiError {
    crate::error::ApiError::new(
        axum::http::StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this route does not take that method",
    )
}
