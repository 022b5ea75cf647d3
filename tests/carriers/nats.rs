//! The `nats` carrier component on a real nats-server.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use switchyard_carrier::conformance::Passed;
use switchyard_carrier::{
    Carrier, CarrierSetup, ComponentSpec, Endpoint, FanOut, Message, SendError, endpoints_named_by,
};
use switchyard_runtime::{Runtime, RuntimeConfig};
use switchyard_tests::nats::NatsServer;
use switchyard_tests::plugins::component;
use tokio::sync::mpsc;

const WAIT: Duration = Duration::from_secs(10);

fn start(runtime: &Arc<Runtime>, name: &str, config: serde_json::Value) -> Arc<Carrier> {
    Carrier::start(
        ComponentSpec::new(name, "test", component("nats")),
        CarrierSetup {
            allowed_endpoints: endpoints_named_by(&config.to_string(), None),
            config: config.to_string(),
            database_url: None,
        },
        runtime.clone(),
    )
    .expect("the nats carrier starts")
}

async fn connected(runtime: &Arc<Runtime>, name: &str, server: &NatsServer) -> Arc<Carrier> {
    let carrier = start(
        runtime,
        name,
        serde_json::json!({"servers": [server.address()], "roots": ["jobs", "cache", "work"]}),
    );
    assert!(carrier.wait_ready(WAIT).await, "{name} connected");
    carrier
}

/// A round trip through the server: everything sent before it is in force
/// (NATS handles a client's operations in order; nobody serves this subject).
async fn round_trip(carrier: &Carrier) {
    let answer = carrier.request("jobs.round-trip", Bytes::new(), WAIT).await;
    assert!(matches!(answer, Err(SendError::NoResponders)), "{answer:?}");
}

async fn next(messages: &mut mpsc::Receiver<Message>) -> Message {
    tokio::time::timeout(WAIT, messages.recv())
        .await
        .expect("a message in time")
        .expect("subscription open")
}

