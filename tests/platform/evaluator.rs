//! The cluster's grant evaluator through the API, with two replicas on one
//! database: the shipped `grant-standard` in force until one is bound,
//! generations that every replica follows, refused settings that leave the
//! generation in force serving, rollback, scopes, and the holder's
//! judgement (what federation calls) on each generation.

use std::sync::Arc;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use switchyard_binding::bound::Loader;
use switchyard_binding::grant_evaluator::{EVALUATOR_FAILED, GrantEvaluator};
use switchyard_runtime::grant::{Charge, FederatedCall, Grant, Usage};
use switchyard_runtime::{PluginKind, Runtime, RuntimeConfig};
use switchyard_server::SeedComponent;
use switchyard_store::Store;
use switchyard_tests::db::fresh_database;
use switchyard_tests::plugins::component;
use switchyard_tests::replica::Replica;
use switchyard_tests::switch::eventually;

/// A replica that seeds `grant-standard@0.1.0` as the binary does.
async fn replica(db: &str, dir: &std::path::Path) -> Replica {
    Replica::with(db, dir, |config| {
        config.seed_components = vec![SeedComponent {
            name: "grant-standard".into(),
            kind: PluginKind::Grant,
            version: "0.1.0".into(),
            bytes: component("grant-standard").into(),
        }];
    })
    .await
}

