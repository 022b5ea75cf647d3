//! Lanes behind a shaped link (1 Gbit/s, 10 ms each way, one queue per
//! direction that every connection shares): a 256 MiB transfer from the
//! worker while the frontend makes a small call every 5 ms whose answer
//! travels the transfer's way. The call's p99 on the transfer's own session,
//! on the inference lane with the transfer on the bulk lane, and on a TCP
//! connection of its own.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use switchyard_carrier::Stream;
use switchyard_carrier::stream_seam::Acceptor;
use switchyard_carrier::tunnel::{Lane, TunnelSession, loopback};
use switchyard_runtime::{Runtime, RuntimeConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

use crate::shaper::Link;
use crate::stats::{header, percentiles};
use crate::tunnel::spec;

const RATE: f64 = 1e9 / 8.0;
const DELAY: Duration = Duration::from_millis(10);
/// The shared queue of each direction.
const QUEUE: usize = 1024 * 1024;
const TRANSFER: usize = 256 * 1024 * 1024;
const CALL_EVERY: Duration = Duration::from_millis(5);
const CALL_BYTES: usize = 64;

pub fn run() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    runtime.block_on(async {
        let plugins = Runtime::new(RuntimeConfig::for_carriers(None)).expect("runtime");
        header(
            "Lanes: a small call every 5 ms during a 256 MiB transfer, 1 Gbit/s and 10 ms each way, one shared queue (1 MiB)",
            &["the call travels on", "calls", "p50 ms", "p99 ms", "transfer MB/s"],
        );
        let idle = scenario(&plugins, Placement::OwnTcp, false).await;
        row("its own TCP connection, no transfer (the link's floor)", idle);
        row("the transfer's session", scenario(&plugins, Placement::SameSession, true).await);
        row(
            "the inference lane (transfer on the bulk lane)",
            scenario(&plugins, Placement::InferenceLane, true).await,
        );
        row(
            "its own TCP connection (transfer on the bulk lane)",
            scenario(&plugins, Placement::OwnTcp, true).await,
        );
        println!();
    });
}

fn row(name: &str, (calls, p50, p99, rate): (usize, f64, f64, f64)) {
    println!(
        "| {name} | {calls} | {:.1} | {:.1} | {rate:.0} |",
        p50 / 1e3,
        p99 / 1e3
    );
}

#[derive(Clone, Copy)]
enum Placement {
    SameSession,
    InferenceLane,
    OwnTcp,
}

fn services() -> Acceptor {
    switchyard_worker::services::acceptor(switchyard_worker::services::control_verbs())
}

/// A session pair whose websocket crosses `link`.
async fn shaped_pair(plugins: &Arc<Runtime>, link: &Arc<Link>, lane: Lane) -> TunnelSession {
    let (listener, address) = loopback::listen().await.expect("bind");
    let through = link.proxy(address).await;
    let (frontend, worker) = loopback::pair(plugins, &spec(), listener, &through, lane, services())
        .await
        .expect("a session pair");
    // The worker's session lives as long as its websocket; keep it open.
    std::mem::forget(worker);
    frontend
}

/// Where the small call travels.
enum Caller {
    Stream(Stream),
    Tcp(tokio::net::TcpStream),
}

impl Caller {
    /// One round trip: write, read the echo back.
    async fn call(&mut self, payload: &Bytes) -> Duration {
        let started = Instant::now();
        match self {
            Caller::Stream(stream) => {
                stream.writer.write(payload.clone()).await.expect("call");
                let mut got = 0;
                while got < payload.len() {
                    got += stream
                        .reader
                        .read()
                        .await
                        .expect("echo")
                        .expect("echo")
                        .len();
                }
            }
            Caller::Tcp(socket) => {
                socket.write_all(payload).await.expect("call");
                let mut echo = vec![0u8; payload.len()];
                socket.read_exact(&mut echo).await.expect("echo");
            }
        }
        started.elapsed()
    }
}

/// A TCP connection the worker side dials through the link (as workers dial
/// out), echoing; the frontend side makes the calls on it.
async fn tcp_call(link: &Arc<Link>) -> Caller {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let through = link
        .proxy(listener.local_addr().expect("address").to_string())
        .await;
    let mut worker = tokio::net::TcpStream::connect(through).await.expect("dial");
    let _ = worker.set_nodelay(true);
    tokio::spawn(async move {
        let mut buffer = vec![0u8; 4096];
        loop {
            match worker.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if worker.write_all(&buffer[..n]).await.is_err() {
                        return;
                    }
                }
            }
        }
    });
    let (frontend, _) = listener.accept().await.expect("accept");
    let _ = frontend.set_nodelay(true);
    Caller::Tcp(frontend)
}

async fn scenario(
    plugins: &Arc<Runtime>,
    placement: Placement,
    transfer: bool,
) -> (usize, f64, f64, f64) {
    let link = Link::new(RATE, DELAY, QUEUE);
    let bulk = match placement {
        Placement::SameSession => shaped_pair(plugins, &link, Lane::Inference).await,
        _ => shaped_pair(plugins, &link, Lane::Bulk).await,
    };
    let mut caller = match placement {
        Placement::SameSession => Caller::Stream(bulk.open("echo").await.expect("echo")),
        Placement::InferenceLane => {
            let inference = shaped_pair(plugins, &link, Lane::Inference).await;
            Caller::Stream(inference.open("echo").await.expect("echo"))
        }
        Placement::OwnTcp => tcp_call(&link).await,
    };
    let (done_tx, done) = watch::channel(false);
    let started = Instant::now();
    let transfer_task = tokio::spawn(async move {
        let mut received = 0;
        if transfer {
            let Stream {
                mut reader,
                mut writer,
            } = bulk.open("source").await.expect("source");
            writer
                .write(Bytes::from(TRANSFER.to_string()))
                .await
                .expect("request");
            writer.finish();
            while let Some(chunk) = reader.read().await {
                received += chunk.expect("data").len();
            }
        } else {
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
        let _ = done_tx.send(true);
        received
    });
    let payload = Bytes::from(vec![1u8; CALL_BYTES]);
    let mut samples = Vec::new();
    let mut tick = tokio::time::interval(CALL_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while !*done.borrow() {
        tick.tick().await;
        samples.push(caller.call(&payload).await);
    }
    let received = transfer_task.await.expect("transfer");
    let rate = received as f64 / started.elapsed().as_secs_f64() / 1e6;
    let (p50, p99) = percentiles(&mut samples);
    (samples.len(), p50, p99, rate)
}
