//! One tunnel stream's throughput on loopback, each direction, beside a
//! bare TCP connection: the websocket, the session driver and the tunnel
//! component (which sees only frame headers), with the worker's `sink` and
//! `source` services at the far end.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use switchyard_carrier::tunnel::{Lane, TunnelSession, loopback};
use switchyard_carrier::{ComponentSpec, Stream};
use switchyard_runtime::{Runtime, RuntimeConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::anchors;
use crate::fixtures::component;
use crate::stats::{header, median};

/// Bytes per run.
const BYTES: usize = 512 * 1024 * 1024;
/// Runs per path; the median is reported.
const RUNS: usize = 5;
/// What the application hands the stream per write.
const WRITE: usize = 1024 * 1024;

pub fn spec() -> ComponentSpec {
    let (bytes, sha256) = component("tunnel");
    ComponentSpec {
        name: "tunnel".into(),
        version: "bench".into(),
        bytes: bytes.into(),
        sha256,
    }
}

pub fn run() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    runtime.block_on(async {
        let plugins = Runtime::new(RuntimeConfig::for_carriers(None)).expect("runtime");
        let services =
            switchyard_worker::services::acceptor(switchyard_worker::services::control_verbs());
        let (listener, address) = loopback::listen().await.expect("bind");
        let (frontend, _worker) =
            loopback::pair(&plugins, &spec(), listener, &address, Lane::Bulk, services)
                .await
                .expect("a session pair");
        // The paths take turns in each round, so that a change in the
        // machine's load (it is shared) falls on all three alike.
        let bare = bare_listener().await;
        let (mut tcp, mut up, mut down) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..RUNS {
            tcp.push(bare_tcp(bare).await);
            up.push(upload(&frontend).await);
            down.push(download(&frontend).await);
        }
        let (tcp, up, down) = (median(tcp), median(up), median(down));
        header(
            &format!(
                "Tunnel: one stream on loopback, {} MiB per run, median of {RUNS}",
                BYTES >> 20
            ),
            &["path", "MB/s", "ratio to bare TCP"],
        );
        println!("| bare TCP (64 KiB writes) | {tcp:.0} | 1.00 |");
        println!(
            "| tunnel, frontend to worker (bulk lane) | {up:.0} | {:.2} |",
            up / tcp
        );
        println!(
            "| tunnel, worker to frontend (bulk lane) | {down:.0} | {:.2} |",
            down / tcp
        );
        println!();
        for (direction, figure) in [("frontend to worker", up), ("worker to frontend", down)] {
            anchors::record(anchors::Row {
                what: format!("tunnel single stream, {direction}"),
                ours: format!("{figure:.0} MB/s"),
                anchor: format!("bare TCP loopback {tcp:.0} MB/s"),
                ratio: figure / tcp,
                aim: anchors::Aim::AtLeast(0.7),
            });
        }
        let _ = Arc::strong_count(&plugins);
    });
}

fn rate(bytes: usize, elapsed: Duration) -> f64 {
    bytes as f64 / elapsed.as_secs_f64() / 1e6
}

/// A loopback listener whose connections read `BYTES` and answer one byte.
async fn bare_listener() -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buffer = vec![0u8; 64 * 1024];
                let mut total = 0;
                while total < BYTES {
                    match socket.read(&mut buffer).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => total += n,
                    }
                }
                let _ = socket.write_all(b"k").await;
            });
        }
    });
    address
}

/// One run of bare TCP: `BYTES` in 64 KiB writes, until the reader's answer.
async fn bare_tcp(address: std::net::SocketAddr) -> f64 {
    let block = vec![7u8; 64 * 1024];
    let mut socket = tokio::net::TcpStream::connect(address).await.expect("dial");
    let _ = socket.set_nodelay(true);
    let started = Instant::now();
    for _ in 0..BYTES / block.len() {
        socket.write_all(&block).await.expect("write");
    }
    let mut ack = [0u8; 1];
    socket.read_exact(&mut ack).await.expect("ack");
    rate(BYTES, started.elapsed())
}

async fn upload(frontend: &TunnelSession) -> f64 {
    let data = Bytes::from(vec![7u8; WRITE]);
    let Stream {
        mut reader,
        mut writer,
    } = frontend.open("sink").await.expect("sink");
    let started = Instant::now();
    for _ in 0..BYTES / WRITE {
        writer.write(data.clone()).await.expect("write");
    }
    writer.finish();
    let answer = reader.read_to_end(64).await.expect("the sink's count");
    assert_eq!(answer, BYTES.to_string().as_bytes());
    rate(BYTES, started.elapsed())
}

async fn download(frontend: &TunnelSession) -> f64 {
    let Stream {
        mut reader,
        mut writer,
    } = frontend.open("source").await.expect("source");
    let started = Instant::now();
    writer
        .write(Bytes::from(BYTES.to_string()))
        .await
        .expect("request");
    writer.finish();
    let mut total = 0;
    while let Some(chunk) = reader.read().await {
        total += chunk.expect("data").len();
    }
    assert_eq!(total, BYTES);
    rate(BYTES, started.elapsed())
}
