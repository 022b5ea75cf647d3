//! The admin audit trail and teams: every state-changing admin route in the
//! OpenAPI document leaves a record, secrets never reach one, the chain of
//! digests names a row altered in PostgreSQL (through the API and the CLI),
//! and teams group keys.

use std::collections::BTreeSet;
use std::process::Command;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use switchyard_protocol::audit::{AuditLog, AuditVerification};
use switchyard_tests::ADMIN_TOKEN;
use switchyard_tests::db::fresh_database;
use switchyard_tests::process::binary;
use switchyard_tests::replica::Replica;

/// A path parameter's value that passes the path checks, by its name.
fn value_for(param: &str) -> &'static str {
    match param {
        "sha256" => "0000000000000000000000000000000000000000000000000000000000000000",
        "point" => "inference",
        "verb" => "engine.status",
        _ => "audit-probe",
    }
}

/// Every (method, route) of the document a key may call that may change state.
fn keyed_changes(doc: &Value) -> Vec<(Method, String)> {
    let mut found = Vec::new();
    for (route, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let method = method.to_ascii_uppercase();
            if !route.starts_with("/api/") || matches!(method.as_str(), "GET" | "HEAD") {
                continue;
            }
            let keyed = op["security"]
                .as_array()
                .is_some_and(|s| s.iter().any(|r| r.get("bearer").is_some()));
            if keyed {
                found.push((
                    Method::from_bytes(method.as_bytes()).unwrap(),
                    route.clone(),
                ));
            }
        }
    }
    found
}

fn filled(route: &str) -> String {
    route
        .split('/')
        .map(
            |part| match part.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
                Some(param) => value_for(param).to_string(),
                None => part.to_string(),
            },
        )
        .collect::<Vec<_>>()
        .join("/")
}

