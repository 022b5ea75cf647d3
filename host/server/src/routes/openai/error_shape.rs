//! OpenAI's error shape on every `/v1` error: whatever answered (the
//! frontend's own refusal, an extractor's, authentication, a policy's
//! denial, a batch route, the owner of a federated job), the body's
//! `error` gains OpenAI's `type` (from the status, as OpenAI sorts its
//! errors) and `param` (the request field at fault, when one is), beside
//! the stable `code` and `message`. Clients that read `error.type` behave
//! as they do against OpenAI. One middleware rather than every error site
//! knowing OpenAI's words.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use serde_json::Value;

/// The largest error body rewritten; a larger one, or one of unknown
/// length, passes unchanged.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// OpenAI's `type` for an error answered with `status`.
pub fn error_type(status: StatusCode) -> &'static str {
    switchyard_protocol::openai::error_type(status.as_u16())
}

/// The request field an error code blames, as OpenAI's `param`.
fn param(code: &str) -> Option<&'static str> {
    match code {
        "model_not_found" => Some("model"),
        "invalid_endpoint" => Some("endpoint"),
        "invalid_completion_window" => Some("completion_window"),
        "invalid_metadata" => Some("metadata"),
        "invalid_purpose" => Some("purpose"),
        "file_not_found" | "invalid_file" => Some("input_file_id"),
        _ => None,
    }
}

/// Adds `type` and `param` to `body`'s `error`, when it has one.
fn shaped(status: StatusCode, body: &[u8]) -> Option<Vec<u8>> {
    let mut value: Value = serde_json::from_slice(body).ok()?;
    let error = value.get_mut("error")?.as_object_mut()?;
    let code = error
        .get("code")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let param = param(code);
    error.insert("type".into(), error_type(status).into());
    error
        .entry("param")
        .or_insert_with(|| param.map_or(Value::Null, Value::from));
    serde_json::to_vec(&value).ok()
}

/// Middleware on every route: a `/v1` answer of 400 and above with a JSON
/// `error` of known, small length gets OpenAI's `type` and `param`.
pub async fn openai_errors(request: Request, next: Next) -> Response {
    let v1 = request.uri().path().starts_with("/v1/");
    let response = next.run(request).await;
    let headers = response.headers();
    let json = headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    // This server's own answers say their length; a streamed body (an
    // engine's, a peer's) passes as it comes.
    let small = axum::body::HttpBody::size_hint(response.body())
        .exact()
        .is_some_and(|length| length <= MAX_ERROR_BODY as u64);
    if !v1 || !json || !small || response.status().as_u16() < 400 {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_ERROR_BODY).await {
        Ok(bytes) => bytes,
        Err(_) => return Response::from_parts(parts, Body::empty()),
    };
    match shaped(parts.status, &bytes) {
        Some(body) => {
            parts.headers.remove(header::CONTENT_LENGTH);
            if let Ok(length) = HeaderValue::from_str(&body.len().to_string()) {
                parts.headers.insert(header::CONTENT_LENGTH, length);
            }
            Response::from_parts(parts, Body::from(body))
        }
        None => Response::from_parts(parts, Body::from(bytes)),
    }
}

#[cfg(test)]
mod tests {
    use axum::Router;
    use axum::routing::get;
    use serde_json::json;

    use super::*;

    async fn call(app: Router, path: &str) -> (StatusCode, Value) {
        use tower::ServiceExt;
        let response = app
            .oneshot(Request::get(path).body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, serde_json::from_slice(&body).unwrap())
    }

    fn app(status: StatusCode, code: &'static str) -> Router {
        let answer = move || async move {
            (
                status,
                axum::Json(json!({"error": {"code": code, "message": "m"}})),
            )
        };
        Router::new()
            .route("/v1/x", get(answer))
            .route("/api/x", get(answer))
            .layer(axum::middleware::from_fn(openai_errors))
    }

    #[tokio::test]
    async fn each_v1_error_kind_gets_openai_s_type_and_param() {
        let cases = [
            (
                StatusCode::BAD_REQUEST,
                "invalid_request",
                "invalid_request_error",
                Value::Null,
            ),
            (
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "authentication_error",
                Value::Null,
            ),
            (
                StatusCode::FORBIDDEN,
                "deny-weekends",
                "permission_error",
                Value::Null,
            ),
            (
                StatusCode::NOT_FOUND,
                "model_not_found",
                "invalid_request_error",
                json!("model"),
            ),
            (
                StatusCode::TOO_MANY_REQUESTS,
                "replicas_busy",
                "rate_limit_error",
                Value::Null,
            ),
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "model_loading",
                "server_error",
                Value::Null,
            ),
        ];
        for (status, code, kind, param) in cases {
            let (answered, body) = call(app(status, code), "/v1/x").await;
            assert_eq!(answered, status);
            assert_eq!(
                body,
                json!({"error": {"code": code, "message": "m", "type": kind, "param": param}})
            );
        }
    }

    #[tokio::test]
    async fn other_routes_keep_the_api_s_shape() {
        let (_, body) = call(app(StatusCode::NOT_FOUND, "not_found"), "/api/x").await;
        assert_eq!(
            body,
            json!({"error": {"code": "not_found", "message": "m"}})
        );
    }
}
