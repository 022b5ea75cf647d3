//! Worker identity: registration with the registration token, the node's
//! own credential, approval, heartbeats, and the connect endpoint's answers.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use switchyard_tests::db::fresh_database;
use switchyard_tests::process::{NO_FLAGS, WorkerProcess};
use switchyard_tests::replica::Replica;

async fn registration_token(replica: &Replica) -> String {
    let (status, body) = replica
        .call(
            replica
                .admin(Method::POST, "/api/nodes/registration-tokens")
                .json(&json!({"name": "test"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body["value"].as_str().unwrap().to_string()
}

async fn register(replica: &Replica, token: &str, name: &str) -> (StatusCode, Value) {
    replica
        .call(
            replica
                .http
                .post(format!("{}/api/nodes/register", replica.url))
                .bearer_auth(token)
                .json(&json!({"name": name, "inventory": {"cpus": 2}})),
        )
        .await
}

async fn connect(
    replica: &Replica,
    node: Option<&str>,
    token: Option<&str>,
) -> (StatusCode, Value) {
    let mut request = replica.http.get(format!(
        "{}/api/cluster/connect?lane=inference",
        replica.url
    ));
    if let Some(node) = node {
        request = request.header("x-switchyard-node", node);
    }
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    replica.call(request).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registration_approval_and_the_connect_endpoints_answers() {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = Replica::on(&db, dir.path()).await;
    let token = registration_token(&replica).await;

    let (status, _) = register(&replica, "sy_not_a_token", "gpu-1").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, registered) = register(&replica, &token, "gpu-1").await;
    assert_eq!(status, StatusCode::CREATED, "{registered}");
    assert_eq!(registered["node"]["state"], "pending");
    let node = registered["node"]["id"].as_str().unwrap().to_string();
    let credential = registered["credential"].as_str().unwrap().to_string();
    assert!(
        credential.len() >= 3 + 32,
        "at least 128 random bits: {credential}"
    );

    // The connect endpoint's answers, one by one.
    assert_eq!(
        connect(&replica, Some(&node), None).await.0,
        StatusCode::UNAUTHORIZED,
        "no token"
    );
    assert_eq!(
        connect(&replica, Some("node_unknown"), Some(&credential))
            .await
            .0,
        StatusCode::UNAUTHORIZED,
        "unknown node is 401, not 404"
    );
    assert_eq!(
        connect(&replica, Some(&node), Some("sy_wrong")).await.0,
        StatusCode::UNAUTHORIZED,
        "wrong token"
    );
    assert_eq!(
        connect(&replica, Some(&node), Some(&token)).await.0,
        StatusCode::UNAUTHORIZED,
        "the registration token never opens a session"
    );
    let (status, body) = connect(&replica, Some(&node), Some(&credential)).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (StatusCode::FORBIDDEN, json!("node_pending")),
        "{body}"
    );

    // Heartbeats work while pending; approval makes the node healthy.
    let heartbeat = |credential: String| {
        replica
            .http
            .post(format!("{}/api/nodes/{node}/heartbeat", replica.url))
            .bearer_auth(credential)
            .header("x-switchyard-node", &node)
            .json(&json!({"inventory": {"cpus": 2}}))
    };
    let (status, answer) = replica.call(heartbeat(credential.clone())).await;
    assert_eq!(
        (status, answer["state"].clone()),
        (StatusCode::OK, json!("pending")),
        "{answer}"
    );
    let (status, approved) = replica
        .call(replica.admin(Method::POST, &format!("/api/nodes/{node}/approve")))
        .await;
    assert_eq!(
        (status, approved["state"].clone()),
        (StatusCode::OK, json!("healthy")),
        "{approved}"
    );
    let (_, answer) = replica.call(heartbeat(credential.clone())).await;
    assert_eq!(answer["state"], "healthy");

    // Approved, but this frontend holds no carrier registry yet.
    let (status, body) = connect(&replica, Some(&node), Some(&credential)).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (
            StatusCode::SERVICE_UNAVAILABLE,
            json!("carrier_unavailable")
        ),
        "{body}"
    );

    // Re-registering mints a new credential: the old one is refused, and the node waits again.
    let (_, again) = register(&replica, &token, "gpu-1").await;
    assert_eq!(again["node"]["id"], node.as_str());
    assert_eq!(again["node"]["state"], "pending");
    assert_ne!(again["credential"], credential.as_str());
    assert_eq!(
        replica.call(heartbeat(credential)).await.0,
        StatusCode::UNAUTHORIZED
    );

    // Nothing secret in the listing.
    let (_, nodes) = replica.call(replica.admin(Method::GET, "/api/nodes")).await;
    assert_eq!(nodes["nodes"].as_array().unwrap().len(), 1);
    assert!(!nodes.to_string().contains("sy_"), "{nodes}");

    // A lookup that fails is 500, never a 401 that hides it.
    let (client, connection) = tokio_postgres::connect(&db, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
        .batch_execute("ALTER TABLE nodes RENAME TO nodes_gone")
        .await
        .unwrap();
    let (status, body) = connect(&replica, Some(&node), Some("sy_anything")).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
    assert!(
        !body.to_string().contains("nodes_gone"),
        "no internals in the error body: {body}"
    );
    client
        .batch_execute("ALTER TABLE nodes_gone RENAME TO nodes")
        .await
        .unwrap();
    replica.stop().await;
}

fn start_worker(frontend: &str, token: &str, dir: &std::path::Path) -> WorkerProcess {
    WorkerProcess::start(frontend, token, "gpu-7", dir, NO_FLAGS)
}

async fn wait_for_node(replica: &Replica, done: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let (_, nodes) = replica.call(replica.admin(Method::GET, "/api/nodes")).await;
        if let Some(node) = nodes["nodes"]
            .as_array()
            .and_then(|n| n.first())
            .filter(|n| done(n))
        {
            return node.clone();
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the worker never got there: {nodes}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_process_registers_heartbeats_and_keeps_its_identity() {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = Replica::start(switchyard_tests::replica::Options {
        database_url: &db,
        data_dir: dir.path(),
        call_deadline: Duration::from_millis(100),
        poll_interval: Duration::from_millis(500),
        auto_approve: true,
    })
    .await;
    let token = registration_token(&replica).await;
    let worker_dir = tempfile::tempdir().unwrap();

    let worker = start_worker(&replica.url, &token, worker_dir.path());
    let node = wait_for_node(&replica, |n| {
        n["state"] == "healthy" && !n["last_heartbeat_at"].is_null()
    })
    .await;
    assert_eq!(node["name"], "gpu-7");
    assert_eq!(
        node["inventory"]["cpus"].as_u64().map(|c| c > 0),
        Some(true),
        "{node}"
    );
    let identity = std::fs::read_to_string(worker_dir.path().join("node.json")).unwrap();
    assert!(identity.contains(node["id"].as_str().unwrap()));
    drop(worker);

    // A restart reuses the stored credential: same node, no new registration.
    let registered_at = node["registered_at"].clone();
    let first_beat = node["last_heartbeat_at"].clone();
    let _worker = start_worker(&replica.url, "sy_revoked_or_absent", worker_dir.path());
    let node = wait_for_node(&replica, |n| n["last_heartbeat_at"] != first_beat).await;
    assert_eq!(
        node["registered_at"], registered_at,
        "the worker did not register again"
    );
    assert_eq!(node["state"], "healthy");
    replica.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_claim_is_released_only_by_its_owner_and_epoch() {
    let db = fresh_database().await;
    let store = switchyard_store::Store::connect(&db).await.unwrap();
    let inventory = json!({});
    let (node, _) = store
        .register_node(switchyard_store::nodes::Registration {
            name: "gpu-1",
            address: None,
            inventory: &inventory,
            labels: &Default::default(),
            auto_approve: true,
        })
        .await
        .unwrap();
    let first = store
        .claim_connection(&node.id, "inference", "replica-a")
        .await
        .unwrap();
    // The worker reconnects to another replica, which takes the claim with a newer epoch.
    let second = store
        .claim_connection(&node.id, "inference", "replica-b")
        .await
        .unwrap();
    assert!(second > first, "epochs come from a sequence");
    assert!(
        !store
            .release_connection(&node.id, "inference", "replica-a", first)
            .await
            .unwrap(),
        "the loser cannot release the winner's claim"
    );
    assert!(
        !store
            .release_connection(&node.id, "inference", "replica-b", first)
            .await
            .unwrap(),
        "an old epoch releases nothing"
    );
    assert!(
        store
            .release_connection(&node.id, "inference", "replica-b", second)
            .await
            .unwrap()
    );
    assert!(
        !store
            .release_connection(&node.id, "inference", "replica-b", second)
            .await
            .unwrap(),
        "released once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labels_and_files_held_are_reported_checked_and_kept() {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = Replica::on(&db, dir.path()).await;
    let token = registration_token(&replica).await;
    let register = |labels: Value| {
        replica
            .http
            .post(format!("{}/api/nodes/register", replica.url))
            .bearer_auth(&token)
            .json(&json!({"name": "gpu-l", "labels": labels}))
    };
    let (status, body) = replica.call(register(json!({"bad key": "x"}))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("bad key")
    );
    let (status, registered) = replica.call(register(json!({"zone": "a"}))).await;
    assert_eq!(status, StatusCode::CREATED, "{registered}");
    assert_eq!(registered["node"]["labels"], json!({"zone": "a"}));
    assert_eq!(registered["node"]["files_held"], json!([]));
    let node = registered["node"]["id"].as_str().unwrap().to_string();
    let credential = registered["credential"].as_str().unwrap().to_string();
    let beat = |body: Value| {
        replica
            .http
            .post(format!("{}/api/nodes/{node}/heartbeat", replica.url))
            .bearer_auth(&credential)
            .json(&body)
    };
    let shown = || async {
        replica
            .call(replica.admin(Method::GET, &format!("/api/nodes/{node}")))
            .await
            .1
    };

    let held = "ab".repeat(32);
    let (status, _) = replica
        .call(beat(
            json!({"inventory": {}, "labels": {"zone": "b", "gpu": "h100"}, "files_held": [held]}),
        ))
        .await;
    assert_eq!(status, StatusCode::OK);
    let node_now = shown().await;
    assert_eq!(node_now["labels"], json!({"gpu": "h100", "zone": "b"}));
    assert_eq!(node_now["files_held"], json!([held]));

    // A heartbeat without them changes neither (files are sent on change only).
    let (status, _) = replica.call(beat(json!({"inventory": {}}))).await;
    assert_eq!(status, StatusCode::OK);
    let node_now = shown().await;
    assert_eq!(node_now["labels"], json!({"gpu": "h100", "zone": "b"}));
    assert_eq!(node_now["files_held"], json!([held]));

    // Bad reports are refused and change nothing.
    for bad in [
        json!({"files_held": ["not-a-digest"]}),
        json!({"files_held": vec![held.clone(); 4097]}),
        json!({"labels": {"zone": "a b"}}),
    ] {
        let (status, body) = replica.call(beat(bad)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    }
    assert_eq!(shown().await["files_held"], json!([held]));
    let (status, _) = replica
        .call(beat(json!({"inventory": {}, "files_held": []})))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(shown().await["files_held"], json!([]));
    replica.stop().await;
}
