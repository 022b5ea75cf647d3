//! Placement inputs the workers report, end to end with real processes on
//! the `tunnel` set: a node selector lands the replica on the labelled
//! worker of two (and a selector no node matches leaves the deployment
//! pending with the reason), and a worker whose placement cache already
//! holds the model's files wins over an otherwise equal one.

use std::process::Command;

use reqwest::Method;
use serde_json::{Value, json};
use switchyard_tests::ADMIN_TOKEN;
use switchyard_tests::cluster::weights;
use switchyard_tests::process::binary;

pub(crate) use switchyard_tests::cluster::Cluster;

/// `switchyard deployment create` of `demo@r1` through the CLI, one replica on one GPU.
pub(crate) fn create(cluster: &Cluster, extra: &[&str]) -> std::process::Output {
    Command::new(binary())
        .args([
            "deployment",
            "create",
            "--model",
            "demo",
            "--revision",
            "r1",
            "--gpus",
            "1",
            "--gpu-memory-mib",
            "1024",
        ])
        .args(extra)
        .env("SWITCHYARD_SERVER", &cluster.serve.url)
        .env("SWITCHYARD_TOKEN", ADMIN_TOKEN)
        .output()
        .expect("switchyard deployment create")
}

/// [`create`], which must succeed; the deployment's id.
fn create_deployment(cluster: &Cluster, extra: &[&str]) -> String {
    let output = create(cluster, extra);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let created: Value = serde_json::from_slice(&output.stdout).unwrap();
    created["id"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_selector_lands_the_replica_on_the_labelled_worker() {
    let cluster = Cluster::start().await;
    let (dir_plain, dir_labelled) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // Binpack prefers the plain worker (one GPU, which the replica fills;
    // the labelled one keeps GPUs free): only the selector sends the
    // replica to the labelled one.
    let _plain = cluster.worker(
        "plain",
        dir_plain.path(),
        &["--gpu", "name=L4,memory=24GiB", "--label", "zone=a"],
    );
    let _labelled = cluster.worker(
        "labelled",
        dir_labelled.path(),
        &[
            "--gpu",
            "name=H100,memory=80GiB,count=3",
            "--label",
            "gpu=h100",
            "--label",
            "zone=b",
        ],
    );
    let plain = cluster.node_id("plain").await;
    let labelled = cluster.node_id("labelled").await;
    let (_, shown) = cluster
        .call(Method::GET, &format!("/api/nodes/{labelled}"), None)
        .await;
    assert_eq!(shown["labels"], json!({"gpu": "h100", "zone": "b"}));

    // A selector no node matches: pending, and the status says why.
    let nowhere = create_deployment(
        &cluster,
        &[
            "--served-model-name",
            "nowhere",
            "--node-selector",
            "gpu=b200",
        ],
    );
    let shown = cluster
        .until(
            &format!("/api/deployments/{nowhere}"),
            "no pending reason",
            |v| !v["deployment"]["pending_reason"].is_null(),
        )
        .await;
    let reason = shown["deployment"]["pending_reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!("{plain}: labels lack gpu=b200"))
            && reason.contains(&format!("{labelled}: labels lack gpu=b200")),
        "{reason}"
    );
    assert_eq!(shown["replicas_status"], json!([]));

    // `--wait` shows the replica until it is ready, then exits 0.
    let output = create(
        &cluster,
        &[
            "--served-model-name",
            "on-h100",
            "--node-selector",
            "gpu=h100",
            "--node-selector",
            "zone=b",
            "--wait",
        ],
    );
    let shown = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{shown}");
    assert!(
        shown.contains(&format!(" on {labelled}  ready"))
            && shown.ends_with("1 of 1 replicas ready\n"),
        "{shown}"
    );
    let created: Value = serde_json::from_slice(&output.stdout).unwrap();
    let id = created["id"].as_str().unwrap();
    let replica = cluster.ready_replica(id).await;
    assert_eq!(replica["node_id"], labelled.as_str(), "{replica}");
    let (_, shown) = cluster
        .call(Method::GET, &format!("/api/deployments/{id}"), None)
        .await;
    assert_eq!(
        shown["deployment"]["node_selector"],
        json!({"gpu": "h100", "zone": "b"})
    );
    assert!(shown["deployment"]["pending_reason"].is_null(), "{shown}");

    // Without a selector, binpack takes the plain worker: the selector did it.
    let free = create_deployment(&cluster, &["--served-model-name", "anywhere"]);
    let replica = cluster.ready_replica(&free).await;
    assert_eq!(replica["node_id"], plain.as_str(), "{replica}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_holding_the_files_wins_over_an_equal_one() {
    let cluster = Cluster::start().await;
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let gpus = ["--gpu", "name=L4,memory=24GiB"];
    let _a = cluster.worker("equal-a", dir_a.path(), &gpus);
    let _b = cluster.worker("equal-b", dir_b.path(), &gpus);
    let a = cluster.node_id("equal-a").await;
    let b = cluster.node_id("equal-b").await;
    // Equal nodes go to the smaller id; the files go to the other one, as
    // an earlier staging would have left them.
    let (holder, holder_dir) = if a > b {
        (&a, dir_a.path())
    } else {
        (&b, dir_b.path())
    };
    let cached = holder_dir.join("models/blobs/sha256").join(&cluster.digest);
    std::fs::write(&cached, weights()).unwrap();
    let digest = cluster.digest.clone();
    cluster
        .until(
            &format!("/api/nodes/{holder}"),
            "the heartbeat never reported the file",
            |v| v["files_held"] == json!([digest]),
        )
        .await;

    let id = create_deployment(&cluster, &[]);
    let replica = cluster.ready_replica(&id).await;
    assert_eq!(replica["node_id"], holder.as_str(), "{replica}");

    // Removing the file is reported too (the list is sent when it changes).
    std::fs::remove_file(&cached).unwrap();
    cluster
        .until(
            &format!("/api/nodes/{holder}"),
            "the heartbeat never reported the removal",
            |v| v["files_held"] == json!([]),
        )
        .await;
}
