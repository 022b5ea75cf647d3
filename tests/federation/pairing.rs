//! Joining and pairing: a join links both clusters and registers each on
//! the other; repeating it changes nothing; a label or URL that shows
//! another key, a wrong token and an unreachable peer are refused with
//! their codes. Request → approve → complete leaves both clusters with the
//! same terms signed by both keys.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use switchyard_federation::receipt;
use switchyard_protocol::federation::GrantRecord;
use switchyard_tests::federation::{Member, grant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joining_is_idempotent_and_refuses_a_changed_identity() {
    let (alpha, beta, gamma) = tokio::join!(
        Member::bare("alpha"),
        Member::bare("beta"),
        Member::bare("gamma")
    );
    let peer = alpha.join(&beta).await;
    assert_eq!(peer["label"], "beta");
    assert_eq!(peer["url"], beta.url());
    assert_eq!(peer["cluster_id"], beta.identity().await["cluster_id"]);
    assert_eq!(peer["link"]["state"], "up", "{peer}");
    // Registered on the other side too, under its own label.
    let back = beta
        .expect(
            StatusCode::OK,
            Method::GET,
            "/api/federation/peers/alpha",
            None,
        )
        .await;
    assert_eq!(back["public_key"], alpha.identity().await["public_key"]);

    // The same identity at the same URL: 200, the same peer.
    let token = beta.join_token().await;
    let again = alpha
        .expect(
            StatusCode::OK,
            Method::POST,
            "/api/federation/peers",
            Some(json!({"url": beta.url(), "join_token": token, "label": "beta"})),
        )
        .await;
    assert_eq!(again["id"], peer["id"]);

    // "beta" now at a cluster with another key: refused, the peer kept.
    let token = gamma.join_token().await;
    let (status, refused) = alpha
        .call(
            Method::POST,
            "/api/federation/peers",
            Some(json!({"url": gamma.url(), "join_token": token, "label": "beta"})),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(refused["error"]["code"], "identity_conflict");
    let kept = alpha
        .expect(
            StatusCode::OK,
            Method::GET,
            "/api/federation/peers/beta",
            None,
        )
        .await;
    assert_eq!(kept["public_key"], beta.identity().await["public_key"]);
    assert_eq!(kept["url"], beta.url());

    // A wrong token; an unreachable peer.
    let (status, refused) = alpha
        .call(
            Method::POST,
            "/api/federation/peers",
            Some(json!({"url": gamma.url(), "join_token": "syj_wrong", "label": "gamma"})),
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{refused}");
    assert_eq!(refused["error"]["code"], "invalid_join_token");
    let (status, refused) = alpha
        .call(
            Method::POST,
            "/api/federation/peers",
            Some(json!({"url": "http://127.0.0.1:9", "join_token": "syj_x", "label": "nowhere"})),
        )
        .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{refused}");
    assert_eq!(refused["error"]["code"], "NODE_UNAVAILABLE");
    // A token rotated away no longer joins.
    let old = gamma.join_token().await;
    gamma.join_token().await;
    let (status, refused) = alpha
        .call(
            Method::POST,
            "/api/federation/peers",
            Some(json!({"url": gamma.url(), "join_token": old, "label": "gamma"})),
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{refused}");
}

/// Both signatures of a grant's terms verify against both clusters'
/// public keys, on both sides, and both sides keep the same terms.
fn assert_signed(record: &GrantRecord, owner_key: &str, grantee_key: &str) {
    receipt::verify(owner_key, &record.terms, &record.owner_signature)
        .expect("the owner's signature verifies");
    let grantee_signature = record.grantee_signature.as_deref().expect("completed");
    receipt::verify(grantee_key, &record.terms, grantee_signature)
        .expect("the grantee's signature verifies");
    assert!(
        receipt::verify(owner_key, &record.terms, grantee_signature).is_err(),
        "a signature verifies only with its own key"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_approve_complete_leaves_both_sides_the_receipt_signed_by_both_keys() {
    let (alpha, beta) = tokio::join!(Member::bare("alpha"), Member::serving("beta", json!({})));
    alpha.join(&beta).await;
    beta.offer_service("chat").await;
    let spec = json!({
        "services": ["chat"], "operations": ["inference"], "lifetime_s": 3600,
        "max_concurrent": 2, "max_requests": 10,
    });
    let id = grant(&beta, &alpha, &["inference"], spec).await;

    let owner_key = beta.identity().await["public_key"]
        .as_str()
        .unwrap()
        .to_string();
    let grantee_key = alpha.identity().await["public_key"]
        .as_str()
        .unwrap()
        .to_string();
    let path = format!("/api/federation/grants/{id}");
    let on_owner: GrantRecord =
        serde_json::from_value(beta.expect(StatusCode::OK, Method::GET, &path, None).await)
            .unwrap();
    let on_grantee: GrantRecord =
        serde_json::from_value(alpha.expect(StatusCode::OK, Method::GET, &path, None).await)
            .unwrap();
    assert_eq!(on_owner.terms, on_grantee.terms);
    assert_eq!(on_owner.direction.as_str(), "outgoing");
    assert_eq!(on_grantee.direction.as_str(), "incoming");
    assert_eq!(
        on_owner.status,
        switchyard_protocol::federation::GrantStanding::Active
    );
    assert_signed(&on_owner, &owner_key, &grantee_key);
    assert_signed(&on_grantee, &owner_key, &grantee_key);
    assert_eq!(on_owner.terms.grantee.label, "alpha");
    assert_eq!(on_owner.terms.services, vec!["chat".to_string()]);

    // The request is answered on both sides.
    let requests: Value = beta
        .expect(
            StatusCode::OK,
            Method::GET,
            "/api/federation/requests",
            None,
        )
        .await;
    assert_eq!(requests["requests"][0]["state"], "approved", "{requests}");
    assert_eq!(requests["requests"][0]["grant"], id.as_str());

    // Approving a resource this cluster does not offer is refused.
    let asked = alpha
        .expect(
            StatusCode::CREATED,
            Method::POST,
            "/api/federation/peers/beta/requests",
            Some(json!({"operations": ["inference"]})),
        )
        .await;
    let (status, refused) = beta
        .call(
            Method::POST,
            &format!(
                "/api/federation/requests/{}/approve",
                asked["id"].as_str().unwrap()
            ),
            Some(
                json!({"services": ["secret"], "operations": ["inference"], "lifetime_s": 60,
                        "max_concurrent": 1, "max_requests": 1}),
            ),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_joining_itself_is_refused_and_registers_nothing() {
    let alpha = Member::bare("alpha").await;
    let token = alpha.join_token().await;
    let (status, refused) = alpha
        .call(
            Method::POST,
            "/api/federation/peers",
            Some(json!({"url": alpha.url(), "join_token": token, "label": "me"})),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(refused["error"]["code"], "self_join", "{refused}");
    let peers = alpha
        .expect(StatusCode::OK, Method::GET, "/api/federation/peers", None)
        .await;
    assert_eq!(peers["peers"], json!([]), "{peers}");
}
