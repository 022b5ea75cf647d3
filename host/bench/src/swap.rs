//! A swap every 5 ms while 8 threads evaluate continuously: no call may fail,
//! and every call is answered by a whole generation.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use switchyard_runtime::admission::{AdmissionPoint, AdmissionRequest, Decision};
use switchyard_runtime::{Runtime, RuntimeConfig};

use crate::fixtures::{REQUEST, chain};
use crate::stats::header;

const CALLERS: usize = 8;
const SWAP_EVERY: Duration = Duration::from_millis(5);
const RUN_FOR: Duration = Duration::from_secs(3);

pub fn run() {
    let runtime = Runtime::new(RuntimeConfig::default()).expect("runtime");
    let live = Arc::new(ArcSwap::from_pointee(chain(&runtime, 1)));
    let request = AdmissionRequest::from_json(
        AdmissionPoint::Inference,
        serde_json::from_str(REQUEST).unwrap(),
    )
    .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (calls, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));

    let callers: Vec<_> = (0..CALLERS)
        .map(|_| {
            let (live, request, stop, calls, failed) = (
                live.clone(),
                request.clone(),
                stop.clone(),
                calls.clone(),
                failed.clone(),
            );
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let verdict = live.load().evaluate(request.clone());
                    calls.fetch_add(1, Ordering::Relaxed);
                    let whole =
                        verdict.steps.len() == 3 && verdict.steps.iter().all(|s| s.error.is_none());
                    if verdict.decision != Decision::Allow || !whole {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();

    // Build the next generations ahead (make), then swap on the beat (break).
    let started = Instant::now();
    let mut swaps = 0u64;
    let mut next = chain(&runtime, 2);
    while started.elapsed() < RUN_FOR {
        std::thread::sleep(SWAP_EVERY);
        live.store(Arc::new(next));
        swaps += 1;
        next = chain(&runtime, 2 + swaps as i64);
    }
    stop.store(true, Ordering::Relaxed);
    for caller in callers {
        caller.join().expect("caller thread");
    }
    header(
        &format!(
            "Swap under load ({CALLERS} callers, a swap every {} ms, {} s)",
            SWAP_EVERY.as_millis(),
            RUN_FOR.as_secs()
        ),
        &["swaps", "calls", "failed calls"],
    );
    println!(
        "| {swaps} | {} | {} |",
        calls.load(Ordering::Relaxed),
        failed.load(Ordering::Relaxed)
    );
    println!();
}
