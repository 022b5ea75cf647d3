//! The inference core: the typed `/v1` path as a library. A
//! [`ValidRequest`] (the body parsed once) goes in; the `inference`
//! admission chain judges the record built from it (a denial is the
//! policy's code; a patch changes the body); a [`Target`] is chosen (the
//! least-loaded ready replica over the streams seam, or a peer's service
//! under a grant); an [`Answer`] (the engine's status, headers and body as
//! it comes, SSE included) or an [`InferenceError`] comes out. Dropping the
//! answer's body resets the stream, which cancels the engine's work.
//!
//! Three callers, one path: the `/v1` routes (`routes::openai`, which alone
//! turn an answer into an HTTP response), the batch consumer (a line's
//! answer read whole), and federation's owner side (a peer's call, its
//! answer sent back over the link as it came).
//!
//! # Layout
//! - `valid`: the body parsed once; the admission record; the body the
//!   engine gets (the client's bytes unless a patch changed them).
//! - `fields`: the one pass over the bytes that `valid` parses with.
//! - `error`: [`InferenceError`] and the one answer each gets.
//! - `target`: where a request goes, the stream's heads, the answer's body.
//! - `metrics`: the counters of answered requests, by model and status.
//! - `usage`: the meter every answer that reached an engine passes through.
//! - `counters`: the usage counters policies read (rate limits, budgets).
//! - `trace`: the request's span (OTLP, GenAI conventions) and its policy spans.

pub mod counters;
mod error;
mod fields;
pub mod metrics;
mod target;
pub mod trace;
pub mod usage;
mod valid;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use switchyard_binding::admission::Admission;
use switchyard_carrier_set::Carriers;
use switchyard_federation::Federation;
use switchyard_runtime::admission::{AdmissionPoint, Decision, InferencePatch, Patch};
use switchyard_scheduler::routing::Routing;

pub use error::{InferenceError, POLICY_FAILED_MESSAGE};
pub use switchyard_protocol::answer::{Answer, AnswerBody, ReadError};
pub use target::Target;
pub use valid::{Endpoint, ValidRequest};

use metrics::model_label;
pub use switchyard_protocol::keys::{Caller, MissingScope};

/// What the core works with: the handles it needs, not the whole core of
/// the replica (the server builds one at start-up and keeps it).
#[derive(Debug)]
pub struct Inference {
    /// The chains; a request asks the `inference` one (a peer's call the
    /// `federation` one first).
    pub admission: Arc<Admission>,
    /// Which replica serves each model (the scheduler refreshes it).
    pub routing: Arc<Routing>,
    /// The streams seam to the workers; `None` without a carrier set.
    pub carriers: Option<Arc<Carriers>>,
    /// Peers' services (`<label>/<service>` models); `None` only in the
    /// router's own tests.
    pub federation: Option<Arc<Federation>>,
    /// The silence after which a streamed answer gets an SSE comment.
    pub sse_keepalive: Duration,
    /// What was answered, by model and status, for `/metrics`.
    pub metrics: metrics::InferenceMetrics,
    /// Tokens and times of every answer that reached an engine; `None`
    /// when metering is off.
    pub usage: Option<Arc<usage::UsageMeter>>,
    /// Requests and tokens per key, team and peer, as policies read them;
    /// `None` when metering is off.
    pub counters: Option<Arc<counters::UsageCounters>>,
    /// Where spans go (`--otlp-endpoint`); `None` when tracing is off.
    pub tracer: Option<Arc<switchyard_telemetry::Tracer>>,
}

/// Answers one request body as `/v1` would for `caller` (a batch's line:
/// the same scope check, parse, admission chain and routing), without the
/// HTTP request around it; the caller reads the answer's body.
pub async fn answer(
    caller: &Caller,
    core: &Inference,
    endpoint: Endpoint,
    body: Bytes,
) -> Result<Answer, InferenceError> {
    may_infer(caller)?;
    let request = ValidRequest::parse(endpoint, body)?;
    infer(caller, core, &request).await
}

/// Whether `caller` may ask for inference at all: a `federation:invoke`
/// key calls remote models only (checked once the model is known);
/// anything else needs `inference`.
pub fn may_infer(caller: &Caller) -> Result<(), InferenceError> {
    caller
        .require("inference")
        .or_else(|_| caller.require("federation:invoke"))?;
    Ok(())
}

