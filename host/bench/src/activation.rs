//! Activation of a new generation with a warm compile cache: load the three
//! policies (digest check, world check, cached compile, InstancePre, first
//! instance, settings validation, smoke call) and swap the chain in.

use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use switchyard_runtime::{Runtime, RuntimeConfig};

use crate::fixtures::chain;
use crate::stats::{header, percentiles};

const ROUNDS: usize = 30;

pub fn run() {
    let cache = tempfile::tempdir().expect("temp dir");
    let config = RuntimeConfig {
        cache_dir: Some(cache.path().to_path_buf()),
        ..RuntimeConfig::default()
    };

    // Cold: nothing compiled yet.
    let runtime = Runtime::new(config.clone()).expect("runtime");
    let started = Instant::now();
    let live = ArcSwap::from_pointee(chain(&runtime, 1));
    let cold = started.elapsed();

    // Warm in memory: the same process builds the next generations.
    let mut warm_memory: Vec<Duration> = (0..ROUNDS)
        .map(|i| {
            let started = Instant::now();
            live.store(Arc::new(chain(&runtime, 2 + i as i64)));
            started.elapsed()
        })
        .collect();

    // Warm on disk: a new process (a new engine) finds the compiled code in the cache.
    let mut warm_disk: Vec<Duration> = (0..ROUNDS)
        .map(|i| {
            let runtime = Runtime::new(config.clone()).expect("runtime");
            let started = Instant::now();
            live.store(Arc::new(chain(&runtime, 100 + i as i64)));
            started.elapsed()
        })
        .collect();

    header(
        "Activation of a generation of three policies",
        &["cache", "p50 (ms)", "max (ms)"],
    );
    println!(
        "| cold (compile all three) | {:.2} | {:.2} |",
        cold.as_secs_f64() * 1e3,
        cold.as_secs_f64() * 1e3
    );
    for (what, samples) in [
        ("warm, in memory (same process)", &mut warm_memory),
        ("warm, on disk (new process)", &mut warm_disk),
    ] {
        let max = samples.iter().max().copied().unwrap_or_default();
        let (p50, _) = percentiles(samples);
        println!(
            "| {what} | {:.2} | {:.2} |",
            p50 / 1e3,
            max.as_secs_f64() * 1e3
        );
    }
    println!();
}
