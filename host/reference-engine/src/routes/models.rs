//! `GET /v1/models`.

use axum::Json;
use axum::extract::State;

use crate::openai::ApiError;
use crate::openai::response::{ModelCard, ModelList};
use crate::state::EngineState;

/// The one model served.
pub async fn list(State(state): State<EngineState>) -> Result<Json<ModelList>, ApiError> {
    let model = state.model().ok_or(ApiError::Loading)?;
    Ok(Json(ModelList {
        object: "list",
        data: vec![ModelCard {
            id: model.name.clone(),
            object: "model",
            created: model.created,
            owned_by: "switchyard",
        }],
    }))
}
