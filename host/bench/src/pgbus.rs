//! The pgbus carrier on a private PostgreSQL: a burst of 4,000 broadcasts of
//! 64 KiB from 16 publishers heard by two frontends beside the bare spill
//! scheme doing the same (`pgbus/bare.rs`), and small-message throughput
//! beside bare `pg_notify` from one client.

mod bare;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use switchyard_carrier::{Carrier, CarrierSetup, ComponentSpec, Message};
use switchyard_runtime::{Runtime, RuntimeConfig};
use switchyard_store::embedded::EmbeddedPostgres;
use tokio::sync::mpsc;

use switchyard_tests::bytes::pattern;

use crate::anchors;
use crate::fixtures::component;
use crate::stats::{header, median};

const BURST: usize = 4_000;
const BURST_PAYLOAD: usize = 64 * 1024;
const PUBLISHERS: usize = 16;
const SMALL: usize = 20_000;
const SMALL_PAYLOAD: usize = 64;
/// Publishes in flight at once.
const WINDOW: usize = 256;
/// The small messages each client sends: whole windows only.
const SMALL_SENT: usize = (SMALL / WINDOW) * WINDOW;
const WAIT: Duration = Duration::from_secs(60);
/// How long a listening frontend waits for its next message before the
/// run counts what it has.
const PATIENCE: Duration = Duration::from_secs(10);
/// Spill readers per frontend (the carrier's default).
const READERS: usize = 8;
/// The aim for the burst: at most this times the bare scheme's time.
const BURST_AIM: f64 = 1.2;

/// Bursts each path takes in turn (the median of each is compared): a
/// change in the shared machine's load falls on both alike.
const ROUNDS: usize = 3;

/// Prints the tables and records the burst beside its anchor.
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
    let shape = bare::Shape {
        messages: BURST,
        payload: BURST_PAYLOAD,
        publishers: PUBLISHERS,
        frontends: 2,
        readers: READERS,
        patience: PATIENCE,
    };
    header(
        &format!(
            "pgbus: burst of {BURST} x 64 KiB from {PUBLISHERS} publishers, two frontends listening with {READERS} readers each; {ROUNDS} rounds, the paths in turn"
        ),
        &[
            "round",
            "path",
            "delivered at frontend 1 / 2",
            "lost (carrier's counter)",
            "time to the last at the slower frontend (s)",
        ],
    );
    let slowest = |times: &mut dyn Iterator<Item = f64>| times.fold(0.0, f64::max);
    let (mut carrier_times, mut bare_times, mut complete) = (Vec::new(), Vec::new(), true);
    for round in 1..=ROUNDS {
        let carrier = tokio.block_on(burst(&url));
        let delivered: Vec<String> = carrier.iter().map(|b| b.0.to_string()).collect();
        let lost: u64 = carrier.iter().map(|b| b.1).sum();
        let seconds = slowest(&mut carrier.iter().map(|b| b.2));
        println!(
            "| {round} | pgbus carrier | {} of {BURST} | {lost} | {seconds:.2} |",
            delivered.join(" / ")
        );
        complete &= carrier.iter().all(|b| b.0 == BURST);
        carrier_times.push(seconds);

        let bare_burst = tokio.block_on(bare::burst(&url, shape));
        let delivered: Vec<String> = bare_burst.iter().map(|b| b.0.to_string()).collect();
        let seconds = slowest(&mut bare_burst.iter().map(|b| b.1));
        println!(
            "| {round} | bare scheme (insert + notify, fetch by id) | {} of {BURST} | | {seconds:.2} |",
            delivered.join(" / ")
        );
        complete &= bare_burst.iter().all(|b| b.0 == BURST);
        bare_times.push(seconds);
    }
    let (carrier_s, bare_s) = (median(carrier_times), median(bare_times));
    let ratio = carrier_s / bare_s;
    let incomplete = if complete { "" } else { " (incomplete)" };
    println!(
        "| median | carrier {carrier_s:.2} s, bare {bare_s:.2} s | ratio {ratio:.2}{incomplete} (aim <= {BURST_AIM}) | | |"
    );
    println!();

    let (carrier_rate, native_rate) = tokio.block_on(small(&url));
    drop(tokio);
    drop(pg);
    header(
        &format!("pgbus: {SMALL_PAYLOAD}-byte messages, publish to delivery"),
        &["client", "throughput (msg/s)"],
    );
    println!("| pgbus carrier (component) | {carrier_rate:.0} |");
    println!("| bare pg_notify (tokio-postgres, one client) | {native_rate:.0} |");
    println!("| ratio carrier/bare | {:.2} |", carrier_rate / native_rate);
    println!();

    anchors::record(anchors::Row {
        what: format!(
            "pgbus burst, {BURST} x 64 KiB from {PUBLISHERS} publishers, every message at both frontends (median of {ROUNDS})"
        ),
        ours: format!("{carrier_s:.2} s{incomplete}"),
        anchor: format!("bare scheme {bare_s:.2} s"),
        ratio,
        aim: anchors::Aim::AtMost(BURST_AIM),
    });
}

