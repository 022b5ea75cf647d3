//! `GET /health`.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::state::EngineState;

/// 200 `{"status": "ok"}` once the model is loaded, 503 `{"status": "loading"}` before.
pub async fn health(State(state): State<EngineState>) -> (StatusCode, Json<Value>) {
    match state.model() {
        Some(_) => (StatusCode::OK, Json(json!({"status": "ok"}))),
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "loading"})),
        ),
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    use super::*;
    use crate::config::ReferenceConfig;
    use crate::model::Model;
    use crate::router;

    #[tokio::test]
    async fn unavailable_until_the_model_is_loaded() {
        let state = EngineState::loading(&ReferenceConfig::new("unused"));
        let app = router(state.clone());
        let get = || Request::get("/health").body(Body::empty()).unwrap();

        let loading = app.clone().oneshot(get()).await.unwrap();
        assert_eq!(loading.status(), StatusCode::SERVICE_UNAVAILABLE);
        let models = app
            .clone()
            .oneshot(Request::get("/v1/models").body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(models.status(), StatusCode::SERVICE_UNAVAILABLE);

        state.set_loaded(Model {
            name: "m".into(),
            digest: [0; 32],
            created: 0,
        });
        assert_eq!(app.oneshot(get()).await.unwrap().status(), StatusCode::OK);
    }
}
