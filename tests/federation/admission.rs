//! Both clusters' own `inference` chains judge a remote call, each in its
//! own names: the caller's chain first, as it judges a local call (the
//! model as the client wrote it, `beta/chat`, and the caller's key), then
//! the owner's, which sees its own model name and `peer:<label>` as the
//! caller. A call the owner's chains refuse is not charged to the grant.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use switchyard_tests::ADMIN_TOKEN;
use switchyard_tests::federation::{Member, eventually, grant};
use switchyard_tests::plugins::{component, sha256};

/// Uploads `name` as version 1.0.0 (once per cluster).
async fn push(member: &Member, name: &str) {
    let bytes = component(name);
    let pushed = reqwest::Client::new()
        .post(format!("{}/api/plugins", member.url()))
        .query(&[
            ("name", name),
            ("version", "1.0.0"),
            ("sha256", &sha256(&bytes)),
        ])
        .bearer_auth(ADMIN_TOKEN)
        .body(bytes)
        .send()
        .await
        .unwrap();
    assert_eq!(pushed.status(), StatusCode::CREATED);
}

/// Sets `member`'s `inference` chain: an allowlist of `models`, then, with
/// `clamp`, `max_tokens` clamped to it.
async fn inference_chain(member: &Member, models: &[&str], clamp: Option<u32>) {
    let mut policies = vec![json!({"plugin": "model-allowlist", "version": "1.0.0",
        "settings": {"default": models, "rules": []}, "mode": "enforce"})];
    if let Some(clamp) = clamp {
        policies.push(json!({"plugin": "max-tokens", "version": "1.0.0",
            "settings": {"max_tokens": clamp, "mode": "clamp"}, "mode": "enforce"}));
    }
    member
        .expect(
            StatusCode::OK,
            Method::PUT,
            "/api/admission/inference",
            Some(json!({ "policies": policies })),
        )
        .await;
}

async fn chat(member: &Member, key: &str, max_tokens: u32) -> (StatusCode, Value) {
    let response = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", member.url()))
        .bearer_auth(key)
        .json(&json!({"model": "beta/chat", "max_tokens": max_tokens,
                      "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Calls until the answer has `status` (a chain just set takes effect on
/// every replica within moments); that answer.
async fn until_status(member: &Member, key: &str, status: StatusCode) -> Value {
    eventually(&format!("the call never answered {status}"), || async {
        let (got, body) = chat(member, key, 4).await;
        (got == status).then_some(body)
    })
    .await
}

async fn requests_charged(owner: &Member, grant: &str) -> u64 {
    let record = owner
        .expect(
            StatusCode::OK,
            Method::GET,
            &format!("/api/federation/grants/{grant}"),
            None,
        )
        .await;
    record["usage"]["requests"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_clusters_inference_chain_judges_a_remote_call_in_its_own_names() {
    let (alpha, beta) = tokio::join!(
        Member::bare("alpha"),
        Member::serving("beta", json!({"served_model_name": "demo-chat"}))
    );
    alpha.join(&beta).await;
    beta.offer_service("chat").await;
    let spec = json!({"services": ["chat"], "operations": ["inference"], "lifetime_s": 3600,
                      "max_concurrent": 4, "max_requests": 100});
    let id = grant(&beta, &alpha, &["inference"], spec).await;
    let key = alpha.key(&["inference", "federation:invoke"]).await;
    tokio::join!(
        push(&alpha, "model-allowlist"),
        push(&beta, "model-allowlist")
    );
    push(&alpha, "max-tokens").await;

    // Beta's chain refuses everything: refused calls are not charged.
    inference_chain(&beta, &["nothing-*"], None).await;
    let refused = until_status(&alpha, &key, StatusCode::FORBIDDEN).await;
    assert_eq!(refused["error"]["code"], "model_not_allowed", "{refused}");
    let before = requests_charged(&beta, &id).await;
    for _ in 0..3 {
        assert_eq!(chat(&alpha, &key, 4).await.0, StatusCode::FORBIDDEN);
    }
    assert_eq!(
        requests_charged(&beta, &id).await,
        before,
        "a call the owner refused was charged to max_requests"
    );

    // Beta's chain in its own names (`switchyard up`'s allowlist): its
    // service's model, not the `beta/chat` alpha's client wrote.
    inference_chain(&beta, &["demo-*"], None).await;
    until_status(&alpha, &key, StatusCode::OK).await;

    // Alpha's own chain judges the call first, as a local one: `demo-*`
    // only refuses `beta/chat` ...
    inference_chain(&alpha, &["demo-*"], Some(8)).await;
    let refused = until_status(&alpha, &key, StatusCode::FORBIDDEN).await;
    assert_eq!(refused["error"]["code"], "model_not_allowed", "{refused}");
    // ... and once allowed, its clamp holds for the remote call too.
    inference_chain(&alpha, &["demo-*", "beta/*"], Some(8)).await;
    until_status(&alpha, &key, StatusCode::OK).await;
    let (status, answer) = chat(&alpha, &key, 300).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let tokens = answer["usage"]["completion_tokens"].as_u64().unwrap();
    assert!(tokens <= 8, "alpha's clamp to 8 was skipped: {answer}");
}
