//! `switchyard deployment status --watch` (and `create --wait`) end on
//! the outcome: exit 0 once every replica is ready (see `placement.rs`),
//! exit 1 naming the replica that failed.

use std::process::Command;

use serde_json::Value;
use switchyard_tests::ADMIN_TOKEN;
use switchyard_tests::process::binary;

use crate::placement::{Cluster, create};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_ends_with_the_replica_that_failed() {
    let cluster = Cluster::start().await;
    let dir = tempfile::tempdir().unwrap();
    let _worker = cluster.worker("solo", dir.path(), &["--gpu", "name=L4,memory=24GiB"]);
    let node = cluster.node_id("solo").await;
    // The library loses the file behind the manifest: staging cannot succeed.
    std::fs::remove_file(
        cluster
            .data
            .path()
            .join("library/blobs/sha256")
            .join(&cluster.digest),
    )
    .unwrap();

    let output = create(&cluster, &["--wait"]);
    let shown = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{shown}");
    let created: Value = serde_json::from_slice(&output.stdout).unwrap();
    let id = created["id"].as_str().unwrap();
    assert!(
        shown.contains(&format!(" on {node}  failed: m.gguf")) && shown.contains(" failed: "),
        "{shown}"
    );

    // `status --watch` says the same at once, and prints the status as JSON.
    let output = Command::new(binary())
        .args(["deployment", "status", id, "--watch"])
        .env("SWITCHYARD_SERVER", &cluster.serve.url)
        .env("SWITCHYARD_TOKEN", ADMIN_TOKEN)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let status: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(status["replicas_status"][0]["state"], "failed", "{status}");
    let replica = status["replicas_status"][0]["id"].as_str().unwrap();
    assert!(
        String::from_utf8_lossy(&output.stderr).contains(&format!("replica {replica} failed: ")),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
