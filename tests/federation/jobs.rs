//! Batch jobs with one owner cluster. A batch the official `openai` client
//! submits to alpha with `metadata.owner = "beta"` is stored and run by
//! beta alone; alpha forwards every request for it and keeps a summary
//! projection. Beta's worker and one of its frontend replicas die mid-run
//! (SIGKILL) and the link is cut: beta keeps running the job, alpha answers
//! its reads from the projection marked stale and its cancel with 503
//! `NODE_UNAVAILABLE`, and refreshes once the link returns. The output has
//! one answer per line. A draining owner takes no new jobs from peers and
//! keeps its running ones.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use switchyard_tests::batch::{batch, batch_until, chat_lines, completed, python_batch, upload};
use switchyard_tests::cluster::PATIENCE;
use switchyard_tests::federation::{Member, eventually, grant};
use switchyard_tests::process::ServeProcess;
use switchyard_tests::proxy::TcpProxy;
use tokio::io::AsyncBufReadExt;

/// A `/v1` call on `url` with `key`.
async fn v1(
    method: Method,
    url: &str,
    path: &str,
    key: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut request = reqwest::Client::new()
        .request(method, format!("{url}{path}"))
        .bearer_auth(key);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Alpha joined to beta (through `proxy` when given), beta's `chat`
/// service granted for inference; alpha's key with `inference`.
async fn paired(alpha: &Member, beta: &Member, proxy: Option<&TcpProxy>) -> String {
    match proxy {
        Some(proxy) => alpha.join_at(beta, &proxy.url()).await,
        None => alpha.join(beta).await,
    };
    beta.offer_service("chat").await;
    let spec = json!({"services": ["chat"], "operations": ["inference"], "lifetime_s": 3600,
                      "max_concurrent": 8, "max_requests": 5000});
    grant(beta, alpha, &["inference"], spec).await;
    alpha.key(&["inference"]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_sent_to_alpha_runs_once_on_beta_through_kills_and_a_cut_link() {
    // 20 ms a token, 8 tokens, 8 at a time: 500 lines take about 15 s.
    let (alpha, mut beta) = tokio::join!(
        Member::bare("alpha"),
        Member::serving("beta", json!({"max_concurrency": 8, "token_delay_ms": 20}))
    );
    // Beta's second frontend replica (its key file shared) runs lines too.
    let key_file = beta.cluster.data.path().join("federation/cluster.key");
    let second_data = tempfile::tempdir().unwrap();
    let mut second = ServeProcess::on_set(
        &beta.cluster.database_url,
        second_data.path(),
        None,
        &["--federation-key", key_file.to_str().unwrap()],
    );
    let target = beta.url().trim_start_matches("http://").parse().unwrap();
    let proxy = TcpProxy::start(target).await;
    let key = paired(&alpha, &beta, Some(&proxy)).await;

    let mut client = python_batch(alpha.url(), &key, "beta/chat", 500, Some("beta"));
    let mut stdout = tokio::io::BufReader::new(client.stdout.take().unwrap()).lines();
    let id = tokio::time::timeout(PATIENCE, stdout.next_line())
        .await
        .expect("the client never created the batch")
        .unwrap()
        .expect("a batch id");

    // Beta, the owner, stores and runs it; alpha shows beta's summary.
    let (status, owned) = v1(
        Method::GET,
        beta.url(),
        &format!("/v1/batches/{id}"),
        switchyard_tests::ADMIN_TOKEN,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "beta owns the job: {owned}");
    assert_eq!(owned["request_counts"]["total"], 500, "{owned}");
    assert!(owned.get("owner").is_none(), "{owned}");
    let (status, shown) = batch(alpha.url(), &key, &id).await;
    assert_eq!(status, StatusCode::OK, "{shown}");
    assert_eq!(shown["owner"], "beta", "{shown}");
    assert_eq!(shown["projection_level"], "summary", "{shown}");
    assert_eq!(shown["owner_available"], true, "{shown}");
    assert_eq!(shown["projection_stale"], false, "{shown}");
    assert!(shown["last_synced_at"].as_i64().is_some(), "{shown}");
    // The projection is the job's creator's: another of alpha's keys is
    // told of it what it is told of a job that does not exist.
    let other = alpha.key(&["inference"]).await;
    let (status, hidden) = batch(alpha.url(), &other, &id).await;
    assert_eq!(
        (status, hidden["error"]["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("batch_not_found")),
        "{hidden}"
    );

    // Beta's worker dies (SIGKILL; its engine with it) under the lines it
    // runs and comes back, then beta's second replica, with the lines it
    // ran and the units it held.
    batch_until(alpha.url(), &key, &id, "the job never got going", |b| {
        completed(b) >= 60
    })
    .await;
    beta.kill_and_restart_worker();
    batch_until(
        alpha.url(),
        &key,
        &id,
        "the job stalled after the engine died",
        |b| completed(b) >= 150,
    )
    .await;
    second.child.kill().unwrap();
    let _ = second.child.wait();

    // The link is cut and stays down.
    proxy.refuse(true);
    proxy.cut();
    alpha
        .cluster
        .until(
            "/api/federation/peers/beta",
            "the link never went down",
            |p| p["link"]["state"] != "up",
        )
        .await;
    // Alpha answers the job's read from its projection, marked stale ...
    let (status, stale) = batch(alpha.url(), &key, &id).await;
    assert_eq!(status, StatusCode::OK, "{stale}");
    assert_eq!(stale["projection_stale"], true, "{stale}");
    assert_eq!(stale["owner_available"], false, "{stale}");
    assert_eq!(stale["owner"], "beta", "{stale}");
    // ... and its cancel, its output and an unknown job with 503; nothing is queued.
    let (status, refused) = v1(
        Method::POST,
        alpha.url(),
        &format!("/v1/batches/{id}/cancel"),
        &key,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{refused}");
    assert_eq!(refused["error"]["code"], "NODE_UNAVAILABLE", "{refused}");
    let (status, refused) = v1(
        Method::GET,
        alpha.url(),
        "/v1/batches/batch_unknown",
        &key,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{refused}");
    assert_eq!(refused["error"]["code"], "NODE_UNAVAILABLE", "{refused}");
    // Beta keeps running it meanwhile.
    let at_cut = completed(&stale);
    let owner_batch = |b: &Value| completed(b) > at_cut + 50 || b["status"] == "completed";
    batch_until(
        beta.url(),
        switchyard_tests::ADMIN_TOKEN,
        &id,
        "beta stopped running the job",
        owner_batch,
    )
    .await;
    let (_, still) = batch(alpha.url(), &key, &id).await;
    assert_eq!(still["projection_stale"], true, "{still}");

    // The link returns: alpha's projection refreshes (no request needed).
    proxy.refuse(false);
    alpha.until_link_up("beta").await;
    let refreshed = eventually("alpha's projection never refreshed", || async {
        let (_, listed) = v1(Method::GET, alpha.url(), "/v1/batches?limit=5", &key, None).await;
        let job = listed["data"]
            .as_array()?
            .iter()
            .find(|b| b["id"] == id.as_str())?
            .clone();
        (job["projection_stale"] == false && completed(&job) > at_cut + 50).then_some(job)
    })
    .await;
    assert_eq!(refreshed["owner"], "beta", "{refreshed}");

    // The client saw the job complete, one 200 a line, read through alpha.
    let rest = tokio::spawn(async move {
        let mut lines = Vec::new();
        while let Ok(Some(line)) = stdout.next_line().await {
            lines.push(line);
        }
        lines
    });
    let status = tokio::time::timeout(std::time::Duration::from_secs(300), client.wait())
        .await
        .expect("the Python client never finished")
        .unwrap();
    let mut stderr = String::new();
    if let Some(mut err) = client.stderr.take() {
        use tokio::io::AsyncReadExt;
        let _ = err.read_to_string(&mut stderr).await;
    }
    let lines = rest.await.unwrap();
    assert!(
        status.success() && lines.last().map(String::as_str) == Some("ok"),
        "{lines:?}\n{stderr}"
    );
    // Beta charged the grant a call a line.
    let status = beta
        .expect(StatusCode::OK, Method::GET, "/api/federation/status", None)
        .await;
    let jobs = &alpha
        .expect(StatusCode::OK, Method::GET, "/api/federation/status", None)
        .await["peers"][0]["jobs"];
    assert_eq!(jobs["jobs"], 1, "{jobs}");
    assert_eq!(jobs["active"], 0, "{jobs}");
    assert_eq!(
        status["peers"][0]["grants"][0]["requests_left"], 4500,
        "{status}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_owner_takes_no_new_jobs_and_keeps_its_running_ones() {
    let (alpha, beta) = tokio::join!(
        Member::bare("alpha"),
        Member::serving("beta", json!({"max_concurrency": 4, "token_delay_ms": 20}))
    );
    let key = paired(&alpha, &beta, None).await;
    let upload = |lines: usize| {
        let (url, key) = (alpha.url().to_string(), key.clone());
        async move {
            let (status, uploaded) = upload(
                &url,
                &key,
                "batch",
                chat_lines("beta/chat", lines).as_bytes(),
            )
            .await;
            assert_eq!(status, StatusCode::OK, "{uploaded}");
            uploaded["id"].as_str().unwrap().to_string()
        }
    };
    let create = |file: String| json!({"input_file_id": file, "endpoint": "/v1/chat/completions", "completion_window": "24h"});

    // No owner named: the selector picks beta, which serves the model.
    let (status, running) = v1(
        Method::POST,
        alpha.url(),
        "/v1/batches",
        &key,
        Some(create(upload(40).await)),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{running}");
    assert_eq!(running["owner"], "beta", "{running}");
    let running_id = running["id"].as_str().unwrap().to_string();

    // Draining: beta takes no new job from alpha; its running one goes on.
    let drained = beta
        .expect(
            StatusCode::OK,
            Method::PUT,
            "/api/federation/eligibility",
            Some(json!({"state": "draining", "reason": "host maintenance"})),
        )
        .await;
    assert_eq!(drained["state"], "draining", "{drained}");
    assert_eq!(drained["active_jobs"], 1, "{drained}");
    let (status, refused) = v1(
        Method::POST,
        alpha.url(),
        "/v1/batches",
        &key,
        Some(create(upload(2).await)),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(refused["error"]["code"], "owner_not_eligible", "{refused}");
    let done = batch_until(
        alpha.url(),
        &key,
        &running_id,
        "the running job never ended",
        |b| b["status"] == "completed",
    )
    .await;
    assert_eq!(done["request_counts"]["completed"], 40, "{done}");
    let idle = beta
        .expect(
            StatusCode::OK,
            Method::GET,
            "/api/federation/eligibility",
            None,
        )
        .await;
    assert_eq!(idle["active_jobs"], 0, "{idle}");

    // Undrained: new jobs are taken again.
    beta.expect(
        StatusCode::OK,
        Method::PUT,
        "/api/federation/eligibility",
        Some(json!({"state": "eligible"})),
    )
    .await;
    let mut named = create(upload(2).await);
    named["metadata"] = json!({"owner": "beta"});
    let (status, taken) = v1(Method::POST, alpha.url(), "/v1/batches", &key, Some(named)).await;
    assert_eq!(status, StatusCode::OK, "{taken}");
    assert_eq!(taken["owner"], "beta", "{taken}");
    // A plain service name finds the peer serving it too.
    let (status, uploaded) = switchyard_tests::batch::upload(
        alpha.url(),
        &key,
        "batch",
        chat_lines("chat", 2).as_bytes(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{uploaded}");
    let plain = create(uploaded["id"].as_str().unwrap().to_string());
    let (status, taken) = v1(Method::POST, alpha.url(), "/v1/batches", &key, Some(plain)).await;
    assert_eq!(status, StatusCode::OK, "{taken}");
    assert_eq!(taken["owner"], "beta", "{taken}");

    // Revoking the grant cancels the jobs it made on beta.
    let (status, long) = v1(
        Method::POST,
        alpha.url(),
        "/v1/batches",
        &key,
        Some(create(upload(200).await)),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{long}");
    let long_id = long["id"].as_str().unwrap().to_string();
    let grants = beta
        .expect(StatusCode::OK, Method::GET, "/api/federation/grants", None)
        .await;
    let grant_id = grants["grants"][0]["id"].as_str().unwrap().to_string();
    beta.expect(
        StatusCode::OK,
        Method::POST,
        &format!("/api/federation/grants/{grant_id}/revoke"),
        None,
    )
    .await;
    let cancelled = batch_until(
        beta.url(),
        switchyard_tests::ADMIN_TOKEN,
        &long_id,
        "the job outlived its grant",
        |b| b["status"] == "cancelled",
    )
    .await;
    assert!(completed(&cancelled) < 200, "{cancelled}");

    // An owner that is no peer is refused.
    let mut unknown = create(upload(1).await);
    unknown["metadata"] = json!({"owner": "gamma"});
    let (status, refused) = v1(
        Method::POST,
        alpha.url(),
        "/v1/batches",
        &key,
        Some(unknown),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{refused}");
    assert_eq!(refused["error"]["code"], "owner_not_found", "{refused}");
}
