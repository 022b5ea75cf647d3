//! The nats carrier beside a native client: publish-to-delivery throughput
//! and latency of small messages through the plugin (host reactor and
//! component), and the same through async-nats, on one nats-server; then
//! the throughput of 64 KiB messages, whose payloads the host moves beside
//! the guest.
//!
//! The anchor row compares like with like: the carrier's `publish_queued`
//! and async-nats's `publish` both queue without a verdict, in the same
//! loop. The carrier's `publish`, which awaits the plugin's verdict for
//! each message, is measured beside them.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use switchyard_carrier::{Carrier, CarrierSetup, ComponentSpec};
use switchyard_runtime::{Runtime, RuntimeConfig};

use crate::anchors;
use crate::cpu::{clock_ticks_per_second, cpu_ticks};
use crate::fixtures::component;
use crate::stats::{header, median, percentiles};

const MESSAGES: usize = 100_000;
const PAYLOAD: usize = 64;
/// Messages in flight at once while measuring throughput.
const WINDOW: usize = 1_000;
/// Turns each client takes (the median rate is reported).
const ROUNDS: usize = 3;
const LATENCY_SAMPLES: usize = 5_000;
/// The rate at which latency is sampled (one message every 100 us).
const LATENCY_INTERVAL: Duration = Duration::from_micros(100);

/// The large messages: a payload the host moves beside the guest, and
/// fewer of them, so that the run stays a few seconds.
const LARGE_PAYLOAD: usize = 64 * 1024;
const LARGE_MESSAGES: usize = 20_000;
const LARGE_WINDOW: usize = 100;

/// How the carrier's publisher sends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Publishing {
    /// `publish_queued` in a loop: no verdict awaited, as async-nats's
    /// `publish` only queues (the same loop as the native client's).
    Queued,
    /// `publish`, each awaiting the plugin's verdict, `window` at a time
    /// (`join_all`).
    Answered,
}

/// One throughput run: how many messages of what size, how many in flight.
#[derive(Clone, Copy)]
struct Load {
    messages: usize,
    payload: usize,
    window: usize,
    publishing: Publishing,
}

const SMALL: Load = Load {
    messages: MESSAGES,
    payload: PAYLOAD,
    window: WINDOW,
    publishing: Publishing::Queued,
};

const SMALL_ANSWERED: Load = Load {
    publishing: Publishing::Answered,
    ..SMALL
};

const LARGE: Load = Load {
    messages: LARGE_MESSAGES,
    payload: LARGE_PAYLOAD,
    window: LARGE_WINDOW,
    publishing: Publishing::Answered,
};

