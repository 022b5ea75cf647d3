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
        routes::plugins::component,
        routes::admission::set,
        routes::admission::show,
        routes::admission::rollback,
        routes::admission::evaluate,
        routes::admission_decisions::decisions,
        routes::federation_evaluator::set,
        routes::federation_evaluator::show,
        routes::federation_evaluator::rollback,
        routes::federation::identity,
        routes::federation::adopt,
        routes::federation::join_token,
        routes::federation::link,
        routes::federation::join,
        routes::federation::peers,
        routes::federation::peer,
        routes::federation::forget,
        routes::federation::status,
        routes::federation_jobs::show,
        routes::federation_jobs::set,
        routes::federation::publish,
        routes::federation::offers,
        routes::federation::withdraw,
        routes::federation_grants::request,
        routes::federation_grants::requests,
        routes::federation_grants::discard,
        routes::federation_grants::approve,
        routes::federation_grants::share,
        routes::federation_grants::grants,
        routes::federation_grants::grant,
        routes::federation_grants::complete,
        routes::federation_grants::revoke,
        routes::federation_grants::refresh,
        routes::federation_grants::retire,
        routes::federation_services::remote_services,
        routes::federation_services::manage,
        routes::federation_services::peer_services,
        routes::federation_services::operation,
        routes::federation_copies::manifest,
        routes::federation_copies::start,
        routes::federation_copies::list,
        routes::federation_copies::show,
        routes::federation_copies::pause,
        routes::federation_copies::resume,
        routes::federation_copies::delete,
        routes::keys::create,
        routes::keys::list,
        routes::keys::revoke,
        routes::teams::create,
        routes::teams::list,
        routes::teams::delete,
        routes::audit::list,
        routes::audit::verify,
        routes::usage::usage,
        routes::trust::list,
        routes::trust::add,
        routes::trust::remove,
        routes::nodes::create_registration_token,
        routes::nodes::registration_tokens,
        routes::nodes::revoke_registration_token,
        routes::nodes::release,
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
        routes::deployment_preview::preview,
        routes::openai::models,
        routes::openai::chat,
        routes::openai::completions,
        routes::openai::embeddings,
        routes::batches::upload,
        routes::batches::show_file,
        routes::batches::delete_file,
        routes::batches::file_content,
        routes::batches::create,
        routes::batches::show,
        routes::batches::list,
        routes::batches::cancel,
        routes::models::put_blob,
        routes::models::blob,
        routes::models::register,
        routes::model_fetch::fetch,
        routes::models::list,
        routes::models::show,
        routes::models::delete,
        routes::cluster::carrier,
        routes::cluster::change,
        routes::settings::show,
        routes::settings::update,
        routes::diagnostics::control,
        routes::diagnostics::stream,
        routes::diagnostics::probe,
        routes::diagnostics::probes,
    ),
    components(schemas(
        switchyard_protocol::carrier::CarrierChange,
        switchyard_protocol::carrier::Preflight,
        switchyard_protocol::carrier::Blocker,
        switchyard_protocol::carrier::ChangeMoved,
        switchyard_protocol::carrier::CarrierStatus,
        switchyard_protocol::carrier::Blocked,
        switchyard_protocol::admin::SetChain,
        switchyard_protocol::admin::PolicyBinding,
        switchyard_protocol::admin::Rollback,
        switchyard_protocol::admin::SetEvaluator,
        switchyard_protocol::admin::NewKey,
        switchyard_protocol::keys::Key,
        switchyard_protocol::keys::CreatedKey,
        switchyard_protocol::keys::Keys,
        switchyard_protocol::teams::Team,
        switchyard_protocol::teams::NewTeam,
        switchyard_protocol::teams::Teams,
        switchyard_protocol::audit::AuditRecord,
        switchyard_protocol::audit::AuditLog,
        switchyard_protocol::audit::AuditVerification,
        switchyard_protocol::audit::BrokenRecord,
        switchyard_protocol::usage::UsageReport,
        switchyard_protocol::usage::UsageRow,
        switchyard_protocol::health::Liveness,
        switchyard_protocol::health::Readiness,
        switchyard_protocol::generations::BoundComponent,
        switchyard_protocol::generations::Generation,
        switchyard_protocol::generations::ReplicaStatus,
        switchyard_protocol::generations::SignedComponent,
        switchyard_protocol::dry_run::DryRun,
        switchyard_protocol::dry_run::DryRunStep,
        switchyard_protocol::dry_run::Judgement,
        switchyard_protocol::dry_run::DecisionKind,
        switchyard_protocol::dry_run::StepFailure,
        switchyard_protocol::generations::ChainStatus,
        switchyard_protocol::generations::EvaluatorGeneration,
        switchyard_protocol::generations::EvaluatorStatus,
        switchyard_protocol::nodes::Node,
        switchyard_protocol::lists::Peers,
        switchyard_protocol::lists::Offers,
        switchyard_protocol::lists::AccessRequests,
        switchyard_protocol::lists::Grants,
        switchyard_protocol::lists::RemoteServices,
        switchyard_protocol::lists::ManagedServices,
        switchyard_protocol::lists::Copies,
        switchyard_protocol::lists::TrustedKeys,
        switchyard_protocol::lists::Probes,
        switchyard_protocol::models::Blob,
        switchyard_protocol::models::ModelSummary,
        switchyard_protocol::models::Models,
        switchyard_protocol::deployments::Deployment,
        switchyard_protocol::deployments::Replica,
        switchyard_protocol::deployments::DeploymentStatus,
        switchyard_protocol::deployments::Deployments,
        switchyard_protocol::plugin::PluginRecord,
        switchyard_protocol::plugin::Plugins,
        switchyard_protocol::plugin::PluginVersions,
        switchyard_protocol::nodes::Nodes,
        switchyard_protocol::nodes::RegistrationToken,
        switchyard_protocol::nodes::RegistrationTokens,
        switchyard_protocol::nodes::CreatedRegistrationToken,
        switchyard_protocol::federation::Identity,
        switchyard_protocol::federation::JoinToken,
        switchyard_protocol::federation::NewJoinToken,
        switchyard_protocol::federation::JoinPeer,
        switchyard_protocol::federation::Peer,
        switchyard_protocol::federation::LinkStatus,
        switchyard_protocol::federation::LinkState,
        switchyard_protocol::federation::NewAccessRequest,
        switchyard_protocol::federation::AccessRequest,
        switchyard_protocol::federation::Operation,
        switchyard_protocol::federation::Direction,
        switchyard_protocol::federation::GrantState,
        switchyard_protocol::federation::GrantSpec,
        switchyard_protocol::federation::GrantTerms,
        switchyard_protocol::federation::GrantUsage,
        switchyard_protocol::federation::GrantRecord,
        switchyard_protocol::federation::Party,
        switchyard_protocol::federation::Revoked,
        switchyard_protocol::federation::NewOffer,
        switchyard_protocol::federation::Offer,
        switchyard_protocol::federation::Resource,
        switchyard_protocol::federation::FederationStatus,
        switchyard_protocol::jobs::OwnerEligibility,
        switchyard_protocol::jobs::SetEligibility,
        switchyard_protocol::jobs::JobProjections,
        switchyard_protocol::federation::PeerStatus,
        switchyard_protocol::federation::GrantStatus,
        switchyard_protocol::federation::Bounds,
        switchyard_protocol::federation::OperationRecord,
        switchyard_protocol::federation::ManageCall,
        switchyard_protocol::federation::ManageAction,
        switchyard_protocol::federation::ManagedService,
        switchyard_protocol::federation::ManagedServiceSpec,
        switchyard_protocol::federation::RemoteService,
        switchyard_protocol::copies::ModelManifest,
        switchyard_protocol::copies::NewCopy,
        switchyard_protocol::copies::CopyRecord,
        switchyard_protocol::copies::CopyFile,
        switchyard_protocol::copies::CopyState,
        switchyard_protocol::copies::Reconnect,
        switchyard_protocol::admin::NewRegistrationToken,
        switchyard_protocol::node::RegisterNode,
        switchyard_protocol::batch::FileObject,
        switchyard_protocol::batch::FileDeleted,
        switchyard_protocol::batch::Batch,
        switchyard_protocol::batch::BatchStatus,
        switchyard_protocol::batch::RequestCounts,
        switchyard_protocol::batch::CreateBatch,
        switchyard_protocol::batch::BatchList,
        switchyard_protocol::node::Heartbeat,
        routes::diagnostics::ProbeRequest,
        switchyard_protocol::admin::NewDeployment,
        switchyard_protocol::admin::DeploymentPreview,
        switchyard_protocol::admin::PreviewPlacement,
        switchyard_protocol::admin::PreviewRefusal,
        switchyard_protocol::admin::Scale,
        switchyard_protocol::admin::FetchModel,
        switchyard_protocol::carrier::ClusterSettings,
        switchyard_protocol::signing::RequireSigned,
        switchyard_protocol::signing::NewTrustedKey,
        switchyard_protocol::signing::TrustedKey,
        switchyard_protocol::signing::Signer,
        switchyard_protocol::signing::SignerTrust,
        switchyard_protocol::signing::PluginSignature,
        ErrorBody,
        ErrorDetail,
        switchyard_store::models::ModelRevision,
        switchyard_store::models::ModelFile,
    )),
    modifiers(&BearerAuth, &Relay, &CommonResponses),
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
        // The cluster's relay secret, between replicas only.
        components.add_security_scheme(
            "relay_secret",
            SecurityScheme::ApiKey(utoipa::openapi::security::ApiKey::Header(
                utoipa::openapi::security::ApiKeyValue::new(
                    switchyard_protocol::carrier::RELAY_HEADER,
                ),
            )),
        );
    }
}

