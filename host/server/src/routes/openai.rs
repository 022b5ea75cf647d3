//! The OpenAI-compatible API: `/v1/chat/completions`, `/v1/completions`,
//! `/v1/embeddings` and `/v1/models`, for keys with the `inference` scope
//! (or `federation:invoke`, for the remote services of this cluster's
//! grants, named `<peer label>/<service>`).
//!
//! The HTTP edge of the inference core ([`switchyard_inference`]): a handler
//! parses the body into a [`ValidRequest`], asks the core, and answers its
//! [`Answer`] (the engine's, SSE included, streaming as it comes) or its
//! [`InferenceError`] as a response. Dropping the client's connection drops
//! the answer's body, which resets the stream and cancels the engine's
//! work. `error_shape` adds OpenAI's `type` and `param` to every `/v1`
//! error.

mod error;
pub mod error_shape;

use std::sync::Arc;
use std::time::Instant;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use serde::Serialize;
use tracing::field::Empty;

use crate::auth::{Authenticated, Caller};
use crate::error::ApiError;
use crate::state::AppState;
use switchyard_inference::metrics::model_label;
use switchyard_inference::{self as inference, Answer, AnswerBody, Endpoint, ValidRequest};

/// `GET /v1/models`, as OpenAI lists models.
#[derive(Debug, Serialize)]
pub struct ModelList {
    object: &'static str,
    data: Vec<ModelCard>,
}

/// One served model.
#[derive(Debug, Serialize)]
pub struct ModelCard {
    id: String,
    object: &'static str,
    created: u64,
    /// `switchyard`, or the peer that serves a remote model.
    owned_by: String,
}

/// The models this cluster serves.
#[utoipa::path(get, path = "/v1/models", tag = "inference",
    responses((status = 200, description = "`{object: \"list\", data: [{id, object, created, owned_by}]}`")))]
#[tracing::instrument(name = "v1_models", skip_all, fields(key = %caller.key_id))]
pub async fn models(
    Authenticated(caller): Authenticated,
    State(state): State<Arc<AppState>>,
) -> Result<Json<ModelList>, ApiError> {
    caller
        .require("inference")
        .or_else(|_| caller.require("federation:invoke"))?;
    // A `federation:invoke` key sees the remote services only.
    let mut names: Vec<String> = match caller.require("inference") {
        Ok(()) => state.inference.routing.models().keys().cloned().collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    let mut data: Vec<ModelCard> = names
        .into_iter()
        .map(|id| ModelCard {
            id,
            object: "model",
            created: 0,
            owned_by: "switchyard".into(),
        })
        .collect();
    if let Some(federation) = &state.federation {
        match federation.remote_services().await {
            Ok(remote) => data.extend(remote.into_iter().map(|r| ModelCard {
                id: r.model,
                object: "model",
                created: 0,
                owned_by: r.peer,
            })),
            // The local models are still worth answering.
            Err(e) => tracing::warn!(error = %e, "remote services not listed"),
        }
    }
    Ok(Json(ModelList {
        object: "list",
        data,
    }))
}

/// Chat completions (streaming with `"stream": true`).
#[utoipa::path(post, path = "/v1/chat/completions", tag = "inference",
    request_body(content = Object, description = "an OpenAI chat completion request"),
    responses(
        (status = 200, description = "the engine's answer (JSON, or SSE when streaming)"),
        (status = 400, description = "`invalid_request`: the body is not JSON, names no `model` string, or gives `max_tokens` or `max_completion_tokens` other than an integer from 1 to 4294967295, or `stream` other than a boolean (`param` names the field)"),
        (status = 403, description = "the inference chain denied: the policy's code and message"),
        (status = 404, description = "`model_not_found`"),
        (status = 429, description = "`replicas_busy`: every replica at its limit, or `worker_overloaded`: the worker at its stream limit; Retry-After. Or a policy's throttle (the shipped `rate-limit`: `rate_limit_exceeded`, `token_budget_exceeded`), with OpenAI's `x-ratelimit-*` headers and Retry-After"),
        (status = 502, description = "`worker_refused`: the worker refused the stream; `stream_reset`: the stream broke before the answer's head"),
        (status = 503, description = "`model_loading`: no replica ready yet, or `replica_unreachable`: no route to its worker; Retry-After"),
    ))]
