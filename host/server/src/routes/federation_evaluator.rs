//! The cluster's grant evaluator: bind one (a new generation), show it
//! with its history and each replica's status, roll it back. The
//! mechanism is the admission chains' (`switchyard_binding::grant_evaluator`).

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use switchyard_protocol::admin::{Rollback, SetEvaluator};
use switchyard_protocol::generations::{EvaluatorGeneration, EvaluatorStatus, Generation};

use crate::auth::{Admin, Authorized, FederationManage};
use crate::error::ApiResult;
use crate::extract::ApiJson;
use crate::state::AppState;
use switchyard_binding::grant_evaluator::{EvaluatorBinding, HISTORY, POINT, SHIPPED};

/// Binds the cluster's grant evaluator: a new generation. The component
/// is loaded and its settings validated here first; nothing is stored
/// unless that passes, and the generation in force keeps serving.
#[utoipa::path(put, path = "/api/federation/evaluator", tag = "federation",
    request_body = SetEvaluator,
    responses(
        (status = 200, body = Generation, description = "The new generation"),
        (status = 401, description = "`unauthorized`"),
        (status = 403, description = "`forbidden`: the key lacks `admin`"),
        (status = 404, description = "`plugin_not_found`"),
        (status = 422, description = "`invalid_settings` (the plugin's own message), `wrong_kind` (not a grant evaluator), or `invalid_request`; where grant evaluators require signatures (`require_signed`), `signature_required` (unsigned) or `untrusted_signature` (signed by a key not, or no longer, trusted)"),
    ))]
pub async fn set(
    caller: Authorized<Admin>,
    State(state): State<Arc<AppState>>,
    ApiJson(body): ApiJson<SetEvaluator>,
) -> ApiResult<Json<Generation>> {
    let evaluator = &state.grant_evaluator;
    let entry = evaluator
        .resolve(EvaluatorBinding {
            plugin: body.plugin,
            version: body.version,
            settings: body.settings,
        })
        .await?;
    let generation = evaluator
        .generations()
        .commit(&[entry], "set", &caller.key_id)
        .await?;
    tracing::info!(generation = generation.generation, by = %caller.key_id, "grant evaluator bound");
    Ok(Json(generation))
}

/// The evaluator in force (generation 0: the shipped `grant-standard` with
/// `{}` settings), the newest generations, and what each replica serves.
#[utoipa::path(get, path = "/api/federation/evaluator", tag = "federation",
    responses(
        (status = 200, body = EvaluatorStatus, description = "The evaluator in force, its history, and what each replica serves"),
        (status = 401, description = "`unauthorized`"),
        (status = 403, description = "`forbidden`: the key lacks `federation:manage` and `admin`"),
    ))]
pub async fn show(
    _caller: Authorized<FederationManage>,
    State(state): State<Arc<AppState>>,
) -> ApiResult<Json<EvaluatorStatus>> {
    let evaluator = &state.grant_evaluator;
    let latest = state.store.latest_generation(POINT).await?;
    let history = state.store.generations(POINT, HISTORY).await?;
    let replicas = evaluator.replicas(latest.generation).await?;
    let (signers, trust_warnings) =
        switchyard_binding::signing::signers(&state.store, &latest.policies).await?;
    let mut status = EvaluatorStatus {
        current: summary(&latest),
        shipped: latest.policies.is_empty(),
        sha256: None,
        settings: serde_json::json!({}),
        signature: signers.into_iter().next().flatten(),
        trust_warnings,
        error: None,
        history: history.iter().map(summary).collect(),
        replicas,
    };
    // What it binds, spelled out even when it binds the shipped evaluator
    // by default.
    match state.grant_evaluator.bound(&latest).await {
        Ok(entry) => {
            status.current.plugin = entry.plugin;
            status.current.version = Some(entry.version);
            status.sha256 = Some(entry.sha256);
            status.settings = entry.settings;
        }
        // Generation 0 with no grant-standard in the registry: say so
        // rather than fail the whole status.
        Err(e) => {
            status.current.plugin = SHIPPED.into();
            status.current.version = None;
            status.error = Some(e.to_string());
        }
    }
    Ok(Json(status))
}

/// A new generation with an older binding: the one before the generation
/// whose binding is in force, or the one named in the body (0: the shipped
/// evaluator).
#[utoipa::path(post, path = "/api/federation/evaluator/rollback", tag = "federation",
    request_body(content = Rollback, description = "optional: `{generation}` to restore"),
    responses(
        (status = 200, body = Generation, description = "The new generation"),
        (status = 400, description = "`invalid_request`: the target is not older than the newest generation"),
        (status = 401, description = "`unauthorized`"),
        (status = 403, description = "`forbidden`: the key lacks `admin`"),
        (status = 404, description = "`not_found`: no such generation"),
        (status = 409, description = "`nothing_to_rollback`: nothing was ever bound, or the shipped evaluator of generation 0 is in force already"),
        (status = 422, description = "`invalid_settings`: the restored binding no longer loads here; `signature_required` or `untrusted_signature`: grant evaluators require signatures and the restored one is unsigned or signed by a key not (or no longer) trusted"),
    ))]
pub async fn rollback(
    caller: Authorized<Admin>,
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Json<Generation>> {
    let wanted = if body.is_empty() {
        Rollback::default()
    } else {
        ApiJson::<Rollback>::parse(&headers, &body)?.0
    };
    let (generation, restored) = state
        .grant_evaluator
        .generations()
        .roll_back(wanted.generation, &caller.key_id)
        .await?;
    tracing::info!(generation = generation.generation, to = restored, by = %caller.key_id, "grant evaluator rolled back");
    Ok(Json(generation))
}

/// One line of the history.
fn summary(generation: &Generation) -> EvaluatorGeneration {
    let entry = generation.policies.first();
    EvaluatorGeneration {
        generation: generation.generation,
        plugin: entry.map_or(SHIPPED, |e| e.plugin.as_str()).to_string(),
        version: entry.map(|e| e.version.clone()),
        note: generation.note.clone(),
        created_by: generation.created_by.clone(),
        created_at: generation.created_at.clone(),
    }
}