async fn heard(broadcasts: &mut switchyard_carrier::fanout::Broadcasts) -> Message {
    tokio::time::timeout(WAIT, broadcasts.recv())
        .await
        .expect("a broadcast in time")
        .expect("holder alive")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_conformance_suite_passes() {
    let server = NatsServer::start(&[]);
    let runtime = Runtime::new(RuntimeConfig::for_carriers(None)).unwrap();
    let nats = ComponentSpec::new("nats", "test", component("nats"));
    let setup = CarrierSetup {
        config:
            serde_json::json!({"servers": [server.address()], "roots": ["jobs", "cache", "work"]})
                .to_string(),
        database_url: None,
        allowed_endpoints: vec![Endpoint::Tcp(server.address())],
    };
    let results = switchyard_carrier::conformance::run(nats, setup, runtime)
        .await
        .unwrap();
    let failed = switchyard_carrier::conformance::failures(&results);
    assert!(failed.is_empty(), "{failed:#?}");
    assert!(results.len() >= 10, "every check ran");
    let served: Vec<_> = results
        .iter()
        .filter(|r| r.name.contains("queue"))
        .map(|r| (r.name, r.outcome.clone()))
        .collect();
    assert!(
        served
            .iter()
            .all(|(_, outcome)| *outcome == Ok(Passed::Yes)),
        "NATS serves queue groups and the work queue: {served:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_cannot_dial_an_endpoint_the_operator_did_not_allow() {
    let server = NatsServer::start(&[]);
    // Somewhere the operator did not name: it must never see a connection.
    let elsewhere = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    elsewhere.set_nonblocking(true).unwrap();
    let elsewhere_address = elsewhere.local_addr().unwrap().to_string();
    let runtime = Runtime::new(RuntimeConfig::for_carriers(None)).unwrap();
    // The plugin is told to dial `elsewhere` first (and lists it among its
    // endpoints); the operator allowed only the server.
    let carrier = Carrier::start(
        ComponentSpec::new("nats", "test", component("nats")),
        CarrierSetup {
            config: serde_json::json!({
                "servers": [elsewhere_address, server.address()],
                "roots": ["jobs"],
            })
            .to_string(),
            database_url: None,
            allowed_endpoints: vec![Endpoint::Tcp(server.address())],
        },
        runtime,
    )
    .expect("the nats carrier starts");
    assert!(
        carrier.wait_ready(WAIT).await,
        "the allowed server is reached"
    );
    round_trip(&carrier).await;
    match elsewhere.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("the plugin reached an endpoint the operator did not allow: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_and_password_authentication() {
    let server = NatsServer::start(&["--user", "switchyard", "--pass", "s3cret"]);
    let runtime = Runtime::new(RuntimeConfig::for_carriers(None)).unwrap();
    let good = start(
        &runtime,
        "good",
        serde_json::json!({"servers": [server.address()], "user": "switchyard", "password": "s3cret"}),
    );
    assert!(good.wait_ready(WAIT).await);
    let bad = start(
        &runtime,
        "bad",
        serde_json::json!({"servers": [server.address()], "user": "switchyard", "password": "wrong"}),
    );
    assert!(
        !bad.wait_ready(Duration::from_secs(2)).await,
        "a wrong password never connects"
    );
    assert!(matches!(
        bad.publish("jobs.x", Bytes::new()).await,
        Err(SendError::NotConnected)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_is_survived_by_reconnecting_and_resubscribing() {
    let mut server = NatsServer::start(&[]);
    let runtime = Runtime::new(RuntimeConfig::for_carriers(None)).unwrap();
    let (a, b) = (
        connected(&runtime, "a", &server).await,
        connected(&runtime, "b", &server).await,
    );
    let (_s, mut on_b) = b.subscribe("jobs.after", None).await.unwrap();

    server.kill();
    assert!(a.wait_lost(WAIT).await, "a saw the server go");
    server.restart();
    assert!(
        a.wait_ready(WAIT).await && b.wait_ready(WAIT).await,
        "both reconnect without a restart"
    );
    round_trip(&b).await;
    a.publish("jobs.after", Bytes::from_static(b"back"))
        .await
        .unwrap();
    assert_eq!(
        next(&mut on_b).await.payload,
        Bytes::from_static(b"back"),
        "b's subscription came back with it"
    );
    assert!(a.stats().reconnects >= 1 && b.stats().reconnects >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fan_out_holder_listens_on_two_carriers_during_a_change() {
    let server = NatsServer::start(&[]);
    let runtime = Runtime::new(RuntimeConfig::for_carriers(None)).unwrap();
    let (old, new) = (
        connected(&runtime, "old", &server).await,
        connected(&runtime, "new", &server).await,
    );
    let holder = FanOut::new(old.clone());
    let mut messages = holder.subscribe("cache.invalidate", None).await.unwrap();

    // While both are attached, the handler hears a publish made on either.
    holder.listen(&new).await.unwrap();
    round_trip(&new).await;
    let publisher = connected(&runtime, "publisher", &server).await;
    publisher
        .publish("cache.invalidate", Bytes::from_static(b"during"))
        .await
        .unwrap();
    assert_eq!(
        heard(&mut messages).await.payload,
        Bytes::from_static(b"during")
    );
    assert_eq!(
        heard(&mut messages).await.payload,
        Bytes::from_static(b"during"),
        "a publish made around the holder carries no id: heard once per attached carrier"
    );
    // One made through a holder carries its id: heard once, on two carriers of one server.
    holder
        .publish("cache.invalidate", Bytes::from_static(b"once"))
        .await
        .unwrap();
    holder
        .publish("cache.invalidate", Bytes::from_static(b"twice?"))
        .await
        .unwrap();
    assert_eq!(
        heard(&mut messages).await.payload,
        Bytes::from_static(b"once")
    );
    assert_eq!(
        heard(&mut messages).await.payload,
        Bytes::from_static(b"twice?"),
        "the second copy of `once` was dropped"
    );

    // After the swap and the release, publish goes to the new carrier and is heard once.
    let published_before = old.stats().published;
    holder.swap(new.clone());
    holder.release(&old);
    round_trip(&new).await;
    round_trip(&old).await;
    holder
        .publish("cache.invalidate", Bytes::from_static(b"after"))
        .await
        .unwrap();
    holder
        .publish("cache.invalidate", Bytes::from_static(b"marker"))
        .await
        .unwrap();
    assert_eq!(
        heard(&mut messages).await.payload,
        Bytes::from_static(b"after")
    );
    assert_eq!(
        heard(&mut messages).await.payload,
        Bytes::from_static(b"marker")
    );
    assert_eq!(holder.active().name(), "new");
    assert_eq!(
        old.stats().published,
        published_before,
        "nothing went through the old carrier after the swap"
    );
}

#[test]
fn the_conformance_command_runs_on_a_component_file() {
    let server = NatsServer::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let wasm = switchyard_tests::plugins::dir().join("nats.wasm");
    let run = |roots: serde_json::Value| {
        let config = dir.path().join("config.json");
        std::fs::write(
            &config,
            serde_json::json!({"servers": [server.address()], "roots": roots}).to_string(),
        )
        .unwrap();
        std::process::Command::new(switchyard_tests::process::binary())
            .args(["carrier", "conformance"])
            .arg(&wasm)
            .arg("--config")
            .arg(&config)
            .env("RUST_LOG", "error")
            .output()
            .unwrap()
    };
    let passing = run(serde_json::json!(["jobs", "cache", "work"]));
    let stdout = String::from_utf8_lossy(&passing.stdout);
    assert!(passing.status.success(), "{stdout}");
    assert!(stdout.contains("11 of 11 checks passed"), "{stdout}");

    // A configuration that does not allow `cache` fails the delivery check, and says so.
    let failing = run(serde_json::json!(["jobs"]));
    let stdout = String::from_utf8_lossy(&failing.stdout);
    assert_eq!(failing.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("FAIL  delivery to every subscriber"),
        "{stdout}"
    );
}
