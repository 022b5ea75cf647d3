//! Federation: a remote chat completion through the link beside the same
//! request on the owner cluster directly. Two clusters on this machine,
//! each a `switchyard serve` on its own database with one worker and the
//! reference engine serving `demo@r1` (the end-to-end suite's
//! `switchyard_tests::federation::Member`); alpha joins beta, beta offers
//! its deployment as service `chat` and grants alpha `inference` on it
//! (64 concurrent calls, a million requests, an hour). Then the same
//! non-streaming chat completion of 16 tokens goes (a) to beta's `/v1` with
//! a beta `inference` key, model `demo`, and (b) to alpha's `/v1` with an
//! alpha `federation:invoke` key, model `beta/chat`: alpha's frontend,
//! the link's inference lane, beta judging the call (grant evaluator,
//! counters charged and released in PostgreSQL, the `federation` and
//! `inference` chains) and routing it to its deployment, the answer back
//! the same way. 1, 4 and 8 concurrent callers, a warm-up, then a fixed
//! number of requests per row, direct first. The engine waits 1 ms per
//! token, so it does work the way a fast small model does.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use switchyard_store::embedded::EmbeddedPostgres;
use switchyard_tests::federation::{Member, grant};

use crate::stats::{header, percentiles};

/// Where the harness makes each cluster's database.
const DATABASE_VAR: &str = "SWITCHYARD_TEST_DATABASE_URL";
/// The reference engine's delay per token.
const TOKEN_DELAY_MS: u64 = 1;
/// Tokens per answer.
const MAX_TOKENS: u64 = 16;
/// Concurrent callers and the requests each row measures.
const LEVELS: [(usize, usize); 3] = [(1, 200), (4, 400), (8, 800)];
/// Requests before each measured row (not counted).
const WARM_UP: usize = 16;

/// One table row.
struct Row {
    callers: usize,
    requests: usize,
    direct: Measured,
    remote: Measured,
}

pub fn run() {
    let beside = std::env::current_exe()
        .expect("current exe")
        .with_file_name("switchyard");
    if !beside.is_file() && std::env::var_os("SWITCHYARD_BIN").is_none() {
        println!("(skipping federation: the switchyard binary is not built beside this one)");
        return;
    }
    if std::env::var_os(DATABASE_VAR).is_none() {
        return run_on_private_postgres();
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    let (rows, counted) = runtime.block_on(measure());
    header(
        &format!(
            "Federation: non-streaming chat completions of {MAX_TOKENS} tokens ({TOKEN_DELAY_MS} ms a token), through alpha to beta's service beside beta directly"
        ),
        &[
            "callers",
            "requests",
            "direct p50/p99 (ms)",
            "remote p50/p99 (ms)",
            "added p50/p99 (ms)",
            "direct req/s",
            "remote req/s",
            "ratio",
            "failed direct/remote",
        ],
    );
    let mut failures = std::collections::BTreeMap::<String, usize>::new();
    for mut row in rows {
        let (dp50, dp99) = percentiles(&mut row.direct.samples);
        let (rp50, rp99) = percentiles(&mut row.remote.samples);
        println!(
            "| {} | {} | {:.2}/{:.2} | {:.2}/{:.2} | {:.2}/{:.2} | {:.0} | {:.0} | {:.2} | {}/{} |",
            row.callers,
            row.requests,
            dp50 / 1e3,
            dp99 / 1e3,
            rp50 / 1e3,
            rp99 / 1e3,
            (rp50 - dp50) / 1e3,
            (rp99 - dp99) / 1e3,
            row.direct.rate,
            row.remote.rate,
            row.remote.rate / row.direct.rate,
            row.direct.failed.len(),
            row.remote.failed.len(),
        );
        for (side, failed) in [("direct", row.direct.failed), ("remote", row.remote.failed)] {
            for e in failed {
                *failures.entry(format!("{side} {e}")).or_default() += 1;
            }
        }
    }
    println!();
    println!("{counted}");
    if !failures.is_empty() {
        let counts: Vec<String> = failures.iter().map(|(e, n)| format!("{e} ×{n}")).collect();
        println!("failed requests (status and code): {}", counts.join(", "));
    }
    println!();
}

/// The harness makes each cluster's database in the PostgreSQL that
/// `SWITCHYARD_TEST_DATABASE_URL` names and reads nothing else: without
/// one, a private PostgreSQL is started and this section runs again in a
/// child process that has it (the bench sets no variable of its own).
fn run_on_private_postgres() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut pg = EmbeddedPostgres::start(&dir.path().join("pg")).expect("a private PostgreSQL");
    let mut child = Command::new(std::env::current_exe().expect("current exe"))
        .arg("federation")
        .env(DATABASE_VAR, pg.url())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the federation section in a child process");
    let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
    // The child's own banner was printed by this process already.
    let mut banner = true;
    for line in stdout.lines().map_while(Result::ok) {
        if banner && (line.starts_with("switchyard-bench (") || line.is_empty()) {
            continue;
        }
        banner = false;
        println!("{line}");
    }
    let status = child.wait().expect("the child's exit");
    let _ = pg.stop();
    assert!(status.success(), "the federation section failed: {status}");
}

