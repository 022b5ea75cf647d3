//! The OpenAI-compatible API: `/v1/chat/completions`, `/v1/completions`,
//! `/v1/embeddings` and `/v1/models`, for keys with the `inference` scope.
//! Each request is parsed once into a [`ValidRequest`]; the `inference`
//! admission chain judges the record built from it (a denial is 403 with
//! the policy's code; a patch changes the body); then it goes to a
//! [`Target`], the least-loaded ready replica over the streams seam
//! (inference lane), and the engine's answer, SSE included, streams back as
//! it comes. Dropping the client's connection resets the stream, which
//! cancels the engine's work. Every failure is one [`ProxyError`].
//!
//! # Layout
//! - `valid`: the body parsed once; the admission record; the body the
//!   engine gets (the client's bytes unless a patch changed them).
//! - `fields`: the one pass over the bytes that `valid` parses with.
//! - `error`: [`ProxyError`] and its one mapping to status, code and body.
//! - `target`: where a request goes, the stream's heads, the answer's body.

mod error;
mod fields;
mod target;
mod valid;

use std::sync::Arc;
use std::time::Instant;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use switchyard_runtime::admission::{AdmissionPoint, Decision, InferencePatch, Patch};
use tracing::field::Empty;

pub use error::ProxyError;
pub use target::Target;
pub use valid::{Endpoint, ValidRequest};

use crate::auth::Caller;
use crate::error::ApiError;
use crate::inference_metrics::model_label;
use crate::state::AppState;

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
    owned_by: &'static str,
}

/// The models this cluster serves.
#[utoipa::path(get, path = "/v1/models", tag = "inference",
    responses((status = 200, description = "`{object: \"list\", data: [{id, object, created, owned_by}]}`")))]
#[tracing::instrument(name = "v1_models", skip_all, fields(key = %caller.key_id))]
pub async fn models(
    caller: Caller,
    State(state): State<Arc<AppState>>,
) -> Result<Json<ModelList>, ApiError> {
    caller.require("inference")?;
    let mut names: Vec<String> = state.routing.models().keys().cloned().collect();
    names.sort();
    let data = names
        .into_iter()
        .map(|id| ModelCard {
            id,
            object: "model",
            created: 0,
            owned_by: "switchyard",
        })
        .collect();
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
        (status = 400, description = "`invalid_request`: the body is not JSON, names no `model` string, or a token limit above 4294967295"),
        (status = 403, description = "the inference chain denied: the policy's code and message"),
        (status = 404, description = "`model_not_found`"),
        (status = 429, description = "`replicas_busy`: every replica at its limit, or `worker_overloaded`: the worker at its stream limit; Retry-After"),
        (status = 502, description = "`worker_refused`: the worker refused the stream; `stream_reset`: the stream broke before the answer's head"),
        (status = 503, description = "`model_loading`: no replica ready yet, or `replica_unreachable`: no route to its worker; Retry-After"),
    ))]
pub async fn chat(caller: Caller, State(state): State<Arc<AppState>>, body: Bytes) -> Response {
    proxy(caller, state, Endpoint::Chat, body).await
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
    proxy(caller, state, Endpoint::Completions, body).await
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
    proxy(caller, state, Endpoint::Embeddings, body).await
}

/// Answers one `/v1` request and counts the answer. The span carries what
/// an operator filters by: the endpoint, the key, the model, whether it
/// streams, the replica, the outcome (`answered` or the error's code) and
/// the status.
#[tracing::instrument(name = "v1", skip_all, fields(
    endpoint = endpoint.path(), key = %caller.key_id,
    model = Empty, stream = Empty, replica = Empty, outcome = Empty, status = Empty,
))]
async fn proxy(caller: Caller, state: Arc<AppState>, endpoint: Endpoint, body: Bytes) -> Response {
    let started = Instant::now();
    let span = tracing::Span::current();
    let parsed = caller
        .require("inference")
        .map_err(ProxyError::from)
        .and_then(|()| ValidRequest::parse(endpoint, body));
    let (model, answered) = match parsed {
        Ok(request) => {
            // A served name is at most MAX_NAME; a longer one is the
            // client's and is not logged whole.
            let shown = request.model.floor_char_boundary(crate::valid::MAX_NAME);
            span.record("model", &request.model[..shown]);
            span.record("stream", request.stream);
            let answered = forward(&caller, &state, &request).await;
            (Some(request.model), answered)
        }
        Err(e) => (None, Err(e)),
    };
    let response = match answered {
        Ok(response) => {
            state.inference.head_after(started.elapsed());
            span.record("outcome", "answered");
            response
        }
        Err(e) => {
            span.record("outcome", e.code());
            e.into_response()
        }
    };
    let status = response.status().as_u16();
    span.record("status", status);
    tracing::debug!("v1 request answered");
    let label = model_label(model.as_deref(), |m| state.routing.models().contains_key(m));
    state.inference.answered(label, status);
    response
}

/// Admits, routes and carries one parsed request.
async fn forward(
    caller: &Caller,
    state: &AppState,
    request: &ValidRequest,
) -> Result<Response, ProxyError> {
    let patch = admit(caller, state, request).await?;
    let target = Target::route(&state.routing, &request.model)?;
    tracing::Span::current().record("replica", target.replica());
    let body = request.body(patch.as_ref())?;
    target.send(state, request.endpoint.path(), body).await
}

/// Asks the `inference` chain: the patch to apply, if any, or the denial.
async fn admit(
    caller: &Caller,
    state: &AppState,
    request: &ValidRequest,
) -> Result<Option<InferencePatch>, ProxyError> {
    let chain = state.admission.chain(AdmissionPoint::Inference);
    if chain.entries.is_empty() {
        // Nothing to ask: no record to build, no hop to a blocking thread.
        return Ok(None);
    }
    let record = request.admission(caller);
    // A misbehaving policy may hold a call until its deadline: off the async workers.
    let verdict = tokio::task::spawn_blocking(move || chain.evaluate(record))
        .await
        .map_err(ProxyError::internal)?;
    match verdict.decision {
        Decision::Deny(denial) => Err(ProxyError::denied(
            denial.code,
            denial.message,
            &caller.key_id,
        )),
        Decision::Patch {
            patch: Patch::Inference(patch),
        } => Ok(Some(patch)),
        _ => Ok(None),
    }
}
