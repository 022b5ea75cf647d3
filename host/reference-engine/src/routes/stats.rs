//! `GET /stats`.

use axum::Json;
use axum::extract::State;

use crate::state::EngineState;
use crate::stats::StatsSnapshot;

/// The engine's counters and the last request body.
pub async fn stats(State(state): State<EngineState>) -> Json<StatsSnapshot> {
    Json(state.stats().snapshot())
}
