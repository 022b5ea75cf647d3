//! The `nats` carrier component on a real nats-server.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use switchyard_carrier::{Carrier, CarrierSpec, FanOut, Message, SendError};
use switchyard_runtime::{Runtime, RuntimeConfig};
use switchyard_tests::nats::NatsServer;
use switchyard_tests::plugins::{component, sha256};
use tokio::sync::mpsc;

const WAIT: Duration = Duration::from_secs(10);

fn start(runtime: &Arc<Runtime>, name: &str, config: serde_json::Value) -> Arc<Carrier> {
    let bytes = component("nats");
    Carrier::start(
        CarrierSpec {
            name: name.into(),
            version: "test".into(),
            sha256: sha256(&bytes),
            bytes: bytes.into(),
            config: config.to_string(),
        },
        runtime.clone(),
    )
    .expect("the nats carrier starts")
}

async fn connected(runtime: &Arc<Runtime>, name: &str, server: &NatsServer) -> Arc<Carrier> {
    let carrier = start(
        runtime,
        name,
        serde_json::json!({"servers": [server.address()], "roots": ["jobs", "cache"]}),
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fan_out_reaches_every_subscriber_on_both_ends_at_every_size() {
    let server = NatsServer::start(&[]);
    let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
    let (a, b) = (
        connected(&runtime, "a", &server).await,
        connected(&runtime, "b", &server).await,
    );
    let (_sa, mut on_a) = a.subscribe("cache.invalidate", None).await.unwrap();
    let (_sb, mut on_b) = b.subscribe("cache.invalidate", None).await.unwrap();
    round_trip(&b).await;
    round_trip(&a).await;

    for size in [1usize, 7999, 8000, 65536] {
        let payload = Bytes::from((0..size).map(|i| (i % 251) as u8).collect::<Vec<u8>>());
        a.publish("cache.invalidate", payload.clone())
            .await
            .unwrap();
        for messages in [&mut on_a, &mut on_b] {
            let message = next(messages).await;
            assert_eq!(message.subject, "cache.invalidate");
            assert_eq!(message.payload, payload, "{size} bytes arrive whole");
        }
    }

    // Above the server's maximum: refused before anything is written.
    let max = 1 << 20;
    let refused = a
        .publish("cache.invalidate", Bytes::from(vec![0u8; max + 1]))
        .await;
    assert!(
        matches!(refused, Err(SendError::PayloadTooLarge(_, m)) if m == max as u64),
        "{refused:?}"
    );
    assert_eq!((a.stats().dropped, b.stats().dropped), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subjects_wildcards_and_unsubscribe() {
    let server = NatsServer::start(&[]);
    let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
    let carrier = connected(&runtime, "c", &server).await;

    // Other wildcard forms and subjects outside the roots are refused.
    for bad in ["jobs.>", "jobs.a*", "jobs..x", "other.topic"] {
        let refused = carrier.subscribe(bad, None).await.err();
        assert!(
            matches!(refused, Some(SendError::InvalidSubject(_))),
            "{bad}: {refused:?}"
        );
    }
    assert!(matches!(
        carrier.publish("other.topic", Bytes::new()).await,
        Err(SendError::InvalidSubject(_))
    ));

    // `*` matches exactly one token.
    let (_star, mut progress) = carrier.subscribe("jobs.*.progress", None).await.unwrap();
    let (own, mut own_messages) = carrier.subscribe("jobs.7.progress", None).await.unwrap();
    round_trip(&carrier).await;
    carrier
        .publish("jobs.7.x.progress", Bytes::from_static(b"two tokens"))
        .await
        .unwrap();
    carrier
        .publish("jobs.7.progress", Bytes::from_static(b"one token"))
        .await
        .unwrap();
    assert_eq!(
        next(&mut progress).await.payload,
        Bytes::from_static(b"one token"),
        "the two-token subject did not match"
    );
    assert_eq!(
        next(&mut own_messages).await.payload,
        Bytes::from_static(b"one token")
    );

    // Unsubscribing removes only that subscription.
    drop(own);
    round_trip(&carrier).await;
    carrier
        .publish("jobs.7.progress", Bytes::from_static(b"after"))
        .await
        .unwrap();
    assert_eq!(
        next(&mut progress).await.payload,
        Bytes::from_static(b"after")
    );
    carrier
        .publish("jobs.8.progress", Bytes::from_static(b"marker"))
        .await
        .unwrap();
    assert_eq!(
        next(&mut progress).await.payload,
        Bytes::from_static(b"marker")
    );
    assert!(
        own_messages.try_recv().is_err(),
        "the dropped subscription got nothing more"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_groups_and_request_reply() {
    let server = NatsServer::start(&[]);
    let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
    let (a, b) = (
        connected(&runtime, "a", &server).await,
        connected(&runtime, "b", &server).await,
    );

    // A work queue: each unit goes to exactly one member of the group.
    let (_qa, mut on_a) = a.subscribe("jobs.units", Some("workers")).await.unwrap();
    let (_qb, mut on_b) = b.subscribe("jobs.units", Some("workers")).await.unwrap();
    round_trip(&a).await;
    round_trip(&b).await;
    const UNITS: usize = 200;
    for i in 0..UNITS {
        a.publish("jobs.units", Bytes::from(i.to_string()))
            .await
            .unwrap();
    }
    let mut seen = Vec::new();
    while seen.len() < UNITS {
        tokio::select! {
            Some(m) = on_a.recv() => seen.push(m.payload),
            Some(m) = on_b.recv() => seen.push(m.payload),
            _ = tokio::time::sleep(WAIT) => panic!("only {} of {UNITS} units arrived", seen.len()),
        }
    }
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), UNITS, "every unit exactly once");

    // Request and reply: a responder on b answers a's request.
    let (_responder, mut requests) = b.subscribe("jobs.echo", None).await.unwrap();
    round_trip(&b).await;
    let responder = tokio::spawn({
        let b = b.clone();
        async move {
            let request = next(&mut requests).await;
            let reply_to = request.reply_to.expect("a request carries its inbox");
            b.publish(&reply_to, request.payload).await.unwrap();
        }
    });
    let reply = a
        .request("jobs.echo", Bytes::from_static(b"ping"), WAIT)
        .await
        .unwrap();
    assert_eq!(reply.payload, Bytes::from_static(b"ping"));
    responder.await.unwrap();
    assert!(matches!(
        a.request("jobs.nobody", Bytes::new(), WAIT).await,
        Err(SendError::NoResponders)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_and_password_authentication() {
    let server = NatsServer::start(&["--user", "switchyard", "--pass", "s3cret"]);
    let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
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
    let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
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
    let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
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
        next(&mut messages).await.payload,
        Bytes::from_static(b"during")
    );
    assert_eq!(
        next(&mut messages).await.payload,
        Bytes::from_static(b"during"),
        "heard once per attached carrier"
    );

    // After the swap and the release, publish goes to the new carrier and is heard once.
    holder.swap(new.clone());
    holder.release("old");
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
        next(&mut messages).await.payload,
        Bytes::from_static(b"after")
    );
    assert_eq!(
        next(&mut messages).await.payload,
        Bytes::from_static(b"marker")
    );
    assert_eq!(holder.active().name(), "new");
    assert_eq!(
        old.stats().published,
        0,
        "nothing went through the old carrier after the swap"
    );
}