async fn show(replica: &Replica) -> Value {
    let (status, body) = replica
        .call(replica.admin(Method::GET, "/api/federation/evaluator"))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

async fn bind(replica: &Replica, body: Value) -> (StatusCode, Value) {
    replica
        .call(
            replica
                .admin(Method::PUT, "/api/federation/evaluator")
                .json(&body),
        )
        .await
}

async fn rollback(replica: &Replica, body: Option<Value>) -> (StatusCode, Value) {
    let request = replica.admin(Method::POST, "/api/federation/evaluator/rollback");
    let request = match body {
        Some(body) => request.json(&body),
        None => request,
    };
    replica.call(request).await
}

/// Every live replica serves `generation`, and says it is current.
async fn all_current(replica: &Replica, generation: i64, replicas: usize) {
    eventually(
        &format!("every replica serves grant evaluator generation {generation}"),
        || async {
            let body = show(replica).await;
            let list = body["replicas"].as_array().cloned().unwrap_or_default();
            list.len() == replicas
                && list
                    .iter()
                    .all(|r| r["generation"] == generation && r["status"] == "current")
        },
    )
    .await;
}

fn grant() -> Grant {
    Grant {
        id: "g1".into(),
        peer: "acme".into(),
        operations: vec!["inference".into()],
        services: vec!["chat".into()],
        models: vec!["demo-tiny@main".into()],
        machines: Vec::new(),
        expires_at_unix_ms: u64::MAX,
        max_concurrent: 4,
        max_requests: 100,
        max_model_bytes: 0,
    }
}

fn call(peer: &str) -> FederatedCall {
    FederatedCall {
        peer: peer.into(),
        operation: "inference".into(),
        service: Some("chat".into()),
        model: Some("demo-tiny@main".into()),
        machines: Vec::new(),
        model_bytes: 0,
        tokens: 16,
    }
}

const UNUSED: Usage = Usage {
    concurrent: 0,
    requests: 0,
    model_bytes: 0,
};

/// The code a judgement refused with, `None` when it was inside.
async fn refused(holder: &GrantEvaluator, peer: &str) -> Option<String> {
    holder
        .judge(call(peer), grant(), UNUSED)
        .await
        .err()
        .map(|r| r.code)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_evaluator_is_bound_with_generations_followed_by_every_replica() {
    let db = fresh_database().await;
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = replica(&db, dir_a.path()).await;
    let b = replica(&db, dir_b.path()).await;

    // Nothing bound: the shipped grant-standard with {} settings, on both.
    let shown = show(&a).await;
    assert_eq!(shown["generation"], 0, "{shown}");
    assert_eq!(shown["plugin"], "grant-standard", "{shown}");
    assert_eq!(shown["version"], "0.1.0", "{shown}");
    assert_eq!(shown["settings"], json!({}), "{shown}");
    assert_eq!(shown["shipped"], true, "{shown}");
    assert_eq!(shown["history"], json!([]), "{shown}");
    all_current(&a, 0, 2).await;

    // The holder federation asks: judging nothing before its first sync
    // fails closed, then grant-standard judges and charges.
    let store = Store::connect(&db).await.unwrap();
    let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
    let loader = Loader::new(store.clone(), runtime, "inst_probe".into());
    let holder = Arc::new(GrantEvaluator::new(Arc::new(loader)));
    assert_eq!(
        refused(&holder, "acme").await.as_deref(),
        Some(EVALUATOR_FAILED)
    );
    holder.sync().await.unwrap();
    assert_eq!(
        holder.judge(call("acme"), grant(), UNUSED).await,
        Ok(Charge {
            requests: 1,
            concurrent: 1,
            model_bytes: 0,
            tokens: 16
        })
    );
    assert_eq!(
        refused(&holder, "globex").await.as_deref(),
        Some("wrong_peer")
    );

    // Bind grant-standard with settings: generation 1, on replica A, which
    // B follows.
    let (status, body) = bind(
        &a,
        json!({"plugin": "grant-standard", "version": "0.1.0",
               "settings": {"deny_peers": ["acme"]}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["generation"], 1, "{body}");
    all_current(&b, 1, 2).await;
    let shown = show(&b).await;
    assert_eq!(
        shown["settings"],
        json!({"deny_peers": ["acme"]}),
        "{shown}"
    );
    assert_eq!(shown["shipped"], false, "{shown}");
    assert_eq!(shown["history"][0]["generation"], 1, "{shown}");
    assert_eq!(shown["history"][0]["note"], "set", "{shown}");
    holder.sync().await.unwrap();
    assert_eq!(
        refused(&holder, "acme").await.as_deref(),
        Some("peer_denied")
    );

    // A settings document the plugin refuses is not stored; generation 1
    // keeps serving everywhere.
    let (status, body) = bind(
        &a,
        json!({"plugin": "grant-standard", "version": "0.1.0",
               "settings": {"max_tokens_per_call": 0}}),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"]["code"], "invalid_settings", "{body}");
    assert_eq!(
        body["error"]["message"],
        "max_tokens_per_call must be at least 1, got 0"
    );
    let (status, body) = bind(
        &a,
        json!({"plugin": "grant-standard", "version": "0.1.0", "settings": {"deny": []}}),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"]["code"], "invalid_settings", "{body}");
    // A policy is no evaluator; an unknown plugin is not found; a typo in
    // the body is refused, not read as empty settings.
    let (status, body) = a
        .push("max-tokens", "1.0.0", &component("max-tokens"))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, body) = bind(
        &a,
        json!({"plugin": "max-tokens", "version": "1.0.0", "settings": {}}),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (StatusCode::UNPROCESSABLE_ENTITY, json!("wrong_kind")),
        "{body}"
    );
    let (status, body) = bind(&a, json!({"plugin": "nope", "version": "1"})).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (StatusCode::NOT_FOUND, json!("plugin_not_found")),
        "{body}"
    );
    let (status, body) = bind(
        &a,
        json!({"plugin": "grant-standard", "version": "0.1.0", "setings": {}}),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let shown = show(&b).await;
    assert_eq!(shown["generation"], 1, "{shown}");
    assert_eq!(shown["history"].as_array().unwrap().len(), 1, "{shown}");
    holder.sync().await.unwrap();
    assert_eq!(
        refused(&holder, "acme").await.as_deref(),
        Some("peer_denied")
    );

    // Another evaluator (the fixture, written with the SDK): generation 2.
    let (status, body) = a
        .push("grant-evaluator", "1.0.0", &component("grant-evaluator"))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, body) = bind(
        &b,
        json!({"plugin": "grant-evaluator", "version": "1.0.0", "settings": {}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["generation"], 2, "{body}");
    all_current(&a, 2, 2).await;
    assert_eq!(show(&a).await["plugin"], "grant-evaluator");
    // An evaluator that traps refuses the call (fail closed), and the
    // next call runs on a fresh instance.
    holder.sync().await.unwrap();
    let trapped = holder
        .judge(call("trap"), grant(), UNUSED)
        .await
        .unwrap_err();
    assert_eq!(trapped.code, EVALUATOR_FAILED, "{trapped:?}");
    assert!(
        trapped.message.contains("grant-evaluator@1.0.0 failed"),
        "{trapped:?}"
    );
    assert!(!trapped.message.contains("asked to trap"), "{trapped:?}");
    assert_eq!(refused(&holder, "acme").await, None);

    // Rollback walks back: 2 → 1's binding (generation 3), then → 0's, the
    // shipped evaluator (generation 4); past that there is nothing.
    let (status, body) = rollback(&a, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        (body["generation"].clone(), body["note"].clone()),
        (json!(3), json!("rollback to 1"))
    );
    all_current(&b, 3, 2).await;
    let shown = show(&b).await;
    assert_eq!(
        (shown["plugin"].clone(), shown["settings"].clone()),
        (json!("grant-standard"), json!({"deny_peers": ["acme"]}))
    );
    let (status, body) = rollback(&a, Some(json!({"generation": 0}))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["note"], "rollback to 0", "{body}");
    all_current(&a, 4, 2).await;
    let shown = show(&a).await;
    assert_eq!(
        (shown["shipped"].clone(), shown["settings"].clone()),
        (json!(true), json!({}))
    );
    holder.sync().await.unwrap();
    assert_eq!(refused(&holder, "acme").await, None);
    let (status, body) = rollback(&a, None).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (StatusCode::CONFLICT, json!("nothing_to_rollback")),
        "{body}"
    );
    let (status, body) = rollback(&a, Some(json!({"generation": 4}))).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (StatusCode::BAD_REQUEST, json!("invalid_request")),
        "{body}"
    );
    let history = show(&a).await["history"].clone();
    let numbers: Vec<i64> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["generation"].as_i64().unwrap())
        .collect();
    assert_eq!(numbers, [4, 3, 2, 1]);

    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_evaluator_routes_need_their_scopes() {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = replica(&db, dir.path()).await;
    let key = |scope: &'static str| {
        let replica = &replica;
        async move {
            let (status, created) = replica
                .call(
                    replica
                        .admin(Method::POST, "/api/keys")
                        .json(&json!({"name": scope.replace(':', "-"), "scopes": [scope]})),
                )
                .await;
            assert_eq!(status, StatusCode::CREATED, "{created}");
            created["token"].as_str().unwrap().to_string()
        }
    };
    let inference = key("inference").await;
    let manage = key("federation:manage").await;
    let url = format!("{}/api/federation/evaluator", replica.url);
    let binding = json!({"plugin": "grant-standard", "version": "0.1.0", "settings": {}});

    let (status, _) = replica.call(replica.http.get(&url)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // An inference key reads nothing of federation.
    let (status, body) = replica
        .call(replica.http.get(&url).bearer_auth(&inference))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    // federation:manage reads, but binding and rolling back are admin's.
    let (status, body) = replica
        .call(replica.http.get(&url).bearer_auth(&manage))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["plugin"], "grant-standard");
    for token in [&inference, &manage] {
        let (status, body) = replica
            .call(replica.http.put(&url).bearer_auth(token).json(&binding))
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
        let (status, body) = replica
            .call(
                replica
                    .http
                    .post(format!("{url}/rollback"))
                    .bearer_auth(token),
            )
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    }
    // Nothing was made by the refused calls.
    assert_eq!(show(&replica).await["generation"], 0);
    replica.stop().await;
}