/// Admits, routes and carries one parsed request, traced when a tracer
/// is set: a refusal ends the request's span here, an answer where its
/// body ends.
pub async fn infer(
    caller: &Caller,
    core: &Inference,
    request: &ValidRequest,
) -> Result<Answer, InferenceError> {
    let trace = start_trace(core, request);
    let answered = infer_traced(caller, core, request, trace.clone()).await;
    if let (Some(trace), Err(e)) = (&trace, &answered) {
        trace.end(e.http_status(), Some(e.code()));
    }
    answered
}

/// The request's span, under the caller's `traceparent`.
fn start_trace(core: &Inference, request: &ValidRequest) -> Option<trace::RequestTrace> {
    let tracer = core.tracer.as_ref()?;
    Some(trace::RequestTrace::start(
        tracer,
        request,
        request.traceparent.as_ref(),
    ))
}

async fn infer_traced(
    caller: &Caller,
    core: &Inference,
    request: &ValidRequest,
    trace: Option<trace::RequestTrace>,
) -> Result<Answer, InferenceError> {
    let started = std::time::Instant::now();
    if let Some(remote) = remote_target(core, &request.model).await? {
        // The caller's key stays here: the owner sees the link's identity
        // and the grant, and judges the call with its own chains.
        // This cluster's own `inference` chain first, as for a local
        // model (the model as the client wrote it): the owner's chains
        // judge only what this cluster let through.
        let patch = admit(caller, core, request, trace.as_ref()).await?;
        let target = Target::Peer(remote);
        tracing::Span::current().record("replica", target.replica());
        let limit = patch.as_ref().and_then(|p| p.max_tokens);
        let tokens = limit.or(request.max_tokens).map_or(0, u64::from);
        let body = request.body(patch.as_ref())?;
        let account = Account {
            caller: &caller.key_id,
            started,
            charge: charge(core, caller, request, limit),
            trace,
        };
        return send_metered(core, target, request, body, tokens, account).await;
    }
    caller.require("inference")?;
    let patch = admit(caller, core, request, trace.as_ref()).await?;
    let target = Target::route(&core.routing, &request.model)?;
    tracing::Span::current().record("replica", target.replica());
    let body = request.body(patch.as_ref())?;
    let account = Account {
        caller: &caller.key_id,
        started,
        charge: charge(core, caller, request, patch.and_then(|p| p.max_tokens)),
        trace,
    };
    send_metered(core, target, request, body, 0, account).await
}

/// Whom an answer is metered and counted for.
struct Account<'a> {
    /// The caller's key id, or `peer:<label>`.
    caller: &'a str,
    /// When the request came in.
    started: std::time::Instant,
    /// Its place in the usage counters, settled when the answer ends.
    charge: Option<counters::Charge>,
    /// Its span, ended when the answer ends.
    trace: Option<trace::RequestTrace>,
}

/// Counts an admitted request in the usage counters: its estimate (prompt
/// tokens and `max_tokens`, as patched) until its answer's tokens are known.
fn charge(
    core: &Inference,
    caller: &Caller,
    request: &ValidRequest,
    patched_max_tokens: Option<u32>,
) -> Option<counters::Charge> {
    let counters = core.counters.as_ref()?;
    let max_tokens = patched_max_tokens.or(request.max_tokens).unwrap_or(0);
    let estimate = u64::from(request.prompt_tokens) + u64::from(max_tokens);
    Some(counters.charge(counters::subjects(caller), estimate))
}

/// Sends a request's body to its target, the answer metered for `caller`;
/// a stream is asked for its usage when the client did not ask.
async fn send_metered(
    core: &Inference,
    target: Target,
    request: &ValidRequest,
    body: Bytes,
    tokens: u64,
    account: Account<'_>,
) -> Result<Answer, InferenceError> {
    let Account {
        caller,
        started,
        charge,
        trace,
    } = account;
    let traceparent = trace.as_ref().map(trace::RequestTrace::traceparent);
    let path = request.endpoint.path();
    let Some(meter) = &core.usage else {
        let sent = target
            .send(core, path, body, tokens, traceparent.as_deref())
            .await;
        match (&sent, trace) {
            (Err(_), _) => {
                if let Some(charge) = charge {
                    charge.refund();
                }
            }
            // Without the meter the span ends with the answer's head.
            (Ok(answer), Some(trace)) => trace.end(answer.status, None),
            (Ok(_), None) => {}
        }
        return sent;
    };
    let asked = request
        .stream
        .then(|| usage::ask_for_usage(&body))
        .flatten();
    let strip_usage = asked.is_some();
    let body = asked.unwrap_or(body);
    let (served_by, node) = target.served_by();
    let metering = usage::Metering {
        caller: caller.to_string(),
        model: request.model.clone(),
        served_by,
        node,
        started,
        strip_usage,
        trace,
    };
    let answer = match target
        .send(core, path, body, tokens, traceparent.as_deref())
        .await
    {
        Ok(answer) => answer,
        Err(e) => {
            if let Some(charge) = charge {
                charge.refund();
            }
            return Err(e);
        }
    };
    Ok(usage::meter(
        meter.clone(),
        with_overhead(answer, started),
        metering,
        charge,
    ))
}

