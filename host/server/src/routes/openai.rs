//! The OpenAI-compatible API: `/v1/chat/completions`, `/v1/completions`,
//! `/v1/embeddings` and `/v1/models`, for keys with the `inference` scope
//! (or `federation:invoke`, for the remote services of this cluster's
//! grants, named `<peer label>/<service>`).
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
pub mod error_shape;
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
    /// `switchyard`, or the peer that serves a remote model.
    owned_by: String,
}

/// The models this cluster serves.
#[utoipa::path(get, path = "/v1/models", tag = "inference",
    responses((status = 200, description = "`{object: \"list\", data: [{id, object, created, owned_by}]}`")))]
#[tracing::instrument(name = "v1_models", skip_all, fields(key = %caller.key_id))]
pub async fn models(
    caller: Caller,
    State(state): State<Arc<AppState>>,
) -> Result<Json<ModelList>, ApiError> {
    caller
        .require("inference")
        .or_else(|_| caller.require("federation:invoke"))?;
    // A `federation:invoke` key sees the remote services only.
    let mut names: Vec<String> = match caller.require("inference") {
        Ok(()) => state.routing.models().keys().cloned().collect(),
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
    // A `federation:invoke` key calls remote models only (checked once the
    // model is known); anything else needs `inference`.
    let parsed = caller
        .require("inference")
        .or_else(|_| caller.require("federation:invoke"))
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

/// Answers one request body as `/v1` would for `caller` (a batch's line:
/// the same scope check, parse, admission chain and routing), without the
/// HTTP request around it; the caller reads the answer's body.
pub async fn answer(
    caller: &Caller,
    state: &AppState,
    endpoint: Endpoint,
    body: Bytes,
) -> Result<Response, ProxyError> {
    caller
        .require("inference")
        .or_else(|_| caller.require("federation:invoke"))?;
    let request = ValidRequest::parse(endpoint, body)?;
    forward(caller, state, &request).await
}

/// Admits, routes and carries one parsed request.
async fn forward(
    caller: &Caller,
    state: &AppState,
    request: &ValidRequest,
) -> Result<Response, ProxyError> {
    if let Some(remote) = remote_target(state, &request.model).await? {
        // The caller's key stays here: the owner sees the link's identity
        // and the grant, and judges the call with its own chains.
        // This cluster's own `inference` chain first, as for a local
        // model (the model as the client wrote it): the owner's chains
        // judge only what this cluster let through.
        let patch = admit(caller, state, request).await?;
        let target = Target::Peer(remote);
        tracing::Span::current().record("replica", target.replica());
        let limit = patch.as_ref().and_then(|p| p.max_tokens);
        let tokens = limit.or(request.max_tokens).map_or(0, u64::from);
        let body = request.body(patch.as_ref())?;
        return target
            .send(state, request.endpoint.path(), body, tokens)
            .await;
    }
    caller.require("inference")?;
    let patch = admit(caller, state, request).await?;
    let target = Target::route(&state.routing, &request.model)?;
    tracing::Span::current().record("replica", target.replica());
    let body = request.body(patch.as_ref())?;
    target.send(state, request.endpoint.path(), body, 0).await
}

/// The peer a `<peer label>/<service>` model names, if it names one (a
/// local model with a `/` in its name is served here first).
async fn remote_target(
    state: &AppState,
    model: &str,
) -> Result<Option<switchyard_federation::RemoteTarget>, ProxyError> {
    let Some(federation) = &state.federation else {
        return Ok(None);
    };
    if !model.contains('/') || state.routing.models().contains_key(model) {
        return Ok(None);
    }
    federation
        .resolve(model)
        .await
        .map_err(ProxyError::Federation)
}

/// Answers a call a peer's grant admitted, as this cluster's own `/v1`
/// path would: the `federation` chain, then the `inference` chain (the
/// caller is the peer, never the peer's client, and the model is this
/// cluster's own name for the service, never the `<label>/<service>` the
/// peer's client wrote), then the service's deployment. Every outcome, a
/// refusal too, is a response; with it, whether the chains admitted the
/// call (a refused call is not charged to the grant).
pub async fn serve_federated(
    state: &AppState,
    call: switchyard_federation::LocalCall,
) -> (Response, bool) {
    let endpoint = match call.path.as_str() {
        "/v1/chat/completions" => Endpoint::Chat,
        "/v1/completions" => Endpoint::Completions,
        "/v1/embeddings" => Endpoint::Embeddings,
        other => {
            let refused = ProxyError::Invalid(format!("no remote endpoint {other}"));
            return (refused.into_response(), false);
        }
    };
    let caller = Caller {
        key_id: format!("peer:{}", call.peer),
        scopes: vec!["inference".into()],
    };
    let mut admitted = false;
    let answered = async {
        let mut request = ValidRequest::parse(endpoint, call.body)?;
        request.model = call.model.clone();
        let federation_patch = admit_federated(
            state,
            &call.peer,
            &call.grant,
            &call.service,
            &call.model,
            &request,
        )
        .await?;
        let patch = admit(&caller, state, &request).await?;
        admitted = true;
        let limit = [federation_patch, patch.and_then(|p| p.max_tokens)]
            .into_iter()
            .flatten()
            .min();
        let target = Target::route(&state.routing, &call.model)?;
        let body = request.body_for(&call.model, limit)?;
        target.send(state, endpoint.path(), body, 0).await
    };
    let answered: Result<Response, ProxyError> = answered.await;
    let outcome = answered
        .as_ref()
        .err()
        .map_or("answered", ProxyError::code)
        .to_string();
    let response = answered.unwrap_or_else(IntoResponse::into_response);
    tracing::info!(
        caller = %caller.key_id, grant = %call.grant, service = %call.service,
        outcome, status = response.status().as_u16(),
        "federated call answered"
    );
    state.inference.answered(
        model_label(Some(&call.model), |m| {
            state.routing.models().contains_key(m)
        }),
        response.status().as_u16(),
    );
    (response, admitted)
}

/// Asks the `federation` chain about a peer's inference call: a lower
/// `max_tokens` to apply, if any, or the denial.
async fn admit_federated(
    state: &AppState,
    peer: &str,
    grant: &str,
    service: &str,
    model: &str,
    request: &ValidRequest,
) -> Result<Option<u32>, ProxyError> {
    federation_chain(
        state,
        switchyard_runtime::admission::FederationRequest {
            peer: peer.to_string(),
            grant_id: grant.to_string(),
            service: service.to_string(),
            model: Some(model.to_string()),
            prompt_tokens: request.prompt_tokens,
            max_tokens: request.max_tokens,
        },
    )
    .await
}

/// Asks the `federation` chain about any federated call (inference, or a
/// managed service's change): a lower `max_tokens`, if any, or the denial.
pub async fn federation_chain(
    state: &AppState,
    record: switchyard_runtime::admission::FederationRequest,
) -> Result<Option<u32>, ProxyError> {
    let chain = state.admission.chain(AdmissionPoint::Federation);
    if chain.entries.is_empty() {
        return Ok(None);
    }
    let peer = record.peer.clone();
    let record = switchyard_runtime::admission::AdmissionRequest::Federation(record);
    let verdict = state
        .admission
        .judge(record)
        .await
        .map_err(ProxyError::internal)?;
    match verdict.decision {
        Decision::Deny(denial) => Err(ProxyError::denied(
            denial.code,
            denial.message,
            &format!("peer:{peer}"),
        )),
        Decision::Patch {
            patch: Patch::Federation(patch),
        } => Ok(patch.max_tokens),
        _ => Ok(None),
    }
}

/// Asks the `inference` chain: the patch to apply, if any, or the denial.
async fn admit(
    caller: &Caller,
    state: &AppState,
    request: &ValidRequest,
) -> Result<Option<InferencePatch>, ProxyError> {
    let chain = state.admission.chain(AdmissionPoint::Inference);
    if chain.entries.is_empty() {
        // Nothing to ask: no record to build.
        return Ok(None);
    }
    let record = request.admission(caller);
    let verdict = state
        .admission
        .judge(record)
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
