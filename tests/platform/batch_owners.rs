//! Batch files and batches as objects of a key (the outside audit, issue
//! 29): every route of `/v1/files` and `/v1/batches` answers another key
//! 404, as for an id that never existed; an `admin` key sees all; a file is
//! deleted, expires and is swept; a key's files are held to its quota; a
//! line longer than a request is refused at upload; and an upload is
//! written as it streams, so a replica never holds whole files.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use switchyard_tests::ADMIN_TOKEN;
use switchyard_tests::batch::{call, chat_lines, upload, upload_form};
use switchyard_tests::cluster::{Cluster, PATIENCE};

/// `(status, error code)` of an answer.
fn refusal(answer: &(StatusCode, Value)) -> (StatusCode, Option<&str>) {
    (answer.0, answer.1["error"]["code"].as_str())
}

/// The content of a file as `key` reads it: the status and the text.
async fn content(url: &str, key: &str, id: &str) -> (StatusCode, String) {
    let response = reqwest::Client::new()
        .get(format!("{url}/v1/files/{id}/content"))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    (response.status(), response.text().await.unwrap())
}

/// Every route about a file, as `key` calls it: record, content, a batch
/// made from it, deletion (last). Each answer's `(status, code)`.
async fn file_routes(url: &str, key: &str, id: &str) -> Vec<(StatusCode, Option<String>)> {
    let mut answers = Vec::new();
    let shown = call(url, key, Method::GET, &format!("/v1/files/{id}"), None).await;
    answers.push((shown.0, shown.1["error"]["code"].as_str().map(String::from)));
    let (status, text) = content(url, key, id).await;
    let code = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| v["error"]["code"].as_str().map(String::from));
    answers.push((status, code));
    let made = json!({"input_file_id": id, "endpoint": "/v1/chat/completions", "completion_window": "24h"});
    let created = call(url, key, Method::POST, "/v1/batches", Some(made)).await;
    answers.push((
        created.0,
        created.1["error"]["code"].as_str().map(String::from),
    ));
    let deleted = call(url, key, Method::DELETE, &format!("/v1/files/{id}"), None).await;
    answers.push((
        deleted.0,
        deleted.1["error"]["code"].as_str().map(String::from),
    ));
    answers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_file_and_batch_route_answers_another_key_not_found() {
    let cluster = Cluster::start().await;
    let url = cluster.serve.url.clone();
    let (a, b) = (cluster.inference_key().await, cluster.inference_key().await);
    let (status, file) = upload(&url, &a, "batch", chat_lines("demo", 2).as_bytes()).await;
    assert_eq!(status, StatusCode::OK, "{file}");
    let file = file["id"].as_str().unwrap().to_string();
    let made = json!({"input_file_id": file, "endpoint": "/v1/chat/completions",
        "completion_window": "24h", "metadata": {"secret": "a's"}});
    let (status, batch) = call(&url, &a, Method::POST, "/v1/batches", Some(made)).await;
    assert_eq!(status, StatusCode::OK, "{batch}");
    let batch = batch["id"].as_str().unwrap().to_string();

    // B is told of A's file exactly what it is told of a file that does not exist.
    let not_found = Some("file_not_found".to_string());
    let expected = vec![(StatusCode::NOT_FOUND, not_found); 4];
    assert_eq!(file_routes(&url, &b, &file).await, expected);
    assert_eq!(
        file_routes(&url, &b, "file-0000000000000000").await,
        expected
    );
    // And of A's batch.
    for (method, path) in [
        (Method::GET, format!("/v1/batches/{batch}")),
        (Method::POST, format!("/v1/batches/{batch}/cancel")),
    ] {
        let answer = call(&url, &b, method, &path, None).await;
        assert_eq!(
            refusal(&answer),
            (StatusCode::NOT_FOUND, Some("batch_not_found")),
            "{path}"
        );
    }
    let (status, listed) = call(&url, &b, Method::GET, "/v1/batches", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(listed["data"], json!([]), "B lists none of A's batches");

    // A still has all of it; an admin key sees it too.
    let (status, shown) = call(&url, &a, Method::GET, &format!("/v1/batches/{batch}"), None).await;
    assert_eq!(
        (status, shown["metadata"]["secret"].as_str()),
        (StatusCode::OK, Some("a's"))
    );
    assert_eq!(
        content(&url, &a, &file).await,
        (StatusCode::OK, chat_lines("demo", 2))
    );
    let (_, listed) = call(&url, ADMIN_TOKEN, Method::GET, "/v1/batches", None).await;
    assert_eq!(listed["data"][0]["id"], batch.as_str(), "{listed}");

    // A's batch ends (nothing serves `demo`: each line fails) and its
    // error file is A's only.
    let ended = cluster_until(&url, &a, &batch, |b| b["status"] == "completed").await;
    let output = ended["error_file_id"]
        .as_str()
        .expect("an error file")
        .to_string();
    let answers = file_routes(&url, &b, &output).await;
    assert_eq!(answers[0].0, StatusCode::NOT_FOUND, "record: {answers:?}");
    assert_eq!(answers[1].0, StatusCode::NOT_FOUND, "content: {answers:?}");
    assert_eq!(answers[3].0, StatusCode::NOT_FOUND, "delete: {answers:?}");
    let (status, shown) = call(&url, &a, Method::GET, &format!("/v1/files/{output}"), None).await;
    assert_eq!(
        (status, shown["purpose"].as_str()),
        (StatusCode::OK, Some("batch_output"))
    );
    // A's own deletion works, once.
    let (status, deleted) =
        call(&url, &a, Method::DELETE, &format!("/v1/files/{file}"), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        deleted,
        json!({"id": file, "object": "file", "deleted": true})
    );
    let again = call(&url, &a, Method::DELETE, &format!("/v1/files/{file}"), None).await;
    assert_eq!(
        refusal(&again),
        (StatusCode::NOT_FOUND, Some("file_not_found"))
    );
    // The batch made from it keeps its record.
    let (status, _) = call(&url, &a, Method::GET, &format!("/v1/batches/{batch}"), None).await;
    assert_eq!(status, StatusCode::OK);
}

/// Polls `key`'s view of a batch until `done` holds.
async fn cluster_until(url: &str, key: &str, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let started = std::time::Instant::now();
    loop {
        let (_, shown) = call(url, key, Method::GET, &format!("/v1/batches/{id}"), None).await;
        if done(&shown) {
            return shown;
        }
        assert!(started.elapsed() < PATIENCE, "{shown}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_expires_as_openai_s_expires_after_says_and_is_swept() {
    let cluster = Cluster::start().await;
    let url = cluster.serve.url.clone();
    let key = cluster.inference_key().await;
    let lines = chat_lines("demo", 1);
    // No expires_after: 30 days, as OpenAI's batch files.
    let (status, file) = upload(&url, &key, "batch", lines.as_bytes()).await;
    assert_eq!(status, StatusCode::OK, "{file}");
    let created = file["created_at"].as_i64().unwrap();
    assert_eq!(
        file["expires_at"].as_i64(),
        Some(created + 2_592_000),
        "{file}"
    );
    let fields = |seconds: &'static str| {
        [
            ("purpose", "batch"),
            ("expires_after[anchor]", "created_at"),
            ("expires_after[seconds]", seconds),
        ]
    };
    let (status, hour) = upload_form(&url, &key, &fields("3600"), lines.as_bytes()).await;
    assert_eq!(status, StatusCode::OK, "{hour}");
    let created = hour["created_at"].as_i64().unwrap();
    assert_eq!(hour["expires_at"].as_i64(), Some(created + 3600), "{hour}");
    for seconds in ["3599", "2592001", "soon"] {
        let answer = upload_form(&url, &key, &fields(seconds), lines.as_bytes()).await;
        assert_eq!(
            refusal(&answer),
            (StatusCode::BAD_REQUEST, Some("invalid_expires_after")),
            "{seconds}"
        );
    }
    let other_anchor = [
        ("purpose", "batch"),
        ("expires_after[anchor]", "last_active_at"),
        ("expires_after[seconds]", "3600"),
    ];
    let answer = upload_form(&url, &key, &other_anchor, lines.as_bytes()).await;
    assert_eq!(
        refusal(&answer),
        (StatusCode::BAD_REQUEST, Some("invalid_expires_after"))
    );

    // Its hour passes: it is gone at once, and the sweep deletes its rows.
    let id = hour["id"].as_str().unwrap();
    // The host's own connection: the suite also runs against a PostgreSQL
    // that accepts only TLS.
    let db = switchyard_tests::db::connect(&cluster.database_url).await;
    db.execute(
        "UPDATE batch_files SET expires_at = now() - interval '1 second' WHERE id = $1",
        &[&id],
    )
    .await
    .unwrap();
    let shown = call(&url, &key, Method::GET, &format!("/v1/files/{id}"), None).await;
    assert_eq!(
        refusal(&shown),
        (StatusCode::NOT_FOUND, Some("file_not_found"))
    );
    assert_eq!(content(&url, &key, id).await.0, StatusCode::NOT_FOUND);
    let store = switchyard_store::Store::connect(&cluster.database_url)
        .await
        .unwrap();
    // The server's own sweep may have run first; either way, after one
    // sweep the file's rows are gone.
    store
        .sweep_batch_files(std::time::Duration::from_secs(3600), 1000)
        .await
        .unwrap();
    let left: i64 = db
        .query_one(
            "SELECT (SELECT count(*) FROM batch_files WHERE id = $1)
                  + (SELECT count(*) FROM batch_file_chunks WHERE file_id = $1)",
            &[&id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0, "the expired file's rows are deleted");
    let kept = call(
        &url,
        &key,
        Method::GET,
        &format!("/v1/files/{}", file["id"].as_str().unwrap()),
        None,
    )
    .await;
    assert_eq!(kept.0, StatusCode::OK, "the file not expired stays");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_s_files_are_held_to_its_quota_and_a_line_longer_than_a_request_is_refused() {
    let lines = chat_lines("demo", 12);
    // Two files exceed the quota, one does not.
    assert!((1251..=2500).contains(&lines.len()), "{}", lines.len());
    let quota = "2500";
    let cluster = Cluster::start_with(None, &["--batch-storage-quota-bytes", quota]).await;
    let url = cluster.serve.url.clone();
    let (a, b) = (cluster.inference_key().await, cluster.inference_key().await);
    let (status, first) = upload(&url, &a, "batch", lines.as_bytes()).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    let second = upload(&url, &a, "batch", lines.as_bytes()).await;
    assert_eq!(
        refusal(&second),
        (StatusCode::PAYLOAD_TOO_LARGE, Some("quota_exceeded")),
        "{}",
        second.1
    );
    // The quota is per key; deleting a file frees its share.
    let (status, _) = upload(&url, &b, "batch", lines.as_bytes()).await;
    assert_eq!(status, StatusCode::OK);
    let first = first["id"].as_str().unwrap();
    let (status, _) = call(
        &url,
        &a,
        Method::DELETE,
        &format!("/v1/files/{first}"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, again) = upload(&url, &a, "batch", lines.as_bytes()).await;
    assert_eq!(status, StatusCode::OK, "{again}");

    // A line longer than a `/v1` request body: refused at once, with its number.
    let cluster = Cluster::start().await;
    let key = cluster.inference_key().await;
    let long = json!({"custom_id": "long", "method": "POST", "url": "/v1/chat/completions",
        "body": {"model": "demo", "messages": [{"role": "user",
            "content": "x".repeat(switchyard_protocol::limits::MAX_REQUEST_BODY)}]}});
    let file = format!("{}{long}\n", chat_lines("demo", 1));
    let (status, refused) = upload(&cluster.serve.url, &key, "batch", file.as_bytes()).await;
    assert_eq!(
        (status, refused["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("line_too_large")),
        "{refused}"
    );
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("line 2 "),
        "{refused}"
    );
}

/// The serve process's peak resident memory (`VmHWM`), in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_concurrent_48_mib_uploads_do_not_grow_the_replica_by_their_size() {
    let cluster = Cluster::start().await;
    let url = cluster.serve.url.clone();
    // 44,000 lines of about 1.1 KiB: 48 MiB, under the 50,000 lines a file may have.
    let filler = "x".repeat(1000);
    let file: String = (0..44_000)
        .map(|i| {
            json!({"custom_id": format!("l{i}"), "method": "POST", "url": "/v1/chat/completions",
                "body": {"model": "demo", "messages": [{"role": "user", "content": filler}]}})
            .to_string()
                + "\n"
        })
        .collect();
    assert!(file.len() > 46 << 20, "{}", file.len());
    let pid = cluster.serve.child.id();
    let before = peak_rss(pid);
    let mut uploads = Vec::new();
    for _ in 0..4 {
        let (url, key, file) = (url.clone(), cluster.inference_key().await, file.clone());
        uploads.push(tokio::spawn(async move {
            upload(&url, &key, "batch", file.as_bytes()).await
        }));
    }
    for upload in uploads {
        let (status, body) = upload.await.unwrap();
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["bytes"].as_i64(), Some(file.len() as i64));
    }
    // Held whole, four files are 192 MiB and more (their lines parsed
    // beside them); streamed, a few MiB each.
    let grown = peak_rss(pid).saturating_sub(before);
    assert!(
        grown < 96 << 20,
        "the replica's peak grew by {} MiB",
        grown >> 20
    );
}
