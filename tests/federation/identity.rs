//! The cluster key lives in a file: removing it suspends federation
//! (`identity_missing`), another key in its place too (`identity_mismatch`,
//! what a restored backup with a new key sees); links close and federated
//! calls are refused until the cluster's own key is back, or a new key is
//! adopted and the peers pair again.

use std::os::unix::fs::PermissionsExt;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use switchyard_federation::identity::ClusterKey;
use switchyard_tests::federation::{Member, eventually, grant};

async fn identity_state(member: &Member) -> Value {
    member
        .expect(StatusCode::OK, Method::GET, "/api/federation/status", None)
        .await
}

async fn until_state(member: &Member, state: &str) -> Value {
    eventually(&format!("the identity never became {state}"), || async {
        let status = identity_state(member).await;
        (status["identity"] == state).then_some(status)
    })
    .await
}

fn write_key(path: &std::path::Path, content: &[u8]) {
    std::fs::write(path, content).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_or_swapped_key_suspends_federation() {
    let (alpha, beta) = tokio::join!(Member::bare("alpha"), Member::serving("beta", json!({})));
    alpha.join(&beta).await;
    beta.offer_service("chat").await;
    let spec = json!({"services": ["chat"], "operations": ["inference"], "lifetime_s": 3600,
                      "max_concurrent": 4, "max_requests": 100});
    grant(&beta, &alpha, &["inference"], spec).await;
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
    let verified = until_state(&alpha, "verified").await;
    let public_key = verified["cluster"]["public_key"].clone();
    assert!(public_key.is_string(), "{verified}");

    // Removed: suspended; the link closes; calls and joins are refused.
    let path = alpha.cluster.data.path().join("federation/cluster.key");
    let original = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let suspended = until_state(&alpha, "identity_missing").await;
    assert!(suspended["suspended"].is_string(), "{suspended}");
    let (status, refused) = call().await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{refused}");
    assert_eq!(refused["error"]["code"], "identity_missing", "{refused}");
    // Alpha's own record and status say the link is down, and why.
    let peer = alpha
        .cluster
        .until(
            "/api/federation/peers/beta",
            "alpha's record of beta still says its link is up while suspended",
            |p| p["link"]["state"] == "down",
        )
        .await;
    let error = peer["link"]["last_error"].as_str().unwrap_or_default();
    assert!(error.contains("identity_missing"), "{peer}");
    let status = identity_state(&alpha).await;
    assert_eq!(status["peers"][0]["link"]["state"], "down", "{status}");
    let (status, refused) = alpha
        .call(Method::POST, "/api/federation/join-token", None)
        .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{refused}");
    eventually("beta never saw the link go down", || async {
        let peer = beta
            .expect(
                StatusCode::OK,
                Method::GET,
                "/api/federation/peers/alpha",
                None,
            )
            .await;
        (peer["link"]["state"] == "down").then_some(())
    })
    .await;
    // The database kept the public key only: nothing was made anew.
    assert_eq!(suspended["cluster"]["public_key"], public_key);
    assert!(!path.exists(), "a key was made to replace the missing one");

    // Another key in its place: a mismatch, still suspended.
    let other = alpha.cluster.data.path().join("other.key");
    ClusterKey::init_file(&other).unwrap();
    write_key(&path, &std::fs::read(&other).unwrap());
    until_state(&alpha, "identity_mismatch").await;
    let (status, refused) = call().await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{refused}");
    assert_eq!(refused["error"]["code"], "identity_mismatch", "{refused}");

    // The cluster's own key back: the link comes back and calls go through.
    write_key(&path, &original);
    until_state(&alpha, "verified").await;
    alpha.until_link_up("beta").await;
    let answered = eventually("calls never went through again", || async {
        let (status, answer) = call().await;
        (status == StatusCode::OK).then_some(answer)
    })
    .await;
    assert!(answered["choices"].is_array(), "{answered}");

    // The key lost for good: a new one is adopted explicitly. The peer,
    // paired with the old key, refuses the new one until both sides forget
    // each other and alpha joins again.
    write_key(&path, &std::fs::read(&other).unwrap());
    until_state(&alpha, "identity_mismatch").await;
    let adopted = alpha
        .expect(
            StatusCode::OK,
            Method::POST,
            "/api/federation/identity/adopt",
            None,
        )
        .await;
    assert_ne!(adopted["public_key"], public_key, "{adopted}");
    until_state(&alpha, "verified").await;
    let refused = eventually("beta never refused the new key", || async {
        let peer = alpha
            .expect(
                StatusCode::OK,
                Method::GET,
                "/api/federation/peers/beta",
                None,
            )
            .await;
        let error = peer["link"]["last_error"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        error.contains("unknown_peer").then_some(error)
    })
    .await;
    assert!(refused.contains("unknown_peer"), "{refused}");
    alpha
        .expect(
            StatusCode::NO_CONTENT,
            Method::DELETE,
            "/api/federation/peers/beta",
            None,
        )
        .await;
    beta.expect(
        StatusCode::NO_CONTENT,
        Method::DELETE,
        "/api/federation/peers/alpha",
        None,
    )
    .await;
    alpha.join(&beta).await;
}
