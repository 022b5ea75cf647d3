//! Admission chains: set, show, roll back, and the dry-run evaluation.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};
use switchyard_runtime::admission::{AdmissionPoint, AdmissionRequest};
use switchyard_store::admission::{StoredPolicy, rollback_note, rolled_back_to};

use crate::admission::{parse_fail, parse_mode};
use crate::auth::{Admin, Authorized};
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiJson, ApiPath};
use crate::state::AppState;

/// A new chain for a point.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct SetChain {
    /// The policies, in order: the first enforced deny wins.
    pub policies: Vec<PolicyBinding>,
}

/// One policy of a chain.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct PolicyBinding {
    /// Plugin name.
    pub plugin: String,
    /// Plugin version.
    pub version: String,
    /// Settings, checked by the plugin's own `validate-settings`.
    #[serde(default = "empty_object")]
    #[schema(value_type = Object)]
    pub settings: Value,
    /// `enforce` (default) or `monitor`.
    #[serde(default = "enforce")]
    pub mode: String,
    /// `closed` (default) or `open`.
    #[serde(default = "closed")]
    pub fail: String,
}

fn empty_object() -> Value {
    json!({})
}
fn enforce() -> String {
    "enforce".into()
}
fn closed() -> String {
    "closed".into()
}

fn point(name: &str) -> ApiResult<AdmissionPoint> {
    AdmissionPoint::parse(name).ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "unknown_point",
            format!("no admission point '{name}'; points: inference, deploy, transfer, federation"),
        )
    })
}

/// Replaces a point's chain with a new generation. Every policy is loaded and
/// its settings validated here first; nothing is stored unless all pass.
#[utoipa::path(put, path = "/api/admission/{point}", tag = "admission",
    params(("point" = String, Path, description = "inference, deploy, transfer or federation")),
    request_body = SetChain,
    responses(
        (status = 200, description = "The new generation"),
        (status = 404, description = "`unknown_point` or `plugin_not_found`"),
        (status = 422, description = "`invalid_settings` (the plugin's own message), `point_not_supported`, `wrong_kind`"),
    ))]
pub async fn set(
    caller: Authorized<Admin>,
    State(state): State<Arc<AppState>>,
    ApiPath(point_name): ApiPath<String>,
    ApiJson(body): ApiJson<SetChain>,
) -> ApiResult<Json<Value>> {
    let point = point(&point_name)?;
    let mut policies = Vec::with_capacity(body.policies.len());
    for binding in body.policies {
        parse_mode(&binding.mode)?;
        parse_fail(&binding.fail)?;
        let record = state
            .store
            .plugin(&binding.plugin, &binding.version)
            .await?
            .ok_or_else(|| {
                ApiError::new(
                    StatusCode::NOT_FOUND,
                    "plugin_not_found",
                    format!("no plugin {}@{}", binding.plugin, binding.version),
                )
            })?;
        if record.kind != "policy" {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "wrong_kind",
                format!(
                    "{}@{} is a {} plugin, not an admission policy",
                    record.name, record.version, record.kind
                ),
            ));
        }
        policies.push(StoredPolicy {
            plugin: record.name,
            version: record.version,
            sha256: record.sha256,
            settings: binding.settings,
            mode: binding.mode,
            fail: binding.fail,
        });
    }
    let generation = state
        .admission
        .commit(point, &policies, "set", &caller.key_id)
        .await?;
    tracing::info!(%point, generation = generation.generation, by = %caller.key_id, "admission chain set");
    Ok(Json(json!(generation)))
}

/// The chain, its generation, and what each replica serves.
#[utoipa::path(get, path = "/api/admission/{point}", tag = "admission",
    params(("point" = String, Path, description = "inference, deploy, transfer or federation")),
    responses((status = 200, description = "`{point, generation, policies, replicas: [{instance, generation, status, error}]}`"), (status = 404, description = "`unknown_point`")))]
pub async fn show(
    _caller: Authorized<Admin>,
    State(state): State<Arc<AppState>>,
    ApiPath(point_name): ApiPath<String>,
) -> ApiResult<Json<Value>> {
    let point = point(&point_name)?;
    let latest = state.store.latest_generation(point.as_str()).await?;
    let replicas = state
        .store
        .admission_replicas(point.as_str(), latest.generation)
        .await?;
    let mut body = json!(latest);
    body["replicas"] = json!(replicas);
    Ok(Json(body))
}