/// Every error answer: `{"error":{"code","message"}}`.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // Only its schema is used: `ApiError` writes the body.
pub struct ErrorBody {
    error: ErrorDetail,
}

/// What went wrong.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub struct ErrorDetail {
    /// Stable, machine-readable (`invalid_request`, `forbidden`, ...).
    code: String,
    /// For a person; never carries a secret.
    message: String,
}

/// Routes anyone may call.
const PUBLIC: &[&str] = &["/healthz", "/readyz"];

/// Routes that take no credential but answer like the API otherwise: the
/// federation link is authenticated by its key handshake alone.
const ANONYMOUS: &[&str] = &["/api/federation/link"];

/// The answers every route shares, added to each operation so that the
/// document lists every status a client can see: 401/403 wherever a
/// credential is needed, 400/413/415/422 wherever a body or a path
/// parameter is read, 503 when the database does not answer in time.
struct CommonResponses;

impl utoipa::Modify for CommonResponses {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::SecurityRequirement;
        for (path, item) in openapi.paths.paths.iter_mut() {
            let public = PUBLIC.contains(&path.as_str());
            let has_params = path.contains('{');
            for op in [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
                &mut item.patch,
            ]
            .into_iter()
            .flatten()
            {
                if public {
                    continue;
                }
                if path == "/metrics" {
                    // Anonymous unless the operator turns `--metrics-auth` on.
                    op.security = Some(vec![
                        SecurityRequirement::default(),
                        SecurityRequirement::new("bearer", Vec::<String>::new()),
                    ]);
                    add(
                        op,
                        "401",
                        "`unauthorized`: `--metrics-auth` is on and no valid key was sent",
                    );
                    continue;
                }
                if ANONYMOUS.contains(&path.as_str()) {
                    // No requirement, as a public route: no credential is asked for.
                    op.security = None;
                } else {
                    if op.security.is_none() {
                        op.security = Some(vec![SecurityRequirement::new(
                            "bearer",
                            Vec::<String>::new(),
                        )]);
                    }
                    add(
                        op,
                        "401",
                        "`unauthorized`: no credential, or one that is not valid",
                    );
                    add(
                        op,
                        "403",
                        "`forbidden`: the credential lacks the scope this route needs",
                    );
                }
                add(
                    op,
                    "503",
                    "`database_unavailable`: the database did not answer in time",
                );
                if has_params {
                    add(
                        op,
                        "400",
                        "`invalid_request`: a path parameter or query is not valid",
                    );
                }
                body_answers(op);
            }
        }
    }
}

