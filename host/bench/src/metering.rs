//! Usage metering's cost: `switchyard up` with metering on beside off
//! (`--no-usage-metering`), the same chat requests (non-streaming and
//! streaming, 16 tokens, no token delay so every cost shows), the CPU time
//! of the cluster's whole process tree (frontend and worker, the embedded
//! PostgreSQL the meter writes to, the engine) per request, and req/s.
//! Off and on alternate, twice each; the table gives each run and the
//! ratio of the medians.

use std::time::Duration;

use crate::cpu::{clock_ticks_per_second, stat_fields};
use crate::routing::{load, start_with};
use crate::stats::header;

/// Requests per mode and run.
const REQUESTS: usize = 2000;

/// Callers at once.
const CONCURRENCY: usize = 4;

/// Every live process whose ancestry includes `root`, `root` too.
fn tree(root: u32) -> Vec<u32> {
    let mut parents = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if let Some(ppid) = stat_fields(&stat).and_then(|f| f.get(1)?.parse::<u32>().ok()) {
            parents.push((pid, ppid));
        }
    }
    let mut found = vec![root];
    let mut grew = true;
    while grew {
        grew = false;
        for (pid, ppid) in &parents {
            if found.contains(ppid) && !found.contains(pid) {
                found.push(*pid);
                grew = true;
            }
        }
    }
    found
}

/// CPU ticks of a process tree (a process that ended is not counted; the
/// cluster's processes live through the run).
fn tree_ticks(root: u32) -> u64 {
    let ticks = |pid: u32| -> Option<u64> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let fields = stat_fields(&stat)?;
        Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
    };
    tree(root).into_iter().filter_map(ticks).sum()
}

pub fn run() {
    let Some(bin) = crate::fixtures::switchyard_bin("metering") else {
        return;
    };
    let runtime = crate::fixtures::two_thread_runtime();
    header(
        "Usage metering: CPU per chat request of the cluster's processes, metering off beside on",
        &[
            "run",
            "metering",
            "mode",
            "requests",
            "req/s",
            "CPU per request (ms)",
        ],
    );
    let tick_ms = 1000.0 / clock_ticks_per_second();
    let mut per_request: [[Vec<f64>; 2]; 2] = Default::default();
    for run in 1..=2 {
        for (m, metering) in ["off", "on"].into_iter().enumerate() {
            let extra: &[&str] = if metering == "off" {
                &["--no-usage-metering"]
            } else {
                &[]
            };
            let cluster = start_with(&bin, None, 0, extra);
            let root = cluster.up.0.id();
            let http = reqwest::Client::new();
            runtime.block_on(wait_ready(&http, &cluster.frontend, &cluster.key));
            for (s, stream) in [false, true].into_iter().enumerate() {
                let before = tree_ticks(root);
                let (_, rate) = runtime.block_on(load(
                    &http,
                    &cluster.frontend,
                    Some(&cluster.key),
                    CONCURRENCY,
                    stream,
                    REQUESTS,
                ));
                let cpu = (tree_ticks(root) - before) as f64 * tick_ms / REQUESTS as f64;
                per_request[m][s].push(cpu);
                println!(
                    "| {run} | {metering} | {} | {REQUESTS} | {rate:.0} | {cpu:.3} |",
                    if stream { "streaming" } else { "non-streaming" }
                );
            }
        }
    }
    println!();
    for (s, mode) in ["non-streaming", "streaming"].into_iter().enumerate() {
        // The median of two runs is their mean.
        let median = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let (off, on) = (median(&per_request[0][s]), median(&per_request[1][s]));
        println!(
            "{mode}: CPU per request off {off:.3} ms, on {on:.3} ms, on/off {:.3}",
            on / off
        );
    }
    println!();
}

/// Until the frontend answers a chat request with the inference key.
async fn wait_ready(http: &reqwest::Client, base: &str, key: &str) {
    let body = serde_json::json!({"model": "demo-tiny", "max_tokens": 1,
        "messages": [{"role": "user", "content": "ready?"}]});
    for _ in 0..600 {
        let answered = http
            .post(format!("{base}/v1/chat/completions"))
            .bearer_auth(key)
            .json(&body)
            .send()
            .await;
        if answered.is_ok_and(|r| r.status().is_success()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the cluster at {base} never answered a chat request");
}
