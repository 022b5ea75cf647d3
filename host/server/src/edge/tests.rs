//! The edge's limits against raw sockets on loopback, with short limits.

use std::time::Duration;

use axum::body::Body;
use axum::routing::{get, post};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

/// Bounds every wait of these tests: a limit that does not hold fails the
/// test instead of hanging it.
const BOUND: Duration = Duration::from_secs(10);

/// Serves a small app under `limits`; answers its address and a receiver
/// that hears of each `/echo` request its handler started. `GET /` answers
/// `hello`; `GET /prove` proves its connection; `POST /early` answers 401
/// without reading its body; `POST /echo` answers the body's length, or
/// 408 with the error when the body failed.
async fn start(
    limits: EdgeLimits,
) -> (
    std::net::SocketAddr,
    tokio::sync::mpsc::UnboundedReceiver<()>,
) {
    let (entered, hear) = tokio::sync::mpsc::unbounded_channel();
    let app = Router::new()
        .route("/", get(|| async { "hello" }))
        .route(
            "/prove",
            get(|connection: ThisConnection| async move {
                connection.prove();
                "proven"
            }),
        )
        .route(
            "/early",
            post(|| async { (axum::http::StatusCode::UNAUTHORIZED, "no") }),
        )
        .route(
            "/echo",
            post(move |body: Body| async move {
                let _ = entered.send(());
                match axum::body::to_bytes(body, usize::MAX).await {
                    Ok(bytes) => (axum::http::StatusCode::OK, bytes.len().to_string()),
                    Err(e) => {
                        let timeout = BodyTimeout::is(&e);
                        (
                            axum::http::StatusCode::REQUEST_TIMEOUT,
                            format!("timeout={timeout} {e}"),
                        )
                    }
                }
            }),
        );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve(listener, app, limits, std::future::pending()));
    (addr, hear)
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
        max_unproven: 64,
        max_probes: 8,
        header_read: Duration::from_millis(300),
        body_idle: Duration::from_millis(300),
        body_grace: Duration::from_secs(5),
        body_min_rate: 1000,
    }
}

