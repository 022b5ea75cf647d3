//! The edge's limits against raw sockets on loopback, with short limits.

use std::time::Duration;

use axum::routing::{get, post};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

/// Bounds every wait of these tests: a limit that does not hold fails the
/// test instead of hanging it.
const BOUND: Duration = Duration::from_secs(10);

/// Serves a small app under `limits`; answers its address. `GET /` answers
/// `hello`; `POST /echo` answers the body's length, or 408 with the error
/// when the body failed.
async fn start(limits: EdgeLimits) -> std::net::SocketAddr {
    let app = Router::new().route("/", get(|| async { "hello" })).route(
        "/echo",
        post(|body: Body| async move {
            match axum::body::to_bytes(body, usize::MAX).await {
                Ok(bytes) => (axum::http::StatusCode::OK, bytes.len().to_string()),
                Err(e) => {
                    let stalled = BodyStalled::is(&e);
                    (
                        axum::http::StatusCode::REQUEST_TIMEOUT,
                        format!("stalled={stalled}"),
                    )
                }
            }
        }),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve(listener, app, limits, std::future::pending()));
    addr
}

/// Reads until the server closes the connection; what it sent.
async fn until_closed(socket: &mut TcpStream) -> String {
    let mut answer = Vec::new();
    tokio::time::timeout(BOUND, async {
        let mut buffer = [0u8; 1024];
        loop {
            match socket.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => answer.extend_from_slice(&buffer[..n]),
            }
        }
    })
    .await
    .expect("the server kept the connection open");
    String::from_utf8_lossy(&answer).into_owned()
}

fn quick() -> EdgeLimits {
    EdgeLimits {
        max_connections: 64,
        header_read: Duration::from_millis(300),
        body_idle: Duration::from_millis(300),
    }
}

#[tokio::test]
async fn a_connection_whose_headers_stall_is_closed() {
    let addr = start(quick()).await;
    let mut partial = TcpStream::connect(addr).await.unwrap();
    partial
        .write_all(b"GET / HTTP/1.1\r\nhost: x\r\n")
        .await
        .unwrap();
    let mut silent = TcpStream::connect(addr).await.unwrap();
    until_closed(&mut partial).await;
    until_closed(&mut silent).await;
    // A whole request is answered as usual.
    let mut whole = TcpStream::connect(addr).await.unwrap();
    whole
        .write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let answer = until_closed(&mut whole).await;
    assert!(
        answer.starts_with("HTTP/1.1 200") && answer.ends_with("hello"),
        "{answer}"
    );
}

#[tokio::test]
async fn a_stalled_body_is_answered_and_the_connection_closed() {
    let addr = start(quick()).await;
    let mut short = TcpStream::connect(addr).await.unwrap();
    // Ten bytes announced, three sent.
    short
        .write_all(b"POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length: 10\r\n\r\nabc")
        .await
        .unwrap();
    let answer = until_closed(&mut short).await;
    assert!(
        answer.starts_with("HTTP/1.1 408") && answer.ends_with("stalled=true"),
        "{answer}"
    );
    // A body that keeps coming, slower than all of it within the idle
    // timeout but never silent that long, is read whole.
    let addr = start(EdgeLimits {
        body_idle: Duration::from_secs(2),
        ..quick()
    })
    .await;
    let mut slow = TcpStream::connect(addr).await.unwrap();
    slow.write_all(
        b"POST /echo HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-length: 4\r\n\r\n",
    )
    .await
    .unwrap();
    for byte in b"abcd" {
        // The client's pace, not a wait for the server.
        tokio::time::sleep(Duration::from_millis(800)).await;
        slow.write_all(&[*byte]).await.unwrap();
    }
    let answer = until_closed(&mut slow).await;
    assert!(
        answer.starts_with("HTTP/1.1 200") && answer.ends_with('4'),
        "{answer}"
    );
}

#[tokio::test]
async fn connections_beyond_the_limit_wait_for_a_free_slot() {
    let addr = start(EdgeLimits {
        max_connections: 2,
        header_read: BOUND * 3,
        body_idle: BOUND * 3,
    })
    .await;
    let request = b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n";
    // Two connections hold both slots, open and idle.
    let mut first = TcpStream::connect(addr).await.unwrap();
    let held = TcpStream::connect(addr).await.unwrap();
    first
        .write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let mut answered = [0u8; 12];
    first.read_exact(&mut answered).await.unwrap();
    assert_eq!(&answered, b"HTTP/1.1 200");
    // The third is connected by the kernel but not served...
    let mut third = TcpStream::connect(addr).await.unwrap();
    third.write_all(request).await.unwrap();
    let mut byte = [0u8; 1];
    let early = tokio::time::timeout(Duration::from_millis(500), third.read(&mut byte)).await;
    assert!(early.is_err(), "a third connection was served: {early:?}");
    // ... until a slot frees.
    drop(first);
    let answer = until_closed(&mut third).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    drop(held);
}
