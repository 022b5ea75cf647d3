//! Routing overhead: OpenAI chat completions through the frontend (the
//! inference chain, the routing table, a stream on the carrier set's
//! inference lane, the worker, the engine) beside the same requests
//! straight to a reference engine on the same model file, at rising
//! concurrency, non-streaming and streaming, on each carrier set. The
//! cluster is `switchyard up` (embedded PostgreSQL, one worker, the
//! reference engine). With no token delay the engine answers in about
//! 0.1 ms, so every cost of the path shows; with 1 ms per token (16 ms a
//! request, a fast small model) the overhead is seen against real work.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::fixtures::plugins_dir;
use crate::stats::{header, percentiles};

/// One table row's workload: token delay, concurrency levels, requests per level.
struct Workload {
    token_delay_ms: u64,
    levels: &'static [usize],
    requests: usize,
}

const WORKLOADS: [Workload; 2] = [
    Workload {
        token_delay_ms: 0,
        levels: &[1, 4, 8],
        requests: 2000,
    },
    Workload {
        token_delay_ms: 1,
        levels: &[1, 8],
        requests: 400,
    },
];

pub(crate) struct Killed(pub(crate) Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-INT", &self.0.id().to_string()])
            .status();
        let _ = self.0.wait();
    }
}

/// A running `switchyard up` and a reference engine beside it.
pub(crate) struct Cluster {
    pub(crate) frontend: String,
    pub(crate) key: String,
    pub(crate) direct: String,
    // Dropped in order: the engine, then the cluster.
    pub(crate) engine: Killed,
    pub(crate) up: Killed,
    _data: tempfile::TempDir,
}

pub(crate) fn start(bin: &std::path::Path, nats_url: Option<&str>, token_delay_ms: u64) -> Cluster {
    start_with(bin, nats_url, token_delay_ms, &[])
}

/// [`start`], with more flags for `up`.
/// The admin token of the clusters the benches start (a bench binds
/// policies through the admin API).
pub(crate) const BENCH_ADMIN_TOKEN: &str = "bench-admin-token-0123456789abcdef0123456789";

pub(crate) fn start_with(
    bin: &std::path::Path,
    nats_url: Option<&str>,
    token_delay_ms: u64,
    extra: &[&str],
) -> Cluster {
    let data = tempfile::tempdir().expect("temp dir");
    // Run as root, the embedded PostgreSQL runs as its service account,
    // which must be able to walk down to the data directory.
    std::fs::set_permissions(
        data.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o711),
    )
    .expect("temp dir permissions");
    let port = free_port();
    let mut command = Command::new(bin);
    command
        .args([
            "up",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--token-delay-ms",
            &token_delay_ms.to_string(),
        ])
        .arg("--data-dir")
        .arg(data.path().join("data"))
        .arg("--carrier-plugins")
        .arg(plugins_dir())
        .args(extra)
        .env("RUST_LOG", "error")
        .env("SWITCHYARD_ADMIN_TOKEN", BENCH_ADMIN_TOKEN)
        .env_remove("SWITCHYARD_OTLP_ENDPOINT")
        .env_remove("DATABASE_URL")
        .env_remove("SWITCHYARD_NATS_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some(url) = nats_url {
        command.args(["--nats-url", url]);
    }
    let mut up = command.spawn().expect("switchyard up");
    let stdout = BufReader::new(up.stdout.take().expect("stdout"));
    let mut key = String::new();
    for line in stdout.lines().map_while(Result::ok) {
        if let Some(found) = line.strip_prefix("Inference key: ") {
            key = found.to_string();
        }
        if line.starts_with("Ctrl-C stops") {
            break;
        }
    }
    let up = Killed(up);
    let engine_port = free_port();
    let engine = Command::new(bin)
        .args(["engine", "reference", "--served-model-name", "demo-tiny"])
        .arg("--model")
        .arg(data.path().join("data/demo-model/demo-tiny.gguf"))
        .args(["--listen", &format!("127.0.0.1:{engine_port}")])
        .args(["--token-delay-ms", &token_delay_ms.to_string()])
        .env("RUST_LOG", "error")
        .spawn()
        .expect("a direct reference engine");
    Cluster {
        frontend: format!("http://127.0.0.1:{port}"),
        key,
        direct: format!("http://127.0.0.1:{engine_port}"),
        engine: Killed(engine),
        up,
        _data: data,
    }
}