/// The answer with `x-switchyard-overhead-ms`: the time from `started` to
/// its head, less the engine's own (the worker's `x-switchyard-engine-ms`,
/// taken out). An answer without the engine's time (a peer's) carries no
/// overhead header, not even one a peer sent.
pub fn with_overhead(mut answer: Answer, started: std::time::Instant) -> Answer {
    use switchyard_protocol::stream::{ENGINE_MS_HEADER, OVERHEAD_MS_HEADER};
    let mut engine_ms = None;
    answer.headers.retain(|(name, value)| {
        if name.eq_ignore_ascii_case(ENGINE_MS_HEADER) {
            engine_ms = value.parse::<f64>().ok();
            return false;
        }
        !name.eq_ignore_ascii_case(OVERHEAD_MS_HEADER)
    });
    if let Some(engine_ms) = engine_ms {
        let overhead = (started.elapsed().as_secs_f64() * 1e3 - engine_ms).max(0.0);
        answer
            .headers
            .push((OVERHEAD_MS_HEADER.to_string(), format!("{overhead:.3}")));
    }
    answer
}

/// The peer a `<peer label>/<service>` model names, if it names one (a
/// local model with a `/` in its name is served here first).
async fn remote_target(
    core: &Inference,
    model: &str,
) -> Result<Option<switchyard_federation::RemoteTarget>, InferenceError> {
    let Some(federation) = &core.federation else {
        return Ok(None);
    };
    if !model.contains('/') || core.routing.models().contains_key(model) {
        return Ok(None);
    }
    federation
        .resolve(model)
        .await
        .map_err(InferenceError::Federation)
}

/// Answers a call a peer's grant admitted, as this cluster's own `/v1`
/// path would: the `federation` chain, then the `inference` chain (the
/// caller is the peer, never the peer's client, and the model is this
/// cluster's own name for the service, never the `<label>/<service>` the
/// peer's client wrote), then the service's deployment. Every outcome, a
/// refusal too, is an answer; with it, whether the chains admitted the
/// call (a refused call is not charged to the grant).
pub async fn serve_federated(
    core: &Inference,
    call: switchyard_federation::LocalCall,
) -> (Answer, bool) {
    let endpoint = match call.path.as_str() {
        "/v1/chat/completions" => Endpoint::Chat,
        "/v1/completions" => Endpoint::Completions,
        "/v1/embeddings" => Endpoint::Embeddings,
        other => {
            let refused = InferenceError::Invalid(format!("no remote endpoint {other}"));
            return (refused.answer(), false);
        }
    };
    let caller = Caller {
        key_id: format!("peer:{}", call.peer),
        scopes: vec!["inference".into()],
        team: None,
    };
    let mut admitted = false;
    let started = std::time::Instant::now();
    let mut trace = None;
    let answered = async {
        let mut request = ValidRequest::parse(endpoint, call.body)?;
        request.model = call.model.clone();
        request.traceparent = call
            .traceparent
            .as_deref()
            .and_then(switchyard_telemetry::TraceContext::parse);
        trace = start_trace(core, &request);
        let federation_patch = admit_federated(
            core,
            &call.peer,
            &call.grant,
            &call.service,
            &call.model,
            &request,
        )
        .await?;
        let patch = admit(&caller, core, &request, trace.as_ref()).await?;
        admitted = true;
        let limit = [federation_patch, patch.and_then(|p| p.max_tokens)]
            .into_iter()
            .flatten()
            .min();
        let target = Target::route(&core.routing, &call.model)?;
        let body = request.body_for(&call.model, limit)?;
        // The owner's view of the call: the peer is the caller, the model
        // this cluster's name for the service.
        let account = Account {
            caller: &caller.key_id,
            started,
            charge: charge(core, &caller, &request, limit),
            trace: trace.clone(),
        };
        send_metered(core, target, &request, body, 0, account).await
    };
    let answered: Result<Answer, InferenceError> = answered.await;
    if let (Some(trace), Err(e)) = (&trace, &answered) {
        trace.end(e.http_status(), Some(e.code()));
    }
    let outcome = answered
        .as_ref()
        .err()
        .map_or("answered", InferenceError::code)
        .to_string();
    let answer = answered.unwrap_or_else(InferenceError::answer);
    tracing::info!(
        caller = %caller.key_id, grant = %call.grant, service = %call.service,
        outcome, status = answer.status,
        "federated call answered"
    );
    core.metrics.answered(
        model_label(Some(&call.model), |m| core.routing.models().contains_key(m)),
        answer.status,
    );
    (answer, admitted)
}