/// Starts, pairs and grants the two clusters, measures each row; the rows
/// and a line on what beta counted against the grant.
async fn measure() -> (Vec<Row>, String) {
    let fields = json!({"token_delay_ms": TOKEN_DELAY_MS, "max_concurrency": 16});
    let (alpha, beta) = tokio::join!(
        Member::serving("alpha", fields.clone()),
        Member::serving("beta", fields)
    );
    alpha.join(&beta).await;
    beta.offer_service("chat").await;
    let spec = json!({"services": ["chat"], "operations": ["inference"], "lifetime_s": 3600,
                      "max_concurrent": 64, "max_requests": 1_000_000});
    let id = grant(&beta, &alpha, &["inference"], spec).await;
    let remote_key = alpha.key(&["federation:invoke"]).await;
    let direct_key = beta.cluster.inference_key().await;

    let http = reqwest::Client::new();
    let on_beta = Target::new(beta.url(), &direct_key, "demo");
    let through_alpha = Target::new(alpha.url(), &remote_key, "beta/chat");
    let mut rows = Vec::new();
    let mut remote_calls = 0;
    for (callers, requests) in LEVELS {
        let direct = load(&http, &on_beta, callers, requests).await;
        let remote = load(&http, &through_alpha, callers, requests).await;
        remote_calls += WARM_UP + requests;
        rows.push(Row {
            callers,
            requests,
            direct,
            remote,
        });
    }

    // Every remote call was charged to the grant once and released.
    let shown = beta
        .expect(
            StatusCode::OK,
            Method::GET,
            &format!("/api/federation/grants/{id}"),
            None,
        )
        .await;
    let usage = &shown["usage"];
    let counted = format!(
        "beta counted {} requests against the grant for the {remote_calls} remote calls sent (warm-ups included); {} in flight after the run",
        usage["requests"], usage["in_flight"]
    );
    (rows, counted)
}

/// Where a row's requests go.
struct Target {
    url: String,
    key: String,
    body: Value,
}

impl Target {
    fn new(base: &str, key: &str, model: &str) -> Arc<Self> {
        Arc::new(Self {
            url: format!("{base}/v1/chat/completions"),
            key: key.to_string(),
            body: json!({
                "model": model, "max_tokens": MAX_TOKENS, "stream": false,
                "messages": [{"role": "user", "content": "Tell me about switchyards."}],
            }),
        })
    }
}

/// `requests` requests from `callers` concurrent callers after a warm-up.
async fn load(
    http: &reqwest::Client,
    target: &Arc<Target>,
    callers: usize,
    requests: usize,
) -> Measured {
    let mut measured = Measured::default();
    for _ in 0..WARM_UP {
        if let Err(e) = one(http, target).await {
            measured.failed.push(e);
        }
    }
    let per_caller = requests / callers;
    let started = Instant::now();
    let tasks: Vec<_> = (0..callers)
        .map(|_| {
            let (http, target) = (http.clone(), target.clone());
            tokio::spawn(async move {
                let mut outcomes = Vec::with_capacity(per_caller);
                for _ in 0..per_caller {
                    outcomes.push(one(&http, &target).await);
                }
                outcomes
            })
        })
        .collect();
    for task in tasks {
        for outcome in task.await.expect("a caller") {
            match outcome {
                Ok(latency) => measured.samples.push(latency),
                Err(e) => measured.failed.push(e),
            }
        }
    }
    measured.rate = measured.samples.len() as f64 / started.elapsed().as_secs_f64();
    measured
}

/// One side of a row: the answered requests' latencies, answered req/s,
/// and what failed (warm-ups included).
#[derive(Default)]
struct Measured {
    samples: Vec<Duration>,
    rate: f64,
    failed: Vec<String>,
}

/// One request, read to its end: its latency, or the status and error
/// code of a failed one.
async fn one(http: &reqwest::Client, target: &Target) -> Result<Duration, String> {
    let started = Instant::now();
    let response = http
        .post(&target.url)
        .bearer_auth(&target.key)
        .json(&target.body)
        .send()
        .await
        .map_err(|e| format!("not sent: {e}"))?;
    let status = response.status();
    let body = response.bytes().await.map_err(|e| format!("broken: {e}"))?;
    if !status.is_success() {
        let answer: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        return Err(format!(
            "{} {}",
            status.as_u16(),
            answer["error"]["code"].as_str().unwrap_or("?")
        ));
    }
    Ok(started.elapsed())
}
