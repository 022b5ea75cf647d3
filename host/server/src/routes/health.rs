//! Liveness and readiness.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use switchyard_protocol::health::{Liveness, Readiness};

use crate::state::AppState;

/// Always 200 while the process serves HTTP.
#[utoipa::path(get, path = "/healthz", tag = "health", responses((status = 200, description = "The process is up", body = Liveness)))]
pub async fn healthz() -> Json<Liveness> {
    Json(Liveness {
        status: "ok".into(),
    })
}

/// 200 when the database answers and admission has synced; 503 naming what is not ready.
#[utoipa::path(get, path = "/readyz", tag = "health", responses(
    (status = 200, description = "Ready", body = Readiness),
    (status = 503, description = "Not ready; `not_ready` names what", body = Readiness, example = json!({"ready": false, "not_ready": ["database"]})),
))]
pub async fn readyz(State(state): State<Arc<AppState>>) -> (StatusCode, Json<Readiness>) {
    let mut not_ready = Vec::new();
    if state.store.ping().await.is_err() {
        not_ready.push("database");
    }
    if !state.admission.synced() {
        not_ready.push("admission");
    }
    let ready = not_ready.is_empty();
    let status = match ready {
        true => StatusCode::OK,
        false => StatusCode::SERVICE_UNAVAILABLE,
    };
    let not_ready = not_ready.into_iter().map(String::from).collect();
    (status, Json(Readiness { ready, not_ready }))
}
