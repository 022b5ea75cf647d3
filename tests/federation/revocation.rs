//! Revocation ends what a grant has in flight on every replica: a streamed
//! remote call ends within a second with `grant_revoked` (revoked on
//! another replica of the owner than the one serving it), and the next call is refused with
//! that code. `stop_on_revoke` stops only the services that grant created,
//! even after the grant expired; expiry alone stops nothing, and a grant
//! without it leaves its services running.

use std::time::{Duration, Instant};

use futures::StreamExt;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use switchyard_tests::federation::{Member, eventually, grant};
use switchyard_tests::process::ServeProcess;

/// One manage call from alpha to beta; its answer, which must be `expected`.
async fn manage(alpha: &Member, expected: StatusCode, call: Value) -> Value {
    alpha
        .expect(
            expected,
            Method::POST,
            "/api/federation/peers/beta/services",
            Some(call),
        )
        .await
}

/// Beta's deployment serving `name`: its wanted replicas.
async fn replicas(beta: &Member, name: &str) -> i64 {
    let listed = beta
        .expect(StatusCode::OK, Method::GET, "/api/deployments", None)
        .await;
    let deployment = listed["deployments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["deployment"]["served_model_name"] == name)
        .unwrap_or_else(|| panic!("no deployment serves {name}: {listed}"))
        .clone();
    deployment["deployment"]["replicas"].as_i64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_a_grant_ends_its_stream_within_a_second_and_refuses_the_next_call() {
    // 50 ms a token: 200 tokens stream for 10 s.
    let (alpha, beta) = tokio::join!(
        Member::bare("alpha"),
        Member::serving("beta", json!({"token_delay_ms": 50}))
    );
    alpha.join(&beta).await;
    let key_file = beta.cluster.data.path().join("federation/cluster.key");
    let second_data = tempfile::tempdir().unwrap();
    let second = ServeProcess::on_set(
        &beta.cluster.database_url,
        second_data.path(),
        None,
        &["--federation-key", key_file.to_str().unwrap()],
    );
    beta.offer_service("chat").await;
    let spec = json!({"services": ["chat"], "operations": ["inference"], "lifetime_s": 3600,
                      "max_concurrent": 4, "max_requests": 100});
    let id = grant(&beta, &alpha, &["inference"], spec).await;
    let key = alpha.key(&["federation:invoke"]).await;
    let ask = json!({"model": "beta/chat", "max_tokens": 200, "stream": true,
                     "messages": [{"role": "user", "content": "hi"}]});
    let response = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", alpha.url()))
        .bearer_auth(&key)
        .json(&ask)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.bytes_stream();
    let first = body.next().await.unwrap().unwrap();
    assert!(first.starts_with(b"data: "), "{first:?}");

    // Revoked on beta's other replica: the one serving the stream hears of
    // it from the database.
    let revoked_at = Instant::now();
    let revoked: Value = reqwest::Client::new()
        .post(format!("{}/api/federation/grants/{id}/revoke", second.url))
        .bearer_auth(switchyard_tests::ADMIN_TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(revoked["peer_notified"], true, "{revoked}");
    let rest = tokio::time::timeout(Duration::from_secs(10), async {
        let mut rest = Vec::new();
        while let Some(Ok(chunk)) = body.next().await {
            rest.extend_from_slice(&chunk);
        }
        rest
    })
    .await
    .expect("the stream outlived its grant");
    let ended_in = revoked_at.elapsed();
    let rest = String::from_utf8_lossy(&rest);
    assert!(rest.contains("\"grant_revoked\""), "{rest}");
    assert!(
        !rest.contains("[DONE]"),
        "the stream ran to its end: {rest}"
    );
    assert!(
        ended_in < Duration::from_secs(1),
        "the stream ended {ended_in:?} after the revocation"
    );

    // The next call is refused with the same code.
    let response = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", alpha.url()))
        .bearer_auth(&key)
        .json(&json!({"model": "beta/chat", "max_tokens": 2,
                      "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    let refused: Value = response.json().await.unwrap();
    assert_eq!(refused["error"]["code"], "grant_revoked", "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_on_revoke_stops_only_the_grant_s_own_services_even_once_expired() {
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
    let spec = |lifetime_s: i64, stop_on_revoke: bool| {
        json!({"models": ["demo@r1"], "machines": [node], "lifetime_s": lifetime_s,
               "operations": ["inference:manage"], "stop_on_revoke": stop_on_revoke,
               "max_concurrent": 4, "max_requests": 100})
    };
    // Three grants, each making and starting one service: one stops on
    // revocation, one does not, one stops on revocation and expires first.
    let stopping = grant(&beta, &alpha, &["inference:manage"], spec(3600, true)).await;
    let keeping = grant(&beta, &alpha, &["inference:manage"], spec(3600, false)).await;
    let expiring = grant(&beta, &alpha, &["inference:manage"], spec(8, true)).await;
    for (grant, service) in [
        (&stopping, "s-stop"),
        (&keeping, "s-keep"),
        (&expiring, "s-exp"),
    ] {
        let created = manage(
            &alpha,
            StatusCode::CREATED,
            json!({"grant": grant, "operation_id": format!("{service}-create"), "action": "create",
                   "spec": {"service": service, "model": "demo@r1", "runtime": "ref",
                            "machines": [node]}}),
        )
        .await;
        let started = manage(
            &alpha,
            StatusCode::OK,
            json!({"grant": grant, "operation_id": format!("{service}-start"), "action": "start",
                   "service": service, "revision": created["revision"]}),
        )
        .await;
        assert_eq!(started["state"], "running", "{started}");
    }
    for service in ["s-stop", "s-keep", "s-exp"] {
        assert_eq!(replicas(&beta, &format!("federation.{service}")).await, 1);
    }

    // Expiry alone stops nothing.
    eventually("the grant never expired", || async {
        let shown = beta
            .expect(
                StatusCode::OK,
                Method::GET,
                &format!("/api/federation/grants/{expiring}"),
                None,
            )
            .await;
        (shown["status"] == "expired").then_some(())
    })
    .await;
    assert_eq!(replicas(&beta, "federation.s-exp").await, 1);

    // Revoked: each stop_on_revoke grant stops its own service, the
    // expired one too; the other grant's service and beta's own
    // deployment keep running.
    for grant in [&stopping, &keeping, &expiring] {
        beta.expect(
            StatusCode::OK,
            Method::POST,
            &format!("/api/federation/grants/{grant}/revoke"),
            None,
        )
        .await;
    }
    assert_eq!(replicas(&beta, "federation.s-stop").await, 0);
    assert_eq!(replicas(&beta, "federation.s-exp").await, 0);
    assert_eq!(replicas(&beta, "federation.s-keep").await, 1);
    assert_eq!(replicas(&beta, "demo").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_under_a_revoked_grant_says_grant_revoked_while_another_grant_is_active() {
    let (alpha, beta) = tokio::join!(Member::bare("alpha"), Member::serving("beta", json!({})));
    alpha.join(&beta).await;
    beta.offer_service("chat").await;
    beta.expect(
        StatusCode::CREATED,
        Method::POST,
        "/api/federation/offers",
        Some(json!({"resource": {"kind": "model", "model": "demo", "revision": "r1"}})),
    )
    .await;
    let chat = json!({"services": ["chat"], "operations": ["inference"], "lifetime_s": 3600,
                      "max_concurrent": 4, "max_requests": 100});
    let revoked = grant(&beta, &alpha, &["inference"], chat).await;
    // Another active grant from the same owner, naming no service.
    let copies = json!({"models": ["demo@r1"], "operations": ["models:transfer"],
                        "lifetime_s": 3600, "max_concurrent": 1, "max_requests": 10,
                        "max_model_bytes": 1_000_000});
    grant(&beta, &alpha, &["models:transfer"], copies).await;
    let key = alpha.key(&["federation:invoke"]).await;
    let call = || async {
        let response = reqwest::Client::new()
            .post(format!("{}/v1/chat/completions", alpha.url()))
            .bearer_auth(&key)
            .json(&json!({"model": "beta/chat", "max_tokens": 2,
                          "messages": [{"role": "user", "content": "hi"}]}))
            .send()
            .await
            .unwrap();
        let status = response.status();
        (
            status,
            response.json::<Value>().await.unwrap_or(Value::Null),
        )
    };
    assert_eq!(call().await.0, StatusCode::OK);

    beta.expect(
        StatusCode::OK,
        Method::POST,
        &format!("/api/federation/grants/{revoked}/revoke"),
        None,
    )
    .await;
    // Once alpha knows of the revocation, it still claims that grant.
    alpha
        .cluster
        .until(
            &format!("/api/federation/grants/{revoked}"),
            "alpha never learned of the revocation",
            |g| g["status"] == "revoked",
        )
        .await;
    for _ in 0..2 {
        let (status, refused) = call().await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
        assert_eq!(refused["error"]["code"], "grant_revoked", "{refused}");
    }
}