/// Where a rollback goes (the body is optional).
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
pub struct Rollback {
    /// The generation whose chain to restore; without it, the one before
    /// the generation whose chain is active.
    pub generation: Option<i64>,
}

/// A new generation with an older chain: the one before the generation whose
/// chain is active, or the one named in the body.
///
/// A rollback walks back: after `1, 2, 3`, the first rollback restores 2's
/// chain and the second 1's, not 3's again. (Undoing the last change, as
/// `kubectl rollout undo` does, flaps between two chains when repeated;
/// an operator who rolls back twice means two steps back.)
#[utoipa::path(post, path = "/api/admission/{point}/rollback", tag = "admission",
    params(("point" = String, Path, description = "inference, deploy, transfer or federation")),
    request_body(content = Rollback, description = "optional: `{generation}` to restore"),
    responses(
        (status = 200, description = "The new generation"),
        (status = 400, description = "`invalid_request`: the target is not older than the newest generation"),
        (status = 404, description = "`unknown_point`, or `not_found`: no such generation"),
        (status = 409, description = "`nothing_to_rollback`: no generation yet, or the active chain is the empty one of generation 0"),
    ))]
pub async fn rollback(
    caller: Authorized<Admin>,
    State(state): State<Arc<AppState>>,
    ApiPath(point_name): ApiPath<String>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let point = point(&point_name)?;
    let wanted = if body.is_empty() {
        Rollback::default()
    } else {
        ApiJson::<Rollback>::parse(&headers, &body)?.0
    };
    let latest = state.store.latest_generation(point.as_str()).await?;
    let nothing = |why: String| ApiError::new(StatusCode::CONFLICT, "nothing_to_rollback", why);
    if latest.generation == 0 {
        return Err(nothing(format!("the {point} point has no generation yet")));
    }
    let target = match wanted.generation {
        Some(target) if !(0..latest.generation).contains(&target) => {
            return Err(ApiError::invalid_request(format!(
                "a rollback restores an older generation: 0 to {}, got {target}",
                latest.generation - 1
            )));
        }
        Some(target) => target,
        None => {
            // The generation whose chain runs now: the newest, or the one it restored.
            let active = rolled_back_to(&latest.note).unwrap_or(latest.generation);
            if active == 0 {
                return Err(nothing(format!(
                    "the {point} point runs the empty chain of generation 0 already"
                )));
            }
            active - 1
        }
    };
    let previous = state
        .store
        .generation(point.as_str(), target)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("generation {target} of {point}")))?;
    let note = rollback_note(previous.generation);
    let generation = state
        .admission
        .commit(point, &previous.policies, &note, &caller.key_id)
        .await?;
    tracing::info!(%point, generation = generation.generation, to = previous.generation, by = %caller.key_id, "admission chain rolled back");
    Ok(Json(json!(generation)))
}

/// Dry run: evaluates a request record with the chain this replica serves.
#[utoipa::path(post, path = "/api/admission/{point}/evaluate", tag = "admission",
    params(("point" = String, Path, description = "inference, deploy, transfer or federation")),
    request_body(content = Object, description = "The point's request record (snake_case fields)",
        example = json!({"caller": {"key_id": "k1", "project": "demo", "scopes": ["inference"]}, "model": "demo-tiny", "endpoint": "/v1/chat/completions", "prompt_tokens": 12, "max_tokens": 9000, "stream": false})),
    responses(
        (status = 200, description = "`{decision, code?, message?, patch?, generation, request, steps: [{plugin, mode, decision, time_us, error?}]}`"),
        (status = 400, description = "`invalid_request`"),
        (status = 404, description = "`unknown_point`"),
    ))]
pub async fn evaluate(
    _caller: Authorized<Admin>,
    State(state): State<Arc<AppState>>,
    ApiPath(point_name): ApiPath<String>,
    ApiJson(body): ApiJson<Value>,
) -> ApiResult<Json<Value>> {
    let point = point(&point_name)?;
    let request = AdmissionRequest::from_json(point, body)
        .map_err(|e| ApiError::invalid_request(format!("not a {point} request record: {e}")))?;
    let chain = state.admission.chain(point);
    // A misbehaving policy may hold a call until its deadline: keep it off the async workers.
    let verdict = tokio::task::spawn_blocking(move || chain.evaluate(request))
        .await
        .map_err(ApiError::internal)?;
    Ok(Json(json!(verdict)))
}
