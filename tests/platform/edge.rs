//! The network edge of a replica: slow clients are cut off, blob uploads
//! are bounded, and the database pool speaks TLS as `sslmode` asks (more in `tls.rs`).

use std::time::Duration;

use reqwest::{Method, StatusCode};
use switchyard_store::Store;
use switchyard_tests::ADMIN_TOKEN;
use switchyard_tests::db::fresh_database;
use switchyard_tests::replica::Replica;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Bounds every wait: a limit that does not hold fails instead of hanging.
const BOUND: Duration = Duration::from_secs(20);

/// Reads until the replica closes the connection; what it sent.
async fn until_closed(socket: &mut TcpStream) -> String {
    let mut answer = Vec::new();
    tokio::time::timeout(BOUND, async {
        let mut buffer = [0u8; 4096];
        loop {
            match socket.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => answer.extend_from_slice(&buffer[..n]),
            }
        }
    })
    .await
    .expect("the replica kept the connection open");
    String::from_utf8_lossy(&answer).into_owned()
}

fn address(replica: &Replica) -> String {
    replica.url.trim_start_matches("http://").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_are_cut_off_and_blob_uploads_are_bounded() {
    let database_url = fresh_database().await;
    let data_dir = tempfile::tempdir().unwrap();
    let replica = Replica::with(&database_url, data_dir.path(), |config| {
        config.edge.header_read = Duration::from_millis(1000);
        config.edge.body_idle = Duration::from_millis(500);
        config.max_blob_bytes = 1000;
    })
    .await;

    // Headers that never finish: closed after the header read timeout.
    let mut slow = TcpStream::connect(address(&replica)).await.unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n")
        .await
        .unwrap();
    until_closed(&mut slow).await;

    // A blob whose body stops short: 408 `body_timeout`, nothing kept.
    let digest = "a".repeat(64);
    let mut short = TcpStream::connect(address(&replica)).await.unwrap();
    short
        .write_all(
            format!(
                "PUT /api/library/blobs/{digest} HTTP/1.1\r\nhost: x\r\n\
                 authorization: Bearer {ADMIN_TOKEN}\r\ncontent-length: 100\r\n\r\nabc"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let answer = until_closed(&mut short).await;
    assert!(
        answer.starts_with("HTTP/1.1 408") && answer.contains("body_timeout"),
        "{answer}"
    );

    // Over the size cap: 413 `too_large`, declared or streamed.
    let big = vec![7u8; 1001];
    let (status, body) = replica
        .call(
            replica
                .admin(Method::PUT, &format!("/api/library/blobs/{digest}"))
                .body(big.clone()),
        )
        .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    assert_eq!(body["error"]["code"], "too_large");
    let chunks = futures::stream::iter(
        big.chunks(100)
            .map(|c| Ok::<_, std::io::Error>(bytes::Bytes::copy_from_slice(c)))
            .collect::<Vec<_>>(),
    );
    let (status, body) = replica
        .call(
            replica
                .admin(Method::PUT, &format!("/api/library/blobs/{digest}"))
                .body(reqwest::Body::wrap_stream(chunks)),
        )
        .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    let incoming = std::fs::read_dir(data_dir.path().join("library/incoming")).unwrap();
    assert_eq!(
        incoming.count(),
        0,
        "a refused upload left a temporary file"
    );
    replica.stop().await;
}

/// `url` with `sslmode` set, in either form.
fn with_sslmode(url: &str, mode: &str) -> String {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let joiner = if url.contains('?') { '&' } else { '?' };
        format!("{url}{joiner}sslmode={mode}")
    } else {
        format!("{url} sslmode={mode}")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pool_honours_sslmode() {
    // The suite runs against a PostgreSQL on a Unix socket (never TLS), then
    // again against one that accepts only TLS (scripts/test.sh).
    let database_url = fresh_database().await;
    let tls_only: bool = switchyard_tests::db::connect(&database_url)
        .await
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    let (accepted, refused, why): (&[&str], &[&str], &str) = match tls_only {
        false => (
            &["disable", "prefer", "allow"],
            &["require", "verify-full"],
            "does not support TLS",
        ),
        true => (
            &["prefer", "allow", "require", "verify-full"],
            &["disable"],
            "no encryption",
        ),
    };
    for mode in accepted {
        let store = Store::connect(&with_sslmode(&database_url, mode))
            .await
            .unwrap_or_else(|e| panic!("sslmode={mode}: {e}"));
        store.ping().await.unwrap();
    }
    for mode in refused {
        let refused = Store::connect(&with_sslmode(&database_url, mode)).await;
        let message = refused
            .expect_err("the server refuses this mode")
            .to_string();
        assert!(message.contains(why), "sslmode={mode}: {message}");
    }
}