/// The error body on every error status a route documents itself, and the
/// answers to a body that is not valid wherever a body is read.
fn body_answers(op: &mut utoipa::openapi::path::Operation) {
    // Statuses a route documents itself carry the same error body.
    for (status, response) in op.responses.responses.iter_mut() {
        if let utoipa::openapi::RefOr::T(response) = response
            && status.as_str() >= "400"
            && response.content.is_empty()
        {
            response
                .content
                .insert("application/json".into(), error_content());
        }
    }
    if let Some(body) = &op.request_body {
        let json = body.content.contains_key("application/json");
        add(
            op,
            "400",
            "`invalid_request` / `invalid_json`: the body is not valid",
        );
        add(
            op,
            "413",
            "`payload_too_large`: the body is over this route's limit",
        );
        if json {
            add(
                op,
                "415",
                "`unsupported_media_type`: the body is not `application/json`",
            );
            add(
                op,
                "422",
                "`invalid_request`: the JSON does not match the schema",
            );
        }
    }
}

/// Adds an error answer unless the route documents that status itself.
fn add(op: &mut utoipa::openapi::path::Operation, status: &str, description: &str) {
    use utoipa::openapi::ResponseBuilder;
    op.responses
        .responses
        .entry(status.to_string())
        .or_insert_with(|| {
            ResponseBuilder::new()
                .description(description)
                .content("application/json", error_content())
                .build()
                .into()
        });
}

