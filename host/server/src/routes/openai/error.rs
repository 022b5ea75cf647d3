//! Every way a `/v1` request fails before the engine's answer, mapped once
//! to a status, a stable code and a body.
//!
//! The body is the API's `{"error":{"code","message"}}` (a denial's code
//! is the policy's own; a retryable answer has `Retry-After`); every `/v1`
//! error then gains OpenAI's `type` and `param` (`error_shape`).

use axum::Json;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use switchyard_carrier::Refusal;
use switchyard_runtime::admission::POLICY_ERROR_CODE;

use crate::auth::AuthError;
use crate::error::ApiError;
use crate::routing::NoRoute;

/// The message a client gets when a policy failed (trapped, ran out of
/// time or memory) under fail-closed.
pub const POLICY_FAILED_MESSAGE: &str = "the request was refused because an admission policy failed; the operator can find why in the server log";

/// Seconds a client is told to wait while a model loads.
const LOADING_RETRY_AFTER: u32 = 5;
/// Seconds a client is told to wait for a free slot or a route.
const BUSY_RETRY_AFTER: u32 = 1;

/// Why a `/v1` request got no answer from an engine.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// The caller may not use `/v1`.
    #[error(transparent)]
    Auth(#[from] AuthError),
    /// The body cannot be admitted (400 `invalid_request`).
    #[error("{0}")]
    Invalid(String),
    /// A field the frontend reads has the wrong type or range (400
    /// `invalid_request`, with the field as OpenAI's `param`).
    #[error("{message}")]
    InvalidField {
        /// The field, as the client named it.
        param: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// The `inference` chain said no (403, the policy's code).
    #[error("{message}")]
    Denied {
        /// The policy's code, or [`POLICY_ERROR_CODE`].
        code: String,
        /// What the client is told.
        message: String,
    },
    /// No replica was chosen.
    #[error("{why:?} for model `{model}`")]
    NoRoute {
        /// Why.
        why: NoRoute,
        /// The model asked for.
        model: String,
    },
    /// This replica has no carrier set (503 `carrier_unavailable`).
    #[error("no carrier set")]
    NoCarrier,
    /// The carrier could not open the stream, or the worker refused it.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// The stream broke before the answer's head (502 `stream_reset`).
    #[error("{0}")]
    Broken(String),
    /// A remote model's call did not go ahead on this side: no grant, the
    /// link down (503 `NODE_UNAVAILABLE`), federation suspended.
    #[error("{}", .0.message)]
    Federation(switchyard_federation::FederationError),
    /// A bug here (500 `internal`; the detail goes to the log).
    #[error("{0}")]
    Internal(String),
}

impl ProxyError {
    /// An internal error from anything displayable.
    pub fn internal(error: impl std::fmt::Display) -> Self {
        Self::Internal(error.to_string())
    }

    /// A denial. A policy's own denial is its business answer and goes to
    /// the client as the policy wrote it; a failed policy's details (a
    /// trap's backtrace, the plugin's name and limits) are the operator's,
    /// so they go to the log and the client gets the stable code with a
    /// generic message.
    pub fn denied(code: String, message: String, key_id: &str) -> Self {
        if code != POLICY_ERROR_CODE {
            return Self::Denied { code, message };
        }
        tracing::warn!(key = %key_id, detail = %message, "inference refused: an admission policy failed");
        Self::Denied {
            code,
            message: POLICY_FAILED_MESSAGE.into(),
        }
    }

    /// The stable code the client gets (also a span's `outcome`).
    pub fn code(&self) -> &str {
        match self {
            // `require` fails only for a missing scope; the extractor
            // answered the others before the handler ran.
            Self::Auth(AuthError::MissingScope(_)) => "forbidden",
            Self::Auth(_) => "unauthorized",
            Self::Invalid(_) | Self::InvalidField { .. } => "invalid_request",
            Self::Denied { code, .. } => code,
            Self::NoRoute { why, .. } => match why {
                NoRoute::UnknownModel => "model_not_found",
                NoRoute::Cold => "model_loading",
                NoRoute::Busy => "replicas_busy",
            },
            Self::NoCarrier => "carrier_unavailable",
            // The carrier's answers stay apart from the worker's: no route
            // to the worker (503, try again), the worker at its stream limit
            // (429), or the worker's own refusal (502).
            Self::Refused(Refusal::NotDelivered(_)) => "replica_unreachable",
            // During a carrier change: the worker is attached to no set
            // this replica runs yet (503, try again).
            Self::Refused(Refusal::NoRoute(_)) => "no_route",
            Self::Refused(Refusal::Overloaded) => "worker_overloaded",
            Self::Refused(Refusal::UnknownService | Refusal::ServiceRefused(_)) => "worker_refused",
            Self::Broken(_) => "stream_reset",
            Self::Federation(e) => &e.code,
            Self::Internal(_) => "internal",
        }
    }

    /// The status, and the seconds of a `Retry-After` when trying again helps.
    fn status(&self) -> (StatusCode, Option<u32>) {
        match self {
            Self::Auth(_) | Self::Internal(_) => unreachable!("answered as an ApiError"),
            Self::Invalid(_) | Self::InvalidField { .. } => (StatusCode::BAD_REQUEST, None),
            Self::Denied { .. } => (StatusCode::FORBIDDEN, None),
            Self::NoRoute { why, .. } => match why {
                NoRoute::UnknownModel => (StatusCode::NOT_FOUND, None),
                NoRoute::Cold => (StatusCode::SERVICE_UNAVAILABLE, Some(LOADING_RETRY_AFTER)),
                NoRoute::Busy => (StatusCode::TOO_MANY_REQUESTS, Some(BUSY_RETRY_AFTER)),
            },
            Self::NoCarrier => (StatusCode::SERVICE_UNAVAILABLE, None),
            Self::Refused(Refusal::NotDelivered(_) | Refusal::NoRoute(_)) => {
                (StatusCode::SERVICE_UNAVAILABLE, Some(BUSY_RETRY_AFTER))
            }
            Self::Refused(Refusal::Overloaded) => {
                (StatusCode::TOO_MANY_REQUESTS, Some(BUSY_RETRY_AFTER))
            }
            Self::Refused(_) | Self::Broken(_) => (StatusCode::BAD_GATEWAY, None),
            Self::Federation(e) => (
                StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_GATEWAY),
                None,
            ),
        }
    }

    /// What the client reads.
    fn message(&self) -> String {
        match self {
            Self::NoRoute { why, model } => match why {
                NoRoute::UnknownModel => format!("no deployment serves `{model}`"),
                NoRoute::Cold => "the model is deployed but no replica is ready yet".into(),
                NoRoute::Busy => "every replica of this model is at its concurrency limit".into(),
            },
            other => other.to_string(),
        }
    }
}

