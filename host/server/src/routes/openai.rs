//! The OpenAI-compatible API: `/v1/chat/completions`, `/v1/completions`,
//! `/v1/embeddings` and `/v1/models`, for keys with the `inference` scope.
//! Every request runs the `inference` admission chain (a denial is 403 with
//! the policy's code; a patch is applied to the body), then goes to the
//! least-loaded ready replica over the streams seam (inference lane); the
//! engine's answer, SSE included, streams back as it comes. Dropping the
//! client's connection resets the stream, which cancels the engine's work.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::{Value, json};
use switchyard_carrier::streams::Lane;
use switchyard_carrier::{Refusal, StreamError, StreamReader};
use switchyard_runtime::admission::{
    AdmissionPoint, AdmissionRequest, Decision, POLICY_ERROR_CODE, Patch,
};

use crate::auth::Caller;
use crate::error::ApiError;
use crate::routing::{Lease, NoRoute};
use crate::state::AppState;

/// The longest answer head a worker sends.
const MAX_HEAD: usize = 64 * 1024;

/// An error with a `Retry-After`.
fn retry_after(status: StatusCode, code: &'static str, message: &str, seconds: u32) -> Response {
    let body = json!({"error": {"code": code, "type": code, "message": message}});
    (
        status,
        [(header::RETRY_AFTER, seconds.to_string())],
        Json(body),
    )
        .into_response()
}

/// The models this cluster serves.
#[utoipa::path(get, path = "/v1/models", tag = "inference",
    responses((status = 200, description = "`{object: \"list\", data: [{id, object, created, owned_by}]}`")))]
pub async fn models(
    caller: Caller,
    State(state): State<Arc<AppState>>,
) -> Result<Json<Value>, ApiError> {
    caller.require("inference")?;
    let models = state.routing.models();
    let mut data: Vec<Value> = models
        .keys()
        .map(|name| json!({"id": name, "object": "model", "created": 0, "owned_by": "switchyard"}))
        .collect();
    data.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
    Ok(Json(json!({"object": "list", "data": data})))
}

/// Chat completions (streaming with `"stream": true`).
#[utoipa::path(post, path = "/v1/chat/completions", tag = "inference",
    request_body(content = Object, description = "an OpenAI chat completion request"),
    responses(
        (status = 200, description = "the engine's answer (JSON, or SSE when streaming)"),
        (status = 403, description = "the inference chain denied: the policy's code and message"),
        (status = 404, description = "`model_not_found`"),
        (status = 429, description = "`replicas_busy`: every replica at its limit, or `worker_overloaded`: the worker at its stream limit; Retry-After"),
        (status = 502, description = "`worker_refused`: the worker refused the stream; `stream_reset`: the stream broke before the answer's head"),
        (status = 503, description = "`model_loading`: no replica ready yet, or `replica_unreachable`: no route to its worker; Retry-After"),
    ))]
pub async fn chat(caller: Caller, State(state): State<Arc<AppState>>, body: Bytes) -> Response {
    proxy(caller, state, "/v1/chat/completions", body).await
}

/// Text completions.
#[utoipa::path(post, path = "/v1/completions", tag = "inference",
    request_body(content = Object, description = "an OpenAI completion request"),
    responses((status = 200, description = "the engine's answer")))]
pub async fn completions(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    body: Bytes,
) -> Response {
    proxy(caller, state, "/v1/completions", body).await
}

/// Embeddings.
#[utoipa::path(post, path = "/v1/embeddings", tag = "inference",
    request_body(content = Object, description = "an OpenAI embeddings request"),
    responses((status = 200, description = "the engine's answer")))]
pub async fn embeddings(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    body: Bytes,
) -> Response {
    proxy(caller, state, "/v1/embeddings", body).await
}

