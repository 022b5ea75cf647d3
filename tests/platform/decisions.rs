//! The admission decision log on real traffic: a policy bound in monitor
//! mode records what it would have denied while every request succeeds;
//! enforced, its denials are recorded (with the request itself when the
//! binding asks); bad queries are refused; retention by count prunes.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use switchyard_binding::admission::decisions::request_sha256;
use switchyard_tests::ADMIN_TOKEN;
use switchyard_tests::cluster::Cluster;
use switchyard_tests::db::fresh_database;
use switchyard_tests::federation::eventually;
use switchyard_tests::plugins::{component, sha256};
use switchyard_tests::replica::Replica;

/// max-tokens refusing more than 64 tokens, bound with `mode` and the
/// decision log's options; every allow recorded so that counts are exact.
fn max_tokens(mode: &str, log_requests: bool) -> Value {
    json!({"policies": [{
        "plugin": "max-tokens", "version": "1.0.0",
        "settings": {"max_tokens": 64, "mode": "deny"},
        "mode": mode, "log_requests": log_requests, "allow_sample": 1,
    }]})
}

fn chat(max_tokens: u32) -> Value {
    json!({"model": "demo", "messages": [{"role": "user", "content": "hi"}], "max_tokens": max_tokens})
}

/// Reads the log; panics on anything but 200.
async fn decisions(http: &reqwest::Client, url: &str, query: &[(&str, &str)]) -> Value {
    let (status, body) = read(http, url, query).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

async fn read(http: &reqwest::Client, url: &str, query: &[(&str, &str)]) -> (StatusCode, Value) {
    let response = http
        .get(format!("{url}/api/admission/inference/decisions"))
        .bearer_auth(ADMIN_TOKEN)
        .query(query)
        .send()
        .await
        .unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The log once its counts are `expected` (records land within ~200 ms).
async fn counted(
    http: &reqwest::Client,
    url: &str,
    query: &[(&str, &str)],
    expected: Value,
) -> Value {
    eventually(
        &format!("the decision log never counted {expected}"),
        || async {
            let log = decisions(http, url, query).await;
            (log["counts"] == expected).then_some(log)
        },
    )
    .await
}

fn counts(allow: u64, deny: u64, monitor: u64) -> Value {
    json!({"allow": allow, "deny": deny, "patch": 0, "error": 0, "monitor": monitor,
           "throttle": 0, "flag": 0})
}

async fn push_max_tokens(http: &reqwest::Client, url: &str) {
    let bytes = component("max-tokens");
    let pushed = http
        .post(format!("{url}/api/plugins"))
        .bearer_auth(ADMIN_TOKEN)
        .query(&[
            ("name", "max-tokens"),
            ("version", "1.0.0"),
            ("sha256", &sha256(&bytes)),
        ])
        .body(bytes)
        .send()
        .await
        .unwrap();
    assert_eq!(pushed.status(), StatusCode::CREATED);
}

async fn set_chain(http: &reqwest::Client, url: &str, body: &Value) -> Value {
    let set = http
        .put(format!("{url}/api/admission/inference"))
        .bearer_auth(ADMIN_TOKEN)
        .json(body)
        .send()
        .await
        .unwrap();
    assert_eq!(set.status(), StatusCode::OK);
    set.json().await.unwrap()
}

async fn inference_key(http: &reqwest::Client, url: &str) -> (String, String) {
    let created: Value = http
        .post(format!("{url}/api/keys"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"name": "app", "scopes": ["inference"]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let field = |v: &Value| v.as_str().unwrap().to_string();
    (field(&created["key"]["id"]), field(&created["token"]))
}

async fn send(http: &reqwest::Client, url: &str, token: &str, body: &Value) -> StatusCode {
    http.post(format!("{url}/v1/chat/completions"))
        .bearer_auth(token)
        .json(body)
        .send()
        .await
        .unwrap()
        .status()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bind_in_monitor_read_what_it_would_deny_then_enforce() {
    let cluster = Cluster::start().await;
    let dir = tempfile::tempdir().unwrap();
    let _worker = cluster.worker("w", dir.path(), &["--gpu", "name=L4,memory=24GiB"]);
    cluster.node_id("w").await;
    cluster.deploy_ready(json!({})).await;
    let (http, url) = (reqwest::Client::new(), cluster.serve.url.clone());
    push_max_tokens(&http, &url).await;
    let (key_id, token) = inference_key(&http, &url).await;

    // Monitor: 6 requests, 2 asking for more than the cap; all succeed.
    let generation = set_chain(&http, &url, &max_tokens("monitor", false)).await;
    assert_eq!(
        generation["policies"][0]["log_requests"], false,
        "{generation}"
    );
    assert_eq!(generation["policies"][0]["allow_sample"], 1, "{generation}");
    for max in [8, 500, 8, 8, 500, 8] {
        assert_eq!(send(&http, &url, &token, &chat(max)).await, StatusCode::OK);
    }
    let log = counted(&http, &url, &[], counts(4, 0, 2)).await;
    let hits: Vec<&Value> = log["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["monitor"] == true)
        .collect();
    assert_eq!(hits.len(), 2, "{log}");
    for hit in hits {
        assert_eq!(
            (
                &hit["plugin"],
                &hit["version"],
                &hit["generation"],
                &hit["mode"]
            ),
            (
                &json!("max-tokens"),
                &json!("1.0.0"),
                &json!(1),
                &json!("monitor")
            ),
            "{hit}"
        );
        assert_eq!(
            (&hit["decision"], &hit["code"]),
            (&json!("deny"), &json!("max_tokens_exceeded"))
        );
        assert_eq!(hit["key_id"], key_id.as_str());
        assert_eq!(hit["request"], Value::Null, "log_requests is off: {hit}");
        assert_eq!(hit["request_sha256"].as_str().unwrap().len(), 64);
    }
    // The filters: a code, a plugin with its version, another version.
    let filtered = decisions(&http, &url, &[("code", "max_tokens_exceeded")]).await;
    assert_eq!(filtered["counts"], counts(0, 0, 2));
    assert_eq!(filtered["decisions"].as_array().unwrap().len(), 2);
    let filtered = decisions(
        &http,
        &url,
        &[("plugin", "max-tokens@1.0.0"), ("limit", "3")],
    )
    .await;
    assert_eq!(
        filtered["counts"],
        counts(4, 0, 2),
        "counts are over the whole filtered set"
    );
    assert_eq!(filtered["decisions"].as_array().unwrap().len(), 3);
    let none = decisions(&http, &url, &[("plugin", "max-tokens@2.0.0")]).await;
    assert_eq!(none["counts"], counts(0, 0, 0));
    let cursor = log["next_since"].as_i64().unwrap().to_string();

    // Enforce, keeping requests: the large one is refused and recorded whole.
    set_chain(&http, &url, &max_tokens("enforce", true)).await;
    assert_eq!(
        send(&http, &url, &token, &chat(500)).await,
        StatusCode::FORBIDDEN
    );
    assert_eq!(send(&http, &url, &token, &chat(8)).await, StatusCode::OK);
    let newer = counted(&http, &url, &[("since", &cursor)], counts(1, 1, 0)).await;
    let denial = newer["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["decision"] == "deny")
        .unwrap()
        .clone();
    assert_eq!(
        (&denial["generation"], &denial["monitor"]),
        (&json!(2), &json!(false))
    );
    assert_eq!(denial["request"]["max_tokens"], 500, "{denial}");
    assert_eq!(denial["request"]["caller"]["key_id"], key_id.as_str());
    assert_eq!(denial["request_sha256"], request_sha256(&denial["request"]));

    // A time as `since` reads from then on; the whole log counts all.
    let at = log["decisions"][0]["at"].as_str().unwrap().to_string();
    let from_then = decisions(&http, &url, &[("since", &at)]).await;
    assert_eq!(from_then["counts"], counts(5, 1, 2), "{from_then}");

    let metrics = http
        .get(format!("{url}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for line in [
        "switchyard_admission_decisions_total{point=\"inference\",decision=\"deny\",mode=\"monitor\"} 2",
        "switchyard_admission_decisions_total{point=\"inference\",decision=\"deny\",mode=\"enforce\"} 1",
        "switchyard_admission_decisions_total{point=\"inference\",decision=\"allow\",mode=\"monitor\"} 4",
        "switchyard_admission_decision_records_dropped_total 0",
    ] {
        assert!(metrics.contains(line), "{line} in\n{metrics}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_query_parameter_is_refused_with_its_name() {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = Replica::on(&db, dir.path()).await;
    for (query, named) in [
        (("since", "yesterday"), "since"),
        // An offset PostgreSQL cannot read was a 500 (SQLSTATE 22009).
        (("since", "2026-12-01T10:00:00+16:00"), "since"),
        (("since", "2026-12-01T10:00:00-16:00"), "since"),
        (("limit", "0"), "limit"),
        (("limit", "1001"), "limit"),
        (("decision", "deny"), "decision"),
    ] {
        let (status, body) = read(&replica.http, &replica.url, &[query]).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query:?}: {body}");
        assert_eq!(body["error"]["code"], "invalid_request");
        assert!(
            body["error"]["message"].as_str().unwrap().contains(named),
            "{body}"
        );
    }
    let (status, body) = replica
        .call(replica.admin(Method::GET, "/api/admission/nowhere/decisions"))
        .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (StatusCode::NOT_FOUND, &json!("unknown_point"))
    );
    let (status, _) = replica
        .call(
            replica
                .http
                .get(format!("{}/api/admission/inference/decisions", replica.url)),
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    replica.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_by_count_keeps_the_newest_records() {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = Replica::with(&db, dir.path(), |config| {
        config.decision_log.keep = 3;
        config.decision_log.prune_every = std::time::Duration::from_millis(100);
    })
    .await;
    let (http, url) = (replica.http.clone(), replica.url.clone());
    push_max_tokens(&http, &url).await;
    let (_, token) = inference_key(&http, &url).await;
    set_chain(&http, &url, &max_tokens("monitor", false)).await;
    // No model is served: each request is judged, then answered 404.
    for _ in 0..8 {
        assert_eq!(
            send(&http, &url, &token, &chat(500)).await,
            StatusCode::NOT_FOUND
        );
    }
    let metrics = || async {
        let text = http
            .get(format!("{url}/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.contains("switchyard_admission_decision_records_written_total 8")
            .then_some(())
    };
    eventually("the eight records were never written", metrics).await;
    let log = counted(&http, &url, &[], counts(0, 0, 3)).await;
    let ids: Vec<i64> = log["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids.len(), 3);
    assert!(
        ids.windows(2).all(|w| w[1] == w[0] + 1),
        "the newest, in order: {ids:?}"
    );
    replica.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_binds_with_log_options_and_reads_the_log_as_a_table() {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = Replica::on(&db, dir.path()).await;
    let (http, url) = (replica.http.clone(), replica.url.clone());
    push_max_tokens(&http, &url).await;
    let settings = dir.path().join("max-tokens.json");
    std::fs::write(&settings, r#"{"max_tokens": 64, "mode": "deny"}"#).unwrap();
    let cli = |args: &[&str]| {
        let output = std::process::Command::new(switchyard_tests::process::binary())
            .arg("admission")
            .args(args)
            .args(["--server", &url])
            .env("SWITCHYARD_TOKEN", ADMIN_TOKEN)
            .output()
            .unwrap();
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stdout).to_string(),
            String::from_utf8_lossy(&output.stderr).to_string(),
        )
    };
    let (code, out, err) = tokio::task::block_in_place(|| {
        cli(&[
            "set",
            "inference",
            "--policy",
            "max-tokens@1.0.0",
            "--settings",
            settings.to_str().unwrap(),
            "--mode",
            "monitor",
            "--log-requests",
            "true",
            "--allow-sample",
            "1",
        ])
    });
    assert_eq!(code, 0, "{out}{err}");
    let (_, shown) = replica
        .call(replica.admin(Method::GET, "/api/admission/inference"))
        .await;
    let bound = &shown["policies"][0];
    assert_eq!(
        (&bound["log_requests"], &bound["allow_sample"]),
        (&json!(true), &json!(1)),
        "{shown}"
    );

    let (key_id, token) = inference_key(&http, &url).await;
    for max in [500, 8] {
        assert_eq!(
            send(&http, &url, &token, &chat(max)).await,
            StatusCode::NOT_FOUND
        );
    }
    counted(&http, &url, &[], counts(1, 0, 1)).await;
    let (code, out, err) = tokio::task::block_in_place(|| {
        cli(&["decisions", "inference", "--code", "max_tokens_exceeded"])
    });
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("max-tokens@1.0.0"), "{out}");
    assert!(out.contains("deny (monitor)"), "{out}");
    assert!(out.contains(&key_id), "{out}");
    assert!(out.contains("monitor 1  allow (sampled) 0"), "{out}");
    let (code, out, err) = tokio::task::block_in_place(|| {
        cli(&["decisions", "inference", "--plugin", "max-tokens", "--json"])
    });
    assert_eq!(code, 0, "{out}{err}");
    let log: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(log["counts"], counts(1, 0, 1));
    assert!(
        log["decisions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["request"]["model"] == "demo"),
        "log_requests keeps each record: {log}"
    );
    let (code, _, err) =
        tokio::task::block_in_place(|| cli(&["decisions", "inference", "--since", "soon"]));
    assert_ne!(code, 0);
    assert!(
        err.contains("invalid_request") && err.contains("since"),
        "{err}"
    );
    replica.stop().await;
}