/// Asks the `federation` chain about a peer's inference call: a lower
/// `max_tokens` to apply, if any, or the denial.
async fn admit_federated(
    core: &Inference,
    peer: &str,
    grant: &str,
    service: &str,
    model: &str,
    request: &ValidRequest,
) -> Result<Option<u32>, InferenceError> {
    federation_chain(
        core,
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
    core: &Inference,
    record: switchyard_runtime::admission::FederationRequest,
) -> Result<Option<u32>, InferenceError> {
    if core
        .admission
        .chain(AdmissionPoint::Federation)
        .entries
        .is_empty()
    {
        return Ok(None);
    }
    let peer = format!("peer:{}", record.peer);
    let record = switchyard_runtime::admission::AdmissionRequest::Federation(record);
    match judged(core, record, &peer, None).await? {
        Some(Patch::Federation(patch)) => Ok(patch.max_tokens),
        _ => Ok(None),
    }
}

/// Asks the `inference` chain: the patch to apply, if any, or the denial.
async fn admit(
    caller: &Caller,
    core: &Inference,
    request: &ValidRequest,
    trace: Option<&trace::RequestTrace>,
) -> Result<Option<InferencePatch>, InferenceError> {
    if core
        .admission
        .chain(AdmissionPoint::Inference)
        .entries
        .is_empty()
    {
        // Nothing to ask: no record to build.
        return Ok(None);
    }
    match judged(core, request.admission(caller), &caller.key_id, trace).await? {
        Some(Patch::Inference(patch)) => Ok(Some(patch)),
        _ => Ok(None),
    }
}

/// Judges a record with its point's chain: the patch, if any, or the
/// denial (`who` names the caller in the log of a failed policy).
async fn judged(
    core: &Inference,
    record: switchyard_runtime::admission::AdmissionRequest,
    who: &str,
    trace: Option<&trace::RequestTrace>,
) -> Result<Option<Patch>, InferenceError> {
    let started_ns = switchyard_telemetry::now_ns();
    let verdict = core
        .admission
        .judge(record)
        .await
        .map_err(InferenceError::internal)?;
    if let Some(trace) = trace {
        trace.policies(&verdict, started_ns);
    }
    match verdict.decision {
        Decision::Deny(denial) => Err(InferenceError::denied(denial.code, denial.message, who)),
        Decision::Throttle(throttle) => Err(InferenceError::Throttled(Box::new(throttle))),
        Decision::Patch { patch } => Ok(Some(patch)),
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(headers: &[(&str, &str)]) -> Answer {
        Answer {
            status: 200,
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
            body: switchyard_protocol::answer::AnswerBody::Whole(Bytes::new()),
        }
    }

    #[test]
    fn the_overhead_is_the_time_to_the_head_less_the_engines() {
        let started = std::time::Instant::now() - Duration::from_millis(50);
        let shown = with_overhead(
            answer(&[("x-switchyard-engine-ms", "30.0"), ("a", "b")]),
            started,
        );
        let names: Vec<&str> = shown.headers.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["a", "x-switchyard-overhead-ms"]);
        let overhead: f64 = shown.headers[1].1.parse().unwrap();
        assert!((20.0..1000.0).contains(&overhead), "{overhead}");
    }

    #[test]
    fn a_peers_overhead_header_is_not_passed_on_as_ours() {
        let shown = with_overhead(
            answer(&[("x-switchyard-overhead-ms", "1.0")]),
            std::time::Instant::now(),
        );
        assert!(shown.headers.is_empty(), "{:?}", shown.headers);
    }
}
