//! The router's answers before and around the handlers, driven in process
//! with `oneshot` (axum's testing pattern): authentication and scopes, the
//! order of the checks, the JSON fallbacks and the one error mapping. No
//! database runs: keys come from the replica's key cache, and a request
//! that reaches the database is answered 503 `database_unavailable`.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use switchyard_runtime::{Runtime, RuntimeConfig};
use switchyard_store::keys::token_digest;
use switchyard_store::{PoolTimeouts, Store};
use tower::ServiceExt;

use crate::auth::Caller;
use crate::state::AppState;
use switchyard_binding::admission::Admission;
use switchyard_library::Library;

/// An admin key and an `inference`-only key, both in the key cache.
const ADMIN: &str = "sy_admin_token_for_router_tests";
const INFERENCE: &str = "sy_inference_token_for_router_tests";

struct App {
    router: Router,
    _library: tempfile::TempDir,
}

fn app() -> App {
    // Nothing listens here: the pool fails at once, as a database that is down.
    let store = Store::connect_lazily(
        "host=/nonexistent/switchyard port=5432 user=postgres dbname=none",
        PoolTimeouts::default(),
    )
    .expect("a pool");
    let runtime = Runtime::new(RuntimeConfig::default()).expect("a runtime");
    let library_dir = tempfile::tempdir().expect("a temporary folder");
    let loader = Arc::new(switchyard_binding::bound::Loader::new(
        store.clone(),
        runtime.clone(),
        "inst_test".into(),
    ));
    let admission = Arc::new(Admission::new(loader.clone()));
    // The router's tests run empty chains on purpose: ready at once.
    admission.mark_synced();
    let inference = Arc::new(switchyard_inference::Inference {
        admission: admission.clone(),
        routing: Default::default(),
        carriers: None,
        federation: None,
        sse_keepalive: std::time::Duration::from_secs(15),
        metrics: Default::default(),
        usage: None,
        counters: None,
        tracer: None,
    });
    let state = Arc::new(AppState {
        admission,
        grant_evaluator: Arc::new(switchyard_binding::grant_evaluator::GrantEvaluator::new(
            loader,
        )),
        store: store.clone(),
        runtime,
        instance_id: "inst_test".into(),
        auto_approve: false,
        inference: inference.clone(),
        keys: Default::default(),
        library: Library::open(library_dir.path()).expect("a library"),
        fetch_allow: Default::default(),
        batches: Arc::new(switchyard_batches::Batches {
            store: store.clone(),
            inference: inference.clone(),
            carriers: None,
            instance_id: "inst_test".into(),
            storage_quota: switchyard_batches::DEFAULT_QUOTA,
        }),
        carriers: None,
        federation: None,
        metrics_auth: false,
    });
    for (token, key_id, scope) in [
        (ADMIN, "key_admin", "admin"),
        (INFERENCE, "key_inf", "inference"),
    ] {
        let caller = Caller {
            key_id: key_id.into(),
            scopes: vec![scope.into()],
            team: None,
        };
        state.keys.put(token_digest(token), caller);
    }
    App {
        router: super::app(state, None),
        _library: library_dir,
    }
}

/// Sends one request; the status, the `Allow` header and the JSON body.
async fn send(app: &App, request: Request<Body>) -> (StatusCode, Option<String>, Value) {
    let response = app
        .router
        .clone()
        .oneshot(request)
        .await
        .expect("the router answers");
    let status = response.status();
    let allow = response
        .headers()
        .get(header::ALLOW)
        .map(|v| v.to_str().expect("ascii").to_string());
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("a body")
        .to_bytes();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, allow, body)
}

fn request(method: &str, path: &str, token: Option<&str>) -> axum::http::request::Builder {
    let builder = Request::builder().method(method).uri(path);
    match token {
        Some(token) => builder.header(header::AUTHORIZATION, format!("Bearer {token}")),
        None => builder,
    }
}

