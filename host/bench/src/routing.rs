//! Routing overhead: OpenAI chat completions through the frontend (the
//! inference chain, the routing table, the tunnel carrier's inference lane,
//! the worker, the engine) beside the same requests straight to a reference
//! engine on the same model file, at rising concurrency, non-streaming and
//! streaming. The cluster is `switchyard up` (embedded PostgreSQL, one
//! worker, the reference engine without token delay).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::fixtures::plugins_dir;
use crate::stats::{header, percentiles};

/// Concurrency levels (the demo deployment serves 8 at once per replica).
const LEVELS: [usize; 3] = [1, 4, 8];
/// Requests per level and mode.
const REQUESTS: usize = 2000;

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-INT", &self.0.id().to_string()])
            .status();
        let _ = self.0.wait();
    }
}

pub fn run() {
    let exe = std::env::current_exe().expect("current exe");
    let bin = exe.with_file_name("switchyard");
    if !bin.is_file() {
        println!(
            "(skipping routing: {} is not built; scripts/bench.sh builds it)",
            bin.display()
        );
        return;
    }
    let data = tempfile::tempdir().expect("temp dir");
    let port = free_port();
    let mut up = Command::new(&bin)
        .args([
            "up",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--token-delay-ms",
            "0",
        ])
        .arg("--data-dir")
        .arg(data.path().join("data"))
        .arg("--carrier-plugins")
        .arg(plugins_dir())
        .env("RUST_LOG", "error")
        .env_remove("DATABASE_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("switchyard up");
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
    let _up = Killed(up);
    let engine_port = free_port();
    let engine = Command::new(&bin)
        .args(["engine", "reference", "--served-model-name", "demo-tiny"])
        .arg("--model")
        .arg(data.path().join("data/demo-model/demo-tiny.gguf"))
        .args(["--listen", &format!("127.0.0.1:{engine_port}")])
        .env("RUST_LOG", "error")
        .spawn()
        .expect("a direct reference engine");
    let _engine = Killed(engine);

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    runtime.block_on(async {
        let http = reqwest::Client::new();
        let direct = format!("http://127.0.0.1:{engine_port}");
        while http
            .get(format!("{direct}/health"))
            .send()
            .await
            .map_or(true, |r| !r.status().is_success())
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let frontend = format!("http://127.0.0.1:{port}");
        header(
            "Routing: chat completions of 16 tokens, through the frontend (tunnel set) beside straight to the engine",
            &["mode", "concurrency", "direct p50/p99 (ms)", "frontend p50/p99 (ms)", "added p99 (ms)", "direct req/s", "frontend req/s", "ratio"],
        );
        for stream in [false, true] {
            for level in LEVELS {
                let (mut d, d_rate) = load(&http, &direct, None, level, stream).await;
                let (mut f, f_rate) = load(&http, &frontend, Some(&key), level, stream).await;
                let (dp50, dp99) = percentiles(&mut d);
                let (fp50, fp99) = percentiles(&mut f);
                println!(
                    "| {} | {level} | {:.2}/{:.2} | {:.2}/{:.2} | {:.2} | {d_rate:.0} | {f_rate:.0} | {:.2} |",
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
        println!();
    });
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// `REQUESTS` requests from `level` concurrent callers: latencies and req/s.
async fn load(
    http: &reqwest::Client,
    base: &str,
    key: Option<&str>,
    level: usize,
    stream: bool,
) -> (Vec<Duration>, f64) {
    let body = Arc::new(json!({
        "model": "demo-tiny", "max_tokens": 16, "stream": stream,
        "messages": [{"role": "user", "content": "Tell me about switchyards."}],
    }));
    let url = Arc::new(format!("{base}/v1/chat/completions"));
    let per_caller = REQUESTS / level;
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
    let mut samples = Vec::with_capacity(REQUESTS);
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