/// `application/json` holding an [`ErrorBody`].
fn error_content() -> utoipa::openapi::Content {
    use utoipa::openapi::{ContentBuilder, Ref};
    ContentBuilder::new()
        .schema(Some(Ref::from_schema_name("ErrorBody")))
        .build()
}

/// `GET /api/cluster/relay`: a websocket between replicas, documented by
/// hand since it is not an axum handler with a body (the relay secret in
/// a header, not a key).
struct Relay;

impl utoipa::Modify for Relay {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::path::{HttpMethod, OperationBuilder, ParameterBuilder, ParameterIn};
        use utoipa::openapi::security::SecurityRequirement;
        use utoipa::openapi::{PathItem, Required, ResponseBuilder};
        let param = |name: &str, description: &str| {
            ParameterBuilder::new()
                .name(name)
                .parameter_in(ParameterIn::Query)
                .required(Required::True)
                .description(Some(description))
                .schema(Some(
                    utoipa::openapi::ObjectBuilder::new()
                        .schema_type(utoipa::openapi::Type::String),
                ))
                .build()
        };
        let operation = OperationBuilder::new()
            .tag("cluster")
            .description(Some(
                "Another replica of this cluster asks for a stream on a worker session held \
                 here; the answer is a websocket carrying the stream. Only replicas (holding \
                 the cluster's relay secret) may ask.",
            ))
            .parameter(param("node", "the node whose session is held here"))
            .parameter(param("lane", "`inference` or `bulk`"))
            .parameter(param("service", "the worker's stream service"))
            .security(SecurityRequirement::new(
                "relay_secret",
                Vec::<String>::new(),
            ))
            .response(
                "101",
                ResponseBuilder::new().description("switching to the websocket"),
            )
            .build();
        openapi.paths.paths.insert(
            "/api/cluster/relay".into(),
            PathItem::new(HttpMethod::Get, operation),
        );
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
