//! The pgbus carrier on a private PostgreSQL: a burst of 4,000 broadcasts of
//! 64 KiB from 16 publishers heard by two frontends, and small-message
//! throughput beside bare `pg_notify` from one client.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use switchyard_carrier::{Carrier, CarrierSetup, ComponentSpec};
use switchyard_runtime::{Runtime, RuntimeConfig};
use switchyard_store::embedded::EmbeddedPostgres;

use crate::fixtures::component;
use crate::stats::header;

const BURST: usize = 4_000;
const BURST_PAYLOAD: usize = 64 * 1024;
const PUBLISHERS: usize = 16;
const SMALL: usize = 20_000;
const SMALL_PAYLOAD: usize = 64;
/// Publishes in flight at once.
const WINDOW: usize = 256;
const WAIT: Duration = Duration::from_secs(60);

pub fn run() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pg = match EmbeddedPostgres::start(&dir.path().join("pg")) {
        Ok(pg) => pg,
        Err(e) => {
            println!("(skipping pgbus: {e})\n");
            return;
        }
    };
    let url = pg.url();
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    let burst = tokio.block_on(burst(&url));
    let (carrier_rate, native_rate) = tokio.block_on(small(&url));
    drop(pg);

    header(
        &format!(
            "pgbus: burst of {BURST} x 64 KiB from {PUBLISHERS} publishers, two frontends listening"
        ),
        &["frontend", "delivered", "lost", "time (s)"],
    );
    for (name, delivered, lost, seconds) in burst {
        println!("| {name} | {delivered} of {BURST} | {lost} | {seconds:.2} |");
    }
    println!();
    header(
        &format!("pgbus: {SMALL_PAYLOAD}-byte messages, publish to delivery"),
        &["client", "throughput (msg/s)"],
    );
    println!("| pgbus carrier (component) | {carrier_rate:.0} |");
    println!("| bare pg_notify (tokio-postgres, one client) | {native_rate:.0} |");
    println!("| ratio carrier/bare | {:.2} |", carrier_rate / native_rate);
    println!();
}

fn spec(url: &str, config: serde_json::Value) -> (ComponentSpec, CarrierSetup) {
    let (bytes, sha256) = component("pgbus");
    let component = ComponentSpec {
        name: "pgbus".into(),
        version: "bench".into(),
        bytes: bytes.into(),
        sha256,
    };
    let setup = CarrierSetup {
        config: config.to_string(),
        database_url: Some(url.into()),
        allowed_endpoints: vec![switchyard_carrier::Endpoint::Database],
    };
    (component, setup)
}

async fn start(runtime: &Arc<Runtime>, url: &str, config: serde_json::Value) -> Arc<Carrier> {
    let (component, setup) = spec(url, config);
    let carrier = Carrier::start(component, setup, runtime.clone()).expect("pgbus starts");
    assert!(carrier.wait_ready(WAIT).await, "pgbus connected");
    carrier
}

async fn burst(url: &str) -> Vec<(&'static str, usize, u64, f64)> {
    let runtime = Runtime::new(RuntimeConfig::default()).expect("runtime");
    let frontends = [
        start(&runtime, url, serde_json::json!({})).await,
        start(&runtime, url, serde_json::json!({})).await,
    ];
    let mut receivers = Vec::new();
    for frontend in &frontends {
        let (subscription, messages) = frontend
            .subscribe("jobs.burst", None)
            .await
            .expect("subscribe");
        receivers.push((subscription, messages));
    }
    // Publishers keep one reader each: they only publish.
    let mut publishers = Vec::new();
    for _ in 0..PUBLISHERS {
        publishers.push(start(&runtime, url, serde_json::json!({"spill_readers": 1})).await);
    }
    let started = Instant::now();
    let payload = Bytes::from(vec![42u8; BURST_PAYLOAD]);
    let sends = publishers.iter().map(|p| {
        let (p, payload) = (p.clone(), payload.clone());
        tokio::spawn(async move {
            for _ in 0..BURST / PUBLISHERS {
                p.publish("jobs.burst", payload.clone())
                    .await
                    .expect("publish");
            }
        })
    });
    let sends: Vec<_> = sends.collect();
    let counts = receivers
        .into_iter()
        .enumerate()
        .map(|(i, (subscription, mut messages))| {
            tokio::spawn(async move {
                let mut delivered = 0;
                while delivered < BURST {
                    match tokio::time::timeout(Duration::from_secs(10), messages.recv()).await {
                        Ok(Some(m)) if m.payload.len() == BURST_PAYLOAD => delivered += 1,
                        Ok(Some(_)) => {}
                        _ => break,
                    }
                }
                drop(subscription);
                (i, delivered, started.elapsed().as_secs_f64())
            })
        });
    let counts: Vec<_> = counts.collect();
    for send in sends {
        send.await.expect("publisher");
    }
    let mut results = Vec::new();
    for count in counts {
        let (i, delivered, seconds) = count.await.expect("receiver");
        let name = if i == 0 { "frontend 1" } else { "frontend 2" };
        results.push((name, delivered, frontends[i].stats().dropped, seconds));
    }
    results
}

