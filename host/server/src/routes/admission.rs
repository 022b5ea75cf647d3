//! Admission chains: set, show, roll back, and the dry-run evaluation.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use serde_json::Value;
use switchyard_protocol::admin::{Rollback, SetChain};
use switchyard_protocol::dry_run::DryRun;
use switchyard_protocol::generations::{ChainStatus, Generation, SignedComponent};
use switchyard_runtime::admission::AdmissionRequest;

use crate::auth::{Admin, Authorized};
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiJson, ApiPath};
use crate::state::AppState;
use switchyard_binding::admission::{Binding, point};

/// Replaces a point's chain with a new generation. Every policy is loaded and
/// its settings validated here first; nothing is stored unless all pass.
#[utoipa::path(put, path = "/api/admission/{point}", tag = "admission",
    params(("point" = String, Path, description = "inference, deploy, transfer or federation")),
    request_body = SetChain,
    responses(
        (status = 200, body = Generation, description = "The new generation"),
        (status = 404, description = "`unknown_point` or `plugin_not_found`"),
        (status = 422, description = "`invalid_settings` (the plugin's own message), `point_not_supported`, `wrong_kind`, or `invalid_request`: a `mode` or `fail` that is none of the above; where policies require signatures (`require_signed`), `signature_required` (an unsigned policy) or `untrusted_signature` (signed by a key not, or no longer, trusted)"),
    ))]
pub async fn set(
    caller: Authorized<Admin>,
    State(state): State<Arc<AppState>>,
    ApiPath(point_name): ApiPath<String>,
    ApiJson(body): ApiJson<SetChain>,
) -> ApiResult<Json<Generation>> {
    let point = point(&point_name)?;
    let bindings = body.policies.into_iter().map(Binding::from).collect();
    let policies = state.admission.resolve(bindings).await?;
    let generation = state
        .admission
        .point(point)
        .commit(&policies, "set", &caller.key_id)
        .await?;
    tracing::info!(%point, generation = generation.generation, by = %caller.key_id, "admission chain set");
    Ok(Json(generation))
}

/// The chain, its generation, and what each replica serves. Each policy
/// carries its `signature` (`{key_id, key_name, trusted, trust}` or null);
/// `trust_warnings` names each policy that runs signed by a key no longer
/// (or never) trusted: it keeps running, but binding it again is refused
/// while policies require signatures.
#[utoipa::path(get, path = "/api/admission/{point}", tag = "admission",
    params(("point" = String, Path, description = "inference, deploy, transfer or federation")),
    responses((status = 200, body = ChainStatus, description = "The chain, each policy with its signer, and what each replica serves"), (status = 404, description = "`unknown_point`")))]
pub async fn show(
    _caller: Authorized<Admin>,
    State(state): State<Arc<AppState>>,
    ApiPath(point_name): ApiPath<String>,
) -> ApiResult<Json<ChainStatus>> {
    let point = point(&point_name)?;
    let latest = state.store.latest_generation(point.as_str()).await?;
    let replicas = state
        .store
        .admission_replicas(point.as_str(), latest.generation)
        .await?;
    let (signers, trust_warnings) =
        switchyard_binding::signing::signers(&state.store, &latest.policies).await?;
    let policies = latest
        .policies
        .into_iter()
        .zip(signers)
        .map(|(component, signature)| SignedComponent {
            component,
            signature,
        })
        .collect();
    Ok(Json(ChainStatus {
        point: latest.point,
        generation: latest.generation,
        policies,
        note: latest.note,
        created_by: latest.created_by,
        created_at: latest.created_at,
        trust_warnings,
        replicas,
    }))
}

/// A new generation with an older chain: the one before the generation whose
/// chain is active, or the one named in the body. Rollbacks walk back:
/// after generations 1, 2 and 3, the first restores 2's chain, the second 1's.
#[utoipa::path(post, path = "/api/admission/{point}/rollback", tag = "admission",
    params(("point" = String, Path, description = "inference, deploy, transfer or federation")),
    request_body(content = Rollback, description = "optional: `{generation}` to restore"),
    responses(
        (status = 200, body = Generation, description = "The new generation"),
        (status = 400, description = "`invalid_request`: the target is not older than the newest generation"),
        (status = 404, description = "`unknown_point`, or `not_found`: no such generation"),
        (status = 409, description = "`nothing_to_rollback`: no generation yet, or the active chain is the empty one of generation 0"),
        (status = 422, description = "`signature_required` or `untrusted_signature`: policies require signatures and a restored policy is unsigned or signed by a key not (or no longer) trusted"),
    ))]
pub async fn rollback(
    caller: Authorized<Admin>,
    State(state): State<Arc<AppState>>,
    ApiPath(point_name): ApiPath<String>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Json<Generation>> {
    let point = point(&point_name)?;
    let wanted = if body.is_empty() {
        Rollback::default()
    } else {
        ApiJson::<Rollback>::parse(&headers, &body)?.0
    };
    let (generation, restored) = state
        .admission
        .point(point)
        .roll_back(wanted.generation, &caller.key_id)
        .await?;
    tracing::info!(%point, generation = generation.generation, to = restored, by = %caller.key_id, "admission chain rolled back");
    Ok(Json(generation))
}

/// Dry run: evaluates a request record with the chain this replica serves.
#[utoipa::path(post, path = "/api/admission/{point}/evaluate", tag = "admission",
    params(("point" = String, Path, description = "inference, deploy, transfer or federation")),
    request_body(content = Object, description = "The point's request record (snake_case fields)",
        example = json!({"caller": {"key_id": "k1", "project": "demo", "scopes": ["inference"]}, "model": "demo-tiny", "endpoint": "/v1/chat/completions", "prompt_tokens": 12, "max_tokens": 9000, "stream": false})),
    responses(
        (status = 200, description = "The chain's answer and each policy's step", body = DryRun),
        (status = 400, description = "`invalid_request`"),
        (status = 404, description = "`unknown_point`"),
    ))]
pub async fn evaluate(
    _caller: Authorized<Admin>,
    State(state): State<Arc<AppState>>,
    ApiPath(point_name): ApiPath<String>,
    ApiJson(body): ApiJson<Value>,
) -> ApiResult<Json<DryRun>> {
    let point = point(&point_name)?;
    let request = AdmissionRequest::from_json(point, body)
        .map_err(|e| ApiError::invalid_request(format!("not a {point} request record: {e}")))?;
    let chain = state.admission.chain(point);
    let verdict = switchyard_binding::admission::evaluate(&chain, &request)
        .await
        .map_err(ApiError::internal)?;
    Ok(Json(switchyard_binding::admission::dry_run::answer(
        verdict,
    )))
}
