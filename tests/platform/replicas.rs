//! Two `switchyard serve` processes on one database: a chain change made on
//! one is served by the other within 2 seconds; a generation one replica
//! cannot build leaves it on the previous one, and the status says why.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};
use switchyard_tests::ADMIN_TOKEN;
use switchyard_tests::db::fresh_database;
use switchyard_tests::plugins::component;
use switchyard_tests::process::ServeProcess;

use crate::requests::inference;

async fn call(_http: &reqwest::Client, request: reqwest::RequestBuilder) -> (StatusCode, Value) {
    let response = request
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .expect("request sent");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_on_one_replica_is_served_by_the_other_within_two_seconds() {
    let db = fresh_database().await;
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let env = [("SWITCHYARD_ADMIN_TOKEN", ADMIN_TOKEN)];
    // Both start at once on a fresh database: migrations must not collide.
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| {
            ServeProcess::start(
                &[
                    "--database-url",
                    &db,
                    "--data-dir",
                    dir_a.path().to_str().unwrap(),
                ],
                &env,
            )
        });
        let b = s.spawn(|| {
            ServeProcess::start(
                &[
                    "--database-url",
                    &db,
                    "--data-dir",
                    dir_b.path().to_str().unwrap(),
                    "--memory-limit-mib",
                    "1",
                ],
                &env,
            )
        });
        (a.join().unwrap(), b.join().unwrap())
    });
    let http = reqwest::Client::new();
    let sha = switchyard_tests::plugins::sha256(&component("max-tokens"));
    let (status, body) = call(
        &http,
        http.post(format!("{}/api/plugins", a.url))
            .query(&[("name", "max-tokens"), ("version", "1"), ("sha256", &sha)])
            .body(component("max-tokens")),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");

    // Generation 1: an empty chain, which both replicas can serve.
    let (status, body) = call(
        &http,
        http.put(format!("{}/api/admission/inference", a.url))
            .json(&json!({"policies": []})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let request = inference("p", "demo", Some(9000));
    wait_for(&http, &b.url, &request, |v| v["generation"] == 1).await;

    // Generation 2 on A; B (1 MiB memory cap) cannot instantiate the policy.
    let chain = json!({"policies": [{"plugin": "max-tokens", "version": "1", "settings": {"max_tokens": 100, "mode": "deny"}}]});
    let (status, body) = call(
        &http,
        http.put(format!("{}/api/admission/inference", a.url))
            .json(&chain),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, on_a) = call(
        &http,
        http.post(format!("{}/api/admission/inference/evaluate", a.url))
            .json(&request),
    )
    .await;
    assert_eq!(
        (on_a["decision"].clone(), on_a["generation"].clone()),
        (json!("deny"), json!(2)),
        "{on_a}"
    );

    // B stays on generation 1 and the status shows why.
    let started = Instant::now();
    let shown = loop {
        let (_, shown) = call(
            &http,
            http.get(format!("{}/api/admission/inference", a.url)),
        )
        .await;
        let failed = shown["replicas"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["status"] == "failed");
        if failed {
            break shown;
        }
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "B never reported its failure: {shown}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let replicas = shown["replicas"].as_array().unwrap();
    assert_eq!(replicas.len(), 2, "{shown}");
    let failed = replicas.iter().find(|r| r["status"] == "failed").unwrap();
    assert_eq!(failed["generation"], 1);
    assert_eq!(failed["failed_generation"], 2);
    assert!(!failed["error"].as_str().unwrap().is_empty());
    let (_, on_b) = call(
        &http,
        http.post(format!("{}/api/admission/inference/evaluate", b.url))
            .json(&request),
    )
    .await;
    assert_eq!(
        (on_b["decision"].clone(), on_b["generation"].clone()),
        (json!("allow"), json!(1)),
        "{on_b}"
    );

    // Generation 3 made on B (a rollback to 1) is served by A within 2 seconds.
    let started = Instant::now();
    let (status, body) = call(
        &http,
        http.post(format!("{}/api/admission/inference/rollback", b.url)),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    wait_for(&http, &a.url, &request, |v| {
        v["generation"] == 3 && v["decision"] == "allow"
    })
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "A followed after {:?}",
        started.elapsed()
    );
    drop((a, b));
}

/// Polls a replica's dry run until `done` holds (at most 2 s).
async fn wait_for(
    http: &reqwest::Client,
    url: &str,
    request: &Value,
    done: impl Fn(&Value) -> bool,
) {
    let started = Instant::now();
    loop {
        let (_, verdict) = call(
            http,
            http.post(format!("{url}/api/admission/inference/evaluate"))
                .json(request),
        )
        .await;
        if done(&verdict) {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{url} did not follow within 2 s: {verdict}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
