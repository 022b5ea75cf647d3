//! Fetches from a small HTTP server on a local port: no internet.

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::StatusCode;
use axum::routing::get;
use bytes::Bytes;
use sha2::{Digest, Sha256};

use super::*;

fn weights() -> Vec<u8> {
    (0..300_000u32).map(|i| (i % 251) as u8).collect()
}

fn digest(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Serves `/model.gguf`, `/chunked` (no length), `/stall` (a head, then
/// nothing) and 404 elsewhere; answers its base URL.
async fn serve() -> String {
    let app = Router::new()
        .route("/model.gguf", get(|| async { weights() }))
        .route(
            "/chunked",
            get(|| async {
                let parts: Vec<Result<Bytes, std::io::Error>> = weights()
                    .chunks(10_000)
                    .map(|c| Ok(Bytes::copy_from_slice(c)))
                    .collect();
                Body::from_stream(futures::stream::iter(parts))
            }),
        )
        .route(
            "/stall",
            get(|| async {
                let first = futures::stream::iter([Ok::<_, std::io::Error>(Bytes::from_static(
                    b"a start",
                ))]);
                Body::from_stream(first.chain(futures::stream::pending()))
            }),
        )
        .fallback(|| async { (StatusCode::NOT_FOUND, "no such file") });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

fn url(base: &str, path: &str) -> Url {
    parse_url(&format!("{base}{path}")).unwrap()
}

/// Nothing under the library: no blob, no temporary file.
fn empty(dir: &std::path::Path) -> bool {
    ["blobs/sha256", "incoming"]
        .iter()
        .all(|sub| std::fs::read_dir(dir.join(sub)).unwrap().next().is_none())
}

#[tokio::test]
async fn a_file_streams_into_the_library_with_progress() {
    let base = serve().await;
    let dir = tempfile::tempdir().unwrap();
    let library = Library::open(dir.path()).unwrap();
    let sha = digest(&weights());
    let source = open(&url(&base, "/model.gguf"), Limits::default())
        .await
        .unwrap();
    assert_eq!(source.total(), Some(weights().len() as u64));
    let mut heard = Vec::new();
    let stored = source
        .into_library(&library, &sha, |n| heard.push(n))
        .await
        .unwrap();
    assert_eq!(stored, (Stored::New, weights().len() as u64));
    assert_eq!(std::fs::read(library.blob_path(&sha)).unwrap(), weights());
    assert_eq!(heard.last(), Some(&(weights().len() as u64)));
    assert!(heard.windows(2).all(|w| w[0] < w[1]), "{heard:?}");
}

#[tokio::test]
async fn a_digest_mismatch_keeps_nothing() {
    let base = serve().await;
    let dir = tempfile::tempdir().unwrap();
    let library = Library::open(dir.path()).unwrap();
    let declared = digest(b"other bytes");
    let source = open(&url(&base, "/model.gguf"), Limits::default())
        .await
        .unwrap();
    let failed = source.into_library(&library, &declared, |_| {}).await;
    assert!(
        matches!(
            failed,
            Err(FetchError::Library(LibraryError::DigestMismatch { .. }))
        ),
        "{failed:?}"
    );
    assert!(empty(dir.path()));
}

#[tokio::test]
async fn answers_other_than_2xx_and_bad_urls_fail_before_any_byte() {
    let base = serve().await;
    let missing = open(&url(&base, "/nope.gguf"), Limits::default()).await;
    assert!(
        matches!(&missing, Err(FetchError::Status { status, .. }) if status.as_u16() == 404),
        "{missing:?}"
    );
    assert!(matches!(
        parse_url("ftp://example.com/m.gguf"),
        Err(FetchError::InvalidUrl(_))
    ));
    assert!(matches!(
        parse_url("not a url"),
        Err(FetchError::InvalidUrl(_))
    ));
    // A port nobody listens on.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let refused = open(&url(&format!("http://{closed}"), "/m"), Limits::default()).await;
    assert!(
        matches!(refused, Err(FetchError::Unreachable { .. })),
        "{refused:?}"
    );
}

#[tokio::test]
async fn the_size_limit_holds_with_and_without_a_length() {
    let base = serve().await;
    let dir = tempfile::tempdir().unwrap();
    let library = Library::open(dir.path()).unwrap();
    let small = Limits {
        max_bytes: 100_000,
        ..Limits::default()
    };
    let declared = open(&url(&base, "/model.gguf"), small).await;
    assert!(
        matches!(declared, Err(FetchError::TooLarge { limit: 100_000, .. })),
        "{declared:?}"
    );
    let source = open(&url(&base, "/chunked"), small).await.unwrap();
    assert_eq!(source.total(), None);
    let streamed = source
        .into_library(&library, &digest(&weights()), |_| {})
        .await;
    assert!(
        matches!(streamed, Err(FetchError::TooLarge { .. })),
        "{streamed:?}"
    );
    assert!(empty(dir.path()));
}

#[tokio::test]
async fn a_stalled_body_times_out_and_keeps_nothing() {
    let base = serve().await;
    let dir = tempfile::tempdir().unwrap();
    let library = Library::open(dir.path()).unwrap();
    let quick = Limits {
        stall: Duration::from_millis(300),
        ..Limits::default()
    };
    let source = open(&url(&base, "/stall"), quick).await.unwrap();
    let stalled = source.into_library(&library, &digest(b"x"), |_| {}).await;
    assert!(
        matches!(stalled, Err(FetchError::Timeout { .. })),
        "{stalled:?}"
    );
    assert!(empty(dir.path()));
}

#[test]
fn urls_are_shown_without_credentials_or_query() {
    let url = parse_url("https://user:secret@hub.example/m/model.gguf?token=abc#x").unwrap();
    assert_eq!(shown(&url), "https://hub.example/m/model.gguf");
    assert_eq!(file_name(&url).as_deref(), Some("model.gguf"));
    assert_eq!(file_name(&parse_url("https://hub.example/").unwrap()), None);
}
