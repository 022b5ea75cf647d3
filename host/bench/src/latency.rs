//! Evaluation latency through the host, beside the same logic natively.

use std::hint::black_box;
use std::time::{SystemTime, UNIX_EPOCH};

use switchyard_runtime::admission::{AdmissionPoint, AdmissionRequest};
use switchyard_runtime::{Runtime, RuntimeConfig};
use switchyard_sdk::{InferenceDecision, InferenceRequest};

use crate::fixtures::{CHAIN, REQUEST, chain, load};
use crate::stats::{header, percentiles, sample};

const ITERATIONS: usize = 200_000;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

pub fn run() {
    let runtime = Runtime::new(RuntimeConfig::default()).expect("runtime");
    let host_request = AdmissionRequest::from_json(
        AdmissionPoint::Inference,
        serde_json::from_str(REQUEST).unwrap(),
    )
    .unwrap();
    let native_request: InferenceRequest = serde_json::from_str(REQUEST).unwrap();

    let allowlist: policy_model_allowlist::Settings = serde_json::from_str(CHAIN[0].1).unwrap();
    let max_tokens: policy_max_tokens::Settings = serde_json::from_str(CHAIN[1].1).unwrap();
    let weekends: example_deny_weekends::Settings = serde_json::from_str(CHAIN[2].1).unwrap();

    // One policy.
    let policy = load(&runtime, CHAIN[1].0, CHAIN[1].1);
    let mut host_one = sample(ITERATIONS, || {
        black_box(policy.evaluate(black_box(&host_request)).unwrap());
    });
    let mut native_one = sample(ITERATIONS, || {
        black_box(policy_max_tokens::evaluate_inference(
            black_box(&max_tokens),
            black_box(&native_request),
        ));
    });

    // A chain of three.
    let chain = chain(&runtime, 1);
    let mut host_chain = sample(ITERATIONS, || {
        black_box(chain.evaluate(black_box(host_request.clone())));
    });
    let mut native_chain = sample(ITERATIONS, || {
        let request = black_box(&native_request);
        let steps = [
            policy_model_allowlist::evaluate_inference(&allowlist, request),
            policy_max_tokens::evaluate_inference(&max_tokens, request),
            example_deny_weekends::evaluate_inference_at(&weekends, request, now_ms()),
        ];
        black_box(
            steps
                .iter()
                .any(|d| matches!(d, InferenceDecision::Deny(_))),
        );
    });

    header(
        &format!("Policy evaluation ({ITERATIONS} calls each, warm instance)"),
        &[
            "what",
            "host p50 (us)",
            "host p99 (us)",
            "native p50 (us)",
            "native p99 (us)",
            "host/native p50",
            "host p99/p50",
        ],
    );
    for (what, host, native) in [
        ("one policy (max-tokens)", &mut host_one, &mut native_one),
        (
            "chain of three (model-allowlist, max-tokens, deny-weekends)",
            &mut host_chain,
            &mut native_chain,
        ),
    ] {
        let (h50, h99) = percentiles(host);
        let (n50, n99) = percentiles(native);
        println!(
            "| {what} | {h50:.2} | {h99:.2} | {n50:.3} | {n99:.3} | {:.0}x | {:.2} |",
            h50 / n50.max(0.001),
            h99 / h50
        );
    }
    println!();
}
