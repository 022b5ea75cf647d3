//! `POST /api/deployments/preview`: the scheduler's placement of a new
//! deployment on the cluster as it is, with each refusing node's reason,
//! checked as create checks its body, and nothing written.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use switchyard_tests::db::fresh_database;
use switchyard_tests::federation::eventually;
use switchyard_tests::plugins::{component, sha256, shipped_settings};
use switchyard_tests::replica::Replica;

/// Registers `name` with one 24 GiB GPU and `zone`, approves it unless it
/// should stay pending, and heartbeats once (the reconciler takes a node
/// that never beat for a lost one).
async fn node(replica: &Replica, token: &str, name: &str, zone: &str, approve: bool) -> String {
    let inventory = json!({
        "cpus": 8,
        "gpus": [{"index": 0, "name": "L4", "memory_total_bytes": 24u64 << 30}],
        "disk": {"total_bytes": 1u64 << 40, "available_bytes": 1u64 << 39},
    });
    let (status, registered) = replica
        .call(
            replica
                .http
                .post(format!("{}/api/nodes/register", replica.url))
                .bearer_auth(token)
                .json(&json!({"name": name, "inventory": inventory, "labels": {"zone": zone}})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{registered}");
    let id = registered["node"]["id"].as_str().unwrap().to_string();
    let credential = registered["credential"].as_str().unwrap();
    if approve {
        let (status, body) = replica
            .call(replica.admin(Method::POST, &format!("/api/nodes/{id}/approve")))
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let (status, body) = replica
        .call(
            replica
                .http
                .post(format!("{}/api/nodes/{id}/heartbeat", replica.url))
                .bearer_auth(credential)
                .header("x-switchyard-node", &id)
                .json(&json!({"inventory": inventory})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    id
}

async fn preview(replica: &Replica, body: Value) -> (StatusCode, Value) {
    replica
        .call(
            replica
                .admin(Method::POST, "/api/deployments/preview")
                .json(&body),
        )
        .await
}

fn reason<'a>(preview: &'a Value, node: &str) -> &'a str {
    preview["refused"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["node_name"] == node)
        .and_then(|r| r["reason"].as_str())
        .unwrap_or_else(|| panic!("{node} is not refused: {preview}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_preview_places_on_the_node_that_fits_and_says_why_the_others_refuse() {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = Replica::on(&db, dir.path()).await;
    let (status, token) = replica
        .call(
            replica
                .admin(Method::POST, "/api/nodes/registration-tokens")
                .json(&json!({"name": "preview"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{token}");
    let token = token["value"].as_str().unwrap();
    let fits = node(&replica, token, "gpu-a", "a", true).await;
    node(&replica, token, "gpu-b", "b", true).await;
    node(&replica, token, "gpu-c", "a", false).await;

    let bytes = b"weights of tiny".to_vec();
    let digest = sha256(&bytes);
    let (status, body) = replica
        .call(
            replica
                .admin(Method::PUT, &format!("/api/library/blobs/{digest}"))
                .body(bytes.clone()),
        )
        .await;
    assert!(status.is_success(), "{body}");
    let (status, body) = replica
        .call(replica.admin(Method::POST, "/api/models").json(&json!({
            "id": "tiny", "revision": "r1",
            "files": [{"path": "model.gguf", "size": bytes.len(), "sha256": digest}],
        })))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");

    let one = json!({"model": "tiny", "revision": "r1", "engine": "reference",
        "gpus_per_replica": 1, "node_selector": {"zone": "a"}});
    let (status, answer) = preview(&replica, one.clone()).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["placeable"], true, "{answer}");
    assert_eq!(
        answer["placements"],
        json!([{"replica": 0, "node": fits, "node_name": "gpu-a", "gpus": [0]}])
    );
    assert_eq!(reason(&answer, "gpu-b"), "labels lack zone=a");
    assert_eq!(reason(&answer, "gpu-c"), "pending an admin's approval");

    // Two replicas of one GPU each: the second finds no free GPU on gpu-a.
    let mut two = one.clone();
    two["replicas"] = json!(2);
    let (status, answer) = preview(&replica, two).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["placeable"], false, "{answer}");
    assert_eq!(answer["placements"].as_array().unwrap().len(), 1);
    assert_eq!(reason(&answer, "gpu-a"), "0 suitable free GPUs, 1 needed");
    let pending = answer["pending_reason"].as_str().unwrap();
    assert!(pending.starts_with("no node fits a replica: "), "{pending}");

    // The body is checked as create checks it.
    let mut bad = one.clone();
    bad["replicas"] = json!(100_000);
    let (status, answer) = preview(&replica, bad).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert_eq!(answer["error"]["code"], "invalid_request");
    let mut unknown = one.clone();
    unknown["revision"] = json!("r9");
    let (status, answer) = preview(&replica, unknown).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{answer}");
    assert_eq!(answer["error"]["code"], "not_found");

    // A key without models:manage is refused before its body is read.
    let (status, key) = replica
        .call(
            replica
                .admin(Method::POST, "/api/keys")
                .json(&json!({"name": "app", "scopes": ["inference"]})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{key}");
    let (status, answer) = replica
        .call(
            replica
                .http
                .post(format!("{}/api/deployments/preview", replica.url))
                .bearer_auth(key["token"].as_str().unwrap())
                .body("not json"),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{answer}");

    // The deploy chain's say: a guard that allows 90% of a GPU's free
    // memory refuses 23 GiB of the 24 GiB gpu-a has.
    let guard = "gpu-memory-guard";
    let (status, body) = replica.push(guard, "1.0.0", &component(guard)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, body) = replica
        .set_chain(
            "deploy",
            json!([{"plugin": guard, "version": "1.0.0", "settings": shipped_settings(guard), "mode": "enforce"}]),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let mut large = one.clone();
    large["gpu_memory_bytes"] = json!(23u64 << 30);
    let answer = eventually("the deploy chain to refuse the placement", || async {
        let (status, answer) = preview(&replica, large.clone()).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        (answer["placeable"] == false).then_some(answer)
    })
    .await;
    assert!(
        answer["placements"].as_array().unwrap().is_empty(),
        "{answer}"
    );
    let why = reason(&answer, "gpu-a");
    assert!(
        why.starts_with("the deploy chain refused: gpu_memory_exceeded"),
        "{why}"
    );

    // Nothing was written.
    let (_, list) = replica
        .call(replica.admin(Method::GET, "/api/deployments"))
        .await;
    assert_eq!(list["deployments"], json!([]), "{list}");
    replica.stop().await;
}
