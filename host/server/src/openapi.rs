//! The OpenAPI document of the admin API, generated from the route annotations.
//! A committed copy (`docs/openapi.json`) is checked against it by a test.

use axum::Json;
use utoipa::OpenApi;

use crate::routes;

/// The document.
#[derive(OpenApi)]
#[openapi(
    info(title = "Switchyard admin API", description = "Plugins, admission chains, API keys, health and metrics. Errors are `{\"error\":{\"code\",\"message\"}}`."),
    paths(
        routes::health::healthz,
        routes::health::readyz,
        routes::metrics::metrics,
        routes::plugins::upload,
        routes::plugins::list,
        routes::plugins::show,
        routes::admission::set,
        routes::admission::show,
        routes::admission::rollback,
        routes::admission::evaluate,
        routes::keys::create,
        routes::keys::list,
        routes::keys::revoke,
        routes::nodes::create_registration_token,
        routes::nodes::register,
        routes::nodes::heartbeat,
        routes::nodes::list,
        routes::nodes::show,
        routes::nodes::approve,
        routes::cluster::connect,
        routes::nodes::drain,
        routes::nodes::undrain,
        routes::nodes::maintenance,
        routes::deployments::create,
        routes::deployments::list,
        routes::deployments::show,
        routes::deployments::scale,
        routes::deployments::delete,
        routes::openai::models,
        routes::openai::chat,
        routes::openai::completions,
        routes::openai::embeddings,
        routes::models::put_blob,
        routes::models::blob,
        routes::models::register,
        routes::model_fetch::fetch,
        routes::models::list,
        routes::models::show,
        routes::models::delete,
        routes::cluster::carrier,
        routes::diagnostics::control,
        routes::diagnostics::stream,
        routes::diagnostics::probe,
        routes::diagnostics::probes,
    ),
    components(schemas(
        routes::admission::SetChain,
        routes::admission::PolicyBinding,
        routes::keys::NewKey,
        routes::nodes::NewRegistrationToken,
        routes::nodes::RegisterNode,
        routes::nodes::Heartbeat,
        routes::diagnostics::ProbeRequest,
        routes::deployments::NewDeployment,
        routes::deployments::Scale,
        routes::model_fetch::FetchModel,
        switchyard_store::models::ModelRevision,
        switchyard_store::models::ModelFile,
    )),
    modifiers(&BearerAuth),
    security(("bearer" = [])),
)]
pub struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        let bearer =
            || SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build());
        // An API key; a registration token (registers workers only); a node's own
        // credential, sent with the `X-Switchyard-Node` header naming the node.
        for name in ["bearer", "registration_token", "node_credential"] {
            components.add_security_scheme(name, bearer());
        }
    }
}

/// The document as pretty JSON (what `docs/openapi.json` holds).
pub fn document() -> String {
    ApiDoc::openapi()
        .to_pretty_json()
        .expect("the OpenAPI document serialises")
}

/// `GET /api/openapi.json`.
pub async fn serve() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}
