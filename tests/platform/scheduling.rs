//! The scheduler's state in PostgreSQL, against a real database: replica
//! leases from the database clock (a staging replica whose frontend died is
//! brought up again, a stop nobody confirmed is claimed again), failed
//! replicas tried again with a doubling backoff, a deleted deployment's
//! replicas kept (stopping, their GPUs counted) until their stop is
//! confirmed, and the scheduler lock ending with its pass even when the pass
//! is dropped. Then the model library across two replicas: a model imported
//! through one is served by the other (fetched from the first, or found on
//! the shared `--library-dir`).
//!
//! Time passing is the database clock moving past a lease: the tests move
//! the lease into the past (`state_until = now() - 1s`) instead of waiting.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::json;
use sha2::{Digest, Sha256};
use switchyard_protocol::state::ReplicaState;
use switchyard_store::Store;
use switchyard_store::deployments::{Deployment, FAILED_BACKOFF_BASE, Replica, STAGING_LEASE};
use switchyard_tests::db::fresh_database;
use switchyard_tests::process::ServeProcess;
use switchyard_tests::replica::Replica as Frontend;

/// A store on a fresh database with one node (`node_a`), a model revision
/// and a deployment (`dep_a`) of it.
async fn store() -> (Store, tokio_postgres::Client) {
    let url = fresh_database().await;
    let store = Store::connect(&url).await.expect("store");
    let client = switchyard_tests::db::connect(&url).await;
    client
        .batch_execute(
            "INSERT INTO nodes (id, name, state, credential_sha256)
                VALUES ('node_a', 'a', 'healthy', '\\x00');
             INSERT INTO model_revisions (model_id, revision, imported_by)
                VALUES ('demo', 'r1', 'test');",
        )
        .await
        .expect("seed rows");
    let deployment = Deployment {
        id: "dep_a".into(),
        model_id: "demo".into(),
        revision: "r1".into(),
        engine: "reference".into(),
        served_model_name: "demo".into(),
        replicas: 1,
        gpus_per_replica: 1,
        gpu_memory_bytes: 0,
        max_concurrency: 8,
        token_delay_ms: 0,
        strategy: "binpack".into(),
        node_selector: Default::default(),
        pending_reason: None,
        nodes: Vec::new(),
    };
    assert!(store.insert_deployment(&deployment, "test").await.unwrap());
    (store, client)
}

async fn place(store: &Store, id: &str) {
    store
        .insert_replica(&Replica {
            id: id.into(),
            deployment_id: "dep_a".into(),
            node_id: "node_a".into(),
            gpus: vec![0],
            state: ReplicaState::Placed,
            detail: None,
            staged_bytes: None,
            staging_total_bytes: None,
        })
        .await
        .unwrap();
}

async fn state_of(store: &Store, id: &str) -> Option<String> {
    store
        .replicas()
        .await
        .unwrap()
        .into_iter()
        .find(|r| r.id == id)
        .map(|r| r.state.to_string())
}

/// Seconds from the database's now to a replica's timestamp column.
async fn seconds_until(client: &tokio_postgres::Client, id: &str, column: &str) -> Option<f64> {
    client
        .query_one(
            &format!(
                "SELECT extract(epoch FROM {column} - now())::float8
                 FROM deployment_replicas WHERE id = $1"
            ),
            &[&id],
        )
        .await
        .unwrap()
        .get(0)
}