/// A runtime with the limits the server gives carriers. The policies'
/// default (a 100 ms call deadline, 64 MiB) made a carrier whose call was
/// descheduled on this busy 2-core machine trap and be rebuilt, losing what
/// it held: the occasional slow small-message run (docs/benchmarks.md).
fn carrier_runtime() -> Arc<Runtime> {
    Runtime::new(RuntimeConfig::for_carriers(None)).expect("runtime")
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

/// The carrier's burst; per frontend: delivered, dropped, seconds to the last.
async fn burst(url: &str) -> Vec<(usize, u64, f64)> {
    // A checkpoint owed by earlier writes is not this burst's cost.
    let admin = switchyard_tests::db::connect(url).await;
    admin.batch_execute("CHECKPOINT").await.expect("checkpoint");
    let runtime = carrier_runtime();
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
    let payload = pattern(BURST_PAYLOAD, 1);
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
                let mut last = 0.0;
                while delivered < BURST {
                    match tokio::time::timeout(PATIENCE, messages.recv()).await {
                        Ok(Some(m)) if m.payload.len() == BURST_PAYLOAD => {
                            delivered += 1;
                            last = started.elapsed().as_secs_f64();
                        }
                        Ok(Some(_)) => {}
                        _ => break,
                    }
                }
                drop(subscription);
                (i, delivered, last)
            })
        });
    let counts: Vec<_> = counts.collect();
    for send in sends {
        send.await.expect("publisher");
    }
    let mut results = Vec::new();
    for count in counts {
        let (i, delivered, seconds) = count.await.expect("receiver");
        results.push((delivered, frontends[i].stats().dropped, seconds));
    }
    results
}

/// The runs of messages not heard, as `first+count` (at most ten).
fn missing_runs(heard: &[bool]) -> String {
    let mut runs = Vec::new();
    let mut i = 0;
    while i < heard.len() {
        if heard[i] {
            i += 1;
            continue;
        }
        let first = i;
        while i < heard.len() && !heard[i] {
            i += 1;
        }
        runs.push(format!("{first}+{}", i - first));
    }
    let shown = runs.len().min(10);
    let more = runs.len() - shown;
    let mut text = runs[..shown].join(", ");
    if more > 0 {
        text.push_str(&format!(" and {more} more runs"));
    }
    text
}

/// Small messages through the carrier, then bare `pg_notify`: each one's
/// messages per second. The carriers stay up through the bare run.
async fn small(url: &str) -> (f64, f64) {
    let runtime = carrier_runtime();
    let publisher = start(&runtime, url, serde_json::json!({})).await;
    let listener = start(&runtime, url, serde_json::json!({})).await;
    let (_s, mut messages) = listener
        .subscribe("jobs.small", None)
        .await
        .expect("subscribe");
    let carrier_rate = small_through_carrier(&publisher, &listener, &mut messages).await;
    let native_rate = small_bare(url).await;
    (carrier_rate, native_rate)
}

/// [`SMALL_SENT`] messages from `publisher` to `listener`, a window at a
/// time: the rate at which they arrive.
async fn small_through_carrier(
    publisher: &Arc<Carrier>,
    listener: &Carrier,
    messages: &mut mpsc::Receiver<Message>,
) -> f64 {
    // Distinct payloads, as real messages are (PostgreSQL folds identical
    // notifications of one transaction, so pgbus never batches duplicates).
    let payload = |n: usize| {
        let mut p = vec![7u8; SMALL_PAYLOAD];
        p[..8].copy_from_slice(&(n as u64).to_le_bytes());
        Bytes::from(p)
    };
    let started = Instant::now();
    let sender = tokio::spawn({
        let publisher = publisher.clone();
        async move {
            for batch in 0..SMALL / WINDOW {
                let batch = (0..WINDOW)
                    .map(|i| publisher.publish("jobs.small", payload(batch * WINDOW + i)));
                for result in futures::future::join_all(batch).await {
                    result.expect("publish");
                }
            }
        }
    });
    let mut received = 0;
    // Which messages came, and the longest wait between two: on a shortfall
    // they tell lost batches (a run of a window's size missing) from a stall.
    let mut heard = vec![false; SMALL_SENT];
    let (mut last, mut longest_gap) = (Instant::now(), Duration::ZERO);
    while received < SMALL_SENT {
        match tokio::time::timeout(PATIENCE, messages.recv()).await {
            Ok(Some(m)) => {
                received += 1;
                let n = u64::from_le_bytes(m.payload[..8].try_into().expect("8 bytes"));
                if let Some(seen) = heard.get_mut(n as usize) {
                    *seen = true;
                }
                longest_gap = longest_gap.max(last.elapsed());
                last = Instant::now();
            }
            _ => break,
        }
    }
    let rate = received as f64 / started.elapsed().as_secs_f64();
    if received < SMALL_SENT {
        eprintln!(
            "pgbus: only {received} of {SMALL_SENT} delivered (longest gap {longest_gap:?}); missing {}; publisher {:?}, listener {:?}",
            missing_runs(&heard),
            publisher.stats(),
            listener.stats()
        );
    }
    sender.await.expect("sender");
    rate
}

/// The same through bare PostgreSQL: one client notifying, pipelined the
/// same way, one connection listening. TLS as the URL asks, as the
/// carrier's own connections have it.
async fn small_bare(url: &str) -> f64 {
    let database = switchyard_store::DatabaseUrl::parse(url).expect("database URL");
    let connect = || async { database.connect().await.expect("connect") };
    let (listen_client, mut listen_connection) = connect().await;
    let (tx, mut heard) = mpsc::unbounded_channel();
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
    while received < SMALL_SENT {
        match tokio::time::timeout(PATIENCE, heard.recv()).await {
            Ok(Some(())) => received += 1,
            _ => break,
        }
    }
    let native_rate = received as f64 / started.elapsed().as_secs_f64();
    sender.await.expect("sender");
    native_rate
}
