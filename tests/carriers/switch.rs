//! The live carrier switch end to end (issue 10's "Done means"): real
//! `serve` replicas on one database, real workers, a real nats-server, the
//! reference engine serving a deployed model, and chat clients that must
//! not see one failure while the cluster moves between `nats` and `tunnel`
//! or to another version of a carrier component. Broadcasts and work units
//! are counted by id through the probe (`POST /api/cluster/probe`).
//!
//! Where a phase must be held open (a prepare to abort, a replica stopped
//! after it built the target, a leader killed in commit), a node the test
//! heartbeats itself ([`Gate`]) keeps the prepare waiting until the test
//! opens it: real workers attach within milliseconds, so anything else
//! would be a race.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};
use switchyard_store::carrier_switch::LEADER_LOCK;
use switchyard_tests::ADMIN_TOKEN;
use switchyard_tests::db::fresh_database;
use switchyard_tests::nats::worker_flags;
use switchyard_tests::plugins::component;
use switchyard_tests::switch::{
    Change, Cluster, Gate, Load, Nats, Probes, UNIT_PATIENCE, change, count_probes, eventually,
    eventually_within, push_plugin, second_build, settled_on, start_change,
};

/// Chat clients during a change.
const CLIENTS: usize = 8;
/// One probe (broadcast + unit) every this long during a change.
const PROBE_EVERY: Duration = Duration::from_millis(20);

/// A cluster of two replicas seeded on `nats`, two workers that can follow
/// to either set, and a model served on both workers.
async fn nats_cluster_serving(nats: &Nats) -> Cluster {
    let url = nats.address();
    let mut cluster = Cluster::start(fresh_database().await, 2, &["--nats-url", &url]).await;
    let status = cluster.carrier(0).await;
    assert_eq!(status["carrier"], "nats", "{status}");
    assert_eq!(status["state"], "stable", "{status}");
    cluster.start_worker("gpu-1", 0, &worker_flags(Some(&nats.server)));
    cluster.start_worker("gpu-2", 1, &worker_flags(Some(&nats.server)));
    cluster.workers_attached("nats").await;
    cluster.deploy(2, 10).await;
    cluster
}