fn empty(method: &str, path: &str, token: Option<&str>) -> Request<Body> {
    request(method, path, token)
        .body(Body::empty())
        .expect("a request")
}

fn with_body(
    method: &str,
    path: &str,
    token: Option<&str>,
    content_type: &str,
    body: &str,
) -> Request<Body> {
    request(method, path, token)
        .header(header::CONTENT_TYPE, content_type)
        .body(Body::from(body.to_string()))
        .expect("a request")
}

fn json_body(method: &str, path: &str, token: Option<&str>, body: &Value) -> Request<Body> {
    with_body(method, path, token, "application/json", &body.to_string())
}

/// The error body's code, after checking the body has the error shape.
fn code(body: &Value) -> &str {
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "not an error body: {body}"
    );
    body["error"]["code"].as_str().expect("a code")
}

#[tokio::test]
async fn a_request_without_a_usable_bearer_is_401_unauthorized() {
    let app = app();
    for authorization in [
        None,
        Some("Basic YWRtaW46YWRtaW4="),
        Some("Bearer"),
        Some("Bearer   "),
    ] {
        let mut request = Request::builder().uri("/api/plugins");
        if let Some(value) = authorization {
            request = request.header(header::AUTHORIZATION, value);
        }
        let (status, _, body) = send(&app, request.body(Body::empty()).unwrap()).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{authorization:?}");
        assert_eq!(code(&body), "unauthorized");
        assert_eq!(
            body["error"]["message"],
            "an API key is required (Authorization: Bearer <token>)"
        );
    }
}

#[tokio::test]
async fn a_key_without_the_routes_scope_is_403_forbidden() {
    let app = app();
    let (status, _, body) = send(&app, empty("GET", "/api/plugins", Some(INFERENCE))).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(code(&body), "forbidden");
    assert_eq!(body["error"]["message"], "this key lacks the 'admin' scope");
}

#[tokio::test]
async fn the_scope_is_checked_before_the_body_is_read() {
    let app = app();
    for (token, content_type, expected) in [
        // Without the scope: 403, whatever the body is.
        (
            Some(INFERENCE),
            "text/plain",
            (StatusCode::FORBIDDEN, "forbidden"),
        ),
        // Anonymous: 401, never the body's 415.
        (
            None,
            "text/plain",
            (StatusCode::UNAUTHORIZED, "unauthorized"),
        ),
        // With the scope the body is read: its media type, then its syntax.
        (
            Some(ADMIN),
            "text/plain",
            (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type"),
        ),
        (
            Some(ADMIN),
            "application/json",
            (StatusCode::BAD_REQUEST, "invalid_json"),
        ),
    ] {
        let put = with_body(
            "PUT",
            "/api/admission/inference",
            token,
            content_type,
            "{not json",
        );
        let (status, _, body) = send(&app, put).await;
        assert_eq!((status, code(&body)), expected, "{token:?} {content_type}");
    }
}

#[tokio::test]
async fn no_route_shows_its_body_schema_to_a_key_without_the_scope() {
    let app = app();
    for (method, path, content_type, body) in [
        ("POST", "/api/deployments", "text/plain", "x"),
        ("POST", "/api/keys", "application/json", "{}"),
        ("PUT", "/api/admission/inference", "application/json", "[1]"),
        ("POST", "/api/models", "application/json", "{"),
        ("GET", "/api/cluster/carrier", "application/json", ""),
    ] {
        let request = with_body(method, path, Some(INFERENCE), content_type, body);
        let (status, _, answer) = send(&app, request).await;
        assert_eq!(
            (status, code(&answer)),
            (StatusCode::FORBIDDEN, "forbidden"),
            "{path}"
        );
    }
}

#[tokio::test]
async fn with_the_scope_every_rejection_is_a_json_error() {
    let app = app();
    for (content_type, body, status, expected) in [
        (
            "text/plain",
            "{}",
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
        ),
        (
            "application/json",
            "{not json",
            StatusCode::BAD_REQUEST,
            "invalid_json",
        ),
        (
            "application/json",
            r#"{"name": 1}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_request",
        ),
        (
            "application/json",
            r#"{"name": "a\u0000b", "scopes": []}"#,
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
    ] {
        let request = with_body("POST", "/api/keys", Some(ADMIN), content_type, body);
        let (got, _, answer) = send(&app, request).await;
        assert_eq!((got, code(&answer)), (status, expected), "{body}");
    }
    // A repeated query parameter.
    let request = request(
        "POST",
        "/api/plugins?name=a&name=b&version=1&sha256=00",
        Some(ADMIN),
    )
    .body(Body::from("x"))
    .unwrap();
    let (status, _, answer) = send(&app, request).await;
    assert_eq!(
        (status, code(&answer)),
        (StatusCode::BAD_REQUEST, "invalid_request")
    );
}

#[tokio::test]
async fn the_bearer_scheme_is_matched_in_any_case() {
    let app = app();
    let record = json!({"caller": {"key_id": "k", "project": null, "scopes": ["inference"]},
        "model": "m", "endpoint": "/v1/completions", "prompt_tokens": 1, "max_tokens": 1, "stream": false});
    for scheme in ["bearer", "BEARER"] {
        let request = Request::builder()
            .method("POST")
            .uri("/api/admission/inference/evaluate")
            .header(header::AUTHORIZATION, format!("{scheme} {ADMIN}"))
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(record.to_string()))
            .unwrap();
        let (status, _, answer) = send(&app, request).await;
        assert_eq!(status, StatusCode::OK, "{scheme}: {answer}");
        assert_eq!(answer["generation"], 0, "the empty chain of generation 0");
    }
}

#[tokio::test]
async fn unknown_routes_and_methods_answer_json() {
    let app = app();
    let (status, _, body) = send(&app, empty("GET", "/api/nowhere", Some(ADMIN))).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::NOT_FOUND, "unknown_route")
    );
    let (status, allow, body) = send(&app, empty("DELETE", "/api/plugins", Some(ADMIN))).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed")
    );
    let allow = allow.expect("405 keeps its Allow header");
    assert!(allow.contains("GET") && allow.contains("POST"), "{allow}");
}