pub fn run() {
    let Some(bin) = crate::fixtures::switchyard_bin("routing") else {
        return;
    };
    let nats = crate::nats::start_server();
    if nats.is_none() {
        println!("(the nats set is skipped: no nats-server; scripts/bench.sh installs it)");
    }
    let runtime = crate::fixtures::two_thread_runtime();
    header(
        "Routing: chat completions of 16 tokens, through the frontend beside straight to the engine",
        &[
            "carrier set",
            "token delay (ms)",
            "mode",
            "concurrency",
            "direct p50/p99 (ms)",
            "frontend p50/p99 (ms)",
            "added p99 (ms)",
            "direct req/s",
            "frontend req/s",
            "ratio",
        ],
    );
    let sets = [
        ("tunnel", None),
        ("nats", nats.as_ref().map(|(_, url)| url.as_str())),
    ];
    for (set, url) in sets {
        if set == "nats" && url.is_none() {
            continue;
        }
        for workload in &WORKLOADS {
            let cluster = start(&bin, url, workload.token_delay_ms);
            runtime.block_on(measure(set, &cluster, workload));
        }
    }
    println!();
}

async fn measure(set: &str, cluster: &Cluster, workload: &Workload) {
    let http = reqwest::Client::new();
    while http
        .get(format!("{}/health", cluster.direct))
        .send()
        .await
        .map_or(true, |r| !r.status().is_success())
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for stream in [false, true] {
        for &level in workload.levels {
            let n = workload.requests;
            let (mut d, d_rate) = load(&http, &cluster.direct, None, level, stream, n).await;
            let (mut f, f_rate) = load(
                &http,
                &cluster.frontend,
                Some(&cluster.key),
                level,
                stream,
                n,
            )
            .await;
            let (dp50, dp99) = percentiles(&mut d);
            let (fp50, fp99) = percentiles(&mut f);
            println!(
                "| {set} | {} | {} | {level} | {:.2}/{:.2} | {:.2}/{:.2} | {:.2} | {d_rate:.0} | {f_rate:.0} | {:.2} |",
                workload.token_delay_ms,
                if stream { "streaming" } else { "non-streaming" },
                dp50 / 1e3,
                dp99 / 1e3,
                fp50 / 1e3,
                fp99 / 1e3,
                (fp99 - dp99) / 1e3,
                f_rate / d_rate
            );
        }
    }
}

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// `requests` requests from `level` concurrent callers: latencies and req/s.
pub(crate) async fn load(
    http: &reqwest::Client,
    base: &str,
    key: Option<&str>,
    level: usize,
    stream: bool,
    requests: usize,
) -> (Vec<Duration>, f64) {
    let body = Arc::new(json!({
        "model": "demo-tiny", "max_tokens": 16, "stream": stream,
        "messages": [{"role": "user", "content": "Tell me about switchyards."}],
    }));
    let url = Arc::new(format!("{base}/v1/chat/completions"));
    let per_caller = requests / level;
    // Warm-up.
    for _ in 0..20 {
        one(http, &url, key, &body).await;
    }
    let started = Instant::now();
    let callers: Vec<_> = (0..level)
        .map(|_| {
            let (http, url, body) = (http.clone(), url.clone(), body.clone());
            let key = key.map(str::to_string);
            tokio::spawn(async move {
                let mut samples = Vec::with_capacity(per_caller);
                for _ in 0..per_caller {
                    samples.push(one(&http, &url, key.as_deref(), &body).await);
                }
                samples
            })
        })
        .collect();
    let mut samples = Vec::with_capacity(requests);
    for caller in callers {
        samples.extend(caller.await.expect("caller"));
    }
    let rate = samples.len() as f64 / started.elapsed().as_secs_f64();
    (samples, rate)
}

async fn one(
    http: &reqwest::Client,
    url: &str,
    key: Option<&str>,
    body: &serde_json::Value,
) -> Duration {
    let started = Instant::now();
    let mut request = http.post(url).json(body);
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let response = request.send().await.expect("request");
    assert!(response.status().is_success(), "{}", response.status());
    let _ = response.bytes().await.expect("body");
    started.elapsed()
}
