//! Request errors and their one mapping to HTTP: an OpenAI-style body
//! `{"error": {"message", "type", "param", "code"}}` with a stable `code`.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// An error answered to a client.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ApiError {
    /// The body is not valid JSON or a field is missing, of the wrong type or out of range.
    #[error("{message}")]
    InvalidRequest {
        /// What is wrong, for a person.
        message: String,
        /// The offending field, when one is to blame.
        param: Option<String>,
    },
    /// The request names a model this engine does not serve.
    #[error("the model `{requested}` does not exist: this engine serves `{served}`")]
    ModelNotFound {
        /// The `model` of the request.
        requested: String,
        /// The model this engine serves.
        served: String,
    },
    /// As many requests as `max_concurrency` are being served.
    #[error("the engine is serving {limit} requests, its limit; retry in a second")]
    AtCapacity {
        /// The configured `max_concurrency`.
        limit: usize,
    },
    /// The model file is still being hashed.
    #[error("the model is still loading")]
    Loading,
    /// No route matches the path.
    #[error("no route for {0}")]
    NoRoute(String),
}

impl ApiError {
    /// A 400 blaming `param`.
    pub fn invalid(param: &str, message: impl Into<String>) -> Self {
        Self::InvalidRequest {
            message: message.into(),
            param: Some(param.to_owned()),
        }
    }

    /// The HTTP status of this error.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::InvalidRequest { .. } => StatusCode::BAD_REQUEST,
            Self::ModelNotFound { .. } | Self::NoRoute(_) => StatusCode::NOT_FOUND,
            Self::AtCapacity { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::Loading => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// OpenAI's `type`.
    pub fn error_type(&self) -> &'static str {
        match self {
            Self::InvalidRequest { .. } | Self::ModelNotFound { .. } | Self::NoRoute(_) => {
                "invalid_request_error"
            }
            Self::AtCapacity { .. } => "rate_limit_error",
            Self::Loading => "service_unavailable_error",
        }
    }

    /// The stable machine-readable `code`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidRequest { .. } => "invalid_request",
            Self::ModelNotFound { .. } => "model_not_found",
            Self::AtCapacity { .. } => "engine_at_capacity",
            Self::Loading => "model_loading",
            Self::NoRoute(_) => "not_found",
        }
    }

    fn param(&self) -> Option<&str> {
        match self {
            Self::InvalidRequest { param, .. } => param.as_deref(),
            Self::ModelNotFound { .. } => Some("model"),
            _ => None,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"error": {
            "message": self.to_string(),
            "type": self.error_type(),
            "param": self.param(),
            "code": self.code(),
        }});
        let mut response = (self.status(), Json(body)).into_response();
        if matches!(self, Self::AtCapacity { .. } | Self::Loading) {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}
