//! Carrier sets as values: `nats` (on a real nats-server) and `tunnel` (on
//! a real PostgreSQL) started side by side in one process from the catalog,
//! each carrying its own fan-out and work queue.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use switchyard_carrier::set::{self, Frontend, SetEnv, Side};
use switchyard_carrier::{ComponentSpec, FanOut, SetName, TunnelRegistry, WorkQueue};
use switchyard_runtime::{Runtime, RuntimeConfig};
use switchyard_tests::db::fresh_database;
use switchyard_tests::nats::NatsServer;
use switchyard_tests::plugins::component;

const WAIT: Duration = Duration::from_secs(10);

fn frontend(database_url: &str) -> Frontend {
    Frontend {
        database_url: Some(database_url.to_string()),
        sessions: Arc::new(TunnelRegistry::default()),
        resolve: Arc::new(|node: String| Box::pin(async move { Err(format!("no node {node}")) })),
    }
}

/// Publishes on the set's fan-out and hands a unit to its work queue; both
/// come back through the same set.
async fn sends_through(seams: set::Seams, tag: &str) {
    let messages = seams.messages.expect("a frontend's messages carrier");
    assert!(messages.wait_ready(WAIT).await, "{} connected", seams.name);
    let fanout = FanOut::new(messages.clone());
    let mut heard = fanout.subscribe("cache.sets", None).await.unwrap();
    fanout
        .publish("cache.sets", Bytes::from(tag.to_string()))
        .await
        .unwrap();
    let message = tokio::time::timeout(WAIT, heard.recv())
        .await
        .expect("the broadcast in time")
        .expect("subscription open");
    assert_eq!(message.payload, tag.as_bytes(), "{}", seams.name);

    let queue = WorkQueue::new(messages, WAIT);
    let mut units = queue.consume("sets").await.unwrap();
    let consumer = tokio::spawn(async move {
        let unit = units.next().await.expect("a unit");
        let seen = (unit.id.clone(), unit.payload.clone());
        unit.done().await.unwrap();
        seen
    });
    queue
        .submit("sets", &format!("unit-{tag}"), Bytes::from(tag.to_string()))
        .await
        .unwrap();
    let (id, payload) = consumer.await.unwrap();
    assert_eq!(
        (id.as_str(), &payload[..]),
        (&*format!("unit-{tag}"), tag.as_bytes())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_and_tunnel_run_side_by_side_in_one_process() {
    let server = NatsServer::start(&[]);
    let db = fresh_database().await;
    let env = SetEnv {
        runtime: Runtime::new(RuntimeConfig::for_carriers(None)).unwrap(),
        components: ["nats", "pgbus", "tunnel"]
            .map(|name| ComponentSpec::new(name, "test", component(name)))
            .to_vec(),
        nats_url: Some(server.address()),
    };
    let nats = set::start(SetName::Nats, &env, Side::Frontend(frontend(&db))).unwrap();
    let tunnel = set::start(SetName::Tunnel, &env, Side::Frontend(frontend(&db))).unwrap();

    // Each set is what its catalog entry says.
    assert_eq!(
        nats.messages.as_ref().map(|c| c.name().to_string()),
        Some("nats".into())
    );
    // Both sets' streams ride tunnel sessions (the frontend dials the
    // `nats` set's, the worker the `tunnel` set's).
    assert_eq!(
        nats.tunnel.as_ref().map(|c| c.name.as_str()),
        Some("tunnel")
    );
    assert_eq!(
        tunnel.messages.as_ref().map(|c| c.name().to_string()),
        Some("pgbus".into())
    );
    assert_eq!(
        tunnel.tunnel.as_ref().map(|c| c.name.as_str()),
        Some("tunnel")
    );
    assert!(nats.control.is_some() && tunnel.control.is_some());
    assert!(nats.streams.is_some() && tunnel.streams.is_some());

    // Both alive at once, each carrying its own traffic.
    tokio::join!(sends_through(nats, "nats"), sends_through(tunnel, "tunnel"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_starts_only_what_serves_it() {
    let server = NatsServer::start(&[]);
    let env = SetEnv {
        runtime: Runtime::new(RuntimeConfig::for_carriers(None)).unwrap(),
        // No pgbus: a worker never runs it.
        components: ["nats", "tunnel"]
            .map(|name| ComponentSpec::new(name, "test", component(name)))
            .to_vec(),
        nats_url: Some(server.address()),
    };
    let nats = set::start(SetName::Nats, &env, Side::Worker).unwrap();
    let messages = nats.messages.expect("control rides nats");
    assert!(messages.wait_ready(WAIT).await);
    assert!(nats.control.is_none() && nats.streams.is_none());
    let tunnel = set::start(SetName::Tunnel, &env, Side::Worker).unwrap();
    assert!(tunnel.messages.is_none(), "a worker runs no pgbus");
    assert_eq!(tunnel.tunnel.map(|c| c.name), Some("tunnel".into()));
}
