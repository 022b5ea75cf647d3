//! Batches: lines per second of an OpenAI batch run through the work queue
//! (a driver dispatching units, every line claimed, run through the `/v1`
//! path and recorded in PostgreSQL), beside the same requests sent one by
//! one to `/v1/chat/completions` by as many concurrent callers as the
//! replica serves at once. The cluster is `switchyard up` (embedded
//! PostgreSQL, the `tunnel` set, so units travel on pgbus) with the
//! reference engine at 1 ms a token, 16 tokens a request.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::fixtures::plugins_dir;
use crate::stats::header;

/// Lines in the measured batch, and requests sent one by one.
const LINES: usize = 2000;
/// The demo deployment's `max_concurrency`: what the one replica serves at once.
const CONCURRENCY: usize = 8;

struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-INT", &self.0.id().to_string()])
            .status();
        let _ = self.0.wait();
    }
}

pub fn run() {
    let Some(bin) = crate::fixtures::switchyard_bin("batch") else {
        return;
    };
    let data = tempfile::tempdir().expect("temp dir");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    let mut up = Command::new(&bin)
        .args(["up", "--listen", &format!("127.0.0.1:{port}")])
        .args(["--token-delay-ms", "1"])
        .arg("--data-dir")
        .arg(data.path().join("data"))
        .arg("--carrier-plugins")
        .arg(plugins_dir())
        .env("RUST_LOG", "error")
        .env_remove("DATABASE_URL")
        .env_remove("SWITCHYARD_NATS_URL")
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
    let base = format!("http://127.0.0.1:{port}");
    let runtime = crate::fixtures::two_thread_runtime();
    header(
        "Batches: chat completions of 16 tokens at 1 ms a token, a batch through the work queue beside the same requests one by one",
        &[
            "lines",
            "concurrency",
            "one by one req/s",
            "batch lines/s",
            "ratio",
        ],
    );
    runtime.block_on(async {
        let http = reqwest::Client::new();
        // Warm both paths (connections, the routing table, the engine).
        one_by_one(&http, &base, &key, 100).await;
        run_batch(&http, &base, &key, 100).await;
        let direct = one_by_one(&http, &base, &key, LINES).await;
        let batched = run_batch(&http, &base, &key, LINES).await;
        println!(
            "| {LINES} | {CONCURRENCY} | {direct:.0} | {batched:.0} | {:.2} |",
            batched / direct
        );
    });
    println!();
}

fn body() -> Value {
    json!({"model": "demo-tiny", "max_tokens": 16,
           "messages": [{"role": "user", "content": "Tell me about switchyards."}]})
}

/// `n` requests from [`CONCURRENCY`] callers; requests per second.
async fn one_by_one(http: &reqwest::Client, base: &str, key: &str, n: usize) -> f64 {
    let url = Arc::new(format!("{base}/v1/chat/completions"));
    let started = Instant::now();
    let callers: Vec<_> = (0..CONCURRENCY)
        .map(|_| {
            let (http, url, key) = (http.clone(), url.clone(), key.to_string());
            tokio::spawn(async move {
                for _ in 0..n / CONCURRENCY {
                    let response = http
                        .post(url.as_str())
                        .bearer_auth(&key)
                        .json(&body())
                        .send()
                        .await
                        .expect("request");
                    assert!(response.status().is_success(), "{}", response.status());
                    let _ = response.bytes().await.expect("body");
                }
            })
        })
        .collect();
    for caller in callers {
        caller.await.expect("caller");
    }
    n as f64 / started.elapsed().as_secs_f64()
}

/// A batch of `n` lines, uploaded, created and polled until it completed;
/// lines per second from its creation to its end.
async fn run_batch(http: &reqwest::Client, base: &str, key: &str, n: usize) -> f64 {
    let mut content = Vec::new();
    for i in 0..n {
        let line = json!({"custom_id": format!("l{i}"), "method": "POST",
                          "url": "/v1/chat/completions", "body": body()});
        content.extend_from_slice(line.to_string().as_bytes());
        content.push(b'\n');
    }
    let boundary = "switchyard-bench-boundary";
    let mut form = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n\
         --{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"b.jsonl\"\r\n\r\n"
    )
    .into_bytes();
    form.extend_from_slice(&content);
    form.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let file: Value = http
        .post(format!("{base}/v1/files"))
        .bearer_auth(key)
        .header(
            "content-type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .body(form)
        .send()
        .await
        .expect("upload")
        .json()
        .await
        .expect("a file");
    let started = Instant::now();
    let batch: Value = http
        .post(format!("{base}/v1/batches"))
        .bearer_auth(key)
        .json(
            &json!({"input_file_id": file["id"], "endpoint": "/v1/chat/completions",
                      "completion_window": "24h"}),
        )
        .send()
        .await
        .expect("create")
        .json()
        .await
        .expect("a batch");
    let url = format!("{base}/v1/batches/{}", batch["id"].as_str().expect("an id"));
    loop {
        let shown: Value = http
            .get(&url)
            .bearer_auth(key)
            .send()
            .await
            .expect("get")
            .json()
            .await
            .expect("a batch");
        if shown["status"] == "completed" {
            assert_eq!(shown["request_counts"]["completed"], n, "{shown}");
            return n as f64 / started.elapsed().as_secs_f64();
        }
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "the batch never completed: {shown}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
