//! Usage metering against a real cluster (a frontend process, a worker,
//! the reference engine): 200 requests, whole and streamed answers and a
//! batch's lines, from two keys in two teams, sum exactly to what the
//! engine reported (the federated call, metered on both sides:
//! `tests/federation/inference.rs`); a stream that did not
//! ask for its usage is not shown it; the CSV export parses; a
//! `usage:read` key sees only its team.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode, header};
use serde_json::{Value, json};
use switchyard_tests::cluster::Cluster;

/// Prompt, completion tokens.
type Sums = (u64, u64);

/// Requests sent to `/v1` one by one, lines of the one batch, and all.
const DIRECT: u64 = 190;
const BATCH_LINES: usize = 10;
const TOTAL: u64 = DIRECT + BATCH_LINES as u64;

/// Runs a batch of [`BATCH_LINES`] for `token`; its lines and the tokens
/// its output file says the engine used.
async fn batch_usage(cluster: &Cluster, token: &str) -> (u64, Sums) {
    use switchyard_tests::batch::{batch_until, call, chat_lines, upload};
    let url = &cluster.serve.url;
    let (status, file) = upload(
        url,
        token,
        "batch",
        chat_lines("demo", BATCH_LINES).as_bytes(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{file}");
    let made = json!({"input_file_id": file["id"], "endpoint": "/v1/chat/completions",
        "completion_window": "24h"});
    let (status, created) = call(url, token, Method::POST, "/v1/batches", Some(made)).await;
    assert_eq!(status, StatusCode::OK, "{created}");
    let id = created["id"].as_str().unwrap();
    let done = batch_until(url, token, id, "the batch never completed", |b| {
        b["status"] == "completed"
    })
    .await;
    let output = reqwest::Client::new()
        .get(format!(
            "{url}/v1/files/{}/content",
            done["output_file_id"].as_str().unwrap()
        ))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let mut sums = (0, 0);
    let mut lines = 0;
    for line in output.lines() {
        let usage = &serde_json::from_str::<Value>(line).unwrap()["response"]["body"]["usage"];
        sums.0 += usage["prompt_tokens"].as_u64().unwrap();
        sums.1 += usage["completion_tokens"].as_u64().unwrap();
        lines += 1;
    }
    assert_eq!(lines, BATCH_LINES as u64, "{output}");
    (lines, sums)
}

/// A key in a team, with scopes; its id and token.
async fn key(cluster: &Cluster, team: Option<&str>, scope: &str) -> (String, String) {
    let mut body = json!({"name": "usage", "scopes": [scope]});
    if let Some(team) = team {
        body["team"] = json!(team);
    }
    let (status, created) = cluster.call(Method::POST, "/api/keys", Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    (
        created["key"]["id"].as_str().unwrap().to_string(),
        created["token"].as_str().unwrap().to_string(),
    )
}

/// The `data:` events of an SSE body, `[DONE]` left out.
fn events(text: &str) -> Vec<Value> {
    text.split("\n\n")
        .filter_map(|block| block.strip_prefix("data: "))
        .filter(|data| *data != "[DONE]")
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}

/// Chunks that carry one generated token (the reference engine sends one each).
fn token_chunks(events: &[Value]) -> u64 {
    events
        .iter()
        .filter(|e| {
            e["choices"][0]["delta"]["content"]
                .as_str()
                .is_some_and(|c| !c.is_empty())
        })
        .count() as u64
}

/// Sends one request; what the engine reported it used, as the client
/// can tell it.
async fn chat(cluster: &Cluster, token: &str, i: u64, prompt: &mut Option<u64>) -> Sums {
    let mut body = json!({"model": "demo", "max_tokens": 1 + i % 4,
        "messages": [{"role": "user", "content": "count the tokens of this prompt"}]});
    let kind = i % 3;
    if kind > 0 {
        body["stream"] = json!(true);
    }
    if kind == 1 {
        body["stream_options"] = json!({"include_usage": true});
    }
    let response = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", cluster.serve.url))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    // The time to the head spent in Switchyard, not in the engine; the
    // worker's engine time is not passed on.
    let overhead: f64 = response.headers()["x-switchyard-overhead-ms"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((0.0..10_000.0).contains(&overhead), "{overhead}");
    assert!(response.headers().get("x-switchyard-engine-ms").is_none());
    let text = response.text().await.unwrap();
    if kind == 0 {
        let answer: Value = serde_json::from_str(&text).unwrap();
        let usage = &answer["usage"];
        *prompt = usage["prompt_tokens"].as_u64();
        return (
            prompt.unwrap(),
            usage["completion_tokens"].as_u64().unwrap(),
        );
    }
    let events = events(&text);
    let usage: Vec<&Value> = events
        .iter()
        .filter(|e| e["usage"].is_object())
        .map(|e| &e["usage"])
        .collect();
    if kind == 1 {
        assert_eq!(usage.len(), 1, "the usage the client asked for: {text}");
        let completion = usage[0]["completion_tokens"].as_u64().unwrap();
        assert_eq!(
            token_chunks(&events),
            completion,
            "one chunk a token: {text}"
        );
        return (usage[0]["prompt_tokens"].as_u64().unwrap(), completion);
    }
    assert!(
        usage.is_empty(),
        "usage the client did not ask for reached it: {text}"
    );
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    (
        prompt.expect("a whole answer came first"),
        token_chunks(&events),
    )
}

async fn report(cluster: &Cluster, token: &str, query: &str) -> (StatusCode, Value) {
    let response = reqwest::Client::new()
        .get(format!("{}/api/usage{query}", cluster.serve.url))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    (
        response.status(),
        response.json().await.unwrap_or(Value::Null),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metered_usage_sums_to_what_the_engine_reported_per_key_and_team() {
    let cluster = Cluster::start().await;
    let dir = tempfile::tempdir().unwrap();
    let _worker = cluster.worker("w", dir.path(), &["--gpu", "name=L4,memory=24GiB"]);
    cluster.deploy_ready(json!({})).await;
    for team in ["red", "blue"] {
        let (status, _) = cluster
            .call(Method::POST, "/api/teams", Some(json!({"name": team})))
            .await;
        assert_eq!(status, StatusCode::CREATED);
    }
    let red = key(&cluster, Some("red"), "inference").await;
    let blue = key(&cluster, Some("blue"), "inference").await;

    let mut expected: HashMap<String, (u64, Sums)> = HashMap::new();
    let mut prompt = None;
    for i in 0..DIRECT {
        let (id, token) = if i % 2 == 0 { &red } else { &blue };
        let (p, c) = chat(&cluster, token, i, &mut prompt).await;
        let entry = expected.entry(id.clone()).or_default();
        entry.0 += 1;
        entry.1.0 += p;
        entry.1.1 += c;
    }

    // A batch's lines are metered as the key's requests too.
    let (lines, (p, c)) = batch_usage(&cluster, &blue.1).await;
    let entry = expected.entry(blue.0.clone()).or_default();
    entry.0 += lines;
    entry.1.0 += p;
    entry.1.1 += c;

    // The meter writes in batches: wait until all 200 are in.
    let admin = switchyard_tests::ADMIN_TOKEN;
    let started = Instant::now();
    let by_key = loop {
        let (status, shown) = report(&cluster, admin, "?group_by=key&granularity=day").await;
        assert_eq!(status, StatusCode::OK, "{shown}");
        let requests: u64 = shown["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["requests"].as_u64().unwrap())
            .sum();
        if requests == TOTAL {
            break shown;
        }
        assert!(
            requests < TOTAL && started.elapsed() < Duration::from_secs(30),
            "{shown}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    for row in by_key["rows"].as_array().unwrap() {
        let id = row["key"].as_str().unwrap();
        let (requests, (p, c)) = expected[id];
        assert_eq!(
            (
                row["requests"].as_u64(),
                row["prompt_tokens"].as_u64(),
                row["completion_tokens"].as_u64()
            ),
            (Some(requests), Some(p), Some(c)),
            "{id}: {row}"
        );
    }
    assert_eq!(by_key["dropped"], 0);
    // The meter's counters on /metrics: every event queued was written.
    let started = Instant::now();
    loop {
        let text = reqwest::get(format!("{}/metrics", cluster.serve.url))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let counter = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{name} "))?.parse::<u64>().ok())
        };
        assert_eq!(
            counter("switchyard_usage_events_dropped_total"),
            Some(0),
            "{text}"
        );
        if counter("switchyard_usage_events_written_total") == Some(TOTAL) {
            assert_eq!(counter("switchyard_usage_events_queued_total"), Some(TOTAL));
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // By minute the events are summed, by hour and day the hourly
    // roll-up the writer keeps in the same statement: the same totals.
    let total = |shown: &Value| -> (u64, u64, u64) {
        shown["rows"]
            .as_array()
            .unwrap()
            .iter()
            .fold((0, 0, 0), |t, r| {
                (
                    t.0 + r["requests"].as_u64().unwrap(),
                    t.1 + r["prompt_tokens"].as_u64().unwrap(),
                    t.2 + r["completion_tokens"].as_u64().unwrap(),
                )
            })
    };
    let (_, by_minute) = report(&cluster, admin, "?group_by=key&granularity=minute").await;
    assert_eq!(total(&by_minute), total(&by_key), "{by_minute}");
    assert_eq!(total(&by_key).0, TOTAL);

    let (_, by_team) = report(&cluster, admin, "?group_by=team&granularity=hour").await;
    let teams: HashMap<&str, u64> = by_team["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["team"].as_str().unwrap(),
                r["completion_tokens"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(teams["red"], expected[&red.0].1.1);
    assert_eq!(teams["blue"], expected[&blue.0].1.1);

    // The CSV export parses, and sums as the JSON does.
    let csv = reqwest::Client::new()
        .get(format!(
            "{}/api/usage?group_by=team,model",
            cluster.serve.url
        ))
        .bearer_auth(admin)
        .header(header::ACCEPT, "text/csv")
        .send()
        .await
        .unwrap();
    assert!(
        csv.headers()[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/csv")
    );
    let csv = csv.text().await.unwrap();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("bucket,team,model,requests,prompt_tokens,completion_tokens,cached_tokens")
    );
    let prompt_total: u64 = lines
        .map(|l| l.split(',').nth(4).unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(
        prompt_total,
        expected.values().map(|(_, (p, _))| p).sum::<u64>()
    );

    // A usage:read key sees its own team; one in no team, or without the scope, sees nothing.
    let reader = key(&cluster, Some("red"), "usage:read").await;
    let (status, own) = report(&cluster, &reader.1, "?group_by=key").await;
    assert_eq!(status, StatusCode::OK, "{own}");
    let keys: Vec<&str> = own["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["key"].as_str().unwrap())
        .collect();
    assert!(
        !keys.is_empty() && keys.iter().all(|k| *k == red.0),
        "{own}"
    );
    let loner = key(&cluster, None, "usage:read").await;
    assert_eq!(
        report(&cluster, &loner.1, "").await.0,
        StatusCode::FORBIDDEN
    );
    assert_eq!(report(&cluster, &red.1, "").await.0, StatusCode::FORBIDDEN);
    let (status, refused) = report(&cluster, admin, "?group_by=colour").await;
    assert_eq!(
        (status, refused["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_request"))
    );
}
