//! The API's input handling: what a client sends is refused with a 4xx in
//! the `{"error":{"code","message"}}` shape, after the scope check, and
//! never reaches the database as a 500; sizes have caps; the admin key is
//! known by what it is; metrics labels are bounded; rollback walks back.

use reqwest::header::CONTENT_TYPE;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use switchyard_server::error::ApiError;
use switchyard_store::{Store, StoreError};
use switchyard_tests::db::fresh_database;
use switchyard_tests::plugins::{component, sha256};
use switchyard_tests::replica::Replica;
use switchyard_tests::{ADMIN_TOKEN, db};

/// A key with these scopes; its token.
async fn key(replica: &Replica, name: &str, scopes: &[&str]) -> String {
    let (status, body) = replica
        .call(
            replica
                .admin(Method::POST, "/api/keys")
                .json(&json!({"name": name, "scopes": scopes})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body["token"].as_str().unwrap().to_string()
}

fn code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or_default()
}

/// Registers `id@revision` with one small file.
async fn model(replica: &Replica, id: &str, revision: &str) {
    let bytes = format!("weights of {id}").into_bytes();
    let digest = sha256(&bytes);
    let (status, body) = replica
        .call(
            replica
                .admin(Method::PUT, &format!("/api/library/blobs/{digest}"))
                .body(bytes.clone()),
        )
        .await;
    assert!(status.is_success(), "{body}");
    let (status, body) = replica
        .call(replica.admin(Method::POST, "/api/models").json(&json!({
            "id": id, "revision": revision,
            "files": [{"path": "model.gguf", "size": bytes.len(), "sha256": digest}],
        })))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_named_admin_is_just_a_key_and_the_next_start_is_not_stopped() {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = Replica::on(&db, dir.path()).await;
    let token = key(&replica, "admin", &["inference"]).await;
    replica.stop().await;

    // Before the admin key was marked, two live keys named `admin` made
    // every start fail ("query returned an unexpected number of rows").
    let replica = Replica::on(&db, dir.path()).await;
    let (status, body) = replica.call(replica.admin(Method::GET, "/api/keys")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["keys"].as_array().unwrap().len(), 2, "{body}");
    // The key named admin has only the scopes it was given.
    let (status, _) = replica
        .call(
            replica
                .http
                .get(format!("{}/api/keys", replica.url))
                .bearer_auth(&token),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    replica.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_text_and_database_refusals_are_client_errors() {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = Replica::on(&db, dir.path()).await;

    // A NUL in a JSON string, and in a path segment.
    let (status, body) = replica
        .call(
            replica
                .admin(Method::POST, "/api/keys")
                .header(CONTENT_TYPE, "application/json")
                .body(r#"{"name": "a\u0000b", "scopes": ["inference"]}"#),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(code(&body), "invalid_request");
    for path in [
        "/api/plugins/a%00b",
        "/api/models/demo%00/r1",
        "/api/deployments/%FF",
    ] {
        let (status, body) = replica.call(replica.admin(Method::GET, path)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {body}");
        assert_eq!(code(&body), "invalid_request", "{path}");
    }
    let (status, body) = replica
        .call(replica.admin(Method::GET, &format!("/api/plugins/{}", "a".repeat(300))))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");

    // The tunnel carrier's multiplexer is a served kind: stored, not a 500.
    let (status, body) = replica.push("tunnel", "1.0.0", &component("tunnel")).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["kind"], "tunnel");

    // A negative GPU memory is refused by the API.
    model(&replica, "demo", "r1").await;
    let deployment = |extra: Value| {
        let mut body =
            json!({"model": "demo", "revision": "r1", "engine": "reference", "replicas": 0});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        replica.admin(Method::POST, "/api/deployments").json(&body)
    };
    let (status, body) = replica
        .call(deployment(json!({"gpu_memory_bytes": -1})))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("gpu_memory_bytes"),
        "{body}"
    );

    // Deleting a revision a deployment uses is a conflict.
    let (status, body) = replica.call(deployment(json!({}))).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, body) = replica
        .call(replica.admin(Method::DELETE, "/api/models/demo/r1"))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(code(&body), "model_in_use");
    replica.stop().await;
}

/// The schema's constraints are the last line behind the API's checks:
/// what slips past those is still a 4xx, and the error keeps the database's
/// own words (which constraint) for the log, where the driver says only
/// "db error".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_databases_refusals_are_4xx_and_keep_their_cause() {
    let store = Store::connect(&fresh_database().await).await.unwrap();
    let refused = store
        .create_key("a\0b", &["inference".to_string()], None)
        .await
        .unwrap_err();
    assert_eq!(refused.sqlstate(), Some("22021"), "{refused}");
    assert_eq!(ApiError::from(refused).status, StatusCode::BAD_REQUEST);

    let conn = store.conn().await.unwrap();
    let insert = "INSERT INTO admission_generations (point, generation, chain, created_by) \
                  VALUES ($1, 1, '[]', 'k')";
    let refused: StoreError = conn
        .execute(insert, &[&"nowhere"])
        .await
        .unwrap_err()
        .into();
    let said = refused.to_string();
    assert!(said.contains("admission_generations_point_check"), "{said}");
    let api = ApiError::from(refused);
    assert_eq!(
        (api.status, api.code),
        (StatusCode::BAD_REQUEST, "invalid_request")
    );
    assert!(
        api.message.contains("admission_generations_point_check"),
        "{}",
        api.message
    );

    conn.execute(insert, &[&"inference"]).await.unwrap();
    let refused: StoreError = conn
        .execute(insert, &[&"inference"])
        .await
        .unwrap_err()
        .into();
    assert_eq!(
        ApiError::from(refused).status,
        StatusCode::CONFLICT,
        "unique"
    );
    let refused: StoreError = conn
        .execute(
            "INSERT INTO admission_replica_status (instance_id, point, generation) \
             VALUES ('nobody', 'inference', 0)",
            &[],
        )
        .await
        .unwrap_err()
        .into();
    assert_eq!(
        ApiError::from(refused).status,
        StatusCode::CONFLICT,
        "foreign key"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_sizes_have_caps() {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = Replica::on(&db, dir.path()).await;
    model(&replica, "demo", "r1").await;
    for (field, value) in [
        ("replicas", json!(257)),
        ("replicas", json!(i32::MAX)),
        ("max_concurrency", json!(i32::MAX)),
        ("max_concurrency", json!(4097)),
        ("gpus_per_replica", json!(65)),
        ("token_delay_ms", json!(60_001)),
    ] {
        let mut body = json!({"model": "demo", "revision": "r1", "engine": "reference"});
        body[field] = value.clone();
        let (status, answer) = replica
            .call(replica.admin(Method::POST, "/api/deployments").json(&body))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{field}={value}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains(field), "{message}");
    }
    let (status, created) = replica
        .call(
            replica
                .admin(Method::POST, "/api/deployments")
                .json(&json!({
                    "model": "demo", "revision": "r1", "engine": "reference",
                    "replicas": 0, "max_concurrency": 4096,
                })),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["id"].as_str().unwrap();
    let (status, body) = replica
        .call(
            replica
                .admin(Method::PUT, &format!("/api/deployments/{id}/replicas"))
                .json(&json!({"replicas": 257})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("256"));
    replica.stop().await;
}

/// The rest of the scope-before-body and JSON-rejection checks run without a
/// database, through the router (`host/server/src/routes/tests.rs`); a
/// registration token is looked up in the database, so its check is here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registration_is_401_before_its_body_is_read() {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = Replica::on(&db, dir.path()).await;
    let url = |p: &str| format!("{}{p}", replica.url);

    // Registration: a token that is not a live registration token is a 401
    // before the body is read, whatever the body holds.
    for body in ["{not json", r#"{"name": 1}"#] {
        let (status, answer) = replica
            .call(
                replica
                    .http
                    .post(url("/api/nodes/register"))
                    .bearer_auth("sy_not_a_registration_token")
                    .header(CONTENT_TYPE, "application/json")
                    .body(body),
            )
            .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}: {answer}");
        assert_eq!(code(&answer), "unauthorized");
    }

    replica.stop().await;
}

async fn metrics_text(replica: &Replica, token: Option<&str>) -> (StatusCode, String) {
    let mut request = replica.http.get(format!("{}/metrics", replica.url));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    (response.status(), response.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_label_only_served_models_and_can_require_a_key() {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = Replica::on(&db, dir.path()).await;
    let inference = key(&replica, "app", &["inference"]).await;
    for model in ["made-up-1", "made-up-2"] {
        let (status, _) = replica
            .call(
                replica
                    .http
                    .post(format!("{}/v1/chat/completions", replica.url))
                    .bearer_auth(&inference)
                    .json(&json!({"model": model, "messages": []})),
            )
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }
    let (status, text) = metrics_text(&replica, None).await;
    assert_eq!(status, StatusCode::OK, "anonymous by default");
    assert!(
        text.contains("switchyard_inference_requests_total{model=\"other\",status=\"404\"} 2"),
        "{text}"
    );
    assert!(!text.contains("made-up"), "{text}");
    replica.stop().await;

    let replica = Replica::with(&db, dir.path(), |config| config.metrics_auth = true).await;
    let metrics = key(&replica, "prometheus", &["metrics:read"]).await;
    let inference = key(&replica, "app2", &["inference"]).await;
    assert_eq!(
        metrics_text(&replica, None).await.0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        metrics_text(&replica, Some(&inference)).await.0,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        metrics_text(&replica, Some(&metrics)).await.0,
        StatusCode::OK
    );
    assert_eq!(
        metrics_text(&replica, Some(ADMIN_TOKEN)).await.0,
        StatusCode::OK
    );
    replica.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_rollback_walks_further_back() {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = Replica::on(&db, dir.path()).await;
    let (status, body) = replica
        .push("max-tokens", "1.0.0", &component("max-tokens"))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    for limit in [100, 100_000] {
        let (status, body) = replica
            .set_chain(
                "inference",
                json!([{"plugin": "max-tokens", "version": "1.0.0",
                        "settings": {"max_tokens": limit, "mode": "deny"}}]),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let rollback = |body: Option<Value>| {
        let request = replica.admin(Method::POST, "/api/admission/inference/rollback");
        match body {
            Some(body) => request.json(&body),
            None => request,
        }
    };
    // 3 restores 1; 4 restores 0 (the empty chain), not 2 again.
    for (generation, note) in [(3, "rollback to 1"), (4, "rollback to 0")] {
        let (status, body) = replica.call(rollback(None)).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(
            (body["generation"].clone(), body["note"].clone()),
            (json!(generation), json!(note))
        );
    }
    let (status, body) = replica.call(rollback(None)).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(code(&body), "nothing_to_rollback");
    // An explicit target.
    let (status, body) = replica.call(rollback(Some(json!({"generation": 2})))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["note"], "rollback to 2");
    assert_eq!(body["policies"][0]["settings"]["max_tokens"], 100_000);
    let (status, _) = replica.call(rollback(Some(json!({"generation": 5})))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    replica.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_admin_token_is_refused_at_start() {
    let config = switchyard_server::ServeConfig {
        database_url: Some(db::fresh_database().await),
        admin_token: Some("sy_too_short".into()),
        ..Default::default()
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let error = switchyard_server::run_on(listener, config, async {})
        .await
        .unwrap_err();
    let message = format!("{error:#}");
    assert!(message.contains("at least 32"), "{message}");
    assert!(!message.contains("sy_too_short"), "{message}");
}
