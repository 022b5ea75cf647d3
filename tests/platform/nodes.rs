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
    register_body(
        replica,
        token,
        json!({"name": name, "inventory": {"cpus": 2}}),
    )
    .await
}

/// Registers with any body (a credential, an address, labels).
async fn register_body(replica: &Replica, token: &str, body: Value) -> (StatusCode, Value) {
    replica
        .call(
            replica
                .http
                .post(format!("{}/api/nodes/register", replica.url))
                .bearer_auth(token)
                .json(&body),
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

    // The registration token alone does not re-register a taken name: the
    // real worker would be locked out (or, with auto-approve, taken over).
    let (status, refused) = register(&replica, &token, "gpu-1").await;
    assert_eq!(
        (status, refused["error"]["code"].clone()),
        (StatusCode::CONFLICT, json!("node_exists")),
        "{refused}"
    );
    let (status, _) = replica.call(heartbeat(credential.clone())).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the real worker keeps its credential"
    );
    let (status, _) = register_body(
        &replica,
        &token,
        json!({"name": "gpu-1", "credential": "sy_guessed"}),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "a wrong credential is no better"
    );

    // Re-registering with the node's credential mints a new one: the old one
    // is refused, and the node waits again.
    let (status, again) = register_body(
        &replica,
        &token,
        json!({"name": "gpu-1", "credential": credential}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{again}");
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
    let client = switchyard_tests::db::connect(&db).await;
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
    let inventory = switchyard_protocol::node::Inventory::default();
    let (_, token) = store
        .create_registration_token("t", "test", Default::default())
        .await
        .unwrap();
    let (node, _) = store
        .register_node(
            &switchyard_store::keys::token_digest(&token),
            switchyard_store::nodes::Registration {
                name: "gpu-1",
                address: None,
                inventory: &inventory,
                labels: &Default::default(),
                auto_approve: true,
                credential: None,
            },
        )
        .await
        .unwrap()
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
        json!({"inventory": {}, "carriers": {"attached": vec!["nats"; 9]}}),
        json!({"inventory": {}, "carriers": {"attached": ["not a set"]}}),
        json!({"inventory": {}, "carriers": {"attached": [], "cannot_follow": {"nats": "x".repeat(513)}}}),
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diagnostics_reach_only_checks_and_status_reads() {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    // No carrier set here: an allowed call gets as far as the carrier (503);
    // a refused one never does.
    let replica = Replica::on(&db, dir.path()).await;
    let post = |path: String, body: &'static str| {
        let replica = &replica;
        async move {
            replica
                .call(replica.admin(Method::POST, &path).body(body))
                .await
        }
    };
    for verb in [
        "engine.start",
        "engine.stop",
        "files.delete",
        "sleep",
        "format",
    ] {
        let (status, body) = post(
            format!("/api/cluster/nodes/node_x/control/{verb}"),
            r#"{"env": {"LD_PRELOAD": "/tmp/x.so"}}"#,
        )
        .await;
        assert_eq!(
            (status, body["error"]["code"].clone()),
            (StatusCode::FORBIDDEN, json!("verb_not_allowed")),
            "{verb}: {body}"
        );
    }
    for verb in ["ping", "echo", "engine.list", "files.status"] {
        let (status, body) = post(format!("/api/cluster/nodes/node_x/control/{verb}"), "").await;
        assert_eq!(
            (status, body["error"]["code"].clone()),
            (
                StatusCode::SERVICE_UNAVAILABLE,
                json!("carrier_unavailable")
            ),
            "{verb}: {body}"
        );
    }
    for service in ["inference", "blob", "control", "nothing"] {
        let (status, body) = post(
            format!("/api/cluster/nodes/node_x/streams/{service}"),
            r#"{"replica":"r","method":"POST","path":"@evil/x"}"#,
        )
        .await;
        assert_eq!(
            (status, body["error"]["code"].clone()),
            (StatusCode::FORBIDDEN, json!("service_not_allowed")),
            "{service}: {body}"
        );
    }
    for service in ["echo", "sink", "source"] {
        let (status, _) = post(format!("/api/cluster/nodes/node_x/streams/{service}"), "").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{service}");
    }
    replica.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registration_tokens_expire_run_out_are_listed_and_revoked_and_names_are_released() {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = Replica::on(&db, dir.path()).await;
    let create = |body: Value| {
        let replica = &replica;
        async move {
            replica
                .call(
                    replica
                        .admin(Method::POST, "/api/nodes/registration-tokens")
                        .json(&body),
                )
                .await
        }
    };
    for bad in [
        json!({"name": "t", "ttl_seconds": 0}),
        json!({"name": "t", "ttl_seconds": 400 * 24 * 3600}),
        json!({"name": "t", "max_uses": 0}),
    ] {
        let (status, body) = create(bad.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
    }

    // Used up: one registration, then no more.
    let (status, once) = create(json!({"name": "once", "max_uses": 1})).await;
    assert_eq!(status, StatusCode::CREATED, "{once}");
    assert_eq!(once["token"]["max_uses"], 1);
    let once_value = once["value"].as_str().unwrap().to_string();
    assert_eq!(
        register(&replica, &once_value, "gpu-a").await.0,
        StatusCode::CREATED
    );
    assert_eq!(
        register(&replica, &once_value, "gpu-b").await.0,
        StatusCode::UNAUTHORIZED
    );

    // Expired: a token whose time ran out registers nothing.
    let (_, short) = create(json!({"name": "short", "ttl_seconds": 3600})).await;
    let short_value = short["value"].as_str().unwrap().to_string();
    assert!(short["token"]["expires_at"].is_string(), "{short}");
    let client = switchyard_tests::db::connect(&db).await;
    client
        .execute(
            "UPDATE registration_tokens SET expires_at = now() - interval '1 second' WHERE id = $1",
            &[&short["token"]["id"].as_str().unwrap()],
        )
        .await
        .unwrap();
    assert_eq!(
        register(&replica, &short_value, "gpu-c").await.0,
        StatusCode::UNAUTHORIZED
    );

    // Listed with uses, never with a value; revoked, it registers nothing.
    let (_, open) = create(json!({"name": "open"})).await;
    let open_value = open["value"].as_str().unwrap().to_string();
    let open_id = open["token"]["id"].as_str().unwrap().to_string();
    let (status, listed) = replica
        .call(replica.admin(Method::GET, "/api/nodes/registration-tokens"))
        .await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    let tokens = listed["tokens"].as_array().unwrap();
    assert_eq!(tokens.len(), 3);
    assert!(!listed.to_string().contains("sy_"), "{listed}");
    let used = tokens.iter().find(|t| t["name"] == "once").unwrap();
    assert_eq!(
        (used["uses"].clone(), used["max_uses"].clone()),
        (json!(1), json!(1))
    );
    let (status, revoked) = replica
        .call(replica.admin(
            Method::DELETE,
            &format!("/api/nodes/registration-tokens/{open_id}"),
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{revoked}");
    assert!(revoked["revoked_at"].is_string());
    assert!(!revoked.to_string().contains("sy_"));
    assert_eq!(
        register(&replica, &open_value, "gpu-d").await.0,
        StatusCode::UNAUTHORIZED
    );
    let (status, _) = replica
        .call(replica.admin(Method::DELETE, "/api/nodes/registration-tokens/reg_none"))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // An admin's release lets a worker that lost its identity register its
    // name again, and cuts the old credential off at once.
    let (_, fleet) = create(json!({"name": "fleet"})).await;
    let fleet_value = fleet["value"].as_str().unwrap().to_string();
    let (_, first) = register(&replica, &fleet_value, "gpu-e").await;
    let node = first["node"]["id"].as_str().unwrap().to_string();
    let old = first["credential"].as_str().unwrap().to_string();
    assert_eq!(
        register(&replica, &fleet_value, "gpu-e").await.0,
        StatusCode::CONFLICT
    );
    let (status, _) = replica
        .call(replica.admin(Method::POST, &format!("/api/nodes/{node}/release")))
        .await;
    assert_eq!(status, StatusCode::OK);
    let beat = replica
        .http
        .post(format!("{}/api/nodes/{node}/heartbeat", replica.url))
        .bearer_auth(&old)
        .json(&json!({"inventory": {}}));
    assert_eq!(replica.call(beat).await.0, StatusCode::UNAUTHORIZED);
    let (status, again) = register(&replica, &fleet_value, "gpu-e").await;
    assert_eq!(status, StatusCode::CREATED, "{again}");
    assert_eq!(again["node"]["id"], node.as_str());
    // Released once: the next takeover needs the credential again.
    assert_eq!(
        register(&replica, &fleet_value, "gpu-e").await.0,
        StatusCode::CONFLICT
    );

    // Addresses are checked at registration.
    for address in [
        "nohost",
        "host:0",
        "host:99999",
        "a b:80",
        "http://x:80",
        "u@h:80",
        "",
    ] {
        let (status, body) = register_body(
            &replica,
            &fleet_value,
            json!({"name": "gpu-f", "address": address}),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{address}: {body}");
    }
    for address in ["10.0.0.7:7070", "gpu-f.example:7070", "[::1]:7070"] {
        let (status, body) = register_body(
            &replica,
            &fleet_value,
            json!({"name": format!("gpu-{}", address.len()), "address": address}),
        )
        .await;
        assert_eq!(status, StatusCode::CREATED, "{address}: {body}");
    }
    replica.stop().await;
}
