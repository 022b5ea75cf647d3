//! The `pgbus` carrier component on a real PostgreSQL.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use switchyard_carrier::conformance::Passed;
use switchyard_carrier::{Carrier, CarrierSetup, ComponentSpec, Endpoint};
use switchyard_runtime::{Runtime, RuntimeConfig};
use switchyard_store::embedded::EmbeddedPostgres;
use switchyard_tests::bytes::pattern;
use switchyard_tests::db::fresh_database;
use switchyard_tests::plugins::component;

const WAIT: Duration = Duration::from_secs(10);

fn pgbus() -> ComponentSpec {
    ComponentSpec::new("pgbus", "test", component("pgbus"))
}

fn setup(database_url: &str, config: serde_json::Value) -> CarrierSetup {
    CarrierSetup {
        config: config.to_string(),
        database_url: Some(database_url.into()),
        allowed_endpoints: vec![Endpoint::Database],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_conformance_suite_passes() {
    let db = fresh_database().await;
    let runtime = Runtime::new(RuntimeConfig::for_carriers(None)).unwrap();
    let results = switchyard_carrier::conformance::run(
        pgbus(),
        setup(&db, serde_json::json!({"roots": ["jobs", "cache"]})),
        runtime,
    )
    .await
    .unwrap();
    let failed = switchyard_carrier::conformance::failures(&results);
    assert!(failed.is_empty(), "{failed:#?}");
    let queue = results
        .iter()
        .find(|r| r.name.contains("queue group"))
        .unwrap();
    assert_eq!(
        queue.outcome,
        Ok(Passed::NotServed),
        "pgbus fan-out refuses queue groups: the claim queue serves them"
    );
    let work = results
        .iter()
        .find(|r| r.name.contains("work queue"))
        .unwrap();
    assert_eq!(
        work.outcome,
        Ok(Passed::Yes),
        "the claim queue serves the work queue"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_messages_spill_and_the_spill_table_is_used() {
    let db = fresh_database().await;
    let runtime = Runtime::new(RuntimeConfig::for_carriers(None)).unwrap();
    let a = Carrier::start(pgbus(), setup(&db, serde_json::json!({})), runtime.clone()).unwrap();
    let b = Carrier::start(pgbus(), setup(&db, serde_json::json!({})), runtime).unwrap();
    assert!(a.wait_ready(WAIT).await && b.wait_ready(WAIT).await);
    let (_s, mut on_b) = b.subscribe("jobs.big", None).await.unwrap();
    let payloads: Vec<Bytes> = (0..20)
        .map(|i| Bytes::from(vec![i as u8; if i % 2 == 0 { 65536 } else { 10 }]))
        .collect();
    for payload in &payloads {
        a.publish("jobs.big", payload.clone()).await.unwrap();
    }
    for (i, payload) in payloads.iter().enumerate() {
        let m = tokio::time::timeout(WAIT, on_b.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&m.payload, payload, "message {i} in arrival order, whole");
    }
    let client = switchyard_tests::db::connect(&db).await;
    let spilled: i64 = client
        .query_one("SELECT count(*) FROM switchyard_carrier_spill", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        spilled, 10,
        "the ten 64 KiB messages went through the spill table"
    );
    // Short-lived payloads are not compressed (the largest CPU cost of a
    // spill burst in the profile, docs/benchmarks.md).
    let storage: Vec<String> = client
        .query(
            "SELECT attstorage::text FROM pg_attribute WHERE attname = 'payload' \
             AND attrelid IN ('switchyard_carrier_spill'::regclass, 'switchyard_carrier_queue'::regclass)",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(storage, ["e", "e"], "payloads stored EXTERNAL");
    assert_eq!(b.stats().dropped, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_postgres_is_survived_by_reconnecting_and_listening_again() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("pg");
    let start = {
        let data = data.clone();
        move || EmbeddedPostgres::start(&data).expect("a private PostgreSQL")
    };
    let mut pg = tokio::task::spawn_blocking(start.clone()).await.unwrap();
    let url = pg.url();
    let runtime = Runtime::new(RuntimeConfig::for_carriers(None)).unwrap();
    let (a, b): (Arc<Carrier>, Arc<Carrier>) = (
        Carrier::start(pgbus(), setup(&url, serde_json::json!({})), runtime.clone()).unwrap(),
        Carrier::start(pgbus(), setup(&url, serde_json::json!({})), runtime).unwrap(),
    );
    assert!(a.wait_ready(WAIT).await && b.wait_ready(WAIT).await);
    let (_s, mut on_b) = b.subscribe("cache.after", None).await.unwrap();

    pg = tokio::task::spawn_blocking(move || {
        pg.stop().unwrap();
        pg
    })
    .await
    .unwrap();
    assert!(
        a.wait_lost(WAIT).await && b.wait_lost(WAIT).await,
        "both saw the database go"
    );
    let restarted = tokio::task::spawn_blocking(start).await.unwrap();
    assert!(
        a.wait_ready(Duration::from_secs(30)).await && b.wait_ready(Duration::from_secs(30)).await,
        "both came back without a restart"
    );
    a.publish("cache.after", Bytes::from_static(b"back"))
        .await
        .unwrap();
    let m = tokio::time::timeout(WAIT, on_b.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(m.payload, Bytes::from_static(b"back"), "b listens again");
    assert!(a.stats().reconnects >= 1 && b.stats().reconnects >= 1);
    drop((a, b, pg));
    tokio::task::spawn_blocking(move || drop(restarted))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_replicas_pgbus_login_cannot_read_the_platform_tables() {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = switchyard_tests::replica::Replica::with(&db, dir.path(), |config| {
        config.carrier_plugins = Some(switchyard_tests::plugins::dir());
    })
    .await;
    let (_, shown) = replica
        .call(replica.admin(reqwest::Method::GET, "/api/cluster/carrier"))
        .await;
    assert_eq!(shown["running"], "tunnel", "{shown}");
    assert_eq!(shown["connected"], true, "{shown}");
    assert_eq!(shown["plugin"]["state"], "running", "{shown}");

    // The login the replica made; asking again changes nothing.
    let store = switchyard_store::Store::connect(&db).await.unwrap();
    let login = store
        .ensure_carrier_login()
        .await
        .unwrap()
        .expect("the test database's role may create roles");
    let client = switchyard_tests::db::connect(&login.url(&db)).await;

    // The replica's carrier is connected with it, not with the server's login.
    let sessions: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE usename = current_user AND pid <> pg_backend_pid()",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(sessions > 0, "no pgbus connection uses the carrier login");
    // And that login reads none of the platform's tables.
    for table in ["api_keys", "cluster_secrets", "nodes"] {
        let refused = client
            .query(&format!("SELECT * FROM public.{table}"), &[])
            .await
            .expect_err(table);
        assert_eq!(
            refused.code(),
            Some(&tokio_postgres::error::SqlState::INSUFFICIENT_PRIVILEGE),
            "{table}: {refused}"
        );
    }
    replica.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_createrole_the_carrier_login_falls_back_to_the_servers() {
    // A server whose role owns its database but may not create roles, as on
    // managed PostgreSQL.
    let db = fresh_database().await;
    let admin = switchyard_tests::db::connect(&db).await;
    let database: String = admin
        .query_one("SELECT current_database()", &[])
        .await
        .unwrap()
        .get(0);
    let owner = format!("{database}_owner");
    admin
        .batch_execute(&format!(
            "CREATE ROLE {owner} LOGIN NOCREATEROLE; ALTER DATABASE {database} OWNER TO {owner}"
        ))
        .await
        .unwrap();
    let store = switchyard_store::Store::connect(&format!("{db} user={owner}"))
        .await
        .expect("the owner runs the migrations");
    assert_eq!(store.ensure_carrier_login().await.unwrap(), None);
    // Nothing was left half made: no role, and the database still serves.
    let roles: i64 = admin
        .query_one(
            "SELECT count(*) FROM pg_roles WHERE rolname = 'switchyard_carrier_' || left(md5($1), 12)",
            &[&database],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(roles, 0);
    assert!(store.cluster_carrier().await.is_ok());
}

/// The message `seq` of publisher `publisher` in the burst below: 64 KiB
/// (spilled) except every fifth, which is small (inline); its first bytes
/// name it and the rest is a pattern of both, so a mixed-up slice of a
/// batch's payloads shows.
fn burst_message(publisher: u8, seq: u16) -> Bytes {
    let len = if seq % 5 == 4 { 16 } else { 65_536 };
    let mut payload: Vec<u8> = (0..len)
        .map(|i| (i as u64 * 7 + u64::from(seq) * 13 + u64::from(publisher)) as u8)
        .collect();
    payload[0] = publisher;
    payload[1..3].copy_from_slice(&seq.to_be_bytes());
    Bytes::from(payload)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_spills_is_batched_and_every_message_heard_once_in_publish_order() {
    const PUBLISHERS: u8 = 3;
    const EACH: u16 = 60;
    let db = fresh_database().await;
    // The server's limits for carriers: under the policies' 100 ms call
    // deadline a call descheduled on a busy machine traps and the rebuilt
    // plugin has lost what it held.
    let runtime = Runtime::new(RuntimeConfig::for_carriers(None)).unwrap();
    let mut frontends = Vec::new();
    for _ in 0..2 {
        let frontend =
            Carrier::start(pgbus(), setup(&db, serde_json::json!({})), runtime.clone()).unwrap();
        assert!(frontend.wait_ready(WAIT).await);
        frontends.push(frontend);
    }
    let mut inboxes = Vec::new();
    for frontend in &frontends {
        inboxes.push(frontend.subscribe("jobs.burst", None).await.unwrap());
    }
    let mut publishers = Vec::new();
    for _ in 0..PUBLISHERS {
        let config = serde_json::json!({"spill_readers": 1});
        let publisher = Carrier::start(pgbus(), setup(&db, config), runtime.clone()).unwrap();
        assert!(publisher.wait_ready(WAIT).await);
        publishers.push(publisher);
    }
    // Each publisher publishes its messages one after another without
    // waiting for the database: spills published while one is in flight
    // wait and go out together.
    let sends: Vec<_> = publishers
        .iter()
        .enumerate()
        .map(|(p, publisher)| {
            let publisher = publisher.clone();
            tokio::spawn(async move {
                for seq in 0..EACH {
                    publisher
                        .publish("jobs.burst", burst_message(p as u8, seq))
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    for send in sends {
        send.await.unwrap();
    }

    let total = usize::from(PUBLISHERS) * usize::from(EACH);
    for (f, (_subscription, inbox)) in inboxes.iter_mut().enumerate() {
        let mut next = [0u16; PUBLISHERS as usize];
        for _ in 0..total {
            let m = tokio::time::timeout(WAIT, inbox.recv())
                .await
                .unwrap_or_else(|_| panic!("frontend {f}: heard only {next:?}"))
                .unwrap();
            let publisher = m.payload[0];
            let seq = u16::from_be_bytes([m.payload[1], m.payload[2]]);
            assert_eq!(
                seq,
                next[usize::from(publisher)],
                "frontend {f}: publisher {publisher}'s messages in publish order, once"
            );
            assert!(
                m.payload == burst_message(publisher, seq),
                "frontend {f}: message {seq} of publisher {publisher} whole"
            );
            next[usize::from(publisher)] += 1;
        }
        assert_eq!(next, [EACH; PUBLISHERS as usize], "frontend {f}");
        assert!(inbox.try_recv().is_err(), "frontend {f}: nothing twice");
    }

    // Batched: the spilled rows were committed in fewer transactions than rows.
    let client = switchyard_tests::db::connect(&db).await;
    let row = client
        .query_one(
            "SELECT count(*), count(DISTINCT xmin::text) FROM switchyard_carrier_spill",
            &[],
        )
        .await
        .unwrap();
    let (rows, transactions): (i64, i64) = (row.get(0), row.get(1));
    assert_eq!(
        rows,
        i64::from(PUBLISHERS) * 48,
        "four of every five spilled"
    );
    assert!(
        transactions < rows,
        "{rows} spills in {transactions} transactions: not batched"
    );
    for frontend in &frontends {
        assert_eq!(frontend.stats().dropped, 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spilled_payloads_are_held_by_the_host_and_arrive_byte_exact() {
    let db = fresh_database().await;
    let runtime = Runtime::new(RuntimeConfig::for_carriers(None)).unwrap();
    let a = Carrier::start(pgbus(), setup(&db, serde_json::json!({})), runtime.clone()).unwrap();
    let b = Carrier::start(pgbus(), setup(&db, serde_json::json!({})), runtime).unwrap();
    assert!(a.wait_ready(WAIT).await && b.wait_ready(WAIT).await);
    let (_s, mut on_b) = b.subscribe("jobs.big", None).await.unwrap();
    let (_w, mut units) = b.subscribe("work.big", Some("workers")).await.unwrap();
    let (_q, mut asked) = b.subscribe("jobs.ask", None).await.unwrap();

    let small = pattern(100, 1);
    let big = pattern(65_536, 2);
    let unit = pattern(65_536, 3);
    let question = pattern(70_000, 4);
    let answer = pattern(300_000, 5);
    a.publish("jobs.big", small.clone()).await.unwrap();
    a.publish("jobs.big", big.clone()).await.unwrap();
    let unit_id = vec![("switchyard-unit-id".to_string(), "u-big".to_string())];
    a.publish_with_headers("work.big", unit_id, unit.clone())
        .await
        .unwrap();
    for (i, expected) in [&small, &big].into_iter().enumerate() {
        let m = tokio::time::timeout(WAIT, on_b.recv())
            .await
            .unwrap()
            .unwrap();
        assert!(m.payload == *expected, "message {i} byte-exact");
    }
    // A held payload bound into a work unit's row, and claimed held.
    let claimed = tokio::time::timeout(WAIT, units.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(claimed.payload == unit, "the work unit byte-exact");
    let ack = claimed
        .reply_to
        .expect("a claimed unit names its acknowledgement");
    b.publish(&ack, Bytes::new()).await.unwrap();

    // A spilled request and a spilled reply: held on both sides.
    let responder = {
        let b = b.clone();
        let answer = answer.clone();
        tokio::spawn(async move {
            let m = tokio::time::timeout(WAIT, asked.recv())
                .await
                .unwrap()
                .unwrap();
            b.publish(&m.reply_to.unwrap(), answer).await.unwrap();
            m.payload
        })
    };
    let reply = a.request("jobs.ask", question.clone(), WAIT).await.unwrap();
    assert!(
        responder.await.unwrap() == question,
        "the request byte-exact"
    );
    assert!(reply.payload == answer, "the reply byte-exact");

    // The guest was handed only the payload short enough to go inline:
    // outgoing, and in the rows read back (spill reads, the claim).
    assert_eq!(a.stats().inline_payload_bytes, small.len() as u64);
    assert_eq!(b.stats().inline_payload_bytes, 0);
    for (name, frontend) in [("a", &a), ("b", &b)] {
        let stats = frontend.stats();
        assert!(stats.cell_bytes < 1024, "{name}: {stats:?}");
    }
    let client = switchyard_tests::db::connect(&db).await;
    let spilled: Vec<i64> = client
        .query(
            "SELECT length(payload)::bigint FROM switchyard_carrier_spill ORDER BY id",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(
        spilled,
        [65_536, 70_000, 300_000],
        "the three large ones spilled"
    );
    assert_eq!(b.stats().dropped, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pgbus_of_the_0_1_0_world_still_passes_and_talks_to_the_current_one() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/pgbus-0.1.0/pgbus.wasm"
    );
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let info = switchyard_runtime::inspect::inspect(&bytes).unwrap();
    assert_eq!(info.world, "switchyard:carrier/carrier@0.1.0");
    let current = switchyard_runtime::inspect::inspect(&component("pgbus")).unwrap();
    assert_eq!(current.world, "switchyard:carrier/carrier@0.3.0");
    let old = ComponentSpec::new("pgbus", "0.1.0", bytes);

    // The host's 0.1.0 database path (queries, rows, notifications).
    let db = fresh_database().await;
    let runtime = Runtime::new(RuntimeConfig::for_carriers(None)).unwrap();
    let config = serde_json::json!({"roots": ["jobs", "cache"]});
    let results =
        switchyard_carrier::conformance::run(old.clone(), setup(&db, config), runtime.clone())
            .await
            .unwrap();
    let failed = switchyard_carrier::conformance::failures(&results);
    assert!(failed.is_empty(), "{failed:#?}");

    // The notification and spill formats did not change: during a set's
    // upgrade both versions hear each other, spills included.
    let db = fresh_database().await;
    let a = Carrier::start(old, setup(&db, serde_json::json!({})), runtime.clone()).unwrap();
    let b = Carrier::start(pgbus(), setup(&db, serde_json::json!({})), runtime).unwrap();
    assert!(a.wait_ready(WAIT).await && b.wait_ready(WAIT).await);
    let (_a, mut on_a) = a.subscribe("jobs.mixed", None).await.unwrap();
    let (_b, mut on_b) = b.subscribe("jobs.mixed", None).await.unwrap();
    let from_old = pattern(65_536, 6);
    let from_new = pattern(65_536, 7);
    a.publish("jobs.mixed", from_old.clone()).await.unwrap();
    b.publish("jobs.mixed", from_new.clone()).await.unwrap();
    for (name, inbox) in [("old", &mut on_a), ("new", &mut on_b)] {
        // Two publishers: no order between them.
        let mut heard = Vec::new();
        for _ in 0..2 {
            let m = tokio::time::timeout(WAIT, inbox.recv())
                .await
                .unwrap()
                .unwrap();
            heard.push(m.payload);
        }
        assert!(
            heard.contains(&from_old) && heard.contains(&from_new),
            "{name} heard both byte-exact"
        );
    }
    // The old one took its payloads into the guest, as 0.1.0 promised.
    let stats = a.stats();
    assert!(stats.inline_payload_bytes >= 65_536, "{stats:?}");
    assert!(stats.cell_bytes >= 2 * 65_536, "{stats:?}");
    let stats = b.stats();
    assert_eq!(stats.inline_payload_bytes, 0, "{stats:?}");
    assert!(stats.cell_bytes < 1024, "{stats:?}");
}
