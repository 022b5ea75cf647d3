//! What accountability adds to one request, each part timed in this
//! process on its own (the cluster bench, `metering`, measures the whole
//! path, but its run-to-run noise on this machine is larger than the
//! parts): the usage counters' charge and settle (a key and its team), the
//! shipped `rate-limit` policy's call over the counters, and a request's
//! spans (the frontend's, a policy's, the worker's two) recorded and
//! encoded as OTLP. Each is the median of 200,000 calls in batches, and
//! its share of the `/v1` path's CPU per request with everything off
//! (`metering`'s "off" figure, passed as `ACCOUNTING_PATH_US`, 310 us by
//! default: the median of the last run recorded in docs/benchmarks.md).

use std::sync::Arc;
use std::time::Instant;

use switchyard_inference::counters::{UsageCounters, subjects};
use switchyard_protocol::keys::Caller;
use switchyard_runtime::admission::{AdmissionRequest, Decision};
use switchyard_runtime::{Runtime, RuntimeConfig};
use switchyard_telemetry::{Span, SpanKind, TraceContext};

use crate::stats::{header, median};

/// Calls per batch, and batches (the median batch is shown).
const CALLS: usize = 20_000;
const BATCHES: usize = 10;

/// Nanoseconds per call of `f`: the median batch's mean.
fn per_call(mut f: impl FnMut()) -> f64 {
    for _ in 0..CALLS / 10 {
        f();
    }
    let batches = (0..BATCHES)
        .map(|_| {
            let started = Instant::now();
            for _ in 0..CALLS {
                f();
            }
            started.elapsed().as_secs_f64() * 1e9 / CALLS as f64
        })
        .collect();
    median(batches)
}

pub fn run() {
    let path_us: f64 = std::env::var("ACCOUNTING_PATH_US")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(310.0);
    header(
        "Accountability, part by part: time per request in this process",
        &["part", "ns per request", "share of the path (%)"],
    );
    let counters = Arc::new(UsageCounters::default());
    let caller = Caller {
        key_id: "key_0123456789abcdef".into(),
        scopes: vec!["inference".into()],
        team: Some("research".into()),
    };
    let charge = per_call(|| counters.charge(subjects(&caller), 120).settle(96));
    let policy = policy_call(&counters);
    let spans = spans_per_request();
    let rows = [
        ("usage counters: charge and settle (key, team)", charge),
        ("rate-limit policy: one call over the counters", policy),
        ("traces: 4 spans recorded and encoded as OTLP", spans),
        ("all three", charge + policy + spans),
    ];
    for (part, ns) in rows {
        println!("| {part} | {ns:.0} | {:.2} |", ns / (path_us * 1e3) * 100.0);
    }
    println!();
}

/// The shipped `rate-limit` policy judging a request over live counters.
fn policy_call(counters: &Arc<UsageCounters>) -> f64 {
    let runtime = Runtime::new(RuntimeConfig::default()).expect("a plugin runtime");
    runtime.set_usage_counters(counters.clone());
    let settings = r#"{"limits": [
        {"subject": "team:*", "tpm": 1000000000, "tokens_per_day": 1000000000000, "soft_ratio": 0.9},
        {"subject": "key:*", "rpm": 1000000000, "max_parallel": 1000}]}"#;
    let policy = crate::fixtures::load(&runtime, "rate-limit", settings);
    let request = AdmissionRequest::from_json(
        switchyard_runtime::admission::AdmissionPoint::Inference,
        serde_json::json!({"caller": {"key_id": "key_0123456789abcdef", "project": "research",
            "scopes": ["inference"]}, "model": "demo", "endpoint": "/v1/chat/completions",
            "prompt_tokens": 24, "max_tokens": 96, "stream": false}),
    )
    .expect("an inference record");
    assert_eq!(
        policy.evaluate(&request).expect("a decision"),
        Decision::Allow
    );
    per_call(|| {
        let _ = policy.evaluate(&request);
    })
}

/// A request's four spans, as the frontend and the worker make them, and
/// their share of an export body.
fn spans_per_request() -> f64 {
    per_call(|| {
        let mut frontend = Span::start("POST /v1/chat/completions", SpanKind::Server, None);
        for key in ["gen_ai.operation.name", "gen_ai.provider.name", "url.path"] {
            frontend.set(key, "chat");
        }
        frontend.set("gen_ai.request.model", String::from("demo"));
        frontend.set("gen_ai.request.max_tokens", 96u64);
        frontend.set("gen_ai.request.stream", false);
        let context: TraceContext = *frontend.context();
        let mut policy = Span::start("policy rate-limit@1", SpanKind::Internal, Some(&context));
        policy.set("switchyard.admission.decision", "allow");
        let mut worker = Span::start(
            "worker /v1/chat/completions",
            SpanKind::Server,
            Some(&context),
        );
        worker.set("switchyard.replica", String::from("rep_0123"));
        let mut engine = Span::start(
            "engine POST /v1/chat/completions",
            SpanKind::Client,
            Some(worker.context()),
        );
        engine.set("http.response.status_code", 200u64);
        frontend.set("gen_ai.usage.input_tokens", 24u64);
        frontend.set("gen_ai.usage.output_tokens", 96u64);
        frontend.set("gen_ai.server.time_to_first_token", 0.012);
        let spans = [frontend.end(), policy.end(), engine.end(), worker.end()];
        std::hint::black_box(switchyard_telemetry::encode("switchyard-frontend", &spans));
    })
}