pub(crate) struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A nats-server on a free loopback port, and its address.
pub(crate) fn start_server() -> Option<(Server, String)> {
    let port = TcpListener::bind("127.0.0.1:0")
        .ok()?
        .local_addr()
        .ok()?
        .port();
    let binary = if std::path::Path::new("/usr/sbin/nats-server").exists() {
        "/usr/sbin/nats-server"
    } else {
        "nats-server"
    };
    let child = Command::new(binary)
        .args(["-a", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let address = format!("127.0.0.1:{port}");
    let started = Instant::now();
    while std::net::TcpStream::connect(&address).is_err() {
        if started.elapsed() > Duration::from_secs(10) {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Some((Server(child), address))
}

pub fn run() {
    let Some((_server, address)) = start_server() else {
        println!("(skipping NATS: no nats-server; scripts/bench.sh installs it)\n");
        return;
    };
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    // The clients take turns, ROUNDS times: a change in the machine's load
    // (it is shared) falls on both alike. Rates and CPU are medians;
    // latencies are pooled over the rounds.
    small_messages(&tokio, &address);
    large_messages(&tokio, &address);
}

/// The small messages' table, queued and answered beside async-nats, and
/// their anchors (throughput and latency).
fn small_messages(tokio: &tokio::runtime::Runtime, address: &str) {
    let small = rounds(tokio, address, &[SMALL, SMALL_ANSWERED], true);
    let [mut ours, answered] = small.ours.try_into().ok().expect("two loads");
    let mut theirs = small.theirs;
    let (p50, p99) = percentiles(&mut ours.samples);
    let (n50, n99) = percentiles(&mut theirs.samples);
    header(
        &format!("NATS: {PAYLOAD}-byte messages, publish to delivery, one nats-server"),
        &[
            "client",
            "throughput (msg/s)",
            "client CPU per message (us)",
            "latency p50 (us)",
            "latency p99 (us)",
        ],
    );
    println!(
        "| nats carrier (component), `publish_queued` | {:.0} | {:.2} | {p50:.0} | {p99:.0} |",
        ours.rate, ours.cpu_us
    );
    println!(
        "| async-nats (native), `publish` | {:.0} | {:.2} | {n50:.0} | {n99:.0} |",
        theirs.rate, theirs.cpu_us
    );
    println!(
        "| ratio carrier/native | {:.2} | {:.2} | {:.2} | {:.2} |",
        ours.rate / theirs.rate,
        ours.cpu_us / theirs.cpu_us,
        p50 / n50,
        p99 / n99
    );
    println!(
        "| nats carrier, `publish` awaiting each verdict ({WINDOW} at a time) | {:.0} | {:.2} | | |",
        answered.rate, answered.cpu_us
    );
    println!(
        "| ratio answered/native | {:.2} | {:.2} | | |",
        answered.rate / theirs.rate,
        answered.cpu_us / theirs.cpu_us
    );
    println!();
    anchors::record(anchors::Row {
        what: format!("NATS carrier throughput, {PAYLOAD} B"),
        ours: format!("{:.0} msg/s", ours.rate),
        anchor: format!("async-nats {:.0} msg/s", theirs.rate),
        ratio: ours.rate / theirs.rate,
        aim: anchors::Aim::AtLeast(0.8),
    });
    anchors::record(anchors::Row {
        what: format!("NATS carrier latency p50, {PAYLOAD} B"),
        ours: format!("{p50:.0} us"),
        anchor: format!("async-nats {n50:.0} us"),
        ratio: p50 / n50,
        aim: anchors::Aim::AtMost(1.2),
    });
}

/// The large messages' table: the carrier beside async-nats, no latency.
fn large_messages(tokio: &tokio::runtime::Runtime, address: &str) {
    let large = rounds(tokio, address, &[LARGE], false);
    let (ours, theirs) = (&large.ours[0], large.theirs);
    let mb = |rate: f64| rate * LARGE_PAYLOAD as f64 / 1e6;
    header(
        &format!(
            "NATS: {} KiB messages, publish to delivery, one nats-server",
            LARGE_PAYLOAD / 1024
        ),
        &[
            "client",
            "throughput (msg/s)",
            "throughput (MB/s)",
            "client CPU per message (us)",
        ],
    );
    println!(
        "| nats carrier (component) | {:.0} | {:.0} | {:.1} |",
        ours.rate,
        mb(ours.rate),
        ours.cpu_us
    );
    println!(
        "| async-nats (native) | {:.0} | {:.0} | {:.1} |",
        theirs.rate,
        mb(theirs.rate),
        theirs.cpu_us
    );
    println!(
        "| ratio carrier/native | {:.2} | | {:.2} |",
        ours.rate / theirs.rate,
        ours.cpu_us / theirs.cpu_us
    );
    println!();
}

/// Both clients' figures over [`ROUNDS`] turns each: the carrier's for
/// each of its loads, in order.
struct Rounds {
    ours: Vec<Measured>,
    theirs: Measured,
}

/// The carrier under each of `loads` (latency sampled under the first) and
/// async-nats under the first, taking turns.
fn rounds(tokio: &tokio::runtime::Runtime, address: &str, loads: &[Load], latency: bool) -> Rounds {
    let mut ours: Vec<Vec<Measured>> = loads.iter().map(|_| Vec::new()).collect();
    let mut theirs = Vec::new();
    for _ in 0..ROUNDS {
        for (n, load) in loads.iter().enumerate() {
            let sampled = latency && n == 0;
            ours[n].push(tokio.block_on(plugin(address, *load, sampled)));
        }
        theirs.push(tokio.block_on(native(address, loads[0], latency)));
    }
    Rounds {
        ours: ours.into_iter().map(Measured::median).collect(),
        theirs: Measured::median(theirs),
    }
}

fn micros_since(start: Instant, payload: &[u8]) -> Duration {
    let sent = u64::from_le_bytes(payload[..8].try_into().unwrap_or([0; 8]));
    start.elapsed().saturating_sub(Duration::from_nanos(sent))
}

fn stamped(start: Instant) -> Bytes {
    let mut payload = vec![0u8; PAYLOAD];
    payload[..8].copy_from_slice(&(start.elapsed().as_nanos() as u64).to_le_bytes());
    Bytes::from(payload)
}

/// One client's run.
struct Measured {
    /// Messages per second, publish to delivery.
    rate: f64,
    /// CPU of this whole process (publisher and subscriber) per message,
    /// microseconds.
    cpu_us: f64,
    /// Latency samples (with `latency`).
    samples: Vec<Duration>,
}

impl Measured {
    /// The median rate and CPU of several runs, with every run's samples.
    fn median(runs: Vec<Measured>) -> Measured {
        Measured {
            rate: median(runs.iter().map(|r| r.rate).collect()),
            cpu_us: median(runs.iter().map(|r| r.cpu_us).collect()),
            samples: runs.into_iter().flat_map(|r| r.samples).collect(),
        }
    }
}

/// CPU microseconds of this process since `ticks`, per message.
fn cpu_us_per(ticks: u64, messages: usize) -> f64 {
    let spent = cpu_ticks(std::process::id()) - ticks;
    spent as f64 * 1e6 / clock_ticks_per_second() / messages.max(1) as f64
}

/// Throughput of `load`, then (with `latency`) latency samples.
async fn plugin(address: &str, load: Load, latency: bool) -> Measured {
    // The limits the server gives carriers (the policies' 100 ms call
    // deadline would rebuild a carrier descheduled on a busy machine).
    let runtime = Runtime::new(RuntimeConfig::for_carriers(None)).expect("runtime");
    let (bytes, sha256) = component("nats");
    let spec = ComponentSpec {
        name: "nats".into(),
        version: "bench".into(),
        bytes: bytes.into(),
        sha256,
    };
    let setup = CarrierSetup {
        config: serde_json::json!({"servers": [address]}).to_string(),
        database_url: None,
        allowed_endpoints: vec![switchyard_carrier::Endpoint::Tcp(address.to_string())],
    };
    let start = |n: &str| {
        let mut spec = spec.clone();
        spec.name = n.into();
        Carrier::start(spec, setup.clone(), runtime.clone()).expect("carrier")
    };
    let (publisher, subscriber): (Arc<Carrier>, Arc<Carrier>) = (start("pub"), start("sub"));
    assert!(
        publisher.wait_ready(Duration::from_secs(10)).await
            && subscriber.wait_ready(Duration::from_secs(10)).await
    );
    let (_s, mut messages) = subscriber
        .subscribe("bench.tp", None)
        .await
        .expect("subscribe");
    let (_l, mut on_latency) = subscriber
        .subscribe("bench.lat", None)
        .await
        .expect("subscribe");
    // Let the subscriptions reach the server.
    tokio::time::sleep(Duration::from_millis(200)).await;

    let ticks = cpu_ticks(std::process::id());
    let started = Instant::now();
    let payload = Bytes::from(vec![7u8; load.payload]);
    let sender = {
        let publisher = publisher.clone();
        tokio::spawn(async move {
            if load.publishing == Publishing::Queued {
                for _ in 0..load.messages {
                    publisher
                        .publish_queued("bench.tp", payload.clone())
                        .await
                        .expect("publish");
                }
                return;
            }
            for _ in 0..load.messages / load.window {
                let batch =
                    (0..load.window).map(|_| publisher.publish("bench.tp", payload.clone()));
                for result in futures::future::join_all(batch).await {
                    result.expect("publish");
                }
            }
        })
    };
    let mut received = 0;
    while received < load.messages {
        match tokio::time::timeout(Duration::from_secs(10), messages.recv()).await {
            Ok(Some(_)) => received += 1,
            _ => break,
        }
    }
    let rate = received as f64 / started.elapsed().as_secs_f64();
    sender.await.expect("sender");
    let cpu_us = cpu_us_per(ticks, received);

    let clock = Instant::now();
    let mut samples = Vec::with_capacity(LATENCY_SAMPLES);
    for _ in 0..LATENCY_SAMPLES * usize::from(latency) {
        publisher
            .publish("bench.lat", stamped(clock))
            .await
            .expect("publish");
        if let Ok(Some(m)) = tokio::time::timeout(Duration::from_secs(5), on_latency.recv()).await {
            samples.push(micros_since(clock, &m.payload));
        }
        tokio::time::sleep(LATENCY_INTERVAL).await;
    }
    Measured {
        rate,
        cpu_us,
        samples,
    }
}

async fn native(address: &str, load: Load, latency: bool) -> Measured {
    let publisher = async_nats::connect(address)
        .await
        .expect("async-nats connects");
    let subscriber = async_nats::connect(address)
        .await
        .expect("async-nats connects");
    let mut messages = subscriber.subscribe("bench.tp").await.expect("subscribe");
    let mut on_latency = subscriber.subscribe("bench.lat").await.expect("subscribe");
    subscriber.flush().await.expect("flush");

    let ticks = cpu_ticks(std::process::id());
    let started = Instant::now();
    let payload = Bytes::from(vec![7u8; load.payload]);
    let sender = {
        let publisher = publisher.clone();
        tokio::spawn(async move {
            for _ in 0..load.messages {
                publisher
                    .publish("bench.tp", payload.clone())
                    .await
                    .expect("publish");
            }
            publisher.flush().await.expect("flush");
        })
    };
    let mut received = 0;
    while received < load.messages {
        match tokio::time::timeout(Duration::from_secs(10), messages.next()).await {
            Ok(Some(_)) => received += 1,
            _ => break,
        }
    }
    let rate = received as f64 / started.elapsed().as_secs_f64();
    sender.await.expect("sender");
    let cpu_us = cpu_us_per(ticks, received);

    let clock = Instant::now();
    let mut samples = Vec::with_capacity(LATENCY_SAMPLES);
    for _ in 0..LATENCY_SAMPLES * usize::from(latency) {
        publisher
            .publish("bench.lat", stamped(clock))
            .await
            .expect("publish");
        publisher.flush().await.expect("flush");
        if let Ok(Some(m)) = tokio::time::timeout(Duration::from_secs(5), on_latency.next()).await {
            samples.push(micros_since(clock, &m.payload));
        }
        tokio::time::sleep(LATENCY_INTERVAL).await;
    }
    Measured {
        rate,
        cpu_us,
        samples,
    }
}
