//! `GET/PUT /api/cluster/settings`: admin only; unknown and invalid
//! settings refused; a NATS URL checked from the replica (a real
//! nats-server), never with credentials, never changed during a carrier
//! change, and never switching the carrier; passwords masked when read.
//! `switchyard cluster settings show|set` against the same replica.

use std::process::Command;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use switchyard_tests::ADMIN_TOKEN;
use switchyard_tests::db::fresh_database;
use switchyard_tests::nats::NatsServer;
use switchyard_tests::process::binary;
use switchyard_tests::replica::Replica;

const PATH: &str = "/api/cluster/settings";

async fn database(db: &str) -> tokio_postgres::Client {
    switchyard_tests::db::connect(db).await
}

async fn put(replica: &Replica, body: Value) -> (StatusCode, Value) {
    replica
        .call(replica.admin(Method::PUT, PATH).json(&body))
        .await
}

/// A port nothing listens on (bound, then let go).
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_an_admin_reads_or_changes_the_settings() {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = Replica::on(&db, dir.path()).await;
    let url = format!("{}{PATH}", replica.url);

    let (status, body) = replica.call(replica.http.get(&url)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert_eq!(body["error"]["code"], "unauthorized");
    let (status, _) = replica
        .call(replica.http.put(&url).json(&json!({"window_ms": 10000})))
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    let (status, created) = replica
        .call(
            replica
                .admin(Method::POST, "/api/keys")
                .json(&json!({"name": "ops", "scopes": ["nodes:manage"]})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let token = created["token"].as_str().unwrap();
    let (status, body) = replica
        .call(replica.http.get(&url).bearer_auth(token))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"]["code"], "forbidden");
    // The scope is checked before the body is read: no 415 for a key
    // without it, however wrong the body.
    let (status, _) = replica
        .call(replica.http.put(&url).bearer_auth(token).body("not json"))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    replica.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_are_checked_saved_and_shown_with_passwords_masked() {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = Replica::on(&db, dir.path()).await;
    let client = database(&db).await;

    let (status, shown) = replica.call(replica.admin(Method::GET, PATH)).await;
    assert_eq!(status, StatusCode::OK, "{shown}");
    assert_eq!(
        shown,
        json!({"nats_url": null, "worker_nats_url": null, "prepare_timeout_ms": 60000,
            "window_ms": 30000, "max_drain_ms": 120000, "attach_jitter_ms": 10000,
            "require_signed": {"policy": false, "grant": false, "carrier": false}})
    );

    let (status, saved) = put(&replica, json!({"window_ms": 10000, "attach_jitter_ms": 0})).await;
    assert_eq!(status, StatusCode::OK, "{saved}");
    assert_eq!(saved["window_ms"], 10000);
    assert_eq!(saved["attach_jitter_ms"], 0);
    assert_eq!(saved["prepare_timeout_ms"], 60000, "untouched keys stay");
    let (_, shown) = replica.call(replica.admin(Method::GET, PATH)).await;
    assert_eq!(shown, saved);

    for (body, code) in [
        (json!({"window": 10000}), "unknown_setting"),
        (json!({"window_ms": 4999}), "invalid_setting"),
        (json!({"prepare_timeout_ms": 1000}), "invalid_setting"),
        (json!({"max_drain_ms": "120000"}), "invalid_setting"),
        (json!({"attach_jitter_ms": 600_001}), "invalid_setting"),
        (
            json!({"nats_url": "http://127.0.0.1:4222"}),
            "invalid_setting",
        ),
        (
            json!({"nats_url": "nats://ops:hunter2@127.0.0.1:4222"}),
            "invalid_setting",
        ),
        (
            json!({"worker_nats_url": "nats://s3cr3ttoken@127.0.0.1:4222"}),
            "invalid_setting",
        ),
    ] {
        let (status, answer) = put(&replica, body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body} -> {answer}");
        assert_eq!(answer["error"]["code"], code, "{body} -> {answer}");
        let text = answer.to_string();
        assert!(
            !text.contains("hunter2") && !text.contains("s3cr3ttoken"),
            "a credential is never echoed: {text}"
        );
    }
    // A body that is no object is refused without being quoted back.
    let (status, answer) = put(&replica, json!("nats://ops:hunter2@127.0.0.1:4222")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert_eq!(answer["error"]["code"], "invalid_setting");
    assert!(!answer.to_string().contains("hunter2"), "{answer}");
    let (_, shown) = replica.call(replica.admin(Method::GET, PATH)).await;
    assert_eq!(shown, saved, "a refused change changes nothing");

    // A URL stored with a password (before this check, or by hand) is
    // never shown with it; nor is a token-only user part.
    client
        .execute(
            r#"UPDATE cluster_settings SET settings = settings ||
                '{"nats_url": "nats://ops:hunter2@10.0.0.5:4222",
                  "worker_nats_url": "tls://s3cr3ttoken@nats.internal:4222"}'::jsonb"#,
            &[],
        )
        .await
        .unwrap();
    let (status, shown) = replica.call(replica.admin(Method::GET, PATH)).await;
    assert_eq!(status, StatusCode::OK, "{shown}");
    assert_eq!(shown["nats_url"], "nats://ops:***@10.0.0.5:4222");
    assert_eq!(shown["worker_nats_url"], "tls://***@nats.internal:4222");
    // `null` clears a URL; the answer masks what stays.
    let (status, saved) = put(&replica, json!({"worker_nats_url": null})).await;
    assert_eq!(status, StatusCode::OK, "{saved}");
    assert_eq!(saved["worker_nats_url"], Value::Null);
    assert_eq!(saved["nats_url"], "nats://ops:***@10.0.0.5:4222");
    assert!(!saved.to_string().contains("hunter2"));
    replica.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nats_url_must_answer_from_this_replica_and_saving_it_switches_nothing() {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = Replica::on(&db, dir.path()).await;
    let client = database(&db).await;
    let row = || async {
        let row = client
            .query_one("SELECT carrier, epoch, state FROM cluster_carrier", &[])
            .await
            .unwrap();
        (
            row.get::<_, String>(0),
            row.get::<_, i64>(1),
            row.get::<_, String>(2),
        )
    };
    let before = row().await;

    let nobody = format!("nats://127.0.0.1:{}", closed_port());
    let (status, answer) = put(&replica, json!({ "nats_url": nobody })).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    assert_eq!(answer["error"]["code"], "unreachable");
    let nobody_answer = answer;
    // Something that accepts but is no NATS server is no better, and is
    // answered the same: the setting is no probe of internal addresses.
    let (status, answer) = put(
        &replica,
        json!({ "nats_url": format!("nats://{}", replica.url.trim_start_matches("http://")) }),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    assert_eq!(answer, nobody_answer, "the answers tell the targets apart");

    let nats = NatsServer::start(&[]);
    let reachable = format!("nats://{}", nats.address());
    let (status, saved) = put(
        &replica,
        json!({"nats_url": reachable, "worker_nats_url": reachable}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{saved}");
    // Kept as host:port, the form the `nats` set's component dials.
    assert_eq!(saved["nats_url"], nats.address());
    assert_eq!(saved["worker_nats_url"], nats.address());
    assert_eq!(
        row().await,
        before,
        "saving a NATS URL never switches the carrier"
    );

    // During a change a NATS URL stays as it is (the waits may change).
    // The row is held with a share lock while the change is under way, so
    // no replica's leader can move it on before the request is answered.
    client
        .execute(
            "UPDATE cluster_carrier SET state = 'prepare', epoch = epoch + 1, target = carrier,
                target_plugins = plugins, deadline = now() + interval '1 hour'",
            &[],
        )
        .await
        .unwrap();
    let mut holder = database(&db).await;
    let hold = holder.transaction().await.unwrap();
    hold.query_one("SELECT epoch FROM cluster_carrier FOR SHARE", &[])
        .await
        .unwrap();
    let (status, answer) = put(&replica, json!({"nats_url": null})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{answer}");
    assert_eq!(answer["error"]["code"], "change_under_way");
    let (status, answer) = put(&replica, json!({"nats_url": reachable, "window_ms": 20000})).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the same URL is no change: {answer}"
    );
    assert_eq!(answer["window_ms"], 20000);
    hold.rollback().await.unwrap();
    replica.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_shows_and_sets_the_settings() {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = Replica::on(&db, dir.path()).await;
    let cli = |args: &[&str]| {
        let output = Command::new(binary())
            .args(["cluster", "settings"])
            .args(args)
            .args(["--server", &replica.url])
            .env("SWITCHYARD_TOKEN", ADMIN_TOKEN)
            .output()
            .unwrap();
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stdout).to_string(),
            String::from_utf8_lossy(&output.stderr).to_string(),
        )
    };
    let (code, out, err) =
        tokio::task::block_in_place(|| cli(&["set", "window_ms=12000", "worker_nats_url=null"]));
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("window_ms           12000\n"), "{out}");
    let (code, out, err) = tokio::task::block_in_place(|| cli(&["show"]));
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        out,
        "\
nats_url            -
worker_nats_url     -
prepare_timeout_ms  60000
window_ms           12000
max_drain_ms        120000
attach_jitter_ms    10000
require_signed      -
"
    );
    let (code, out, err) = tokio::task::block_in_place(|| cli(&["set", "window_ms=10"]));
    assert_ne!(code, 0, "{out}");
    assert!(err.contains("invalid_setting"), "{err}");
    replica.stop().await;
}

#[test]
fn the_document_lists_both_operations_with_their_statuses() {
    let doc: Value = serde_json::from_str(&switchyard_server::openapi::document()).unwrap();
    let path = &doc["paths"][PATH];
    assert_eq!(path["get"]["security"][0]["bearer"], json!([]));
    assert_eq!(
        path["get"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/ClusterSettings"
    );
    for status in ["200", "400", "401", "403", "409", "422"] {
        assert!(
            path["put"]["responses"].get(status).is_some(),
            "PUT {PATH} documents {status}: {}",
            path["put"]
        );
    }
}
