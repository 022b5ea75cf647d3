//! Keys and scopes: anonymous 401, missing scope 403, revocation at once.

use reqwest::{Method, StatusCode};
use serde_json::json;
use switchyard_tests::db::fresh_database;
use switchyard_tests::replica::Replica;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_is_401_and_a_missing_scope_is_403() {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = Replica::on(&db, dir.path()).await;
    let url = |p: &str| format!("{}{p}", replica.url);

    let (status, body) = replica.call(replica.http.get(url("/api/plugins"))).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["error"]["code"], "unauthorized");
    let (status, _) = replica
        .call(
            replica
                .http
                .get(url("/api/plugins"))
                .bearer_auth("sy_wrong"),
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // An inference-only key cannot administer.
    let (status, created) = replica
        .call(
            replica
                .admin(Method::POST, "/api/keys")
                .json(&json!({"name": "app", "scopes": ["inference"]})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let token = created["token"].as_str().unwrap().to_string();
    assert!(
        token.len() >= 40,
        "a token carries at least 128 random bits"
    );
    let (status, body) = replica
        .call(replica.http.get(url("/api/plugins")).bearer_auth(&token))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(body["error"]["code"], "forbidden");

    // Listing never shows a token; revoking takes effect at once.
    let (_, keys) = replica.call(replica.admin(Method::GET, "/api/keys")).await;
    assert!(!keys.to_string().contains(&token));
    let id = created["key"]["id"].as_str().unwrap();
    let (status, _) = replica
        .call(replica.admin(Method::DELETE, &format!("/api/keys/{id}")))
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = replica
        .call(replica.http.get(url("/api/plugins")).bearer_auth(&token))
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // Unknown scopes are refused.
    let (status, body) = replica
        .call(
            replica
                .admin(Method::POST, "/api/keys")
                .json(&json!({"name": "x", "scopes": ["root"]})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["code"], "invalid_request");

    // The stored form is a digest: the token never appears in the database.
    let client = switchyard_tests::db::connect(&db).await;
    let dump: String = client
        .query_one(
            "SELECT string_agg(id || name || encode(token_sha256, 'hex'), ',') FROM api_keys",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(!dump.contains(&token) && !dump.contains(switchyard_tests::ADMIN_TOKEN));
    replica.stop().await;
}
