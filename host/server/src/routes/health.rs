//! Liveness and readiness.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::state::AppState;

/// Always 200 while the process serves HTTP.
#[utoipa::path(get, path = "/healthz", tag = "health", responses((status = 200, description = "The process is up")))]
pub async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// 200 when the database answers and admission has synced; 503 naming what is not ready.
#[utoipa::path(get, path = "/readyz", tag = "health", responses(
    (status = 200, description = "Ready"),
    (status = 503, description = "Not ready; `not_ready` names what", example = json!({"ready": false, "not_ready": ["database"]})),
))]
pub async fn readyz(State(state): State<Arc<AppState>>) -> (StatusCode, Json<Value>) {
    let mut not_ready = Vec::new();
    if state.store.ping().await.is_err() {
        not_ready.push("database");
    }
    if !state.admission_synced.load(Ordering::Relaxed) {
        not_ready.push("admission");
    }
    match not_ready.is_empty() {
        true => (StatusCode::OK, Json(json!({"ready": true}))),
        false => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"ready": false, "not_ready": not_ready})),
        ),
    }
}