#[tokio::test]
async fn domain_errors_answer_their_status_and_code() {
    let app = app();
    // AdmissionError::UnknownPoint.
    let chain = json!({"policies": []});
    let (status, _, body) = send(
        &app,
        json_body("PUT", "/api/admission/nowhere", Some(ADMIN), &chain),
    )
    .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::NOT_FOUND, "unknown_point")
    );
    assert_eq!(
        body["error"]["message"],
        "no admission point 'nowhere'; points: inference, deploy, transfer, federation"
    );
    // ValidError::PathSegment, from the path check before any handler.
    let (status, _, body) = send(&app, empty("GET", "/api/plugins/%00", Some(ADMIN))).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::BAD_REQUEST, "invalid_request")
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("path parameter `name` must be"),
        "{body}"
    );
    // AuthError::Lookup(StoreError::Pool): a key not in the cache is
    // looked up, and a database that is down is a 503, not a 401 or a 500.
    let (status, _, body) = send(&app, empty("GET", "/api/plugins", Some("sy_not_cached"))).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::SERVICE_UNAVAILABLE, "database_unavailable")
    );
}

#[tokio::test]
async fn a_binding_mode_is_parsed_at_the_route() {
    let app = app();
    for binding in [
        json!({"plugin": "p", "version": "1", "mode": "loud"}),
        json!({"plugin": "p", "version": "1", "fail": "sideways"}),
    ] {
        let chain = json!({"policies": [binding]});
        let (status, _, body) = send(
            &app,
            json_body("PUT", "/api/admission/inference", Some(ADMIN), &chain),
        )
        .await;
        assert_eq!(
            (status, code(&body)),
            (StatusCode::UNPROCESSABLE_ENTITY, "invalid_request"),
            "{binding}"
        );
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("unknown variant"), "{message}");
    }
}
