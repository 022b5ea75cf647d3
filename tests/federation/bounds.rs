//! Bounded metadata: 128 peers, 256 offers, 256 grants and 2,048
//! operation receipts per cluster. Beyond a bound: 409 `limit_reached`
//! naming it. Discarding, retiring and forgetting reclaim room; an active
//! grant cannot be pruned (409 `grant_active`).

use reqwest::{Method, StatusCode};
use serde_json::json;
use switchyard_tests::federation::{Member, grant};

fn runtime_offer(i: usize) -> serde_json::Value {
    json!({"id": format!("rt-{i}"), "resource": {"kind": "runtime", "engine": "reference"}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offers_and_grants_are_bounded_and_reclaimed() {
    let (alpha, beta) = tokio::join!(Member::bare("alpha"), Member::bare("beta"));
    alpha.join(&beta).await;

    // 256 offers; the next is refused, a withdrawal makes room.
    for i in 0..256 {
        beta.expect(
            StatusCode::CREATED,
            Method::POST,
            "/api/federation/offers",
            Some(runtime_offer(i)),
        )
        .await;
    }
    let (status, refused) = beta
        .call(
            Method::POST,
            "/api/federation/offers",
            Some(runtime_offer(256)),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(refused["error"]["code"], "limit_reached");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("offers"),
        "{refused}"
    );
    beta.expect(
        StatusCode::NO_CONTENT,
        Method::DELETE,
        "/api/federation/offers/rt-0",
        None,
    )
    .await;
    beta.expect(
        StatusCode::CREATED,
        Method::POST,
        "/api/federation/offers",
        Some(runtime_offer(256)),
    )
    .await;

    // 256 grants (each kept on both sides); the next is refused.
    let share = json!({"peer": "alpha", "operations": ["models:transfer"], "lifetime_s": 3600,
                       "max_concurrent": 1, "max_requests": 1});
    let first = grant(
        &beta,
        &alpha,
        &["models:transfer"],
        json!({"operations": ["models:transfer"], "lifetime_s": 3600,
               "max_concurrent": 1, "max_requests": 1}),
    )
    .await;
    let mut last = String::new();
    for _ in 1..256 {
        let made = beta
            .expect(
                StatusCode::CREATED,
                Method::POST,
                "/api/federation/grants",
                Some(share.clone()),
            )
            .await;
        last = made["id"].as_str().unwrap().to_string();
    }
    let (status, refused) = beta
        .call(Method::POST, "/api/federation/grants", Some(share.clone()))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(refused["error"]["code"], "limit_reached");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("grants"),
        "{refused}"
    );
    let bounds = beta
        .expect(StatusCode::OK, Method::GET, "/api/federation/status", None)
        .await["bounds"]
        .clone();
    assert_eq!(bounds["grants"], 256, "{bounds}");
    assert_eq!(bounds["offers"], 256, "{bounds}");

    // An active grant cannot be pruned; a revoked one is retired (on
    // both sides), and its room is taken again.
    let (status, refused) = beta
        .call(
            Method::DELETE,
            &format!("/api/federation/grants/{first}"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(refused["error"]["code"], "grant_active");
    beta.expect(
        StatusCode::OK,
        Method::POST,
        &format!("/api/federation/grants/{first}/revoke"),
        None,
    )
    .await;
    for member in [&beta, &alpha] {
        member
            .expect(
                StatusCode::NO_CONTENT,
                Method::DELETE,
                &format!("/api/federation/grants/{first}"),
                None,
            )
            .await;
    }
    // A never-completed grant is pruned too.
    alpha
        .expect(
            StatusCode::NO_CONTENT,
            Method::DELETE,
            &format!("/api/federation/grants/{last}"),
            None,
        )
        .await;
    beta.expect(
        StatusCode::NO_CONTENT,
        Method::DELETE,
        &format!("/api/federation/grants/{last}"),
        None,
    )
    .await;
    beta.expect(
        StatusCode::CREATED,
        Method::POST,
        "/api/federation/grants",
        Some(share.clone()),
    )
    .await;

    // An unanswered request is discarded on either side.
    let asked = alpha
        .expect(
            StatusCode::CREATED,
            Method::POST,
            "/api/federation/peers/beta/requests",
            Some(json!({"operations": ["inference"]})),
        )
        .await;
    let id = asked["id"].as_str().unwrap();
    beta.expect(
        StatusCode::NO_CONTENT,
        Method::DELETE,
        &format!("/api/federation/requests/{id}"),
        None,
    )
    .await;
    let (status, _) = beta
        .call(
            Method::DELETE,
            &format!("/api/federation/requests/{id}"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // A request naming more operations than there are is refused unsent.
    let (status, refused) = alpha
        .call(
            Method::POST,
            "/api/federation/peers/beta/requests",
            Some(json!({"operations": vec!["inference"; 9]})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peers_and_operation_receipts_are_bounded_and_forgetting_reclaims_them() {
    let (alpha, beta) = tokio::join!(Member::bare("alpha"), Member::bare("beta"));
    // 127 peers already known to alpha (made in its database: 127 clusters
    // are more than this machine runs; peers that dial alpha, so that alpha
    // does not dial 127 addresses that do not exist); the 128th joins, the
    // 129th not.
    let db = switchyard_tests::db::connect(&alpha.cluster.database_url).await;
    db.batch_execute(
        "INSERT INTO federation_peers (id, label, cluster_id, public_key) \
         SELECT 'peer_fill' || i, 'fill' || i, 'cluster_fill' || i, 'key' || i \
         FROM generate_series(1, 127) AS i",
    )
    .await
    .unwrap();
    alpha.join(&beta).await;
    let gamma = Member::bare("gamma").await;
    let token = gamma.join_token().await;
    let (status, refused) = alpha
        .call(
            Method::POST,
            "/api/federation/peers",
            Some(json!({"url": gamma.url(), "join_token": token, "label": "gamma"})),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(refused["error"]["code"], "limit_reached");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("peers"),
        "{refused}"
    );
    // Alpha's half failed before gamma wrote its own: gamma keeps nothing.
    gamma
        .expect(
            StatusCode::NOT_FOUND,
            Method::GET,
            "/api/federation/peers/alpha",
            None,
        )
        .await;
    alpha
        .expect(
            StatusCode::NO_CONTENT,
            Method::DELETE,
            "/api/federation/peers/fill1",
            None,
        )
        .await;
    alpha.join(&gamma).await;

    // 2,048 receipts on beta: the next operation is refused, naming the
    // bound; forgetting the peer deletes its receipts.
    let grant = grant(
        &beta,
        &alpha,
        &["inference:manage"],
        json!({"operations": ["inference:manage"], "lifetime_s": 3600,
               "max_concurrent": 1, "max_requests": 5000}),
    )
    .await;
    let db = switchyard_tests::db::connect(&beta.cluster.database_url).await;
    db.execute(
        "INSERT INTO federation_operations (peer_id, id, grant_id, request_sha256, state) \
         SELECT p.id, 'op-' || i, $1, 'x', 'done' \
         FROM federation_peers p, generate_series(1, 2048) AS i WHERE p.label = 'alpha'",
        &[&grant],
    )
    .await
    .unwrap();
    let (status, refused) = alpha
        .call(
            Method::POST,
            "/api/federation/peers/beta/services",
            Some(
                json!({"grant": grant, "operation_id": "op-new", "action": "stop",
                        "service": "none", "revision": 1}),
            ),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(refused["error"]["code"], "limit_reached");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("operation receipts"),
        "{refused}"
    );
    // An active grant keeps its replay protection: it cannot be pruned.
    let (status, _) = beta
        .call(
            Method::DELETE,
            &format!("/api/federation/grants/{grant}"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    beta.expect(
        StatusCode::NO_CONTENT,
        Method::DELETE,
        "/api/federation/peers/alpha",
        None,
    )
    .await;
    let bounds = beta
        .expect(StatusCode::OK, Method::GET, "/api/federation/status", None)
        .await["bounds"]
        .clone();
    assert_eq!(bounds["operations"], 0, "{bounds}");
    assert_eq!(bounds["grants"], 0, "{bounds}");
    assert_eq!(bounds["peers"], 0, "{bounds}");
}
