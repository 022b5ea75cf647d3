//! A worker session held by a replica runs on the carriers' runtime, with
//! their limits, not on the policies' runtime (whose pool and deadline are
//! sized for short admission calls).

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};
use switchyard_tests::db::fresh_database;
use switchyard_tests::plugins;
use switchyard_tests::replica::Replica;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const PATIENCE: Duration = Duration::from_secs(30);

/// `switchyard_plugin_instances{runtime="<runtime>"}` from `/metrics`.
async fn live_instances(replica: &Replica, runtime: &str) -> u64 {
    let text = replica
        .http
        .get(format!("{}/metrics", replica.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let series = format!("switchyard_plugin_instances{{runtime=\"{runtime}\"}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&series))
        .unwrap_or_else(|| panic!("no {series}in /metrics:\n{text}"))
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_session_runs_on_the_carriers_runtime() {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = Replica::with(&db, dir.path(), |config| {
        config.carrier_plugins = Some(plugins::dir());
        config.auto_approve = true;
    })
    .await;
    let (node, credential) = replica.register_node("gpu-1").await;

    let policies_before = live_instances(&replica, "policies").await;
    let carriers_before = live_instances(&replica, "carriers").await;

    let url = format!(
        "{}/api/cluster/connect?lane=inference",
        replica.url.replacen("http", "ws", 1)
    );
    let mut request = url.into_client_request().unwrap();
    request.headers_mut().insert(
        "authorization",
        format!("Bearer {credential}").parse().unwrap(),
    );
    request
        .headers_mut()
        .insert("x-switchyard-node", node.parse().unwrap());
    let (_socket, _) = tokio_tungstenite::connect_async(request)
        .await
        .expect("the session's websocket");

    // Held once the replica lists it.
    let started = Instant::now();
    loop {
        let (_, shown) = replica
            .call(replica.admin(Method::GET, "/api/cluster/carrier"))
            .await;
        if shown["sessions"]
            .as_array()
            .is_some_and(|s| s.iter().any(|s| s["node"] == node.as_str()))
        {
            break;
        }
        assert!(started.elapsed() < PATIENCE, "never held: {shown}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let value: Value = json!({
        "policies": live_instances(&replica, "policies").await,
        "carriers": live_instances(&replica, "carriers").await,
    });
    assert_eq!(
        value,
        json!({"policies": policies_before, "carriers": carriers_before + 1}),
        "the session's instance is the carriers' runtime's"
    );
    replica.stop().await;
}