/// Moves the cluster with `body` while [`CLIENTS`] chat clients send
/// through both frontends and probes are posted; asserts zero failed
/// requests, more than 20 completed during the change, the same worker and
/// engine processes before and after, and every probe unit handled exactly
/// once and every broadcast after the commit heard exactly once per replica.
async fn change_under_load(cluster: &mut Cluster, body: Value, target: &str, tag: &str) -> Change {
    let urls: Vec<String> = (0..cluster.replicas.len())
        .map(|i| cluster.url(i).to_string())
        .collect();
    let (workers_before, engines_before) = cluster.pids().await;
    assert_eq!(engines_before.len(), 2, "{engines_before:?}");
    let load = Load::start(
        &cluster.http,
        &urls,
        cluster.key.as_deref().unwrap(),
        CLIENTS,
    );
    let probes = Probes::start(&cluster.http, &urls, tag, PROBE_EVERY);
    let warm = Instant::now();
    eventually("requests complete before the change", || async {
        load.completed_between(warm, Instant::now()) >= CLIENTS
    })
    .await;
    let moved = change(cluster, 0, body, target).await;
    eventually("requests complete after the change", || async {
        load.completed_between(moved.settled, Instant::now()) >= CLIENTS
    })
    .await;
    let posted = probes.stop().await;
    let during = load.completed_between(moved.requested, moved.settled);
    // When each failure ended, from the request (committed and settled as polled).
    let offset = |at: Instant| match at.checked_duration_since(moved.requested) {
        Some(after) => format!("+{after:?}"),
        None => format!("-{:?}", moved.requested - at),
    };
    let timed: Vec<String> = load
        .failures()
        .into_iter()
        .map(|(at, e)| {
            format!(
                "{} (committed {}, settled {}): {e}",
                offset(at),
                offset(moved.committed),
                offset(moved.settled)
            )
        })
        .collect();
    let (completed, failures) = load.stop().await;
    eprintln!(
        "{tag}: answered in {:?}, replicas ready after {:?}, workers attached after {:?}, \
         past prepare after {:?}, settled after {:?}; \
         {completed} requests, {during} during the change; record {}",
        moved.answered - moved.requested,
        moved.replicas_ready.map(|t| t - moved.requested),
        moved.workers_attached.map(|t| t - moved.requested),
        moved.committed - moved.requested,
        moved.settled - moved.requested,
        moved.record
    );
    assert!(failures.is_empty(), "{} failed: {timed:?}", failures.len());
    assert!(
        during > 20,
        "only {during} requests completed during the change"
    );

    let count = count_probes(
        &cluster.http,
        &urls,
        &posted,
        moved.committed,
        UNIT_PATIENCE,
    )
    .await;
    assert!(count.clean(), "{} probes: {count:?}", posted.len());

    let (workers_after, engines_after) = cluster.pids().await;
    assert_eq!(workers_before, workers_after, "a worker restarted");
    assert_eq!(engines_before, engines_after, "an engine restarted");
    for worker in &mut cluster.workers {
        assert!(worker.alive(), "worker {} exited", worker.name);
    }
    moved
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cluster_on_nats_moves_to_tunnel_and_back_under_chat_load() {
    let nats = Nats::start();
    let mut cluster = nats_cluster_serving(&nats).await;

    // A dry run changes nothing; it says nothing blocks.
    let before = cluster.carrier(1).await;
    let (status, dry) = cluster
        .post(
            1,
            "/api/cluster/carrier",
            json!({"target": "tunnel", "dry_run": true}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{dry}");
    assert_eq!(dry["ok"], true, "{dry}");
    assert_eq!(dry["blockers"], json!([]), "{dry}");
    let after = cluster.carrier(1).await;
    for field in [
        "carrier",
        "plugins",
        "epoch",
        "state",
        "target",
        "last_change",
    ] {
        assert_eq!(before[field], after[field], "{field} changed by a dry run");
    }
    // Unknown sets and versions: 400; what runs already: 422.
    for body in [
        json!({"target": "carrier-pigeon"}),
        json!({"target": "nats", "plugins": {"nats": "9.9.9"}}),
        json!({"target": "nats", "plugins": {"pigeon": "1.0.0"}}),
    ] {
        let (status, answer) = cluster.post(0, "/api/cluster/carrier", body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
        assert_eq!(answer["error"]["code"], "unknown_target", "{answer}");
    }
    let (status, answer) = cluster
        .post(0, "/api/cluster/carrier", json!({"target": "nats"}))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    assert_eq!(answer["blockers"][0]["code"], "already_active", "{answer}");
    assert_eq!(cluster.carrier(0).await["epoch"], before["epoch"]);

    // nats → tunnel under load; then nothing holds NATS connections.
    let to_tunnel =
        change_under_load(&mut cluster, json!({"target": "tunnel"}), "tunnel", "n2t").await;
    eventually("every NATS connection closed after the settle", || async {
        nats.connections().await == 0
    })
    .await;
    cluster.workers_attached("tunnel").await;

    // tunnel → nats the same way; every process dials NATS again.
    let to_nats = change_under_load(&mut cluster, json!({"target": "nats"}), "nats", "t2n").await;
    eventually("replicas and workers connected to NATS again", || async {
        nats.connections().await >= 4
    })
    .await;
    cluster.workers_attached("nats").await;

    // A submit that was in flight on `tunnel` when the change settled lands
    // on pgbus's queue after the settle moved what was there (seen under
    // load: enqueued 112 ms after `settled_at`): it still runs, once.
    strand_unit(&cluster.database_url, "stranded-1").await;
    let urls: Vec<String> = (0..2).map(|i| cluster.url(i).to_string()).collect();
    let stranded = [(
        "stranded-1".to_string(),
        Instant::now(),
        StatusCode::ACCEPTED,
    )];
    let far = Instant::now() + Duration::from_secs(3600);
    let count = count_probes(&cluster.http, &urls, &stranded, far, UNIT_PATIENCE).await;
    assert!(count.clean(), "{count:?}");
    for moved in [to_tunnel, to_nats] {
        assert!(
            moved.record["prepare_ms"].as_f64().is_some(),
            "{:?}",
            moved.record
        );
        assert!(
            moved.record["drain_ms"].as_f64().is_some(),
            "{:?}",
            moved.record
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_nats_plugin_upgrade_and_a_cli_switch_under_chat_load() {
    let nats = Nats::start();
    let mut cluster = nats_cluster_serving(&nats).await;
    let old = cluster.carrier(0).await["plugins"]["nats"].clone();

    // A second build of the nats component under another version.
    let bytes = second_build(&component("nats"), "e2e-upgrade");
    push_plugin(&cluster, "nats", "0.2.0-e2e", bytes.clone()).await;
    change_under_load(
        &mut cluster,
        json!({"target": "nats", "plugins": {"nats": "0.2.0-e2e"}}),
        "nats",
        "upgrade",
    )
    .await;
    let status = cluster.carrier(1).await;
    assert_eq!(
        status["plugins"]["nats"]["version"], "0.2.0-e2e",
        "{status}"
    );
    assert_eq!(
        status["plugins"]["nats"]["sha256"],
        switchyard_tests::plugins::sha256(&bytes),
        "{status}"
    );
    assert_ne!(status["plugins"]["nats"], old);
    cluster.workers_attached("nats").await;

    // The CLI moves it to tunnel and draws the phases until settled, under load.
    let urls: Vec<String> = (0..2).map(|i| cluster.url(i).to_string()).collect();
    let load = Load::start(
        &cluster.http,
        &urls,
        cluster.key.as_deref().unwrap(),
        CLIENTS,
    );
    let output = tokio::process::Command::new(switchyard_tests::process::binary())
        .args(["carrier", "switch", "--to", "tunnel", "--yes", "--wait"])
        .args(["--server", cluster.url(1), "--token", ADMIN_TOKEN])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    let (completed, failures) = load.stop().await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(!stdout.contains(ADMIN_TOKEN) && !stderr.contains(ADMIN_TOKEN));
    let status = cluster.carrier(0).await;
    assert_eq!(
        (status["carrier"].as_str(), status["state"].as_str()),
        (Some("tunnel"), Some("stable")),
        "{status}"
    );
    assert_eq!(status["last_change"]["outcome"], "settled", "{status}");
    assert!(
        failures.is_empty(),
        "{} of {completed} failed: {failures:?}",
        failures.len()
    );
    eprintln!("cli: {completed} requests, stdout:\n{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_that_cannot_follow_blocks_nats_until_forced_and_is_demoted_then_promoted() {
    let nats = Nats::start();
    let mut cluster = Cluster::start(fresh_database().await, 2, &[]).await;
    let seeded = cluster.carrier(0).await;
    assert_eq!(seeded["carrier"], "tunnel", "{seeded}");

    // Saving a NATS URL checks it and never switches.
    let (status, saved) = cluster
        .put(
            0,
            "/api/cluster/settings",
            json!({"nats_url": format!("nats://{}", nats.address()), "prepare_timeout_ms": 60000}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{saved}");
    let after = cluster.carrier(1).await;
    for field in ["carrier", "epoch", "state", "last_change"] {
        assert_eq!(
            seeded[field], after[field],
            "{field} changed by saving a NATS URL"
        );
    }

    // One worker without an address (it cannot serve nats streams), one with.
    let edge = cluster.start_worker("edge-1", 0, &[]);
    let full = cluster.start_worker("gpu-1", 1, &worker_flags(Some(&nats.server)));
    cluster.workers_attached("tunnel").await;
    let edge_node = cluster.node_id(edge).await;
    let full_node = cluster.node_id(full).await;
    eventually(
        "the worker without an address says it cannot follow to nats",
        || async { cluster.worker_report(&edge_node).await["cannot_follow"]["nats"].is_string() },
    )
    .await;

    // Blocked: a dry run says so, the real request is 422 naming the worker.
    let (status, dry) = cluster
        .post(
            0,
            "/api/cluster/carrier",
            json!({"target": "nats", "dry_run": true}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{dry}");
    assert_eq!(dry["ok"], false, "{dry}");
    let names_edge = |body: &Value| {
        body["blockers"].as_array().is_some_and(|b| {
            b.iter().any(|b| {
                b["code"] == "worker_cannot_follow"
                    && b["message"]
                        .as_str()
                        .is_some_and(|m| m.contains(&edge_node))
            })
        })
    };
    assert!(names_edge(&dry), "{dry}");
    let (status, blocked) = cluster
        .post(1, "/api/cluster/carrier", json!({"target": "nats"}))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{blocked}");
    assert_eq!(blocked["error"]["code"], "blocked", "{blocked}");
    assert!(names_edge(&blocked), "{blocked}");
    assert!(
        !blocked["blockers"].to_string().contains(&full_node),
        "{blocked}"
    );

    // Abort in prepare (a gate holds it there): 200, the epoch grew; again: 409.
    let gate = Gate::register(&cluster, "gate").await;
    gate.shut();
    let (_, status, started) =
        start_change(&cluster, 0, &json!({"target": "nats", "force": true})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{started}");
    let (status, again) = cluster
        .post(
            1,
            "/api/cluster/carrier",
            json!({"target": "nats", "force": true}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{again}");
    assert_eq!(again["error"]["code"], "change_under_way", "{again}");
    let (status, aborted) = cluster
        .post(1, "/api/cluster/carrier", json!({"abort": true}))
        .await;
    assert_eq!(status, StatusCode::OK, "{aborted}");
    assert!(
        aborted["epoch"].as_i64() > started["epoch"].as_i64(),
        "{started} → {aborted}"
    );
    let (status, twice) = cluster
        .post(0, "/api/cluster/carrier", json!({"abort": true}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{twice}");
    assert_eq!(twice["error"]["code"], "nothing_to_abort", "{twice}");
    let status = cluster.carrier(0).await;
    assert_eq!(
        (status["carrier"].as_str(), status["state"].as_str()),
        (Some("tunnel"), Some("stable")),
        "{status}"
    );
    assert_eq!(status["last_change"]["outcome"], "aborted", "{status}");
    eventually("workers let go of the aborted target", || async {
        let report = cluster.worker_report(&full_node).await;
        report["attached"] == json!(["tunnel"])
    })
    .await;

    // Forced: the worker that can follow is killed during the prepare and
    // restarted on its identity; it re-attaches, and the change settles.
    let (_, status, started) =
        start_change(&cluster, 0, &json!({"target": "nats", "force": true})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{started}");
    cluster.workers[full].kill();
    cluster.restart_worker(full, 1, &worker_flags(Some(&nats.server)));
    let epoch = started["epoch"].as_i64().unwrap();
    eventually("the restarted worker attached to the target", || async {
        let report = cluster.worker_report(&full_node).await;
        report["attached"]
            .as_array()
            .is_some_and(|a| a.iter().any(|s| s == "nats"))
            && report["epoch_seen"].as_i64().unwrap_or(0) >= epoch
    })
    .await;
    gate.open();
    settled_on(&cluster, 0, "nats").await;
    cluster.workers_attached_some(&[full], "nats").await;

    // The worker that cannot follow stays registered, demoted, with why.
    eventually(
        "the worker without an address is demoted with its reason",
        || async {
            let report = cluster.worker_report(&edge_node).await;
            report["demoted_reason"]
                .as_str()
                .is_some_and(|r| !r.is_empty())
        },
    )
    .await;
    let nodes = cluster.get(0, "/api/nodes").await;
    assert!(nodes.to_string().contains(&edge_node), "deleted: {nodes}");
    assert_eq!(
        cluster.worker_report(&full_node).await["demoted_reason"],
        Value::Null
    );

    // Given an address, it follows and is promoted again.
    cluster.restart_worker(edge, 0, &worker_flags(Some(&nats.server)));
    eventually("the worker given an address is promoted", || async {
        let report = cluster.worker_report(&edge_node).await;
        report["demoted_reason"].is_null()
            && report["attached"]
                .as_array()
                .is_some_and(|a| a.iter().any(|s| s == "nats"))
    })
    .await;
}

/// Leaves a probe unit on pgbus's queue as a submit in flight on the old
/// set does when it lands after the settle.
async fn strand_unit(database_url: &str, id: &str) {
    let client = switchyard_tests::db::connect(database_url).await;
    let schema: String = client
        .query_one(
            "SELECT table_schema::text FROM information_schema.tables
              WHERE table_name = 'switchyard_carrier_queue'",
            &[],
        )
        .await
        .expect("pgbus queued on this database")
        .get(0);
    client
        .execute(
            &format!(
                "INSERT INTO \"{schema}\".switchyard_carrier_queue (unit_id, subject, headers, payload)
                 VALUES ($1, 'work.probe', '', $2)"
            ),
            &[&id, &id.as_bytes()],
        )
        .await
        .unwrap();
}

/// The backend holding the carrier leader lock, if any.
async fn leader_backend(database_url: &str) -> Option<i32> {
    let client = switchyard_tests::db::connect(database_url).await;
    // A bigint advisory key shows as classid (high half) and objid (low
    // half); pg_locks lists every database's (other tests' leaders too).
    let high = ((LEADER_LOCK >> 32) as u32).to_string();
    let low = ((LEADER_LOCK & 0xffff_ffff) as u32).to_string();
    client
        .query_opt(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
               AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
               AND objsubid = 1 AND classid::text = $1 AND objid::text = $2",
            &[&high, &low],
        )
        .await
        .unwrap()
        .map(|row| row.get(0))
}

/// The row as the database holds it.
async fn row_state(database_url: &str) -> (String, String) {
    let client = switchyard_tests::db::connect(database_url).await;
    let row = client
        .query_one("SELECT carrier, state FROM cluster_carrier", &[])
        .await
        .unwrap();
    (row.get(0), row.get(1))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_leader_is_replaced_in_commit_and_a_stopped_replica_does_not_hold_a_prepare() {
    let nats = Nats::start();
    let url = nats.address();
    let nats_flags = ["--nats-url", url.as_str()];
    let mut cluster = Cluster::start(fresh_database().await, 3, &nats_flags).await;
    assert_eq!(cluster.carrier(0).await["carrier"], "nats");
    let database_url = cluster.database_url.clone();
    let gate = Gate::register(&cluster, "gate").await;
    eventually("the first replica leads", || async {
        leader_backend(&database_url).await.is_some()
    })
    .await;
    let leader = leader_backend(&database_url).await;

    // Every replica builds the target; the third is stopped; the gate opens
    // and the change commits; the third has not acted on the commit, so the
    // change stays in commit while its report is fresh.
    gate.shut();
    let (_, status, started) = start_change(&cluster, 1, &json!({"target": "tunnel"})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{started}");
    eventually("every replica built the target", || async {
        let status = cluster.carrier(1).await;
        status["state"] == "prepare"
            && status["replicas"]
                .as_array()
                .is_some_and(|r| r.len() == 3 && r.iter().all(|r| r["ready"] == true))
    })
    .await;
    cluster.replicas[2].signal("STOP");
    gate.open();
    eventually_within("the change committed", Duration::from_secs(5), || async {
        row_state(&database_url).await.1 == "commit"
    })
    .await;
    // The leader dies between commit and settle.
    let killed_at = Instant::now();
    cluster.replicas[0].kill();
    assert_eq!(
        row_state(&database_url).await,
        ("tunnel".to_string(), "commit".to_string()),
        "settled before the leader was killed"
    );
    eventually("another replica took the leader lock", || async {
        let now = leader_backend(&database_url).await;
        now.is_some() && now != leader
    })
    .await;
    eventually("the change settled under the new leader", || async {
        row_state(&database_url).await.1 == "stable"
    })
    .await;
    let status = cluster.carrier(1).await;
    assert_eq!(status["carrier"], "tunnel", "{status}");
    assert_eq!(status["last_change"]["outcome"], "settled", "{status}");
    eprintln!(
        "settled {:?} after the leader was killed",
        killed_at.elapsed()
    );

    // The stopped replica is killed; started again with its `nats` flags,
    // it follows the row (tunnel).
    cluster.replicas[2].kill();
    cluster.restart_replica(2, &nats_flags);
    cluster.restart_replica(0, &nats_flags);
    for i in [0, 2] {
        eventually("a restarted replica runs the row's set", || async {
            let status = cluster.carrier(i).await;
            status["running"] == "tunnel"
                && status["replicas"]
                    .as_array()
                    .is_some_and(|r| r.len() == 3 && r.iter().all(|r| r["ready"] == true))
        })
        .await;
    }

    // A replica stopped during a prepare, then killed, does not hold it.
    let (status, body) = cluster
        .put(
            1,
            "/api/cluster/settings",
            json!({"nats_url": format!("nats://{url}")}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    gate.shut();
    let (_, status, started) = start_change(&cluster, 1, &json!({"target": "nats"})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{started}");
    cluster.replicas[2].signal("STOP");
    assert_eq!(row_state(&database_url).await.1, "prepare");
    cluster.replicas[2].kill();
    let stopped_at = Instant::now();
    gate.open();
    eventually("the change settled without the stopped replica", || async {
        row_state(&database_url).await == ("nats".to_string(), "stable".to_string())
    })
    .await;
    let status = cluster.carrier(1).await;
    assert_eq!(status["last_change"]["outcome"], "settled", "{status}");
    eprintln!(
        "settled {:?} after the replica was stopped",
        stopped_at.elapsed()
    );
    // Started again without `--nats-url` (its flags would seed tunnel), it
    // follows the row: nats, from the cluster's settings.
    cluster.restart_replica(2, &[]);
    eventually("the restarted replica runs nats", || async {
        let status = cluster.carrier(2).await;
        status["running"] == "nats" && status["connected"] == true
    })
    .await;
}
