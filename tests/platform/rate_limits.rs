//! Rate limits and budgets as a policy over the host's counters, against
//! a real cluster: two frontend replicas on one database, a worker, the
//! reference engine, the shipped `rate-limit` policy, and 16 clients of the
//! official `openai` Python client split across the two replicas.
//!
//! A team's tokens-per-minute limit of N holds for the cluster within the
//! stated error (another replica's admissions are seen one sync interval
//! and a notification's delivery late); every 429
//! carries OpenAI's headers and error shape (the client checks); a day
//! budget's soft threshold is recorded as a flag without refusing.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use switchyard_tests::ADMIN_TOKEN;
use switchyard_tests::cluster::Cluster;
use switchyard_tests::plugins::{component, sha256};
use switchyard_tests::process::ServeProcess;

/// The team's tokens per minute.
const TPM: u64 = 1500;
/// Clients, and requests each.
const CLIENTS: usize = 16;
const EACH: usize = 12;
/// A request's estimate: its prompt (50 characters, 4 a token) and `max_tokens` 8.
const ESTIMATE: u64 = 12 + 8;

async fn call(url: &str, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
    let mut request = reqwest::Client::new()
        .request(method, format!("{url}{path}"))
        .bearer_auth(ADMIN_TOKEN);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The decision log's counts once `done` holds for them.
async fn counts_once(url: &str, done: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let path = "/api/admission/inference/decisions?limit=1000";
        let (_, log) = call(url, Method::GET, path, None).await;
        if done(&log["counts"]) {
            return log;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{log}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_teams_tokens_per_minute_hold_across_two_replicas_and_a_soft_budget_only_records() {
    let cluster = Cluster::start().await;
    let dir = tempfile::tempdir().unwrap();
    let _worker = cluster.worker("w", dir.path(), &["--gpu", "name=L4,memory=24GiB"]);
    cluster.deploy_ready(json!({"max_concurrency": 32})).await;
    let data_b = tempfile::tempdir().unwrap();
    let b = ServeProcess::on_set(&cluster.database_url, data_b.path(), None, &[]);
    let a = cluster.serve.url.clone();

    let (status, _) = call(&a, Method::POST, "/api/teams", Some(json!({"name": "red"}))).await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, key) = call(
        &a,
        Method::POST,
        "/api/keys",
        Some(json!({"name": "red app", "scopes": ["inference"], "team": "red"})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{key}");
    let token = key["token"].as_str().unwrap().to_string();

    let bytes = component("rate-limit");
    let pushed = reqwest::Client::new()
        .post(format!("{a}/api/plugins"))
        .bearer_auth(ADMIN_TOKEN)
        .query(&[
            ("name", "rate-limit"),
            ("version", "1"),
            ("sha256", &sha256(&bytes)),
        ])
        .body(bytes)
        .send()
        .await
        .unwrap();
    assert_eq!(pushed.status(), StatusCode::CREATED);
    // The day's budget is far away; its soft threshold (500 tokens) is not.
    let settings = json!({"limits": [{"subject": "team:red", "tpm": TPM,
        "tokens_per_day": 1_000_000, "soft_ratio": 0.0005}]});
    let chain =
        json!({"policies": [{"plugin": "rate-limit", "version": "1", "settings": settings}]});
    let (status, body) = call(&a, Method::PUT, "/api/admission/inference", Some(chain)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // Both replicas judge with the policy before the clients start.
    let probe = json!({"caller": {"key_id": "probe", "scopes": ["inference"]},
        "model": "demo", "endpoint": "/v1/chat/completions", "prompt_tokens": 1, "stream": false});
    for url in [&a, &b.url] {
        let started = Instant::now();
        loop {
            let (_, verdict) = call(
                url,
                Method::POST,
                "/api/admission/inference/evaluate",
                Some(probe.clone()),
            )
            .await;
            if verdict["generation"] == 1 {
                break;
            }
            assert!(started.elapsed() < Duration::from_secs(5), "{verdict}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    let python = std::env::var("SWITCHYARD_PYTHON").expect(
        "SWITCHYARD_PYTHON names a Python with the openai package: scripts/test.sh provides it",
    );
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/openai_rate_limit.py");
    let output = tokio::process::Command::new(python)
        .arg(script)
        .args([
            &token,
            "demo",
            &CLIENTS.to_string(),
            &EACH.to_string(),
            &a,
            &b.url,
        ])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let totals: Value = serde_json::from_str(stdout.trim()).unwrap();
    let (ok, limited, tokens) = (
        totals["ok"].as_u64().unwrap(),
        totals["limited"].as_u64().unwrap(),
        totals["tokens"].as_u64().unwrap(),
    );
    assert_eq!(ok + limited, (CLIENTS * EACH) as u64, "{totals}");
    assert_eq!(
        totals["codes"],
        json!({"rate_limit_exceeded": limited}),
        "{totals}"
    );
    // Within one minute: what was answered is N, less what refused
    // requests' estimates left unused, plus what the other replica
    // admitted unseen: within one sync interval (10 ms) and a delivery,
    // each of its 8 clients starts at most two requests. Unshared, each
    // replica would have let about N through.
    let error = 2 * (CLIENTS as u64 / 2) * ESTIMATE;
    assert!(
        (TPM - 10 * ESTIMATE..=TPM + error).contains(&tokens),
        "{tokens} tokens answered against a limit of {TPM} (error {error}): {totals}"
    );

    // Past 500 tokens of the day answered requests are flagged, on both
    // replicas, and still answered.
    let log = counts_once(&a, |c| {
        c["flag"].as_u64().unwrap_or(0) > 0 && c["throttle"].as_u64() == Some(limited)
    })
    .await;
    let flagged = log["counts"]["flag"].as_u64().unwrap();
    assert!(
        flagged <= ok,
        "only answered requests are flagged: {}",
        log["counts"]
    );
    let replicas: std::collections::HashSet<&str> = log["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["decision"] == "flag")
        .map(|d| d["replica"].as_str().unwrap())
        .collect();
    assert_eq!(replicas.len(), 2, "flags from both replicas: {log}");
    drop(b);
}