async fn expire(client: &tokio_postgres::Client, id: &str) {
    client
        .execute(
            "UPDATE deployment_replicas SET state_until = now() - interval '1 second',
                retry_at = now() - interval '1 second'
             WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_staging_replica_whose_lease_ran_out_is_brought_up_again() {
    let (store, client) = store().await;
    place(&store, "rep_1").await;
    store
        .set_replica_state("rep_1", ReplicaState::Staging, Some("checking"))
        .await
        .unwrap();
    // The lease comes from the database clock.
    let left = seconds_until(&client, "rep_1", "state_until")
        .await
        .unwrap();
    assert!(
        left > STAGING_LEASE.as_secs_f64() - 5.0 && left <= STAGING_LEASE.as_secs_f64(),
        "{left}"
    );
    // Within its lease nothing moves it.
    assert!(store.recover_replicas(&[]).await.unwrap().is_empty());

    // Progress renews the lease.
    expire(&client, "rep_1").await;
    store
        .set_replica_staging("rep_1", 10, 100, "staging")
        .await
        .unwrap();
    assert!(store.recover_replicas(&[]).await.unwrap().is_empty());

    // Its frontend died: past the lease it is placed again, unless a task of
    // the recovering frontend still works on it.
    expire(&client, "rep_1").await;
    assert!(
        store
            .recover_replicas(&["rep_1".to_string()])
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.recover_replicas(&[]).await.unwrap(), ["rep_1"]);
    assert_eq!(state_of(&store, "rep_1").await.as_deref(), Some("placed"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_replica_is_tried_again_after_a_doubling_backoff() {
    let (store, client) = store().await;
    place(&store, "rep_1").await;
    store.fail_replica("rep_1", "engine_failed").await.unwrap();
    let base = FAILED_BACKOFF_BASE.as_secs_f64();
    let first = seconds_until(&client, "rep_1", "retry_at").await.unwrap();
    assert!(first > base - 2.0 && first <= base, "{first}");
    // Not before its time.
    assert!(store.recover_replicas(&[]).await.unwrap().is_empty());
    assert_eq!(state_of(&store, "rep_1").await.as_deref(), Some("failed"));

    expire(&client, "rep_1").await;
    assert_eq!(store.recover_replicas(&[]).await.unwrap(), ["rep_1"]);
    assert_eq!(state_of(&store, "rep_1").await.as_deref(), Some("placed"));

    // A second failure in a row waits twice as long; the count is on the row.
    store.fail_replica("rep_1", "engine_failed").await.unwrap();
    let second = seconds_until(&client, "rep_1", "retry_at").await.unwrap();
    assert!(
        second > 2.0 * base - 2.0 && second <= 2.0 * base,
        "{second}"
    );
    let failures: i32 = client
        .query_one(
            "SELECT failures FROM deployment_replicas WHERE id = 'rep_1'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(failures, 2);

    // Once ready, the count starts again.
    expire(&client, "rep_1").await;
    store.recover_replicas(&[]).await.unwrap();
    store
        .set_replica_state("rep_1", ReplicaState::Ready, None)
        .await
        .unwrap();
    store.fail_replica("rep_1", "crashed").await.unwrap();
    let again = seconds_until(&client, "rep_1", "retry_at").await.unwrap();
    assert!(again <= base, "{again}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_deployments_replicas_stop_and_keep_their_gpus_until_confirmed() {
    let (store, client) = store().await;
    place(&store, "rep_1").await;
    store
        .set_replica_state("rep_1", ReplicaState::Staging, None)
        .await
        .unwrap();
    assert!(store.delete_deployment("dep_a").await.unwrap());
    assert!(store.deployment("dep_a").await.unwrap().is_none());
    // The replica stays, stopping, with its GPU, until its stop is confirmed.
    let replicas = store.replicas().await.unwrap();
    assert_eq!(replicas.len(), 1);
    assert_eq!(replicas[0].state, ReplicaState::Stopping);
    assert_eq!(replicas[0].gpus, [0]);
    // A bring-up finishing late does not bring it back.
    store
        .set_replica_state("rep_1", ReplicaState::Starting, None)
        .await
        .unwrap();
    store.fail_replica("rep_1", "late").await.unwrap();
    assert_eq!(state_of(&store, "rep_1").await.as_deref(), Some("stopping"));
    assert_eq!(store.replica_ids_on("node_a").await.unwrap(), ["rep_1"]);

    // The scheduler claims the stop once; a claim holds for its lease.
    let claims = store.claim_stops().await.unwrap();
    assert_eq!(claims.len(), 1);
    assert_eq!(
        (claims[0].id.as_str(), claims[0].node_id.as_str()),
        ("rep_1", "node_a")
    );
    assert!(!claims[0].again);
    assert!(store.claim_stops().await.unwrap().is_empty());
    // Unconfirmed past its lease (its frontend died): claimed again, the
    // last time.
    expire(&client, "rep_1").await;
    let claims = store.claim_stops().await.unwrap();
    assert_eq!(claims.len(), 1);
    assert!(claims[0].again);
    store.delete_replica("rep_1").await.unwrap();
    assert!(store.replica_ids_on("node_a").await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scheduler_lock_ends_with_its_pass_even_a_dropped_one() {
    let (store, _client) = store().await;
    let other = store.clone();
    let (inside_tx, inside_rx) = tokio::sync::oneshot::channel::<()>();
    let (leave_tx, leave_rx) = tokio::sync::oneshot::channel::<()>();
    let holder = tokio::spawn({
        let store = store.clone();
        async move {
            store
                .scheduler_pass(async move {
                    let _ = inside_tx.send(());
                    let _ = leave_rx.await;
                })
                .await
        }
    });
    inside_rx.await.unwrap();
    // While one pass runs, another frontend's pass does not.
    assert_eq!(other.scheduler_pass(async { 1 }).await.unwrap(), None);
    assert!(store.scheduler_lock_held().await.unwrap());
    leave_tx.send(()).unwrap();
    assert_eq!(holder.await.unwrap().unwrap(), Some(()));
    assert!(!store.scheduler_lock_held().await.unwrap());
    assert_eq!(other.scheduler_pass(async { 2 }).await.unwrap(), Some(2));

    // A pass dropped midway (its task aborted) leaves no lock behind, on
    // the pooled connection or anywhere.
    let (inside_tx, inside_rx) = tokio::sync::oneshot::channel::<()>();
    let dropped = tokio::spawn({
        let store = store.clone();
        async move {
            store
                .scheduler_pass(async move {
                    let _ = inside_tx.send(());
                    std::future::pending::<()>().await;
                })
                .await
        }
    });
    inside_rx.await.unwrap();
    dropped.abort();
    let _ = dropped.await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if other.scheduler_pass(async { 3 }).await.unwrap() == Some(3) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the dropped pass kept the lock"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!store.scheduler_lock_held().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_imported_through_one_replica_is_served_by_the_other() {
    let db = fresh_database().await;
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = Frontend::on(&db, dir_a.path()).await;
    let b = Frontend::on(&db, dir_b.path()).await;
    let weights: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let digest = hex::encode(Sha256::digest(&weights));
    let (status, _) = a
        .call(
            a.admin(Method::PUT, &format!("/api/library/blobs/{digest}"))
                .body(weights.clone()),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, body) = a
        .call(a.admin(Method::POST, "/api/models").json(&json!({
            "id": "demo", "revision": "r1",
            "files": [{"path": "m.gguf", "size": weights.len(), "sha256": digest}],
        })))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert!(
        !dir_b
            .path()
            .join("library/blobs/sha256")
            .join(&digest)
            .exists()
    );

    // The other replica serves it: fetched from the first, verified.
    let (status, body) = b
        .call(b.admin(Method::GET, &format!("/api/library/blobs/{digest}")))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["size"], weights.len());
    let copy = std::fs::read(dir_b.path().join("library/blobs/sha256").join(&digest)).unwrap();
    assert_eq!(copy, weights);

    // A blob no manifest names is not looked for.
    let unknown = hex::encode(Sha256::digest(b"nobody"));
    let (status, _) = b
        .call(b.admin(Method::GET, &format!("/api/library/blobs/{unknown}")))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // The route between replicas takes the cluster's relay secret only.
    let http = reqwest::Client::new();
    let internal = format!("{}/api/cluster/library/blobs/{digest}", a.url);
    let status = http.get(&internal).send().await.unwrap().status();
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let status = http
        .get(&internal)
        .header("x-switchyard-relay", "guess")
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_on_a_shared_library_dir_serve_each_others_imports() {
    let db = fresh_database().await;
    let (dir_a, dir_b, shared) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let env = [("SWITCHYARD_ADMIN_TOKEN", switchyard_tests::ADMIN_TOKEN)];
    let serve = |dir: &std::path::Path| {
        ServeProcess::start(
            &[
                "--database-url",
                &db,
                "--data-dir",
                dir.to_str().unwrap(),
                "--library-dir",
                shared.path().to_str().unwrap(),
            ],
            &env,
        )
    };
    let (a, b) = (serve(dir_a.path()), serve(dir_b.path()));
    let http = reqwest::Client::new();
    let weights = b"shared weights".to_vec();
    let digest = hex::encode(Sha256::digest(&weights));
    let uploaded = http
        .put(format!("{}/api/library/blobs/{digest}", a.url))
        .bearer_auth(switchyard_tests::ADMIN_TOKEN)
        .body(weights.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(uploaded.status(), StatusCode::CREATED);
    // The other replica holds it already (nothing to fetch), on the shared folder.
    let shown = http
        .get(format!("{}/api/library/blobs/{digest}", b.url))
        .bearer_auth(switchyard_tests::ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(shown.status(), StatusCode::OK);
    let stored = shared.path().join("blobs/sha256").join(&digest);
    assert_eq!(std::fs::read(stored).unwrap(), weights);
    assert!(
        !dir_b
            .path()
            .join("library/blobs/sha256")
            .join(&digest)
            .exists()
    );
    assert!(
        !dir_a
            .path()
            .join("library/blobs/sha256")
            .join(&digest)
            .exists()
    );
}