async fn proxy(caller: Caller, state: Arc<AppState>, path: &'static str, body: Bytes) -> Response {
    let mut model = None;
    let response = match forward(caller, state.clone(), path, body, &mut model).await {
        Ok(response) => response,
        Err(response) => response,
    };
    let label = crate::inference_metrics::model_label(model.as_deref(), |m| {
        state.routing.models().contains_key(m)
    });
    state.inference.answered(label, response.status().as_u16());
    response
}

/// Roughly four characters per token: what the chain is told the prompt costs.
fn estimate_prompt_tokens(body: &Value) -> u32 {
    let mut chars = 0usize;
    if let Some(messages) = body["messages"].as_array() {
        for message in messages {
            chars += match &message["content"] {
                Value::String(s) => s.len(),
                Value::Array(parts) => parts
                    .iter()
                    .filter_map(|p| p["text"].as_str())
                    .map(str::len)
                    .sum(),
                _ => 0,
            };
        }
    }
    chars += body["prompt"].as_str().map_or(0, str::len);
    chars += body["input"].as_str().map_or(0, str::len);
    (chars / 4).max(1) as u32
}

/// Admits, routes and carries one request; `model` learns the model asked
/// for as soon as it is known.
async fn forward(
    caller: Caller,
    state: Arc<AppState>,
    path: &'static str,
    body: Bytes,
    model_seen: &mut Option<String>,
) -> Result<Response, Response> {
    let started = std::time::Instant::now();
    caller
        .require("inference")
        .map_err(IntoResponse::into_response)?;
    let mut request: Value = serde_json::from_slice(&body).map_err(|e| {
        ApiError::invalid_request(format!("the body is not JSON: {e}")).into_response()
    })?;
    let model = request["model"]
        .as_str()
        .ok_or_else(|| ApiError::invalid_request("`model` is required").into_response())?
        .to_string();
    *model_seen = Some(model.clone());

    let max_tokens = request["max_tokens"]
        .as_u64()
        .or_else(|| request["max_completion_tokens"].as_u64());
    let record = json!({
        "caller": {"key_id": caller.key_id, "project": null, "scopes": caller.scopes},
        "model": model,
        "endpoint": path,
        "prompt_tokens": estimate_prompt_tokens(&request),
        "max_tokens": max_tokens,
        "stream": request["stream"].as_bool().unwrap_or(false),
    });
    let admission = AdmissionRequest::from_json(AdmissionPoint::Inference, record)
        .map_err(|e| ApiError::invalid_request(e.to_string()).into_response())?;
    let chain = state.admission.chain(AdmissionPoint::Inference);
    let verdict = if chain.entries.is_empty() {
        // Nothing to ask: no hop to a blocking thread.
        chain.evaluate(admission)
    } else {
        // A misbehaving policy may hold a call until its deadline: off the async workers.
        tokio::task::spawn_blocking(move || chain.evaluate(admission))
            .await
            .map_err(|e| ApiError::internal(e).into_response())?
    };
    match verdict.decision {
        Decision::Deny(denial) => {
            return Err(denied(&denial.code, &denial.message, &caller.key_id));
        }
        Decision::Patch {
            patch: Patch::Inference(patch),
        } => {
            if let Some(limit) = patch.max_tokens {
                request["max_tokens"] = json!(limit);
                if request.get("max_completion_tokens").is_some() {
                    request["max_completion_tokens"] = json!(limit);
                }
            }
        }
        _ => {}
    }

    let (lease, _) = state.routing.route(&model).map_err(|why| match why {
        NoRoute::UnknownModel => ApiError::new(
            StatusCode::NOT_FOUND,
            "model_not_found",
            format!("no deployment serves `{model}`"),
        )
        .into_response(),
        NoRoute::Cold => retry_after(
            StatusCode::SERVICE_UNAVAILABLE,
            "model_loading",
            "the model is deployed but no replica is ready yet",
            5,
        ),
        NoRoute::Busy => retry_after(
            StatusCode::TOO_MANY_REQUESTS,
            "replicas_busy",
            "every replica of this model is at its concurrency limit",
            1,
        ),
    })?;
    let cluster = state.cluster.clone().ok_or_else(|| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "carrier_unavailable",
            "no carrier set",
        )
        .into_response()
    })?;
    // The carrier's answers stay apart from the worker's (see `refused`).
    let broken =
        |e: String| ApiError::new(StatusCode::BAD_GATEWAY, "stream_reset", e).into_response();
    let head = json!({
        "replica": lease.replica,
        "method": "POST",
        "path": path,
        "headers": [["content-type", "application/json"]],
    });
    let mut message = format!("{head}\n").into_bytes();
    serde_json::to_writer(&mut message, &request)
        .map_err(|e| ApiError::internal(e).into_response())?;
    let mut reader = cluster
        .streams
        .active()
        .call(
            &lease.node,
            Lane::Inference,
            "inference",
            Bytes::from(message),
        )
        .await
        .map_err(refused)?;
    let (head, first) = reader
        .read_line(MAX_HEAD)
        .await
        .map_err(|e| broken(e.to_string()))?;
    let head: Value = serde_json::from_slice(&head)
        .map_err(|e| broken(format!("the worker's answer head: {e}")))?;
    state.inference.head_after(started.elapsed());
    let status = head_status(&head);
    let replica = HeaderValue::from_str(&lease.replica).ok();
    let keepalive = is_event_stream(&head).then_some(state.sse_keepalive);
    let body = answer_body(reader, lease, first, keepalive);
    let mut response = Response::new(Body::from_stream(body));
    if let Some(replica) = replica {
        response
            .headers_mut()
            .insert(HeaderName::from_static("x-switchyard-replica"), replica);
    }
    *response.status_mut() = status;
    if let Some(headers) = head["headers"].as_array() {
        for pair in headers {
            let (Some(name), Some(value)) = (pair[0].as_str(), pair[1].as_str()) else {
                continue;
            };
            if let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                response.headers_mut().append(name, value);
            }
        }
    }
    Ok(response)
}

