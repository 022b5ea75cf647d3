//! Carrier components come from the plugin registry: a replica seeds it at
//! start, the heartbeat names what a worker runs, and the worker fetches
//! the bytes with its node credential and checks their digest.

use std::sync::Arc;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use switchyard_carrier_set::seed;
use switchyard_protocol::carrier::ComponentRef;
use switchyard_runtime::PluginKind;
use switchyard_server::SeedComponent;
use switchyard_tests::ADMIN_TOKEN;
use switchyard_tests::db::fresh_database;
use switchyard_tests::plugins::{self, component, sha256};
use switchyard_tests::replica::Replica;
use switchyard_worker::components::{ComponentCache, FetchError};
use switchyard_worker::identity::Identity;

/// A registered and approved node: its id and credential.
async fn approved_node(replica: &Replica) -> (String, String) {
    let (node, credential) = replica.register_node("gpu-1").await;
    let (status, _) = replica
        .call(replica.admin(Method::POST, &format!("/api/nodes/{node}/approve")))
        .await;
    assert_eq!(status, StatusCode::OK);
    (node, credential)
}

async fn fetch(
    replica: &Replica,
    path: &str,
    auth: Option<(&str, Option<&str>)>,
) -> (StatusCode, Vec<u8>) {
    let mut request = replica.http.get(format!("{}{path}", replica.url));
    if let Some((token, node)) = auth {
        request = request.bearer_auth(token);
        if let Some(node) = node {
            request = request.header("x-switchyard-node", node);
        }
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    (status, response.bytes().await.unwrap().to_vec())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_fetches_the_components_its_heartbeat_names_and_checks_their_digest() {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = Replica::with(&db, dir.path(), |config| {
        config.carrier_plugins = Some(plugins::dir());
    })
    .await;
    let (node, credential) = approved_node(&replica).await;

    // The heartbeat names the tunnel component the registry was seeded with.
    let (status, answer) = replica
        .call(
            replica
                .http
                .post(format!("{}/api/nodes/{node}/heartbeat", replica.url))
                .bearer_auth(&credential)
                .header("x-switchyard-node", &node)
                .json(&json!({"inventory": {"cpus": 2}})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let named: Vec<ComponentRef> =
        serde_json::from_value(answer["carrier"]["components"].clone()).unwrap();
    assert_eq!(
        named.len(),
        1,
        "a tunnel worker runs only the tunnel: {answer}"
    );
    let tunnel = &named[0];
    assert_eq!(tunnel.name, "tunnel");
    assert_eq!(tunnel.sha256, sha256(&component("tunnel")));
    // A folder's component is versioned by its bytes (build metadata in
    // the version, fetched by that path segment below).
    assert!(
        tunnel.version.starts_with("0.0.0+sha256."),
        "{}",
        tunnel.version
    );
    let (_, registered) = replica
        .call(replica.admin(Method::GET, "/api/plugins/tunnel"))
        .await;
    assert_eq!(registered["versions"][0]["sha256"], json!(tunnel.sha256));
    assert_eq!(registered["versions"][0]["kind"], "tunnel");

    // The node's credential fetches the bytes the registry pins.
    let path = format!("/api/plugins/tunnel/{}/component", tunnel.version);
    let (status, bytes) = fetch(&replica, &path, Some((&credential, Some(&node)))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(sha256(&bytes), tunnel.sha256);
    // So does an admin key.
    let (status, bytes) = fetch(&replica, &path, Some((ADMIN_TOKEN, None))).await;
    assert_eq!(
        (status, sha256(&bytes)),
        (StatusCode::OK, tunnel.sha256.clone())
    );
    // Nothing else does.
    for auth in [
        None,
        Some(("sy_not_the_credential", Some(node.as_str()))),
        Some((credential.as_str(), Some("node_unknown"))),
        Some(("sy_not_a_key", None)),
    ] {
        let (status, _) = fetch(&replica, &path, auth).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{auth:?}");
    }
    // A node fetches carrier components, not the admin's policies; an
    // unknown version is not there.
    let (status, _) = replica
        .push("max-tokens", "1.0.0", &component("max-tokens"))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    for (path, expected) in [
        ("tunnel/9.9.9", StatusCode::NOT_FOUND),
        ("max-tokens/1.0.0", StatusCode::FORBIDDEN),
    ] {
        let path = format!("/api/plugins/{path}/component");
        let (status, _) = fetch(&replica, &path, Some((&credential, Some(&node)))).await;
        assert_eq!(status, expected, "{path}");
    }

    // The worker's cache: the named digest is fetched and kept; another
    // digest for the same name and version is refused and nothing is kept.
    let identity = Identity {
        node_id: node.clone(),
        credential: credential.clone(),
        frontend: replica.url.clone(),
    };
    let worker_dir = tempfile::tempdir().unwrap();
    let cache = ComponentCache::new(worker_dir.path());
    let lying = ComponentRef {
        sha256: sha256(b"some other component"),
        ..tunnel.clone()
    };
    let refused = cache.get(&identity, &lying).await.unwrap_err();
    assert!(matches!(refused, FetchError::Digest(_)), "{refused}");
    assert!(
        !worker_dir
            .path()
            .join("components")
            .join(format!("{}.wasm", lying.sha256))
            .exists(),
        "refused bytes are not kept"
    );
    let fetched = cache.get(&identity, tunnel).await.unwrap();
    assert_eq!(fetched.sha256, tunnel.sha256);
    let kept = worker_dir
        .path()
        .join("components")
        .join(format!("{}.wasm", tunnel.sha256));
    assert_eq!(sha256(&std::fs::read(&kept).unwrap()), tunnel.sha256);
    replica.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeding_is_idempotent_and_a_changed_component_needs_a_new_version() {
    let db = fresh_database().await;
    let store = switchyard_store::Store::connect(&db).await.unwrap();
    let seeded = |name: &str, bytes: Vec<u8>| SeedComponent {
        name: "nats".into(),
        kind: PluginKind::Carrier,
        version: "0.1.0".into(),
        bytes: Arc::from(
            component(name)
                .into_iter()
                .chain(bytes)
                .collect::<Vec<u8>>(),
        ),
    };
    seed::seed(&store, &[seeded("nats", Vec::new())])
        .await
        .unwrap();
    seed::seed(&store, &[seeded("nats", Vec::new())])
        .await
        .unwrap();
    let records = store.plugins(Some("nats")).await.unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].uploaded_by, seed::SEEDED_BY);
    assert_eq!(records[0].sha256, sha256(&component("nats")));

    // Same name and version, other bytes (another carrier): refused, saying so.
    let err = seed::seed(&store, &[seeded("pgbus", Vec::new())])
        .await
        .unwrap_err();
    let message = format!("{err:#}");
    assert!(message.contains("nats@0.1.0"), "{message}");
    assert!(message.contains("new version"), "{message}");

    // A component of another kind than declared is refused.
    let err = seed::seed(
        &store,
        &[SeedComponent {
            name: "nats".into(),
            kind: PluginKind::Tunnel,
            version: "0.2.0".into(),
            bytes: Arc::from(component("nats")),
        }],
    )
    .await
    .unwrap_err();
    assert!(format!("{err:#}").contains("carrier component"), "{err:#}");

    // Folder components are named by their bytes: seeding the folder twice
    // adds nothing, and each record is the file's digest.
    let from_dir = SeedComponent::from_dir(&plugins::dir()).unwrap();
    seed::seed(&store, &from_dir).await.unwrap();
    seed::seed(&store, &from_dir).await.unwrap();
    let all: Vec<Value> = store
        .plugins(None)
        .await
        .unwrap()
        .into_iter()
        .map(|r| json!([r.name, r.version, r.sha256]))
        .collect();
    assert_eq!(all.len(), 1 + 3, "{all:?}");

    // A shipped policy rebuilt with other bytes under the same version does
    // not stop the start: the registry keeps the copy bindings are pinned to.
    let policy = |name: &str| SeedComponent {
        name: "max-tokens".into(),
        kind: PluginKind::Policy,
        version: "0.1.0".into(),
        bytes: Arc::from(component(name)),
    };
    seed::seed(&store, &[policy("max-tokens")]).await.unwrap();
    seed::seed(&store, &[policy("model-allowlist")])
        .await
        .unwrap();
    let kept = store.plugins(Some("max-tokens")).await.unwrap();
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].sha256, sha256(&component("max-tokens")));
}
