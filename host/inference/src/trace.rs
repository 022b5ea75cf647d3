//! A `/v1` request's trace: its server span (under the client's
//! `traceparent`, or a peer's over the link, else a new trace) with the
//! GenAI semantic conventions, a span per policy call beneath it, and the
//! context handed on to the worker (the stream's head) or the peer (the
//! link's call). The span ends where the answer ends: the usage meter
//! adds the tokens and the time to the first token, then exports it.

use std::sync::{Arc, Mutex};

use switchyard_runtime::admission::Verdict;
use switchyard_telemetry::{Span, SpanKind, TraceContext, Tracer};

use crate::{Endpoint, ValidRequest};

/// The request's span while it is open; clones share it, and the first
/// [`RequestTrace::end`] exports it.
#[derive(Debug, Clone)]
pub struct RequestTrace {
    tracer: Arc<Tracer>,
    context: TraceContext,
    span: Arc<Mutex<Option<Span>>>,
}

impl RequestTrace {
    /// The span of `request`, under `parent` when the caller sent one.
    pub fn start(
        tracer: &Arc<Tracer>,
        request: &ValidRequest,
        parent: Option<&TraceContext>,
    ) -> Self {
        let path = request.endpoint.path();
        let mut span = Span::start(format!("POST {path}"), SpanKind::Server, parent);
        span.set("gen_ai.operation.name", operation(request.endpoint));
        span.set("gen_ai.provider.name", "switchyard");
        span.set("gen_ai.request.model", request.model.clone());
        if let Some(max_tokens) = request.max_tokens {
            span.set("gen_ai.request.max_tokens", u64::from(max_tokens));
        }
        span.set("gen_ai.request.stream", request.stream);
        span.set("http.request.method", "POST");
        span.set("url.path", path);
        Self {
            tracer: tracer.clone(),
            context: *span.context(),
            span: Arc::new(Mutex::new(Some(span))),
        }
    }

    /// The `traceparent` a child (the worker, a peer) gets.
    pub fn traceparent(&self) -> String {
        self.context.header()
    }

    /// Sets an attribute on the open span.
    pub fn set(&self, key: &'static str, value: impl Into<switchyard_telemetry::Value>) {
        if let Some(span) = self.span.lock().expect("trace lock").as_mut() {
            span.set(key, value);
        }
    }

    /// One span per policy the chain asked, beneath the request's, laid
    /// end to end from `started_ns` by each call's time.
    pub fn policies(&self, verdict: &Verdict, started_ns: u64) {
        let mut at = started_ns;
        for step in &verdict.steps {
            let took = (step.time_us * 1e3) as u64;
            let mut span = Span::start(
                format!("policy {}", step.plugin),
                SpanKind::Internal,
                Some(&self.context),
            )
            .started_at(at);
            span.set("switchyard.admission.point", verdict.point.as_str());
            span.set("switchyard.plugin", step.plugin.to_string());
            let decision = match (&step.decision, &step.error) {
                (_, Some(error)) => {
                    span.fail();
                    error.kind.to_string()
                }
                (Some(decision), None) => decision_name(decision).to_string(),
                (None, None) => "none".to_string(),
            };
            span.set("switchyard.admission.decision", decision);
            self.tracer.record(span.end_at(at + took));
            at += took;
        }
    }

    /// Ends the span with the answer's status; a refusal's code marks it failed.
    pub fn end(&self, status: u16, error: Option<&str>) {
        let Some(mut span) = self.span.lock().expect("trace lock").take() else {
            return;
        };
        span.set("http.response.status_code", u64::from(status));
        if let Some(code) = error {
            span.set("error.type", code.to_string());
            span.fail();
        } else if status >= 500 {
            span.fail();
        }
        self.tracer.record(span.end());
    }
}

fn operation(endpoint: Endpoint) -> &'static str {
    match endpoint {
        Endpoint::Chat => "chat",
        Endpoint::Completions => "text_completion",
        Endpoint::Embeddings => "embeddings",
    }
}

fn decision_name(decision: &switchyard_runtime::admission::Decision) -> &'static str {
    use switchyard_runtime::admission::Decision;
    match decision {
        Decision::Allow => "allow",
        Decision::Deny(_) => "deny",
        Decision::Patch { .. } => "patch",
        Decision::Throttle(_) => "throttle",
        Decision::Flag(_) => "flag",
    }
}
