//! Remote managed services under an `inference:manage` grant: alpha
//! creates a service on beta from beta's runtime offer, with a model and a
//! machine inside the grant, starts it, calls it, drains, stops and removes
//! it, each with an operation id; an exact retry returns the recorded
//! answer, a changed retry with the same id is refused, and the receipt is
//! inspected on the owner.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use switchyard_tests::federation::{Member, eventually, grant};

/// One manage call from `grantee` to `owner`; the status and answer.
async fn manage(grantee: &Member, owner: &Member, call: Value) -> (StatusCode, Value) {
    grantee
        .call(
            Method::POST,
            &format!("/api/federation/peers/{}/services", owner.label),
            Some(call),
        )
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_managed_service_is_created_started_used_drained_stopped_and_removed() {
    let (alpha, beta) = tokio::join!(Member::bare("alpha"), Member::serving("beta", json!({})));
    alpha.join(&beta).await;
    let node = beta.cluster.node_id("w").await;
    for offer in [
        json!({"resource": {"kind": "model", "model": "demo", "revision": "r1"}}),
        json!({"resource": {"kind": "machine", "node": node}}),
        json!({"id": "ref", "resource": {"kind": "runtime", "engine": "reference", "gpus_per_replica": 0}}),
    ] {
        beta.expect(
            StatusCode::CREATED,
            Method::POST,
            "/api/federation/offers",
            Some(offer),
        )
        .await;
    }
    let spec = json!({"models": ["demo@r1"], "machines": [node], "lifetime_s": 3600,
                      "operations": ["inference", "inference:manage"],
                      "max_concurrent": 4, "max_requests": 100});
    let grant = grant(&beta, &alpha, &["inference", "inference:manage"], spec).await;

    // A model outside the grant is refused by the evaluator.
    let (status, refused) = manage(
        &alpha,
        &beta,
        json!({"grant": grant, "operation_id": "op-outside", "action": "create",
               "spec": {"service": "mine", "model": "other@r1", "runtime": "ref", "machines": [node]}}),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    assert_eq!(refused["error"]["code"], "model_not_granted", "{refused}");

    let create = json!({"grant": grant, "operation_id": "op-create", "action": "create",
                        "spec": {"service": "mine", "model": "demo@r1", "runtime": "ref",
                                 "machines": [node]}});
    let (status, created) = manage(&alpha, &beta, create.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["state"], "stopped");
    assert_eq!(created["revision"], 1);
    // The exact retry: the recorded answer, nothing done twice.
    let (status, again) = manage(&alpha, &beta, create).await;
    assert_eq!(status, StatusCode::CREATED, "{again}");
    assert_eq!(again, created);
    // The same id with a changed request: refused.
    let (status, refused) = manage(
        &alpha,
        &beta,
        json!({"grant": grant, "operation_id": "op-create", "action": "create",
               "spec": {"service": "other", "model": "demo@r1", "runtime": "ref",
                        "machines": [node]}}),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(refused["error"]["code"], "operation_conflict");
    // The receipt, inspected on the owner through the link.
    let receipt = alpha
        .expect(
            StatusCode::OK,
            Method::GET,
            "/api/federation/peers/beta/operations/op-create",
            None,
        )
        .await;
    assert_eq!(receipt["state"], "done", "{receipt}");
    assert_eq!(receipt["status"], 201);
    assert_eq!(receipt["outcome"], created);
    let (status, unknown) = alpha
        .call(
            Method::GET,
            "/api/federation/peers/beta/operations/op-never",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{unknown}");

    // A stale revision is refused; the current one starts it.
    let (status, refused) = manage(
        &alpha,
        &beta,
        json!({"grant": grant, "operation_id": "op-start-stale", "action": "start",
               "service": "mine", "revision": 7}),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(refused["error"]["code"], "revision_changed");
    let (status, started) = manage(
        &alpha,
        &beta,
        json!({"grant": grant, "operation_id": "op-start", "action": "start",
               "service": "mine", "revision": 1}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{started}");
    assert_eq!(started["state"], "running");

    // Used: once ready, alpha's agent calls it as beta/mine.
    let key = alpha.key(&["federation:invoke"]).await;
    let answered = eventually("the managed service never answered", || async {
        let response = reqwest::Client::new()
            .post(format!("{}/v1/chat/completions", alpha.url()))
            .bearer_auth(&key)
            .json(&json!({"model": "beta/mine", "max_tokens": 2,
                          "messages": [{"role": "user", "content": "hi"}]}))
            .send()
            .await
            .unwrap();
        let ok = response.status() == StatusCode::OK;
        let body: Value = response.json().await.unwrap_or(Value::Null);
        ok.then_some(body)
    })
    .await;
    assert!(
        answered["choices"][0]["message"]["content"].is_string(),
        "{answered}"
    );

    // Drained: new calls refused; then stopped and removed.
    let mut revision = started["revision"].as_i64().unwrap();
    for (op, action, state) in [
        ("op-drain", "drain", "draining"),
        ("op-stop", "stop", "stopped"),
    ] {
        let (status, moved) = manage(
            &alpha,
            &beta,
            json!({"grant": grant, "operation_id": op, "action": action,
                   "service": "mine", "revision": revision}),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{moved}");
        assert_eq!(moved["state"], state);
        revision = moved["revision"].as_i64().unwrap();
        if action == "drain" {
            let response = reqwest::Client::new()
                .post(format!("{}/v1/chat/completions", alpha.url()))
                .bearer_auth(&key)
                .json(&json!({"model": "beta/mine", "max_tokens": 2,
                              "messages": [{"role": "user", "content": "hi"}]}))
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
            let body: Value = response.json().await.unwrap();
            assert_eq!(body["error"]["code"], "service_draining", "{body}");
        }
    }
    let listed = alpha
        .expect(
            StatusCode::OK,
            Method::GET,
            &format!("/api/federation/peers/beta/services?grant={grant}"),
            None,
        )
        .await;
    assert_eq!(listed["services"][0]["state"], "stopped", "{listed}");
    let (status, removed) = manage(
        &alpha,
        &beta,
        json!({"grant": grant, "operation_id": "op-remove", "action": "remove",
               "service": "mine", "revision": revision}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{removed}");
    let deployments = beta
        .expect(StatusCode::OK, Method::GET, "/api/deployments", None)
        .await;
    let left = deployments["deployments"].as_array().unwrap();
    assert_eq!(
        left.len(),
        1,
        "only beta's own deployment is left: {deployments}"
    );
}
