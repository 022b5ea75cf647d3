//! An offer published under an id of its own is granted by that id and
//! used by what it offers: a grant of a model offer `my-model` lets the
//! grantee inspect and copy the revision it names.

use reqwest::{Method, StatusCode};
use serde_json::json;
use sha2::{Digest, Sha256};
use switchyard_tests::ADMIN_TOKEN;
use switchyard_tests::federation::{Member, grant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_offer_with_its_own_id_is_granted_and_used() {
    let (alpha, beta) = tokio::join!(Member::bare("alpha"), Member::bare("beta"));
    alpha.join(&beta).await;
    let bytes = b"a small model file".repeat(64);
    let digest = hex::encode(Sha256::digest(&bytes));
    let uploaded = reqwest::Client::new()
        .put(format!("{}/api/library/blobs/{digest}", beta.url()))
        .bearer_auth(ADMIN_TOKEN)
        .body(bytes.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(uploaded.status(), StatusCode::CREATED);
    beta.expect(
        StatusCode::CREATED,
        Method::POST,
        "/api/models",
        Some(
            json!({"id": "custom", "revision": "r1", "licence": "apache-2.0",
            "files": [{"path": "custom.gguf", "size": bytes.len(), "sha256": digest}]}),
        ),
    )
    .await;
    beta.expect(
        StatusCode::CREATED,
        Method::POST,
        "/api/federation/offers",
        Some(json!({"id": "my-model",
                    "resource": {"kind": "model", "model": "custom", "revision": "r1"}})),
    )
    .await;
    let spec = json!({"models": ["my-model"], "operations": ["models:transfer"],
                      "lifetime_s": 3600, "max_concurrent": 1, "max_requests": 10,
                      "max_model_bytes": 1_000_000});
    let grant = grant(&beta, &alpha, &["models:transfer"], spec).await;
    // The terms name the revision itself, on both sides.
    let record = alpha
        .expect(
            StatusCode::OK,
            Method::GET,
            &format!("/api/federation/grants/{grant}"),
            None,
        )
        .await;
    assert_eq!(record["terms"]["models"], json!(["custom@r1"]), "{record}");

    let manifest = alpha
        .expect(
            StatusCode::OK,
            Method::GET,
            "/api/federation/peers/beta/models/custom/r1",
            None,
        )
        .await;
    assert_eq!(manifest["files"][0]["sha256"], digest, "{manifest}");
    let copy = alpha
        .expect(
            StatusCode::ACCEPTED,
            Method::POST,
            "/api/federation/copies",
            Some(json!({"peer": "beta", "model": "custom", "revision": "r1"})),
        )
        .await;
    let id = copy["id"].as_str().unwrap();
    alpha
        .cluster
        .until(
            &format!("/api/federation/copies/{id}"),
            "the copy never completed",
            |c| c["state"] == "complete",
        )
        .await;
}
