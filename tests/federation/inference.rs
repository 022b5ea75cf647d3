//! Remote inference: an agent with a `federation:invoke` key on alpha calls
//! beta's service as `beta/chat`; beta judges the call against its grant
//! and answers from its own deployment. The agent's key never leaves
//! alpha. Calls outside the grant are refused with distinct codes, and the
//! grant's counters hold under parallel callers. A client that goes away
//! mid-stream on alpha cancels the engine's work on beta.

use std::process::Stdio;
use std::time::Duration;

use futures::StreamExt;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use switchyard_tests::federation::{Member, eventually, grant};
use switchyard_tests::proxy::TcpProxy;

/// A `/v1` call on `member` with `key`.
async fn chat(member: &Member, key: &str, body: Value) -> (StatusCode, Value) {
    let response = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", member.url()))
        .bearer_auth(key)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

fn ask(model: &str) -> Value {
    json!({"model": model, "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]})
}

/// A member's usage rows by `group_by`, once they count two requests.
async fn metered(member: &Member, group_by: &str) -> Option<Vec<Value>> {
    let url = format!("/api/usage?group_by={group_by}&granularity=day");
    let report = member.expect(StatusCode::OK, Method::GET, &url, None).await;
    let rows = report["rows"].as_array().cloned().unwrap_or_default();
    let requests: u64 = rows.iter().map(|r| r["requests"].as_u64().unwrap()).sum();
    (requests == 2).then_some(rows)
}

/// The grant's record on its owner.
async fn owner_grant(owner: &Member, id: &str) -> Value {
    owner
        .expect(
            StatusCode::OK,
            Method::GET,
            &format!("/api/federation/grants/{id}"),
            None,
        )
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_client_calls_a_remote_service_and_the_key_stays_home() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let beta_log = Stdio::from(log.reopen().unwrap());
    let (alpha, beta) = tokio::join!(
        Member::bare("alpha"),
        Member::serving_logging("beta", json!({}), Some(beta_log))
    );
    alpha.join(&beta).await;
    beta.offer_service("chat").await;
    let spec = json!({"services": ["chat"], "operations": ["inference"], "lifetime_s": 3600,
                      "max_concurrent": 4, "max_requests": 100});
    let id = grant(&beta, &alpha, &["inference"], spec).await;
    let key = alpha.key(&["federation:invoke"]).await;

    // /v1/models on alpha lists the remote service for that key.
    let models: Value = reqwest::Client::new()
        .get(format!("{}/v1/models", alpha.url()))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["data"][0]["id"], "beta/chat", "{models}");
    assert_eq!(models["data"][0]["owned_by"], "beta");

    // The official OpenAI client lists, completes and streams through alpha.
    let python = std::env::var("SWITCHYARD_PYTHON").expect(
        "SWITCHYARD_PYTHON names a Python with the openai package: scripts/test.sh provides it",
    );
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/openai_client.py");
    let output = tokio::process::Command::new(python)
        .arg(script)
        .args([alpha.url(), key.as_str(), "beta/chat"])
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );

    // Beta counted the calls against the grant, as alpha's peer. The last
    // call's slot is released when its stream closes over the link, which
    // may come just after the client has read the answer's last byte.
    let usage = eventually("beta releases the last call's slot", || async {
        let usage = owner_grant(&beta, &id).await;
        (usage["usage"]["in_flight"] == 0).then_some(usage)
    })
    .await;
    assert_eq!(usage["usage"]["requests"], 2, "{usage}");
    let logged = std::fs::read_to_string(log.path()).unwrap();
    assert!(
        logged.contains("peer:alpha"),
        "beta logs the peer as the caller"
    );
    assert!(!logged.contains(&key), "alpha's key reached beta's log");
    let key_id = alpha
        .expect(StatusCode::OK, Method::GET, "/api/keys", None)
        .await["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["scopes"][0] == "federation:invoke")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        !logged.contains(&key_id),
        "alpha's key id reached beta's log"
    );

    // Both sides metered the two calls, with the same tokens: alpha as the
    // key and `beta/chat`, beta as the peer `alpha`.
    let home = eventually("alpha meters the calls", || metered(&alpha, "key,model")).await;
    let owner = eventually("beta meters the calls", || metered(&beta, "peer")).await;
    assert_eq!((home.len(), owner.len()), (1, 1), "{home:?} {owner:?}");
    assert_eq!(home[0]["model"], "beta/chat");
    assert_eq!(home[0]["key"], key_id.as_str());
    assert_eq!(owner[0]["peer"], "alpha");
    for tokens in ["prompt_tokens", "completion_tokens"] {
        assert!(home[0][tokens].as_u64().unwrap() > 0, "{home:?}");
        assert_eq!(home[0][tokens], owner[0][tokens], "{home:?} {owner:?}");
    }

    // Without federation:invoke (or inference) a key calls nothing.
    let models_only = alpha.key(&["models:manage"]).await;
    let (status, refused) = chat(&alpha, &models_only, ask("beta/chat")).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    // A federation:invoke key reaches no local model.
    let (status, refused) = chat(&alpha, &key, ask("demo")).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_outside_the_grant_are_refused_with_distinct_codes() {
    let (alpha, beta) = tokio::join!(Member::bare("alpha"), Member::serving("beta", json!({})));
    alpha.join(&beta).await;
    beta.offer_service("chat").await;
    beta.offer_service("private").await;
    let spec = json!({"services": ["chat"], "operations": ["inference"], "lifetime_s": 3600,
                      "max_concurrent": 4, "max_requests": 3});
    let id = grant(&beta, &alpha, &["inference"], spec).await;
    let key = alpha.key(&["federation:invoke"]).await;

    let (status, answer) = chat(&alpha, &key, ask("beta/chat")).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    // Another service of beta's, not in the grant.
    let (status, refused) = chat(&alpha, &key, ask("beta/private")).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    assert_eq!(refused["error"]["code"], "service_not_granted", "{refused}");
    // A service beta does not have.
    let (status, refused) = chat(&alpha, &key, ask("beta/nothing")).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{refused}");
    assert_eq!(refused["error"]["code"], "service_not_found", "{refused}");
    // Over the request count: 3 allowed, one used.
    for _ in 0..2 {
        let (status, answer) = chat(&alpha, &key, ask("beta/chat")).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
    }
    let (status, refused) = chat(&alpha, &key, ask("beta/chat")).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    assert_eq!(refused["error"]["code"], "requests_exhausted", "{refused}");
    assert_eq!(owner_grant(&beta, &id).await["usage"]["requests"], 3);

    // A short grant expires.
    let short = json!({"services": ["chat"], "operations": ["inference"], "lifetime_s": 1,
                       "max_concurrent": 1, "max_requests": 100});
    let expiring = grant(&beta, &alpha, &["inference"], short).await;
    // Revoked: refused at once, with its own code.
    beta.expect(
        StatusCode::OK,
        Method::POST,
        &format!("/api/federation/grants/{id}/revoke"),
        None,
    )
    .await;
    let refused = eventually("the short grant never expired", || async {
        let (status, refused) = chat(&alpha, &key, ask("beta/chat")).await;
        (refused["error"]["code"] == "grant_expired").then_some((status, refused))
    })
    .await;
    assert_eq!(refused.0, StatusCode::FORBIDDEN, "{}", refused.1);
    let on_alpha = alpha
        .expect(
            StatusCode::OK,
            Method::GET,
            &format!("/api/federation/grants/{id}"),
            None,
        )
        .await;
    assert_eq!(
        on_alpha["status"], "revoked",
        "the peer heard of the revocation"
    );
    assert_eq!(owner_grant(&beta, &expiring).await["status"], "expired");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_parallel_callers_never_pass_the_concurrency_limit() {
    // Each call takes ~0.5 s at the engine: 10 tokens, 50 ms each.
    let (alpha, beta) = tokio::join!(
        Member::bare("alpha"),
        Member::serving("beta", json!({"token_delay_ms": 50}))
    );
    alpha.join(&beta).await;
    beta.offer_service("chat").await;
    let spec = json!({"services": ["chat"], "operations": ["inference"], "lifetime_s": 3600,
                      "max_concurrent": 2, "max_requests": 1000});
    let id = grant(&beta, &alpha, &["inference"], spec).await;
    let key = alpha.key(&["federation:invoke"]).await;
    let body = json!({"model": "beta/chat", "max_tokens": 10,
                      "messages": [{"role": "user", "content": "hi"}]});

    let watching = {
        let path = format!("/api/federation/grants/{id}");
        let beta_url = beta.url().to_string();
        tokio::spawn(async move {
            let http = reqwest::Client::new();
            let mut most = 0u64;
            for _ in 0..100 {
                let grant: Value = http
                    .get(format!("{beta_url}{path}"))
                    .bearer_auth(switchyard_tests::ADMIN_TOKEN)
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                most = most.max(grant["usage"]["in_flight"].as_u64().unwrap());
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            most
        })
    };
    let calls = (0..16).map(|_| chat(&alpha, &key, body.clone()));
    let answers = futures::future::join_all(calls).await;
    let most_in_flight = watching.await.unwrap();
    let ok = answers.iter().filter(|(s, _)| *s == StatusCode::OK).count();
    let busy = answers
        .iter()
        .filter(|(s, b)| {
            *s == StatusCode::TOO_MANY_REQUESTS && b["error"]["code"] == "concurrency_exhausted"
        })
        .count();
    assert_eq!(ok + busy, 16, "{answers:?}");
    assert!(
        ok >= 2,
        "at least the two allowed went through: {answers:?}"
    );
    assert!(busy >= 1, "sixteen at once exceed two: {answers:?}");
    assert!(most_in_flight <= 2, "{most_in_flight} in flight");
    let usage = eventually("the slots were never released", || async {
        let grant = owner_grant(&beta, &id).await;
        (grant["usage"]["in_flight"] == 0).then_some(grant)
    })
    .await;
    assert_eq!(
        usage["usage"]["requests"], ok as u64,
        "counted only what ran: {usage}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_cut_mid_stream_fails_that_call_and_the_next_succeeds_once_it_is_back() {
    let (alpha, beta) = tokio::join!(
        Member::bare("alpha"),
        Member::serving("beta", json!({"token_delay_ms": 100}))
    );
    let target = beta.url().trim_start_matches("http://").parse().unwrap();
    let proxy = TcpProxy::start(target).await;
    alpha.join_at(&beta, &proxy.url()).await;
    beta.offer_service("chat").await;
    let spec = json!({"services": ["chat"], "operations": ["inference"], "lifetime_s": 3600,
                      "max_concurrent": 4, "max_requests": 100});
    let id = grant(&beta, &alpha, &["inference"], spec).await;
    let key = alpha.key(&["federation:invoke"]).await;

    // 50 tokens at 100 ms: the stream is cut after its first event.
    let response = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", alpha.url()))
        .bearer_auth(&key)
        .json(
            &json!({"model": "beta/chat", "max_tokens": 50, "stream": true,
                      "messages": [{"role": "user", "content": "go on"}]}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.bytes_stream();
    let first = body.next().await.unwrap().unwrap();
    assert!(first.starts_with(b"data: "), "{first:?}");
    proxy.cut();
    let rest = tokio::time::timeout(Duration::from_secs(30), async {
        let mut rest = Vec::new();
        let mut failed = false;
        while let Some(chunk) = body.next().await {
            match chunk {
                Ok(chunk) => rest.extend_from_slice(&chunk),
                Err(_) => failed = true,
            }
        }
        (String::from_utf8_lossy(&rest).to_string(), failed)
    })
    .await
    .expect("the cut call hung instead of failing");
    assert!(
        rest.1 || !rest.0.contains("[DONE]"),
        "the cut call finished as if nothing happened: {rest:?}"
    );

    // The link comes back (alpha redials) and the next call goes through.
    let answered = eventually("no call succeeded after the link came back", || async {
        let (status, answer) = chat(
            &alpha,
            &key,
            json!({"model": "beta/chat", "max_tokens": 2,
                   "messages": [{"role": "user", "content": "again"}]}),
        )
        .await;
        (status == StatusCode::OK).then_some(answer)
    })
    .await;
    assert!(
        answered["choices"][0]["message"]["content"].is_string(),
        "{answered}"
    );
    // The cut call's slot was released on beta.
    eventually("the cut call's slot was never released", || async {
        (owner_grant(&beta, &id).await["usage"]["in_flight"] == 0).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_goes_away_on_alpha_cancels_the_engines_work_on_beta() {
    let (alpha, beta) = tokio::join!(
        Member::bare("alpha"),
        Member::serving("beta", json!({"token_delay_ms": 100}))
    );
    alpha.join(&beta).await;
    beta.offer_service("chat").await;
    let spec = json!({"services": ["chat"], "operations": ["inference"], "lifetime_s": 3600,
                      "max_concurrent": 4, "max_requests": 100});
    let id = grant(&beta, &alpha, &["inference"], spec).await;
    let key = alpha.key(&["federation:invoke"]).await;

    // Beta's engine's own counters, at the address its worker reports.
    let node = beta.cluster.node_id("w").await;
    let engines = beta
        .expect(
            StatusCode::OK,
            Method::POST,
            &format!("/api/cluster/nodes/{node}/control/engine.list"),
            Some(json!({})),
        )
        .await;
    let engine = engines[0]["url"]
        .as_str()
        .unwrap_or_else(|| panic!("an engine url in {engines}"))
        .to_string();
    let http = reqwest::Client::new();
    let stats = || async {
        http.get(format!("{engine}/stats"))
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()
    };

    // 200 tokens at 100 ms would take 20 s; the client leaves after the
    // first event.
    let response = http
        .post(format!("{}/v1/chat/completions", alpha.url()))
        .bearer_auth(&key)
        .json(
            &json!({"model": "beta/chat", "max_tokens": 200, "stream": true,
                      "messages": [{"role": "user", "content": "go on"}]}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.bytes_stream();
    let first = body.next().await.unwrap().unwrap();
    assert!(first.starts_with(b"data: "), "{first:?}");
    assert_eq!(stats().await["in_flight"], 1);
    assert_eq!(owner_grant(&beta, &id).await["usage"]["in_flight"], 1);
    drop(body);

    let cancelled = eventually("beta's engine never heard the client leave", || async {
        let now = stats().await;
        assert_eq!(now["completed"], 0, "generated to the end: {now}");
        (now["cancelled"] == 1).then_some(now)
    })
    .await;
    assert_eq!(cancelled["in_flight"], 0, "{cancelled}");
    assert_eq!(cancelled["completed"], 0, "{cancelled}");
    // The call's slot on the grant was released too.
    eventually("the call's grant slot was never released", || async {
        (owner_grant(&beta, &id).await["usage"]["in_flight"] == 0).then_some(())
    })
    .await;
    assert_eq!(stats().await["completed"], 0);
}