/// The status a worker's answer head names; 502 for one that is missing or
/// not an HTTP status (a truncating cast would read 65736 as 200).
fn head_status(head: &Value) -> StatusCode {
    head["status"]
        .as_u64()
        .and_then(|s| u16::try_from(s).ok())
        .and_then(|s| StatusCode::from_u16(s).ok())
        .unwrap_or(StatusCode::BAD_GATEWAY)
}

/// The message a client gets when a policy failed (trapped, ran out of
/// time or memory) under fail-closed.
const POLICY_FAILED_MESSAGE: &str = "the request was refused because an admission policy failed; the operator can find why in the server log";

/// 403 for a denial. A policy's own denial is its business answer and goes
/// to the client as the policy wrote it; a failed policy's details (a trap's
/// backtrace, the plugin's name and limits) are the operator's, so they go
/// to the log and the client gets the stable code with a generic message.
fn denied(code: &str, message: &str, key_id: &str) -> Response {
    let message = if code == POLICY_ERROR_CODE {
        tracing::warn!(key = %key_id, detail = %message, "inference refused: an admission policy failed");
        POLICY_FAILED_MESSAGE
    } else {
        message
    };
    let body = json!({"error": {"code": code, "type": "admission_denied", "message": message}});
    (StatusCode::FORBIDDEN, Json(body)).into_response()
}

/// A stream the carrier could not open: no route to the worker (503,
/// try again), or the worker's own refusal (at its stream limit: 429; no
/// such service, or refused: 502).
fn refused(refusal: Refusal) -> Response {
    let message = refusal.to_string();
    match refusal {
        Refusal::NotDelivered(_) => retry_after(
            StatusCode::SERVICE_UNAVAILABLE,
            "replica_unreachable",
            &message,
            1,
        ),
        Refusal::Overloaded => retry_after(
            StatusCode::TOO_MANY_REQUESTS,
            "worker_overloaded",
            &message,
            1,
        ),
        Refusal::UnknownService | Refusal::ServiceRefused(_) => {
            ApiError::new(StatusCode::BAD_GATEWAY, "worker_refused", message).into_response()
        }
    }
}