async fn log(replica: &Replica, query: &str) -> AuditLog {
    let response = replica
        .admin(Method::GET, &format!("/api/audit{query}"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    response.json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_admin_change_in_the_document_leaves_a_record_without_its_secrets() {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = Replica::on(&db, dir.path()).await;
    let doc: Value = replica
        .http
        .get(format!("{}/api/openapi.json", replica.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let changes = keyed_changes(&doc);
    assert!(
        changes.len() > 40,
        "the document lists the admin routes: {changes:?}"
    );
    for (method, route) in &changes {
        // An empty object: most routes refuse it, and a refusal is recorded too.
        let body = json!({"token": "sy_secret_in_a_body", "name": "audit-probe"});
        let response = replica
            .admin(method.clone(), &filled(route))
            .json(&body)
            .send()
            .await
            .unwrap();
        drop(response);
    }
    let recorded = log(&replica, "?since=0&limit=1000").await;
    let seen: BTreeSet<(String, String)> = recorded
        .records
        .iter()
        .map(|r| (r.method.clone(), r.route.clone()))
        .collect();
    let missing: Vec<_> = changes
        .iter()
        .filter(|(m, r)| !seen.contains(&(m.to_string(), r.clone())))
        .collect();
    assert!(missing.is_empty(), "changes left no record: {missing:?}");

    let text = serde_json::to_string(&recorded).unwrap();
    assert!(
        !text.contains("sy_secret_in_a_body"),
        "a secret reached the trail"
    );
    assert!(
        !text.contains(ADMIN_TOKEN),
        "the admin token reached the trail"
    );
    let first = &recorded.records[0];
    assert_eq!(first.actor_name, "admin");
    assert!(
        first
            .remote
            .as_deref()
            .is_some_and(|r| r.starts_with("127.0.0.1:")),
        "{first:?}"
    );

    // A created key's token is in its answer, never in its record; the
    // record names the key it made.
    let (status, created) = replica
        .call(
            replica
                .admin(Method::POST, "/api/keys")
                .json(&json!({"name": "app", "scopes": ["inference"]})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let id = created["key"]["id"].as_str().unwrap();
    let token = created["token"].as_str().unwrap();
    let by_object = log(&replica, &format!("?object={id}")).await;
    assert_eq!(by_object.records.len(), 1, "{by_object:?}");
    assert_eq!(by_object.records[0].status, 201);
    assert!(!serde_json::to_string(&by_object).unwrap().contains(token));

    // Reading changes nothing and is not recorded; an anonymous call is not either.
    let before = log(&replica, "?limit=1").await.records[0].seq;
    let _ = replica
        .admin(Method::GET, "/api/keys")
        .send()
        .await
        .unwrap();
    let anonymous = replica
        .http
        .post(format!("{}/api/teams", replica.url))
        .json(&json!({"name": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(log(&replica, "?limit=1").await.records[0].seq, before);
    replica.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_altered_row_breaks_the_chain_where_it_stands() {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = Replica::on(&db, dir.path()).await;
    for name in ["red", "green", "blue"] {
        let (status, _) = replica
            .call(
                replica
                    .admin(Method::POST, "/api/teams")
                    .json(&json!({"name": name})),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED);
    }
    let verify = || async {
        let response = replica
            .admin(Method::GET, "/api/audit/verify")
            .send()
            .await
            .unwrap();
        response.json::<AuditVerification>().await.unwrap()
    };
    let whole = verify().await;
    assert_eq!((whole.records, whole.broken), (3, None));

    let cli = |args: &[&str]| {
        let output = Command::new(binary())
            .args(["audit"])
            .args(args)
            .args(["--server", &replica.url, "--token", ADMIN_TOKEN])
            .output()
            .unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).to_string(),
        )
    };
    let (code, out) = tokio::task::block_in_place(|| cli(&["verify"]));
    assert_eq!(code, Some(0), "{out}");

    let client = switchyard_tests::db::connect(&db).await;
    client
        .execute(
            "UPDATE audit_log SET summary = '{\"name\":\"purple\"}' WHERE seq = 2",
            &[],
        )
        .await
        .unwrap();
    let broken = verify().await;
    let at = broken.broken.expect("the chain is broken");
    assert_eq!((at.seq, at.reason.as_str()), (2, "altered"));
    let (code, out) = tokio::task::block_in_place(|| cli(&["verify"]));
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("record 2"), "{out}");

    // A removed row is a gap at the record after it.
    client
        .execute(
            "UPDATE audit_log SET summary = '{\"name\":\"green\"}' WHERE seq = 2",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(
        verify().await.broken,
        None,
        "the original text hashes as before"
    );
    client
        .execute("DELETE FROM audit_log WHERE seq = 2", &[])
        .await
        .unwrap();
    let gap = verify().await.broken.expect("a removed record is found");
    assert_eq!((gap.seq, gap.reason.as_str()), (3, "gap"));
    replica.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_join_teams_and_a_team_in_use_stays() {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = Replica::on(&db, dir.path()).await;
    let (status, team) = replica
        .call(
            replica
                .admin(Method::POST, "/api/teams")
                .json(&json!({"name": "research"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{team}");
    let (status, again) = replica
        .call(
            replica
                .admin(Method::POST, "/api/teams")
                .json(&json!({"name": "research"})),
        )
        .await;
    assert_eq!(
        (status, again["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("team_exists"))
    );

    let new_key = |team: &str| {
        replica
            .admin(Method::POST, "/api/keys")
            .json(&json!({"name": "app", "scopes": ["inference"], "team": team}))
    };
    let (status, refused) = replica.call(new_key("nowhere")).await;
    assert_eq!(
        (status, refused["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_request"))
    );
    let (status, created) = replica.call(new_key("research")).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["key"]["team"], "research");

    let (_, teams) = replica.call(replica.admin(Method::GET, "/api/teams")).await;
    assert_eq!(teams["teams"][0]["keys"], 1, "{teams}");
    let (status, in_use) = replica
        .call(replica.admin(Method::DELETE, "/api/teams/research"))
        .await;
    assert_eq!(
        (status, in_use["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("team_in_use"))
    );

    let id = created["key"]["id"].as_str().unwrap();
    let (status, _) = replica
        .call(replica.admin(Method::DELETE, &format!("/api/keys/{id}")))
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = replica
        .call(replica.admin(Method::DELETE, "/api/teams/research"))
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, keys) = replica.call(replica.admin(Method::GET, "/api/keys")).await;
    let revoked = keys["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == id)
        .unwrap();
    assert!(
        revoked["team"].is_null(),
        "a deleted team's revoked keys no longer name it: {revoked}"
    );
    let (status, _) = replica
        .call(replica.admin(Method::DELETE, "/api/teams/research"))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    replica.stop().await;
}
