//! The floor of our HTTP stack: a reverse proxy built from the libraries
//! the frontend and the worker are built on (tokio, an axum server, a
//! pooled reqwest client, the answer streamed back) and nothing else: no
//! key, no admission, no carrier, one hop. `proxy` measures its CPU per
//! request beside nginx's, which tells what part of our ratio to nginx is
//! the stack's own and what part is Switchyard's.
//!
//! It runs as a child process of the bench (`switchyard-bench floor-proxy
//! <listen> <upstream>`), so that `/proc/<pid>/stat` counts it alone.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use futures::TryStreamExt;

/// The hidden argument that runs this proxy instead of a section.
pub const ARGUMENT: &str = "floor-proxy";

/// Where requests go.
struct Upstream {
    http: reqwest::Client,
    base: String,
}

/// Serves `listen`, forwarding every request to `upstream` (`host:port`).
pub fn serve(listen: &str, upstream: &str) {
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    runtime.block_on(async {
        let upstream = Arc::new(Upstream {
            http: reqwest::Client::new(),
            base: format!("http://{upstream}"),
        });
        let app = axum::Router::new().fallback(forward).with_state(upstream);
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .expect("the floor proxy's port");
        axum::serve(listener, app).await.expect("the floor proxy");
    });
}

/// One request, forwarded with its method, path, content type and body;
/// the answer's status, content type and body come back as they stream.
async fn forward(State(upstream): State<Arc<Upstream>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let Ok(body) = axum::body::to_bytes(body, 1 << 20).await else {
        return status(StatusCode::BAD_REQUEST);
    };
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut outgoing = upstream
        .http
        .request(parts.method, format!("{}{path}", upstream.base))
        .body(body);
    if let Some(kind) = parts.headers.get(axum::http::header::CONTENT_TYPE) {
        outgoing = outgoing.header(axum::http::header::CONTENT_TYPE, kind);
    }
    let Ok(answer) = outgoing.send().await else {
        return status(StatusCode::BAD_GATEWAY);
    };
    let mut response = Response::builder().status(answer.status().as_u16());
    if let Some(kind) = answer.headers().get(reqwest::header::CONTENT_TYPE) {
        response = response.header(axum::http::header::CONTENT_TYPE, kind.as_bytes());
    }
    let stream = answer.bytes_stream().map_err(std::io::Error::other);
    response
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| status(StatusCode::BAD_GATEWAY))
}

fn status(code: StatusCode) -> Response {
    let mut response = Response::new(Body::from(Bytes::new()));
    *response.status_mut() = code;
    response
}
