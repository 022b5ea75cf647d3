//! The cost of accountability: `switchyard up` with nothing on
//! (`--no-usage-metering`), with usage metering, with metering and the
//! shipped `rate-limit` policy bound (limits far above the load: every
//! request judged over the counters, none refused), with metering and OTLP
//! traces exported (to a sink in this process, whose own CPU is not
//! counted), and with all three.
//! The same chat requests (non-streaming and streaming, 16 tokens, no
//! token delay so every cost shows); the CPU time of the cluster's whole
//! process tree (frontend and worker, the embedded PostgreSQL, the engine)
//! per request, and req/s. The configurations alternate, three runs each;
//! the table gives each run and the ratios of the medians to "off".

use std::time::Duration;

use crate::cpu::{clock_ticks_per_second, stat_fields};
use crate::routing::{BENCH_ADMIN_TOKEN, free_port, load, start_with};
use crate::stats::header;

/// The configurations: what is on beyond the path itself.
const MODES: [&str; 5] = ["off", "metering", "+policy", "+otlp", "all"];

/// Requests per mode and run.
const REQUESTS: usize = 2000;

/// Callers at once.
const CONCURRENCY: usize = 4;

/// Runs of each configuration, alternating.
const RUNS: usize = 5;

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
    let sink = runtime.block_on(otlp_sink());
    header(
        "Accountability: CPU per chat request of the cluster's processes; off, metering, metering + rate-limit policy + OTLP",
        &[
            "run",
            "configuration",
            "mode",
            "requests",
            "req/s",
            "CPU per request (ms)",
        ],
    );
    let tick_ms = 1000.0 / clock_ticks_per_second();
    let mut per_request: [[Vec<f64>; 2]; MODES.len()] = Default::default();
    for run in 1..=RUNS {
        for (m, mode) in MODES.into_iter().enumerate() {
            let extra: Vec<&str> = match mode {
                "off" => vec!["--no-usage-metering"],
                "metering" | "+policy" => vec![],
                _ => vec!["--otlp-endpoint", &sink],
            };
            let cluster = start_with(&bin, None, 0, &extra);
            let root = cluster.up.0.id();
            let http = reqwest::Client::new();
            runtime.block_on(wait_ready(&http, &cluster.frontend, &cluster.key));
            if mode == "all" || mode == "+policy" {
                runtime.block_on(bind_rate_limit(&http, &cluster.frontend));
            }
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
                    "| {run} | {mode} | {} | {REQUESTS} | {rate:.0} | {cpu:.3} |",
                    if stream { "streaming" } else { "non-streaming" }
                );
            }
        }
    }
    println!();
    for (s, stream) in ["non-streaming", "streaming"].into_iter().enumerate() {
        let median = |v: &[f64]| {
            let mut v = v.to_vec();
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let off = median(&per_request[0][s]);
        let shown: Vec<String> = MODES
            .iter()
            .zip(&per_request)
            .skip(1)
            .map(|(mode, runs)| {
                let cpu = median(&runs[s]);
                format!("{mode} {cpu:.3} ms ({:.3})", cpu / off)
            })
            .collect();
        println!(
            "{stream}: CPU per request off {off:.3} ms; {} (÷ off)",
            shown.join(", ")
        );
    }
    println!();
}

/// An OTLP/HTTP endpoint that takes every export and answers 200; its URL.
async fn otlp_sink() -> String {
    let port = free_port();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(|_body: axum::body::Bytes| async { "" }),
    );
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .expect("the OTLP sink's port");
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://127.0.0.1:{port}")
}

/// Pushes the shipped `rate-limit` policy and binds it at the inference
/// point with limits no run reaches.
async fn bind_rate_limit(http: &reqwest::Client, base: &str) {
    use sha2::Digest;
    let path = crate::fixtures::plugins_dir().join("rate-limit.wasm");
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let sha = hex::encode(sha2::Sha256::digest(&bytes));
    let pushed = http
        .post(format!("{base}/api/plugins"))
        .bearer_auth(BENCH_ADMIN_TOKEN)
        .query(&[
            ("name", "rate-limit"),
            ("version", "bench"),
            ("sha256", &sha),
        ])
        .body(bytes)
        .send()
        .await
        .expect("the plugin push");
    assert!(pushed.status().is_success(), "push: {}", pushed.status());
    let settings = serde_json::json!({"limits": [
        {"subject": "key:*", "rpm": 1_000_000_000u64, "tpm": 1_000_000_000_000u64, "max_parallel": 1000},
    ]});
    let bound = http
        .put(format!("{base}/api/admission/inference"))
        .bearer_auth(BENCH_ADMIN_TOKEN)
        .json(&serde_json::json!({"policies": [
            {"plugin": "rate-limit", "version": "bench", "settings": settings},
        ]}))
        .send()
        .await
        .expect("the chain");
    assert!(bound.status().is_success(), "bind: {}", bound.status());
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
