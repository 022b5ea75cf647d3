//! The model library: `switchyard model import` hashes and uploads local
//! files, the library verifies every byte before keeping it, manifests
//! name only verified blobs, and delete removes what nothing else uses.

use std::process::Command;

use reqwest::{Method, StatusCode};
use serde_json::json;
use sha2::{Digest, Sha256};
use switchyard_tests::ADMIN_TOKEN;
use switchyard_tests::db::fresh_database;
use switchyard_tests::process::binary;
use switchyard_tests::replica::Replica;

fn import(
    replica: &Replica,
    path: &std::path::Path,
    id: &str,
    revision: &str,
) -> std::process::Output {
    Command::new(binary())
        .args(["model", "import"])
        .arg(path)
        .args([
            "--id",
            id,
            "--revision",
            revision,
            "--licence",
            "apache-2.0",
        ])
        .env("SWITCHYARD_SERVER", &replica.url)
        .env("SWITCHYARD_TOKEN", ADMIN_TOKEN)
        .output()
        .expect("switchyard model import")
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn import_verify_register_and_delete() {
    let database_url = fresh_database().await;
    let data_dir = tempfile::tempdir().unwrap();
    let replica = Replica::on(&database_url, data_dir.path()).await;

    let model = tempfile::tempdir().unwrap();
    let weights: Vec<u8> = (0..3 * 1024 * 1024 + 11).map(|i| (i % 241) as u8).collect();
    let config = br#"{"layers": 2}"#.to_vec();
    std::fs::write(model.path().join("model.gguf"), &weights).unwrap();
    std::fs::create_dir(model.path().join("tokenizer")).unwrap();
    std::fs::write(model.path().join("tokenizer/config.json"), &config).unwrap();

    let output = import(&replica, model.path(), "demo", "r1");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let (status, manifest) = replica
        .call(replica.admin(Method::GET, "/api/models/demo/r1"))
        .await;
    assert_eq!(status, StatusCode::OK, "{manifest}");
    assert_eq!(manifest["licence"], "apache-2.0");
    assert_eq!(
        manifest["files"],
        json!([
            {"path": "model.gguf", "size": weights.len(), "sha256": sha256(&weights)},
            {"path": "tokenizer/config.json", "size": config.len(), "sha256": sha256(&config)},
        ])
    );
    let stored = data_dir
        .path()
        .join("library/blobs/sha256")
        .join(sha256(&weights));
    assert_eq!(
        std::fs::read(&stored).unwrap(),
        weights,
        "the blob is the file"
    );

    // The same import again is a no-op; other bytes under the same revision are refused.
    assert!(
        import(&replica, model.path(), "demo", "r1")
            .status
            .success()
    );
    std::fs::write(model.path().join("tokenizer/config.json"), b"{}").unwrap();
    let output = import(&replica, model.path(), "demo", "r1");
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("revision_exists"));

    // Bytes that do not hash to the name they are uploaded under are not kept.
    let wrong = sha256(b"something else");
    let (status, body) = replica
        .call(
            replica
                .admin(Method::PUT, &format!("/api/library/blobs/{wrong}"))
                .body(b"these bytes".to_vec()),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"]["code"], "digest_mismatch");
    let (status, _) = replica
        .call(replica.admin(Method::GET, &format!("/api/library/blobs/{wrong}")))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // A manifest naming bytes the library lacks is refused.
    let (status, body) = replica
        .call(replica.admin(Method::POST, "/api/models").json(&json!({
            "id": "demo", "revision": "r2",
            "files": [{"path": "model.gguf", "size": 5, "sha256": wrong}],
        })))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"]["code"], "blob_missing");
    let (status, body) = replica
        .call(replica.admin(Method::POST, "/api/models").json(&json!({
            "id": "demo", "revision": "r2",
            "files": [{"path": "../escape", "size": 5, "sha256": wrong}],
        })))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");

    // A second revision sharing the weights; deleting the first keeps them.
    let (status, _) = replica
        .call(replica.admin(Method::POST, "/api/models").json(&json!({
            "id": "demo", "revision": "r3",
            "files": [{"path": "weights.gguf", "size": weights.len(), "sha256": sha256(&weights)}],
        })))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, _) = replica
        .call(replica.admin(Method::DELETE, "/api/models/demo/r1"))
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert!(stored.exists(), "r3 still uses the weights");
    let config_blob = data_dir
        .path()
        .join("library/blobs/sha256")
        .join(sha256(&config));
    assert!(!config_blob.exists(), "nothing else used the config");
    let (_, listed) = replica
        .call(replica.admin(Method::GET, "/api/models"))
        .await;
    assert_eq!(listed["models"].as_array().unwrap().len(), 1, "{listed}");
    replica.stop().await;
}