async fn small(url: &str) -> (f64, f64) {
    let runtime = Runtime::new(RuntimeConfig::default()).expect("runtime");
    let publisher = start(&runtime, url, serde_json::json!({})).await;
    let publisher_stats = publisher.clone();
    let listener = start(&runtime, url, serde_json::json!({})).await;
    let (_s, mut messages) = listener
        .subscribe("jobs.small", None)
        .await
        .expect("subscribe");
    // Distinct payloads, as real messages are (PostgreSQL folds identical
    // notifications of one transaction, so pgbus never batches duplicates).
    let payload = |n: usize| {
        let mut p = vec![7u8; SMALL_PAYLOAD];
        p[..8].copy_from_slice(&(n as u64).to_le_bytes());
        Bytes::from(p)
    };
    let started = Instant::now();
    let sender = tokio::spawn(async move {
        for batch in 0..SMALL / WINDOW {
            let batch =
                (0..WINDOW).map(|i| publisher.publish("jobs.small", payload(batch * WINDOW + i)));
            for result in futures::future::join_all(batch).await {
                result.expect("publish");
            }
        }
    });
    let expected = (SMALL / WINDOW) * WINDOW;
    let mut received = 0;
    while received < expected {
        match tokio::time::timeout(Duration::from_secs(10), messages.recv()).await {
            Ok(Some(_)) => received += 1,
            _ => break,
        }
    }
    let carrier_rate = received as f64 / started.elapsed().as_secs_f64();
    if received < expected {
        eprintln!(
            "pgbus: only {received} of {expected} delivered; publisher {:?}, listener {:?}",
            publisher_stats.stats(),
            listener.stats()
        );
    }
    sender.await.expect("sender");

    // Bare: one client notifying, pipelined the same way, one connection listening.
    let connect = || async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .expect("connect");
        (client, connection)
    };
    let (listen_client, mut listen_connection) = connect().await;
    let (tx, mut heard) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut stream = futures::stream::poll_fn(move |cx| listen_connection.poll_message(cx));
        while let Some(Ok(message)) = stream.next().await {
            if let tokio_postgres::AsyncMessage::Notification(_) = message {
                let _ = tx.send(());
            }
        }
    });
    listen_client
        .batch_execute("LISTEN bench_bare")
        .await
        .expect("listen");
    let (client, connection) = connect().await;
    tokio::spawn(connection);
    let client = Arc::new(client);
    let text = "x".repeat(SMALL_PAYLOAD * 4 / 3);
    let started = Instant::now();
    let sender = tokio::spawn({
        let client = client.clone();
        async move {
            for batch in 0..SMALL / WINDOW {
                // Distinct payloads: PostgreSQL folds identical notifications of one transaction.
                let sends = (0..WINDOW).map(|i| {
                    let client = client.clone();
                    let text = format!("{text}{batch}-{i}");
                    async move {
                        client
                            .execute("SELECT pg_notify('bench_bare', $1)", &[&text])
                            .await
                    }
                });
                for result in futures::future::join_all(sends).await {
                    result.expect("notify");
                }
            }
        }
    });
    let mut received = 0;
    while received < expected {
        match tokio::time::timeout(Duration::from_secs(10), heard.recv()).await {
            Ok(Some(())) => received += 1,
            _ => break,
        }
    }
    let native_rate = received as f64 / started.elapsed().as_secs_f64();
    sender.await.expect("sender");
    (carrier_rate, native_rate)
}
