//! Payload bypass (`switchyard:carrier@0.3.0`) on the `nats` carrier and a
//! real nats-server: large payloads, with and without headers, as
//! publishes, deliveries, requests and replies, arrive byte-exact while the
//! guest is handed at most its `peek` of any read and never an outgoing
//! payload. A 0.1.0 carrier keeps working beside it: `pgbus` still targets
//! 0.1.0 (`pgbus::the_conformance_suite_passes`), and the committed 0.1.0
//! `nats` component runs the conformance suite here.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use switchyard_carrier::{Carrier, CarrierSetup, ComponentSpec, Endpoint, Message};
use switchyard_runtime::{Runtime, RuntimeConfig};
use switchyard_tests::bytes::pattern;
use switchyard_tests::nats::NatsServer;
use switchyard_tests::plugins::component;
use tokio::sync::mpsc;

const WAIT: Duration = Duration::from_secs(10);

/// The nats plugin's `peek` (plugins/nats/src/component.rs).
const PEEK: u64 = 64 * 1024;

fn setup(server: &NatsServer) -> CarrierSetup {
    CarrierSetup {
        config:
            serde_json::json!({"servers": [server.address()], "roots": ["jobs", "cache", "work"]})
                .to_string(),
        database_url: None,
        allowed_endpoints: vec![Endpoint::Tcp(server.address())],
    }
}

async fn connected(
    runtime: &Arc<Runtime>,
    spec: ComponentSpec,
    server: &NatsServer,
) -> Arc<Carrier> {
    let carrier = Carrier::start(spec, setup(server), runtime.clone()).expect("starts");
    assert!(carrier.wait_ready(WAIT).await, "connected");
    carrier
}

