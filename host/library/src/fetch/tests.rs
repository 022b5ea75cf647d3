//! Fetches from a small HTTP server on a local port: no internet. The
//! server is on loopback, so these fetches name it in the allow-list
//! ([`local`]); without it they are refused.

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
/// nothing), `/to?url=U` (a redirect to U) and 404 elsewhere; answers its
/// base URL.
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
        .route(
            "/to",
            get(
                |axum::extract::Query(q): axum::extract::Query<
                    std::collections::HashMap<String, String>,
                >| async move { axum::response::Redirect::temporary(&q["url"]) },
            ),
        )
        .fallback(|| async { (StatusCode::NOT_FOUND, "no such file") });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

/// The allow-list that lets a fetch reach the test server on loopback.
fn local() -> AllowList {
    AllowList::parse(["127.0.0.1"]).unwrap()
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
    let source = open(&url(&base, "/model.gguf"), &local(), Limits::default())
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
    let source = open(&url(&base, "/model.gguf"), &local(), Limits::default())
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
    // What the bytes do hash to is not told: it would be the digest of a
    // page the caller cannot read.
    let message = failed.unwrap_err().to_string();
    assert!(!message.contains(&digest(&weights())), "{message}");
    assert!(empty(dir.path()));
}

fn refused(fetched: &Result<Source, FetchError>) -> bool {
    matches!(fetched, Err(FetchError::NotAllowed { .. }))
}

#[tokio::test]
async fn loopback_is_refused_unless_allowed_by_literal_or_by_name() {
    let base = serve().await;
    let port = base.rsplit(':').next().unwrap();
    let none = AllowList::default();
    let literal = open(&url(&base, "/model.gguf"), &none, Limits::default()).await;
    assert!(refused(&literal), "{literal:?}");
    // A name that resolves to loopback is refused when it resolves.
    let named = url(&format!("http://localhost:{port}"), "/model.gguf");
    let by_name = open(&named, &none, Limits::default()).await;
    assert!(refused(&by_name), "{by_name:?}");
    assert!(
        matches!(by_name.unwrap_err(), FetchError::NotAllowed { .. }),
        "a refused address is NotAllowed (answered as `address_not_allowed`)"
    );
    // Allowed on another port only: still refused.
    let elsewhere = AllowList::parse(["127.0.0.1:1"]).unwrap();
    let other_port = open(&url(&base, "/model.gguf"), &elsewhere, Limits::default()).await;
    assert!(refused(&other_port), "{other_port:?}");
    // Named by the operator: fetched.
    let allowed = AllowList::parse(["localhost"]).unwrap();
    assert!(open(&named, &allowed, Limits::default()).await.is_ok());
}

#[tokio::test]
async fn a_redirect_to_a_non_public_address_is_refused() {
    let base = serve().await;
    let inner = serve().await;
    let port = base.rsplit(':').next().unwrap();
    // Only the first server is allowed; the redirect leads elsewhere.
    let allow = AllowList::parse([format!("127.0.0.1:{port}")]).unwrap();
    let inner_port = inner.rsplit(':').next().unwrap();
    for target in [
        format!("{inner}/model.gguf"),
        format!("http://localhost:{inner_port}/model.gguf"),
        format!("http://[::1]:{inner_port}/model.gguf"),
        "http://169.254.169.254/latest/meta-data".to_string(),
    ] {
        let hop = url(&base, &format!("/to?url={target}"));
        let fetched = open(&hop, &allow, Limits::default()).await;
        assert!(refused(&fetched), "{target}: {fetched:?}");
    }
    // A redirect that stays on the allowed host is followed.
    let hop = url(&base, &format!("/to?url={base}/model.gguf"));
    let followed = open(&hop, &allow, Limits::default()).await.unwrap();
    assert_eq!(followed.total(), Some(weights().len() as u64));
}

#[tokio::test]
async fn answers_other_than_2xx_and_bad_urls_fail_before_any_byte() {
    let base = serve().await;
    let missing = open(&url(&base, "/nope.gguf"), &local(), Limits::default()).await;
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
    let refused = open(
        &url(&format!("http://{closed}"), "/m"),
        &local(),
        Limits::default(),
    )
    .await;
    assert!(
        matches!(refused, Err(FetchError::Unreachable { .. })),
        "{refused:?}"
    );
    // A closed port reads like any other unreachable source: no probe.
    assert_eq!(
        refused.unwrap_err().to_string(),
        format!("cannot reach http://{closed}/m")
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
    let declared = open(&url(&base, "/model.gguf"), &local(), small).await;
    assert!(
        matches!(declared, Err(FetchError::TooLarge { limit: 100_000, .. })),
        "{declared:?}"
    );
    let source = open(&url(&base, "/chunked"), &local(), small)
        .await
        .unwrap();
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
    let source = open(&url(&base, "/stall"), &local(), quick).await.unwrap();
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
