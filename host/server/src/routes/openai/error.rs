//! A `/v1` request's failure as a response: the one answer the inference
//! core gives each [`InferenceError`] ([`InferenceError::answer`]), as the
//! edge sends it.

#[cfg(test)]
use switchyard_inference::InferenceError;

#[cfg(test)]
mod tests {
    use axum::http::{StatusCode, header};
    use serde_json::{Value, json};
    use switchyard_carrier::Refusal;
    use switchyard_runtime::admission::POLICY_ERROR_CODE;

    use super::*;
    use crate::auth::MissingScope;
    use switchyard_inference::POLICY_FAILED_MESSAGE;
    use switchyard_scheduler::routing::NoRoute;

    /// Status, `Retry-After`, and the body.
    async fn answer(error: InferenceError) -> (StatusCode, Option<String>, Value) {
        let response = super::super::respond(error.answer());
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
                InferenceError::Invalid("`model` is required".into()),
                StatusCode::BAD_REQUEST,
                None,
                json!({"error": {"code": "invalid_request", "message": "`model` is required"}}),
            ),
            (
                InferenceError::NoRoute {
                    why: NoRoute::UnknownModel,
                    model: model(),
                },
                StatusCode::NOT_FOUND,
                None,
                json!({"error": {"code": "model_not_found", "message": "no deployment serves `demo`"}}),
            ),
            (
                InferenceError::NoRoute {
                    why: NoRoute::Cold,
                    model: model(),
                },
                StatusCode::SERVICE_UNAVAILABLE,
                Some("5"),
                json!({"error": {"code": "model_loading",
                    "message": "the model is deployed but no replica is ready yet"}}),
            ),
            (
                InferenceError::NoRoute {
                    why: NoRoute::Busy,
                    model: model(),
                },
                StatusCode::TOO_MANY_REQUESTS,
                Some("1"),
                json!({"error": {"code": "replicas_busy",
                    "message": "every replica of this model is at its concurrency limit"}}),
            ),
            (
                InferenceError::NoCarrier,
                StatusCode::SERVICE_UNAVAILABLE,
                None,
                json!({"error": {"code": "carrier_unavailable", "message": "no carrier set"}}),
            ),
            (
                InferenceError::Broken("eof".into()),
                StatusCode::BAD_GATEWAY,
                None,
                json!({"error": {"code": "stream_reset", "message": "eof"}}),
            ),
            (
                InferenceError::Denied {
                    code: "max_tokens".into(),
                    message: "too many".into(),
                },
                StatusCode::FORBIDDEN,
                None,
                json!({"error": {"code": "max_tokens", "message": "too many"}}),
            ),
            (
                InferenceError::Internal("a secret detail".into()),
                StatusCode::INTERNAL_SERVER_ERROR,
                None,
                json!({"error": {"code": "internal", "message": "internal error; see the server log"}}),
            ),
            (
                InferenceError::Forbidden(MissingScope("inference".into())),
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
            let (got, retry_after, body) = answer(InferenceError::from(refusal)).await;
            assert_eq!(
                (got, retry_after.is_some(), body["error"]["code"].as_str()),
                (status, retry, Some(expected))
            );
        }
    }

    #[tokio::test]
    async fn a_failed_policys_details_stay_in_the_log() {
        let detail = "policy panic@1 failed: wasm trap: unreachable at 0x1f2e";
        let (status, _, body) = answer(InferenceError::denied(
            POLICY_ERROR_CODE.into(),
            detail.into(),
            "key_1",
        ))
        .await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        assert_eq!(body["error"]["code"], POLICY_ERROR_CODE);
        assert_eq!(body["error"]["message"], POLICY_FAILED_MESSAGE);
        // A policy's own denial reaches the client as written.
        let (_, _, body) = answer(InferenceError::denied(
            "max_tokens".into(),
            "max_tokens must be at most 4096".into(),
            "key_1",
        ))
        .await;
        assert_eq!(body["error"]["message"], "max_tokens must be at most 4096");
    }
}