async fn next(messages: &mut mpsc::Receiver<Message>) -> Message {
    tokio::time::timeout(WAIT, messages.recv())
        .await
        .expect("a message in time")
        .expect("subscription open")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_payloads_cross_without_entering_the_guest_and_arrive_byte_exact() {
    let server = NatsServer::start(&[]);
    let runtime = Runtime::new(RuntimeConfig::for_carriers(None)).unwrap();
    let spec = || ComponentSpec::new("nats", "test", component("nats"));
    let sender = connected(&runtime, spec(), &server).await;
    let receiver = connected(&runtime, spec(), &server).await;
    let (_subscription, mut messages) = receiver.subscribe("jobs.*.bypass", None).await.unwrap();
    let (_served, mut requests) = receiver.subscribe("jobs.echo", None).await.unwrap();
    // The subscriptions are in force once a request through the server returns.
    let _ = receiver.request("jobs.none", Bytes::new(), WAIT).await;

    let sizes = [64 * 1024, 1_000_000, 4096, 100, 300_000, 0, 16 * 1024 + 1];
    let mut large = 0;
    for (i, &size) in sizes.iter().enumerate() {
        let payload = pattern(size, i as u64 + 1);
        let headers = match i % 2 {
            0 => Vec::new(),
            _ => vec![("Trace".to_string(), format!("t-{i}"))],
        };
        sender
            .publish_with_headers(
                &format!("jobs.{i}.bypass"),
                headers.clone(),
                payload.clone(),
            )
            .await
            .unwrap();
        let message = next(&mut messages).await;
        assert_eq!(message.subject, format!("jobs.{i}.bypass"));
        assert_eq!(message.headers, headers, "message {i}");
        assert!(
            message.payload == payload,
            "message {i} of {size} bytes arrived changed"
        );
        if size >= 4096 {
            large += size as u64;
        }
    }

    // A request and its reply, both large: the reply is claimed on the
    // requester's inbox.
    let question = pattern(500_000, 99);
    let asking = {
        let sender = sender.clone();
        let question = question.clone();
        tokio::spawn(async move { sender.request("jobs.echo", question, WAIT).await })
    };
    let request = next(&mut requests).await;
    assert!(request.payload == question, "the request arrived changed");
    let answer = pattern(700_000, 100);
    receiver
        .publish(
            request.reply_to.as_deref().expect("a reply subject"),
            answer.clone(),
        )
        .await
        .unwrap();
    let reply = asking.await.unwrap().expect("a reply");
    assert!(reply.payload == answer, "the reply arrived changed");

    let received = receiver.stats();
    assert!(
        received.largest_received <= PEEK,
        "the guest was handed {} bytes in one call",
        received.largest_received
    );
    assert!(
        received.claimed_bytes >= large + question.len() as u64,
        "{received:?}"
    );
    // What the guest saw of the payloads is at most a window per message.
    let payload_bytes: u64 = sizes.iter().map(|&s| s as u64).sum::<u64>() + question.len() as u64;
    assert!(
        received.received_bytes < payload_bytes / 4,
        "the guest was handed {} bytes for {payload_bytes} bytes of payloads",
        received.received_bytes
    );
    // Only payloads under the plugin's `inline-below` (4 KiB) went into the
    // guest: the 100-byte one and the empty ones.
    assert_eq!(sender.stats().inline_payload_bytes, 100);
    assert_eq!(receiver.stats().inline_payload_bytes, 0);
    assert!(sender.stats().claimed_bytes >= answer.len() as u64);
}

/// Small messages come back from the 0.4.0 nats plugin as spans of what
/// it read: their bodies are views of the read, never copied through the
/// guest (only a message that began in an earlier read is copied).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_messages_are_delivered_in_place() {
    const MESSAGES: usize = 200;
    let server = NatsServer::start(&[]);
    let runtime = Runtime::new(RuntimeConfig::for_carriers(None)).unwrap();
    let spec = || ComponentSpec::new("nats", "test", component("nats"));
    let sender = connected(&runtime, spec(), &server).await;
    let receiver = connected(&runtime, spec(), &server).await;
    let (_subscription, mut messages) = receiver.subscribe("jobs.small", None).await.unwrap();
    let _ = receiver.request("jobs.none", Bytes::new(), WAIT).await;
    for n in 0..MESSAGES {
        sender
            .publish_queued("jobs.small", Bytes::from(format!("message {n}")))
            .await
            .unwrap();
    }
    for n in 0..MESSAGES {
        let message = next(&mut messages).await;
        assert_eq!(message.subject, "jobs.small");
        assert_eq!(message.payload, format!("message {n}").as_bytes());
    }
    let stats = receiver.stats();
    assert!(
        stats.delivered_in_place * 2 > MESSAGES as u64,
        "most arrive in place: {stats:?}"
    );
    assert_eq!(sender.stats().refused, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payload_split_across_many_reads_arrives_whole() {
    // One byte at a time would take minutes; the server's writes to a slow
    // reader are cut anyway: a 1 MB payload arrives in many reads.
    let server = NatsServer::start(&[]);
    let runtime = Runtime::new(RuntimeConfig::for_carriers(None)).unwrap();
    let spec = || ComponentSpec::new("nats", "test", component("nats"));
    let sender = connected(&runtime, spec(), &server).await;
    let receiver = connected(&runtime, spec(), &server).await;
    let (_subscription, mut messages) = receiver.subscribe("jobs.many", None).await.unwrap();
    let _ = receiver.request("jobs.none", Bytes::new(), WAIT).await;
    let payloads: Vec<Bytes> = (0..20)
        .map(|i| pattern(200_000 + i * 7919, i as u64))
        .collect();
    for payload in &payloads {
        sender.publish("jobs.many", payload.clone()).await.unwrap();
    }
    for (i, payload) in payloads.iter().enumerate() {
        let message = next(&mut messages).await;
        assert!(message.payload == *payload, "payload {i} arrived changed");
    }
    let stats = receiver.stats();
    assert!(stats.largest_received <= PEEK, "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_carrier_of_the_0_1_0_world_still_passes_the_conformance_suite() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/nats-0.1.0/nats.wasm");
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let server = NatsServer::start(&[]);
    let runtime = Runtime::new(RuntimeConfig::for_carriers(None)).unwrap();
    // Uploads and the registry see its world as it is.
    let info = switchyard_runtime::inspect::inspect(&bytes).unwrap();
    assert_eq!(info.world, "switchyard:carrier/carrier@0.1.0");
    let current = switchyard_runtime::inspect::inspect(&component("nats")).unwrap();
    assert_eq!(current.world, "switchyard:carrier/carrier@0.4.0");
    assert_eq!(current.kind, info.kind);
    let spec = ComponentSpec::new("nats", "0.1.0", bytes);
    let results =
        switchyard_carrier::conformance::run(spec.clone(), setup(&server), runtime.clone())
            .await
            .unwrap();
    let failed = switchyard_carrier::conformance::failures(&results);
    assert!(failed.is_empty(), "{failed:#?}");

    // Its payloads go in inline and its reads whole, as 0.1.0 promised.
    let carrier = connected(&runtime, spec, &server).await;
    let (_subscription, mut messages) = carrier.subscribe("jobs.old", None).await.unwrap();
    let _ = carrier.request("jobs.none", Bytes::new(), WAIT).await;
    let payload = pattern(100_000, 5);
    carrier.publish("jobs.old", payload.clone()).await.unwrap();
    assert!(next(&mut messages).await.payload == payload);
    let stats = carrier.stats();
    assert_eq!(stats.claimed_bytes, 0, "{stats:?}");
    assert!(
        stats.inline_payload_bytes >= payload.len() as u64,
        "{stats:?}"
    );
}