impl IntoResponse for ProxyError {
    fn into_response(self) -> Response {
        match self {
            Self::Auth(e) => return ApiError::from(e).into_response(),
            Self::Internal(detail) => return ApiError::internal(detail).into_response(),
            _ => {}
        }
        let (status, retry_after) = self.status();
        let message = self.message();
        let code = self.code();
        // OpenAI's `type` and `param` are added to every `/v1` error in one
        // place (`error_shape`).
        let body = match &self {
            Self::InvalidField { param, .. } => {
                json!({"error": {"code": code, "message": message, "param": param}})
            }
            _ => json!({"error": {"code": code, "message": message}}),
        };
        let mut response = (status, Json(body)).into_response();
        if let Some(seconds) = retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, seconds.into());
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    /// Status, `Retry-After`, and the body.
    async fn answer(error: ProxyError) -> (StatusCode, Option<String>, Value) {
        let response = error.into_response();
        let status = response.status();
        let retry = response
            .headers()
            .get(header::RETRY_AFTER)
            .map(|v| v.to_str().unwrap().to_string());
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, retry, serde_json::from_slice(&body).unwrap())
    }

    #[tokio::test]
    async fn each_error_has_one_status_code_and_body_shape() {
        let model = || "demo".to_string();
        let cases = [
            (
                ProxyError::Invalid("`model` is required".into()),
                StatusCode::BAD_REQUEST,
                None,
                json!({"error": {"code": "invalid_request", "message": "`model` is required"}}),
            ),
            (
                ProxyError::NoRoute {
                    why: NoRoute::UnknownModel,
                    model: model(),
                },
                StatusCode::NOT_FOUND,
                None,
                json!({"error": {"code": "model_not_found", "message": "no deployment serves `demo`"}}),
            ),
            (
                ProxyError::NoRoute {
                    why: NoRoute::Cold,
                    model: model(),
                },
                StatusCode::SERVICE_UNAVAILABLE,
                Some("5"),
                json!({"error": {"code": "model_loading",
                    "message": "the model is deployed but no replica is ready yet"}}),
            ),
            (
                ProxyError::NoRoute {
                    why: NoRoute::Busy,
                    model: model(),
                },
                StatusCode::TOO_MANY_REQUESTS,
                Some("1"),
                json!({"error": {"code": "replicas_busy",
                    "message": "every replica of this model is at its concurrency limit"}}),
            ),
            (
                ProxyError::NoCarrier,
                StatusCode::SERVICE_UNAVAILABLE,
                None,
                json!({"error": {"code": "carrier_unavailable", "message": "no carrier set"}}),
            ),
            (
                ProxyError::Broken("eof".into()),
                StatusCode::BAD_GATEWAY,
                None,
                json!({"error": {"code": "stream_reset", "message": "eof"}}),
            ),
            (
                ProxyError::Denied {
                    code: "max_tokens".into(),
                    message: "too many".into(),
                },
                StatusCode::FORBIDDEN,
                None,
                json!({"error": {"code": "max_tokens", "message": "too many"}}),
            ),
            (
                ProxyError::Internal("a secret detail".into()),
                StatusCode::INTERNAL_SERVER_ERROR,
                None,
                json!({"error": {"code": "internal", "message": "internal error; see the server log"}}),
            ),
            (
                ProxyError::Auth(AuthError::MissingScope("inference".into())),
                StatusCode::FORBIDDEN,
                None,
                json!({"error": {"code": "forbidden",
                    "message": "this key lacks the 'inference' scope"}}),
            ),
        ];
        for (error, status, retry, body) in cases {
            let shown = format!("{error:?}");
            assert_eq!(
                answer(error).await,
                (status, retry.map(String::from), body),
                "{shown}"
            );
        }
    }

    #[tokio::test]
    async fn the_carriers_answers_stay_apart_from_the_workers() {
        let cases = [
            (
                Refusal::NotDelivered("no session".into()),
                StatusCode::SERVICE_UNAVAILABLE,
                true,
                "replica_unreachable",
            ),
            (
                Refusal::Overloaded,
                StatusCode::TOO_MANY_REQUESTS,
                true,
                "worker_overloaded",
            ),
            (
                Refusal::UnknownService,
                StatusCode::BAD_GATEWAY,
                false,
                "worker_refused",
            ),
            (
                Refusal::ServiceRefused("no".into()),
                StatusCode::BAD_GATEWAY,
                false,
                "worker_refused",
            ),
        ];
        for (refusal, status, retry, expected) in cases {
            let (got, retry_after, body) = answer(ProxyError::from(refusal)).await;
            assert_eq!(
                (got, retry_after.is_some(), body["error"]["code"].as_str()),
                (status, retry, Some(expected))
            );
        }
    }

    #[tokio::test]
    async fn a_failed_policys_details_stay_in_the_log() {
        let detail = "policy panic@1 failed: wasm trap: unreachable at 0x1f2e";
        let (status, _, body) = answer(ProxyError::denied(
            POLICY_ERROR_CODE.into(),
            detail.into(),
            "key_1",
        ))
        .await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        assert_eq!(body["error"]["code"], POLICY_ERROR_CODE);
        assert_eq!(body["error"]["message"], POLICY_FAILED_MESSAGE);
        // A policy's own denial reaches the client as written.
        let (_, _, body) = answer(ProxyError::denied(
            "max_tokens".into(),
            "max_tokens must be at most 4096".into(),
            "key_1",
        ))
        .await;
        assert_eq!(body["error"]["message"], "max_tokens must be at most 4096");
    }
}