pub async fn chat(
    Authenticated(caller): Authenticated,
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    proxy(caller, state, Endpoint::Chat, &headers, body).await
}

/// Text completions.
#[utoipa::path(post, path = "/v1/completions", tag = "inference",
    request_body(content = Object, description = "an OpenAI completion request"),
    responses((status = 200, description = "the engine's answer")))]
pub async fn completions(
    Authenticated(caller): Authenticated,
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    proxy(caller, state, Endpoint::Completions, &headers, body).await
}

/// Embeddings.
#[utoipa::path(post, path = "/v1/embeddings", tag = "inference",
    request_body(content = Object, description = "an OpenAI embeddings request"),
    responses((status = 200, description = "the engine's answer")))]
pub async fn embeddings(
    Authenticated(caller): Authenticated,
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    proxy(caller, state, Endpoint::Embeddings, &headers, body).await
}

/// Answers one `/v1` request and counts the answer. The span carries what
/// an operator filters by: the endpoint, the key, the model, whether it
/// streams, the replica, the outcome (`answered` or the error's code) and
/// the status.
#[tracing::instrument(name = "v1", skip_all, fields(
    endpoint = endpoint.path(), key = %caller.key_id,
    model = Empty, stream = Empty, replica = Empty, outcome = Empty, status = Empty,
))]
async fn proxy(
    caller: Caller,
    state: Arc<AppState>,
    endpoint: Endpoint,
    headers: &HeaderMap,
    body: Bytes,
) -> Response {
    let started = Instant::now();
    let span = tracing::Span::current();
    let parsed = inference::may_infer(&caller).and_then(|()| ValidRequest::parse(endpoint, body));
    let (model, answered) = match parsed {
        Ok(mut request) => {
            // The client's W3C trace context: this request's spans join its trace.
            request.traceparent = headers
                .get(switchyard_telemetry::TRACEPARENT)
                .and_then(|v| v.to_str().ok())
                .and_then(switchyard_telemetry::TraceContext::parse);
            // A served name is at most MAX_NAME; a longer one is the
            // client's and is not logged whole.
            let shown = request
                .model
                .floor_char_boundary(switchyard_protocol::valid::MAX_NAME);
            span.record("model", &request.model[..shown]);
            span.record("stream", request.stream);
            let answered = inference::infer(&caller, &state.inference, &request).await;
            (Some(request.model), answered)
        }
        Err(e) => (None, Err(e)),
    };
    let response = match answered {
        Ok(answer) => {
            state.inference.metrics.head_after(started.elapsed());
            span.record("outcome", "answered");
            respond(answer)
        }
        Err(e) => {
            span.record("outcome", e.code());
            respond(e.answer())
        }
    };
    let status = response.status().as_u16();
    span.record("status", status);
    tracing::debug!("v1 request answered");
    let label = model_label(model.as_deref(), |m| {
        state.inference.routing.models().contains_key(m)
    });
    state.inference.metrics.answered(label, status);
    response
}

/// The core's answer as the HTTP response it is: its status, headers and
/// body (streamed as it comes).
pub fn respond(answer: Answer) -> Response {
    let mut response = Response::new(match answer.body {
        AnswerBody::Whole(bytes) => Body::from(bytes),
        AnswerBody::Streaming(stream) => Body::from_stream(stream),
    });
    *response.status_mut() = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::BAD_GATEWAY);
    let headers = response.headers_mut();
    for (name, value) in &answer.headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            headers.append(name, value);
        }
    }
    response
}
