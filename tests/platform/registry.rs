//! The component registry's contract.

use reqwest::{Method, StatusCode};
use switchyard_tests::db::fresh_database;
use switchyard_tests::plugins::{component, sha256};
use switchyard_tests::replica::Replica;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_digest_world_and_version_rules() {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = Replica::on(&db, dir.path()).await;
    let bytes = component("max-tokens");

    let (status, record) = replica.push("max-tokens", "1.0.0", &bytes).await;
    assert_eq!(status, StatusCode::CREATED, "{record}");
    assert_eq!(record["kind"], "policy");
    // Built with the Rust SDK: the second version of the world.
    assert_eq!(record["world"], "switchyard:policy/admission-policy@0.2.0");
    assert_eq!(record["sha256"], sha256(&bytes));
    assert_eq!(record["size"], bytes.len() as u64);

    // The same upload again is 200 with the same record.
    let (status, again) = replica.push("max-tokens", "1.0.0", &bytes).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(again, record);

    // Same name and version, other bytes: 409.
    let other = component("model-allowlist");
    let (status, body) = replica.push("max-tokens", "1.0.0", &other).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "version_exists");

    // A digest that does not match: 422, before anything else.
    let (status, body) = replica
        .call(
            replica
                .admin(Method::POST, "/api/plugins")
                .query(&[
                    ("name", "x"),
                    ("version", "1"),
                    ("sha256", &sha256(b"other bytes")),
                ])
                .body(bytes.clone()),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"]["code"], "digest_mismatch");

    // Not a component: 400 invalid_component.
    let (status, body) = replica.push("junk", "1", b"definitely not wasm").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["code"], "invalid_component");

    // A component of another world: 400 unsupported_world naming both sides.
    let (status, body) = replica.push("other", "1", &component("other-world")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["code"], "unsupported_world");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("example:other"), "{message}");
    assert!(
        message.contains("switchyard:policy/admission-policy@0.1.0"),
        "{message}"
    );

    // The policy interface's name with another signature: refused at upload
    // (not stored to fail when bound), naming the function and the types.
    let (status, body) = replica
        .push("wrong", "1", &component("wrong-signature"))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["code"], "unsupported_world");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("switchyard:policy/admission@0.1.0"),
        "{message}"
    );
    assert!(message.contains("`points`"), "{message}");
    assert!(message.contains("list<string>"), "{message}");

    // Listing and showing.
    let (status, list) = replica
        .call(replica.admin(Method::GET, "/api/plugins"))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["plugins"].as_array().unwrap().len(), 1, "{list}");
    let (status, shown) = replica
        .call(replica.admin(Method::GET, "/api/plugins/max-tokens"))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(shown["versions"][0]["version"], "1.0.0");
    let (status, _) = replica
        .call(replica.admin(Method::GET, "/api/plugins/nope"))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    replica.stop().await;
}
