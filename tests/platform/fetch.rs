//! `switchyard model fetch`: the server downloads a file from a URL (a
//! local HTTP server here, no internet), hashes it while it streams and
//! registers it as a revision; a digest mismatch or a 404 keeps nothing.
//! The file server is on loopback, which a fetch reaches only when the
//! operator allows it (`--fetch-allow-host`).

use std::process::{Command, Output};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use switchyard_library::fetch::AllowList;
use switchyard_tests::ADMIN_TOKEN;
use switchyard_tests::db::fresh_database;
use switchyard_tests::http::FileServer;
use switchyard_tests::process::binary;
use switchyard_tests::replica::Replica;

fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn fetch(replica: &Replica, url: &str, sha: &str, revision: &str) -> Output {
    Command::new(binary())
        .args(["model", "fetch", url, "--sha256", sha, "--id", "fetched"])
        .args(["--revision", revision, "--licence", "apache-2.0"])
        .env("SWITCHYARD_SERVER", &replica.url)
        .env("SWITCHYARD_TOKEN", ADMIN_TOKEN)
        .output()
        .expect("switchyard model fetch")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Nothing left of failed fetches: no temporary file in the library.
fn no_temporaries(data_dir: &std::path::Path) -> bool {
    std::fs::read_dir(data_dir.join("library/incoming"))
        .unwrap()
        .next()
        .is_none()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_fetched_by_url_is_verified_while_it_streams() {
    let database_url = fresh_database().await;
    let data_dir = tempfile::tempdir().unwrap();
    let replica = Replica::with(&database_url, data_dir.path(), |config| {
        config.fetch_allow = AllowList::parse(["127.0.0.1"]).unwrap();
    })
    .await;
    let weights: Vec<u8> = (0..2 * 1024 * 1024 + 7).map(|i| (i % 239) as u8).collect();
    let other = b"weights of another model".to_vec();
    let files = FileServer::start(vec![
        ("org/model-q4.gguf", weights.clone()),
        ("other.gguf", other.clone()),
    ])
    .await;
    let model_url = format!("{}/org/model-q4.gguf", files.url);

    // Fetched, with a progress bar, and registered under the URL's file name.
    let output = fetch(&replica, &model_url, &sha256(&weights), "r1");
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("fetching model-q4.gguf [")
            && stderr(&output).contains("verified"),
        "{}",
        stderr(&output)
    );
    let printed: Value = serde_json::from_slice(&output.stdout).unwrap();
    let (status, manifest) = replica
        .call(replica.admin(Method::GET, "/api/models/fetched/r1"))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(printed, manifest);
    assert_eq!(manifest["licence"], "apache-2.0");
    assert_eq!(
        manifest["files"],
        json!([{"path": "model-q4.gguf", "size": weights.len(), "sha256": sha256(&weights)}])
    );
    let blob = data_dir
        .path()
        .join("library/blobs/sha256")
        .join(sha256(&weights));
    assert_eq!(std::fs::read(&blob).unwrap(), weights);

    // A digest mismatch keeps nothing, streamed (the CLI) or not (the API).
    let wrong = sha256(b"what the publisher said");
    let output = fetch(&replica, &format!("{}/other.gguf", files.url), &wrong, "r2");
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("digest_mismatch"),
        "{}",
        stderr(&output)
    );
    let (status, body) = replica
        .call(replica.admin(Method::POST, "/api/models/fetch").json(
            &json!({"url": format!("{}/other.gguf", files.url), "sha256": wrong,
                              "id": "fetched", "revision": "r2"}),
        ))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"]["code"], "digest_mismatch");
    for digest in [&wrong, &sha256(&other)] {
        let (status, _) = replica
            .call(replica.admin(Method::GET, &format!("/api/library/blobs/{digest}")))
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "blob {digest} was kept");
    }
    assert!(no_temporaries(data_dir.path()));

    // A 404 is a clear error with a stable code, before anything is written.
    let missing = format!("{}/missing.gguf", files.url);
    let (status, body) = replica
        .call(
            replica
                .admin(Method::POST, "/api/models/fetch")
                .json(&json!({"url": missing, "sha256": wrong, "id": "fetched", "revision": "r3"})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_GATEWAY, "{body}");
    assert_eq!(body["error"]["code"], "source_status");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("404"),
        "{body}"
    );
    let output = fetch(&replica, &missing, &wrong, "r3");
    assert!(
        stderr(&output).contains("source_status"),
        "{}",
        stderr(&output)
    );
    let (_, listed) = replica
        .call(replica.admin(Method::GET, "/api/models"))
        .await;
    assert_eq!(listed["models"].as_array().unwrap().len(), 1, "{listed}");
    assert!(no_temporaries(data_dir.path()));

    // An exact retry needs no download: it works with the source gone.
    drop(files);
    let output = fetch(&replica, &model_url, &sha256(&weights), "r1");
    assert!(output.status.success(), "{}", stderr(&output));
    replica.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_from_loopback_is_refused_without_an_allow_list() {
    let database_url = fresh_database().await;
    let data_dir = tempfile::tempdir().unwrap();
    let replica = Replica::on(&database_url, data_dir.path()).await;
    let weights = b"an internal page".to_vec();
    let files = FileServer::start(vec![("model.gguf", weights.clone())]).await;
    let port = files.url.rsplit(':').next().unwrap();
    for url in [
        format!("{}/model.gguf", files.url),
        format!("http://localhost:{port}/model.gguf"),
        "http://169.254.169.254/latest/meta-data/model.gguf".to_string(),
    ] {
        let (status, body) = replica
            .call(replica.admin(Method::POST, "/api/models/fetch").json(
                &json!({"url": url, "sha256": sha256(b"other"), "id": "internal", "revision": "r1"}),
            ))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{url}: {body}");
        assert_eq!(
            body["error"]["code"], "address_not_allowed",
            "{url}: {body}"
        );
        // Nothing of the page is told: not its digest, not its status.
        assert!(
            !body.to_string().contains(&sha256(&weights)),
            "{url}: {body}"
        );
    }
    assert!(no_temporaries(data_dir.path()));
    replica.stop().await;
}