fn is_event_stream(head: &Value) -> bool {
    head["headers"].as_array().is_some_and(|headers| {
        headers.iter().any(|pair| {
            pair[0]
                .as_str()
                .is_some_and(|n| n.eq_ignore_ascii_case("content-type"))
                && pair[1]
                    .as_str()
                    .is_some_and(|v| v.starts_with("text/event-stream"))
        })
    })
}

/// The engine's answer as the worker streams it; the lease lives as long.
/// With `keepalive`, an SSE answer silent that long between events gets a
/// comment line (clients ignore it; proxies see the connection alive).
fn answer_body(
    reader: StreamReader,
    lease: Lease,
    first: Bytes,
    keepalive: Option<Duration>,
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> {
    let between_events = first.is_empty() || first.ends_with(b"\n\n");
    let first = futures::stream::iter((!first.is_empty()).then_some(Ok(first)));
    let rest = futures::stream::unfold(
        (reader, lease, between_events),
        move |(mut reader, lease, mut between_events)| async move {
            let chunk = loop {
                let Some(every) = keepalive else {
                    break reader.read().await?;
                };
                match tokio::time::timeout(every, reader.read()).await {
                    Ok(chunk) => break chunk?,
                    Err(_) if between_events => {
                        let comment = Ok(Bytes::from_static(b": keep-alive\n\n"));
                        return Some((comment, (reader, lease, between_events)));
                    }
                    // Mid-event: a comment here would split it.
                    Err(_) => continue,
                }
            };
            if let Ok(bytes) = &chunk
                && !bytes.is_empty()
            {
                between_events = bytes.ends_with(b"\n\n");
            }
            let chunk = chunk.map_err(|e: StreamError| std::io::Error::other(e.to_string()));
            Some((chunk, (reader, lease, between_events)))
        },
    );
    first.chain(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_status_that_is_not_an_http_status_is_a_bad_gateway() {
        assert_eq!(head_status(&json!({"status": 201})), StatusCode::CREATED);
        // 65736 truncated to 16 bits is 200: the worker's garbage must not read as success.
        assert_eq!(
            head_status(&json!({"status": 65736})),
            StatusCode::BAD_GATEWAY
        );
        assert_eq!(head_status(&json!({"status": 42})), StatusCode::BAD_GATEWAY);
        assert_eq!(
            head_status(&json!({"status": "200"})),
            StatusCode::BAD_GATEWAY
        );
        assert_eq!(head_status(&json!({})), StatusCode::BAD_GATEWAY);
    }

    async fn code(response: Response) -> (StatusCode, bool, String) {
        let status = response.status();
        let retry = response.headers().contains_key(header::RETRY_AFTER);
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        let body: Value = serde_json::from_slice(&body).unwrap();
        (
            status,
            retry,
            body["error"]["code"].as_str().unwrap().into(),
        )
    }

    #[tokio::test]
    async fn a_failed_policys_details_stay_in_the_log() {
        let detail = "policy panic@1 failed: wasm trap: unreachable at 0x1f2e";
        let response = denied(POLICY_ERROR_CODE, detail, "key_1");
        assert_eq!(response.status(), StatusCode::FORBIDDEN);
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["error"]["code"], POLICY_ERROR_CODE);
        assert_eq!(body["error"]["message"], POLICY_FAILED_MESSAGE);
        // A policy's own denial reaches the client as written.
        let response = denied("max_tokens", "max_tokens must be at most 4096", "key_1");
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["error"]["message"], "max_tokens must be at most 4096");
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
            assert_eq!(
                code(refused(refusal)).await,
                (status, retry, expected.to_string())
            );
        }
    }
}