#[tokio::test]
async fn a_connection_whose_headers_stall_is_closed() {
    let (addr, _) = start(quick()).await;
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
    let (addr, _) = start(quick()).await;
    let mut short = TcpStream::connect(addr).await.unwrap();
    // Ten bytes announced, three sent.
    short
        .write_all(b"POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length: 10\r\n\r\nabc")
        .await
        .unwrap();
    let answer = until_closed(&mut short).await;
    assert!(
        answer.starts_with("HTTP/1.1 408")
            && answer.contains("timeout=true the request body sent nothing"),
        "{answer}"
    );
    // A body that keeps coming, slower than all of it within the idle
    // timeout but never silent that long, is read whole.
    let (addr, _) = start(EdgeLimits {
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
async fn a_body_that_trickles_is_cut_off_after_the_grace() {
    // Never silent for the idle timeout, but far below the rate.
    let (addr, _) = start(EdgeLimits {
        body_idle: BOUND * 3,
        body_grace: Duration::from_millis(600),
        body_min_rate: 1000,
        ..quick()
    })
    .await;
    let mut trickle = TcpStream::connect(addr).await.unwrap();
    trickle
        .write_all(b"POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n")
        .await
        .unwrap();
    let answer = tokio::time::timeout(BOUND, async {
        let mut answer = Vec::new();
        let mut buffer = [0u8; 1024];
        loop {
            // The client's pace, not a wait for the server.
            tokio::time::sleep(Duration::from_millis(100)).await;
            let _ = trickle.write_all(b"x").await;
            match tokio::time::timeout(Duration::from_millis(1), trickle.read(&mut buffer)).await {
                Ok(Ok(0)) | Ok(Err(_)) => break,
                Ok(Ok(n)) => answer.extend_from_slice(&buffer[..n]),
                Err(_) => {}
            }
        }
        String::from_utf8_lossy(&answer).into_owned()
    })
    .await
    .expect("the trickling body was never cut off");
    assert!(
        answer.starts_with("HTTP/1.1 408")
            && answer.contains("timeout=true the request body came slower"),
        "{answer}"
    );
}

#[tokio::test]
async fn an_answer_given_before_the_body_was_read_closes_the_connection() {
    let (addr, _) = start(quick()).await;
    // The body is announced but not sent yet: hyper will not read it for
    // no one, so the answer must say the connection ends.
    let mut early = TcpStream::connect(addr).await.unwrap();
    early
        .write_all(b"POST /early HTTP/1.1\r\nhost: x\r\ncontent-length: 10\r\n\r\n")
        .await
        .unwrap();
    let answer = until_closed(&mut early).await.to_ascii_lowercase();
    assert!(
        answer.starts_with("http/1.1 401") && answer.contains("connection: close"),
        "{answer}"
    );
    // Without a body the connection is kept for the next request.
    let mut kept = TcpStream::connect(addr).await.unwrap();
    kept.write_all(b"POST /early HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n")
        .await
        .unwrap();
    let mut head = [0u8; 12];
    kept.read_exact(&mut head).await.unwrap();
    kept.write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let rest = until_closed(&mut kept).await.to_ascii_lowercase();
    assert!(
        rest.contains("http/1.1 200") && rest.ends_with("hello"),
        "{rest}"
    );
}

#[tokio::test]
async fn a_newcomer_closes_the_longest_idle_unproven_connection_first() {
    let (addr, mut entered) = start(EdgeLimits {
        max_unproven: 2,
        header_read: BOUND * 3,
        body_idle: BOUND * 3,
        body_grace: BOUND * 3,
        ..quick()
    })
    .await;
    // The older one is busy on a body, the younger one idle.
    let mut busy = TcpStream::connect(addr).await.unwrap();
    busy.write_all(b"POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\na")
        .await
        .unwrap();
    entered.recv().await.unwrap();
    let mut idle = TcpStream::connect(addr).await.unwrap();
    // A third: the idle one goes, although it is younger.
    let mut third = TcpStream::connect(addr).await.unwrap();
    until_closed(&mut idle).await;
    // With none idle, the one busy longest goes.
    third
        .write_all(b"POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\na")
        .await
        .unwrap();
    entered.recv().await.unwrap();
    let mut fourth = TcpStream::connect(addr).await.unwrap();
    until_closed(&mut busy).await;
    fourth
        .write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let answer = until_closed(&mut fourth).await;
    assert!(answer.ends_with("hello"), "{answer}");
    third.write_all(b"b").await.unwrap();
    let mut answer = [0u8; 12];
    third.read_exact(&mut answer).await.unwrap();
    assert_eq!(&answer, b"HTTP/1.1 200");
}

#[tokio::test]
async fn proven_connections_are_kept_and_only_they_make_the_edge_wait() {
    let (addr, _) = start(EdgeLimits {
        max_connections: 2,
        max_unproven: 2,
        header_read: BOUND * 3,
        body_idle: BOUND * 3,
        ..quick()
    })
    .await;
    async fn proven(addr: std::net::SocketAddr) -> TcpStream {
        let mut socket = TcpStream::connect(addr).await.unwrap();
        socket
            .write_all(b"GET /prove HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let mut answered = [0u8; 12];
        socket.read_exact(&mut answered).await.unwrap();
        assert_eq!(&answered, b"HTTP/1.1 200");
        socket
    }
    let request = b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n";
    // One proven, one anonymous: a newcomer takes the anonymous one's place.
    let first = proven(addr).await;
    let mut anonymous = TcpStream::connect(addr).await.unwrap();
    let mut newcomer = TcpStream::connect(addr).await.unwrap();
    until_closed(&mut anonymous).await;
    newcomer.write_all(request).await.unwrap();
    assert!(until_closed(&mut newcomer).await.ends_with("hello"));
    // Both proven: the third is connected by the kernel but not served...
    let second = proven(addr).await;
    let mut third = TcpStream::connect(addr).await.unwrap();
    third.write_all(request).await.unwrap();
    let mut byte = [0u8; 1];
    let early = tokio::time::timeout(Duration::from_millis(500), third.read(&mut byte)).await;
    assert!(early.is_err(), "a third connection was served: {early:?}");
    // ... until a slot frees.
    drop(first);
    let answer = until_closed(&mut third).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    drop(second);
}
