//! The nats carrier beside a native client: publish-to-delivery throughput
//! and latency of small messages through the plugin (host reactor, engine
//! thread, component), and the same through async-nats, on one nats-server;
//! then the throughput of 64 KiB messages, whose payloads the host moves
//! beside the guest (`switchyard:carrier@0.3.0`).

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use switchyard_carrier::{Carrier, CarrierSetup, ComponentSpec};
use switchyard_runtime::{Runtime, RuntimeConfig};

use crate::fixtures::component;
use crate::stats::{header, percentiles};

const MESSAGES: usize = 100_000;
const PAYLOAD: usize = 64;
/// Messages in flight at once while measuring throughput.
const WINDOW: usize = 1_000;
const LATENCY_SAMPLES: usize = 5_000;
/// The rate at which latency is sampled (one message every 100 us).
const LATENCY_INTERVAL: Duration = Duration::from_micros(100);

/// The large messages: a payload the host moves beside the guest, and
/// fewer of them, so that the run stays a few seconds.
const LARGE_PAYLOAD: usize = 64 * 1024;
const LARGE_MESSAGES: usize = 20_000;
const LARGE_WINDOW: usize = 100;

/// One throughput run: how many messages of what size, how many in flight.
#[derive(Clone, Copy)]
struct Load {
    messages: usize,
    payload: usize,
    window: usize,
}

const SMALL: Load = Load {
    messages: MESSAGES,
    payload: PAYLOAD,
    window: WINDOW,
};

const LARGE: Load = Load {
    messages: LARGE_MESSAGES,
    payload: LARGE_PAYLOAD,
    window: LARGE_WINDOW,
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
    let (plugin_rate, mut plugin_latency) = tokio.block_on(plugin(&address, SMALL, true));
    let (native_rate, mut native_latency) = tokio.block_on(native(&address, SMALL, true));
    let (p50, p99) = percentiles(&mut plugin_latency);
    let (n50, n99) = percentiles(&mut native_latency);
    header(
        &format!("NATS: {PAYLOAD}-byte messages, publish to delivery, one nats-server"),
        &[
            "client",
            "throughput (msg/s)",
            "latency p50 (us)",
            "latency p99 (us)",
        ],
    );
    println!("| nats carrier (component) | {plugin_rate:.0} | {p50:.0} | {p99:.0} |");
    println!("| async-nats (native) | {native_rate:.0} | {n50:.0} | {n99:.0} |");
    println!(
        "| ratio carrier/native | {:.2} | {:.2} | {:.2} |",
        plugin_rate / native_rate,
        p50 / n50,
        p99 / n99
    );
    println!();

    let (plugin_rate, _) = tokio.block_on(plugin(&address, LARGE, false));
    let (native_rate, _) = tokio.block_on(native(&address, LARGE, false));
    let mb = |rate: f64| rate * LARGE_PAYLOAD as f64 / 1e6;
    header(
        &format!(
            "NATS: {} KiB messages, publish to delivery, one nats-server",
            LARGE_PAYLOAD / 1024
        ),
        &["client", "throughput (msg/s)", "throughput (MB/s)"],
    );
    println!(
        "| nats carrier (component) | {plugin_rate:.0} | {:.0} |",
        mb(plugin_rate)
    );
    println!(
        "| async-nats (native) | {native_rate:.0} | {:.0} |",
        mb(native_rate)
    );
    println!(
        "| ratio carrier/native | {:.2} | |",
        plugin_rate / native_rate
    );
    println!();
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

/// Throughput of `load`, then (with `latency`) latency samples.
async fn plugin(address: &str, load: Load, latency: bool) -> (f64, Vec<Duration>) {
    let runtime = Runtime::new(RuntimeConfig::default()).expect("runtime");
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

    let started = Instant::now();
    let payload = Bytes::from(vec![7u8; load.payload]);
    let sender = {
        let publisher = publisher.clone();
        tokio::spawn(async move {
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
    (rate, samples)
}

async fn native(address: &str, load: Load, latency: bool) -> (f64, Vec<Duration>) {
    let publisher = async_nats::connect(address)
        .await
        .expect("async-nats connects");
    let subscriber = async_nats::connect(address)
        .await
        .expect("async-nats connects");
    let mut messages = subscriber.subscribe("bench.tp").await.expect("subscribe");
    let mut on_latency = subscriber.subscribe("bench.lat").await.expect("subscribe");
    subscriber.flush().await.expect("flush");

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
    (rate, samples)
}
