//! The owner's `federation` admission chain judges every incoming
//! federated call (after the grant's evaluator): a remote inference call
//! and a managed service's change alike, as the peer (never the peer's
//! client).

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use switchyard_tests::ADMIN_TOKEN;
use switchyard_tests::federation::{Member, grant};
use switchyard_tests::plugins::component;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owners_federation_chain_judges_every_incoming_call() {
    let (alpha, beta) = tokio::join!(Member::bare("alpha"), Member::serving("beta", json!({})));
    alpha.join(&beta).await;
    beta.offer_service("chat").await;
    let node = beta.cluster.node_id("w").await;
    for offer in [
        json!({"id": "ref", "resource": {"kind": "runtime", "engine": "reference"}}),
        json!({"resource": {"kind": "model", "model": "demo", "revision": "r1"}}),
        json!({"resource": {"kind": "machine", "node": node}}),
    ] {
        beta.expect(
            StatusCode::CREATED,
            Method::POST,
            "/api/federation/offers",
            Some(offer),
        )
        .await;
    }
    let spec = json!({"services": ["chat"], "models": ["demo@r1"], "machines": [node],
                      "operations": ["inference", "inference:manage"],
                      "lifetime_s": 3600, "max_concurrent": 4, "max_requests": 100});
    let grant = grant(&beta, &alpha, &["inference", "inference:manage"], spec).await;
    let key = alpha.key(&["federation:invoke"]).await;
    let chat = || async {
        let response = reqwest::Client::new()
            .post(format!("{}/v1/chat/completions", alpha.url()))
            .bearer_auth(&key)
            .json(&json!({"model": "beta/chat", "max_tokens": 2,
                          "messages": [{"role": "user", "content": "hi"}]}))
            .send()
            .await
            .unwrap();
        let status = response.status();
        (status, response.json::<Value>().await.unwrap())
    };
    assert_eq!(chat().await.0, StatusCode::OK);

    // Beta's federation chain allows peer alpha no model at all.
    let bytes = component("model-allowlist");
    let pushed = reqwest::Client::new()
        .post(format!("{}/api/plugins", beta.url()))
        .query(&[
            ("name", "model-allowlist"),
            ("version", "1.0.0"),
            ("sha256", &switchyard_tests::plugins::sha256(&bytes)),
        ])
        .bearer_auth(ADMIN_TOKEN)
        .body(bytes)
        .send()
        .await
        .unwrap();
    assert_eq!(pushed.status(), StatusCode::CREATED);
    beta.expect(
        StatusCode::OK,
        Method::PUT,
        "/api/admission/federation",
        Some(
            json!({"policies": [{"plugin": "model-allowlist", "version": "1.0.0",
            "settings": {"rules": [{"peer": "alpha", "models": ["nothing-*"]}], "default": []},
            "mode": "enforce"}]}),
        ),
    )
    .await;
    let (status, refused) = switchyard_tests::federation::eventually(
        "the federation chain never refused the call",
        || async {
            let (status, body) = chat().await;
            (status == StatusCode::FORBIDDEN).then_some((status, body))
        },
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(refused["error"]["code"], "model_not_allowed", "{refused}");

    // A managed service's change, inside the grant, is judged by the
    // same chain: the model it names is not allowed for alpha.
    let (status, refused) = alpha
        .call(
            Method::POST,
            "/api/federation/peers/beta/services",
            Some(
                json!({"grant": grant, "operation_id": "op-1", "action": "create",
                        "spec": {"service": "mine", "model": "demo@r1", "runtime": "ref",
                                 "machines": [node]}}),
            ),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    assert_eq!(refused["error"]["code"], "model_not_allowed", "{refused}");
    let deployments = beta
        .expect(StatusCode::OK, Method::GET, "/api/deployments", None)
        .await;
    assert_eq!(
        deployments["deployments"].as_array().unwrap().len(),
        1,
        "nothing was made"
    );
}
