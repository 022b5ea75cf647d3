//! One policy in three languages: the model allowlist from Rust
//! (policies/model-allowlist), Python (componentize-py) and JavaScript
//! (jco, QuickJS backend), built by scripts/build-guests.sh and
//! scripts/build-policy-examples.sh: size, load time with a cold and a
//! warm compile cache, and the time of a call on a warm instance.

use std::hint::black_box;
use std::time::Instant;

use switchyard_runtime::admission::{AdmissionPoint, AdmissionRequest};
use switchyard_runtime::{Runtime, RuntimeConfig};

use crate::fixtures::{CHAIN, REQUEST, component, load};
use crate::stats::{header, percentiles, sample};

const LANGUAGES: [(&str, &str); 3] = [
    ("Rust", "model-allowlist"),
    ("Python", "model-allowlist-python"),
    ("JavaScript", "model-allowlist-js"),
];

/// Fewer calls than the latency section: a Python call is slower, and the
/// percentiles settle long before.
const ITERATIONS: usize = 20_000;

pub fn run() {
    let request = AdmissionRequest::from_json(
        AdmissionPoint::Inference,
        serde_json::from_str(REQUEST).unwrap(),
    )
    .unwrap();
    // The allowlist's settings in the latency section's chain.
    let settings = CHAIN[0].1;
    header(
        &format!(
            "One policy in three languages (model-allowlist; {ITERATIONS} calls each, warm instance)"
        ),
        &[
            "language",
            "component (KB)",
            "cold load: compile (ms)",
            "warm load: disk cache (ms)",
            "call p50 (us)",
            "call p99 (us)",
        ],
    );
    for (language, name) in LANGUAGES {
        let (bytes, _) = component(name);
        let cache = tempfile::tempdir().expect("temp dir");
        let config = RuntimeConfig {
            cache_dir: Some(cache.path().to_path_buf()),
            ..RuntimeConfig::default()
        };
        // Load = digest and world checks, compile (or the cache), the first
        // instance, settings validation and the smoke call.
        let runtime = Runtime::new(config.clone()).expect("runtime");
        let started = Instant::now();
        drop(load(&runtime, name, settings));
        let cold = started.elapsed();
        let runtime = Runtime::new(config).expect("runtime");
        let started = Instant::now();
        let policy = load(&runtime, name, settings);
        let warm = started.elapsed();
        let mut calls = sample(ITERATIONS, || {
            black_box(policy.evaluate(black_box(&request)).unwrap());
        });
        let (p50, p99) = percentiles(&mut calls);
        println!(
            "| {language} | {:.0} | {:.0} | {:.1} | {p50:.2} | {p99:.2} |",
            bytes.len() as f64 / 1024.0,
            cold.as_secs_f64() * 1e3,
            warm.as_secs_f64() * 1e3,
        );
    }
    println!();
}
