//! Two replicas of one cluster share one key file and one link: the
//! replica holding the dialler lock dials the peer, the other relays its
//! federated calls through it. `/metrics` shows which replica holds the
//! link, and the calls each judged.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use switchyard_tests::federation::{Member, eventually, grant};
use switchyard_tests::process::ServeProcess;

async fn metrics(url: &str) -> String {
    reqwest::get(format!("{url}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_without_the_link_relays_through_the_one_holding_it() {
    let (alpha, beta) = tokio::join!(Member::bare("alpha"), Member::serving("beta", json!({})));
    let key_file = alpha.cluster.data.path().join("federation/cluster.key");
    let second_data = tempfile::tempdir().unwrap();
    let key_flag = key_file.to_str().unwrap().to_string();
    let second = ServeProcess::on_set(
        &alpha.cluster.database_url,
        second_data.path(),
        None,
        &["--federation-key", &key_flag],
    );
    alpha.join(&beta).await;
    beta.offer_service("chat").await;
    let spec = json!({"services": ["chat"], "operations": ["inference"], "lifetime_s": 3600,
                      "max_concurrent": 4, "max_requests": 100});
    let grant = grant(&beta, &alpha, &["inference"], spec).await;
    let key = alpha.key(&["federation:invoke"]).await;

    // The second replica shares the cluster's identity, verified.
    let status: Value = reqwest::Client::new()
        .get(format!("{}/api/federation/status", second.url))
        .bearer_auth(switchyard_tests::ADMIN_TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(status["identity"], "verified", "{status}");

    // It holds no link, yet its agent's calls go through (relayed).
    let held = metrics(&second.url).await;
    assert!(
        held.contains("switchyard_federation_link_held{peer=\"beta\"} 0"),
        "{held}"
    );
    assert!(
        metrics(alpha.url())
            .await
            .contains("switchyard_federation_link_held{peer=\"beta\"} 1")
    );
    for _ in 0..3 {
        let response = reqwest::Client::new()
            .post(format!("{}/v1/chat/completions", second.url))
            .bearer_auth(&key)
            .json(
                &json!({"model": "beta/chat", "max_tokens": 3, "stream": true,
                          "messages": [{"role": "user", "content": "hi"}]}),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let text = response.text().await.unwrap();
        assert!(text.contains("[DONE]"), "{text}");
    }
    // A pairing call from the second replica travels the same way.
    let refreshed: Value = reqwest::Client::new()
        .post(format!(
            "{}/api/federation/grants/{grant}/refresh",
            second.url
        ))
        .bearer_auth(switchyard_tests::ADMIN_TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(refreshed["usage"]["requests"], 3, "{refreshed}");
    assert!(refreshed["last_verified_at"].is_string(), "{refreshed}");

    // The owner counted the calls per grant.
    let counted = metrics(beta.url()).await;
    assert!(
        counted.contains(&format!(
            "switchyard_federation_calls_total{{grant=\"{grant}\",outcome=\"admitted\"}} 3"
        )),
        "{counted}"
    );
    assert!(
        counted.contains(&format!(
            "switchyard_federation_quota_left{{grant=\"{grant}\",peer=\"alpha\",limit=\"requests\"}} 97"
        )),
        "{counted}"
    );
    // And the beta side's other replicas would relay alike: its link is up.
    eventually("beta's link state", || async {
        let peer = beta
            .expect(
                StatusCode::OK,
                Method::GET,
                "/api/federation/peers/alpha",
                None,
            )
            .await;
        (peer["link"]["state"] == "up").then_some(())
    })
    .await;
}
