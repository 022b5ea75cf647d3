//! End to end, per carrier set: two `serve` processes and two `worker`
//! processes on one database. Broadcasts, queue units, control calls and
//! streams cross processes; on the `tunnel` set the workers have no
//! routable address and each dials a different replica, so a call through
//! the other replica is relayed.

use std::path::Path;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};
use switchyard_store::embedded::EmbeddedPostgres;
use switchyard_tests::ADMIN_TOKEN;
use switchyard_tests::db::fresh_database;
use switchyard_tests::nats::{NatsServer, worker_flags};
use switchyard_tests::process::{NO_FLAGS, ServeProcess, WorkerProcess};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const PATIENCE: Duration = Duration::from_secs(30);

struct Frontend {
    process: ServeProcess,
    http: reqwest::Client,
}

impl Frontend {
    fn start(database_url: &str, extra: &[&str]) -> Self {
        let mut args = vec!["--database-url", database_url, "--auto-approve"];
        args.extend_from_slice(extra);
        let data_dir = tempfile::tempdir().unwrap().keep();
        let data_dir = data_dir.to_str().unwrap().to_string();
        args.extend_from_slice(&["--data-dir", &data_dir]);
        let process = ServeProcess::start(&args, &[("SWITCHYARD_ADMIN_TOKEN", ADMIN_TOKEN)]);
        Self {
            process,
            http: reqwest::Client::new(),
        }
    }

    fn url(&self) -> &str {
        &self.process.url
    }

    async fn get(&self, path: &str) -> Value {
        let response = self
            .http
            .get(format!("{}{path}", self.url()))
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "GET {path}");
        response.json().await.unwrap()
    }

    async fn post(&self, path: &str, body: impl Into<reqwest::Body>) -> (StatusCode, Vec<u8>) {
        let response = self
            .http
            .post(format!("{}{path}", self.url()))
            .bearer_auth(ADMIN_TOKEN)
            .body(body)
            .send()
            .await
            .unwrap();
        (response.status(), response.bytes().await.unwrap().to_vec())
    }

    async fn registration_token(&self) -> String {
        let response = self
            .http
            .post(format!("{}/api/nodes/registration-tokens", self.url()))
            .bearer_auth(ADMIN_TOKEN)
            .json(&json!({"name": "e2e"}))
            .send()
            .await
            .unwrap();
        let body: Value = response.json().await.unwrap();
        body["value"]
            .as_str()
            .expect("a registration token")
            .to_string()
    }

    /// Posts a probe; `false` while the carrier is not connected (502).
    async fn probe(&self, id: &str) -> bool {
        let response = self
            .http
            .post(format!("{}/api/cluster/probe", self.url()))
            .bearer_auth(ADMIN_TOKEN)
            .json(&json!({"id": id}))
            .send()
            .await
            .unwrap();
        match response.status() {
            StatusCode::ACCEPTED => true,
            StatusCode::BAD_GATEWAY => false,
            other => panic!("probe {id}: {other}"),
        }
    }
}

fn node_id(worker_dir: &Path) -> String {
    let identity: Value =
        serde_json::from_str(&std::fs::read_to_string(worker_dir.join("node.json")).unwrap())
            .unwrap();
    identity["node_id"].as_str().unwrap().to_string()
}

fn credential(worker_dir: &Path) -> String {
    let identity: Value =
        serde_json::from_str(&std::fs::read_to_string(worker_dir.join("node.json")).unwrap())
            .unwrap();
    identity["credential"].as_str().unwrap().to_string()
}

/// Waits until `check` holds, polling.
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    while !check().await {
        assert!(started.elapsed() < PATIENCE, "never happened: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn wait_for_identity(dir: &Path) -> String {
    eventually("the worker registered", || async {
        dir.join("node.json").exists()
    })
    .await;
    node_id(dir)
}

/// Control calls and streams through `via` to every node.
async fn calls_reach(via: &Frontend, nodes: &[&str]) {
    for node in nodes {
        eventually(&format!("a control ping reaches {node}"), || async {
            via.post(&format!("/api/cluster/nodes/{node}/control/ping"), "")
                .await
                == (StatusCode::OK, b"pong".to_vec())
        })
        .await;
        let (status, body) = via
            .post(&format!("/api/cluster/nodes/{node}/control/echo"), "hello")
            .await;
        assert_eq!(
            (status, body.as_slice()),
            (StatusCode::OK, b"hello".as_slice())
        );
        let (status, body) = via
            .post(&format!("/api/cluster/nodes/{node}/control/format"), "")
            .await;
        // Only checks and status reads are diagnostics (never engine.start).
        assert_eq!(
            status,
            StatusCode::FORBIDDEN,
            "{}",
            String::from_utf8_lossy(&body)
        );
        assert!(String::from_utf8_lossy(&body).contains("verb_not_allowed"));
        for lane in ["inference", "bulk"] {
            let payload: Vec<u8> = (0..3 * 1024 * 1024 + 5).map(|i| (i % 253) as u8).collect();
            let (status, body) = via
                .post(
                    &format!("/api/cluster/nodes/{node}/streams/echo?lane={lane}"),
                    payload.clone(),
                )
                .await;
            assert_eq!(status, StatusCode::OK);
            assert!(body == payload, "the echo through {lane} differs");
        }
        let (status, body) = via
            .post(&format!("/api/cluster/nodes/{node}/streams/nothing"), "")
            .await;
        assert_eq!(
            status,
            StatusCode::FORBIDDEN,
            "{}",
            String::from_utf8_lossy(&body)
        );
    }
}

/// A probe from `from` is heard by every replica and handled by one.
async fn probes_cross(from: &Frontend, all: &[&Frontend], id: &str) {
    eventually(&format!("{} accepted probe {id}", from.url()), || {
        from.probe(id)
    })
    .await;
    for frontend in all {
        eventually(&format!("{} heard probe {id}", frontend.url()), || async {
            frontend.get("/api/cluster/probe").await["heard"]
                .as_array()
                .is_some_and(|heard| heard.iter().any(|h| h == id))
        })
        .await;
    }
    let handled = || async {
        let mut count = 0;
        for frontend in all {
            let probes = frontend.get("/api/cluster/probe").await;
            count += probes["handled"]
                .as_array()
                .map(|handled| handled.iter().filter(|h| *h == id).count())
                .unwrap_or_default();
        }
        count
    };
    eventually(&format!("probe unit {id} was handled"), || async {
        handled().await >= 1
    })
    .await;
    assert_eq!(handled().await, 1, "probe unit {id} handled more than once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tunnel_set_across_two_frontends_and_two_workers_without_addresses_survives_a_restarted_postgres()
 {
    // A PostgreSQL of its own, to restart under the running cluster.
    let pg_dir = tempfile::tempdir().unwrap();
    let data = pg_dir.path().join("pg");
    let start_pg = move || EmbeddedPostgres::start(&data).expect("a private PostgreSQL");
    let pg = tokio::task::spawn_blocking(start_pg.clone()).await.unwrap();
    let database_url = pg.url();
    let a = Frontend::start(&database_url, &[]);
    let b = Frontend::start(&database_url, &[]);
    let carrier = a.get("/api/cluster/carrier").await;
    assert_eq!(carrier["carrier"], "tunnel", "{carrier}");
    assert_eq!(carrier["epoch"], 1);
    assert_eq!(carrier["state"], "stable");

    let token = a.registration_token().await;
    let (dir_1, dir_2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let _worker_1 = WorkerProcess::start(a.url(), &token, "gpu-1", dir_1.path(), NO_FLAGS);
    let _worker_2 = WorkerProcess::start(b.url(), &token, "gpu-2", dir_2.path(), NO_FLAGS);
    let node_1 = wait_for_identity(dir_1.path()).await;
    let node_2 = wait_for_identity(dir_2.path()).await;
    for (frontend, node) in [(&a, &node_1), (&b, &node_2)] {
        eventually(
            &format!("{node} holds both lanes on its frontend"),
            || async {
                let sessions = frontend.get("/api/cluster/carrier").await["sessions"].clone();
                ["inference", "bulk"].iter().all(|lane| {
                    sessions
                        .as_array()
                        .is_some_and(|s| s.contains(&json!({"node": node, "lane": lane})))
                })
            },
        )
        .await;
    }

    // Each frontend reaches both workers: one directly, one relayed.
    calls_reach(&a, &[&node_1, &node_2]).await;
    calls_reach(&b, &[&node_1, &node_2]).await;
    probes_cross(&a, &[&a, &b], "tunnel-probe-1").await;
    probes_cross(&b, &[&a, &b], "tunnel-probe-2").await;

    // PostgreSQL restarts under the running cluster: pgbus reconnects and
    // listens again, relays look up session holders again; no process restarts.
    let mut pg = pg;
    let pg = tokio::task::spawn_blocking(move || {
        pg.stop().expect("PostgreSQL stops");
        start_pg()
    })
    .await
    .unwrap();
    // Fan-out is at most once: probe once both replicas listen again.
    for frontend in [&a, &b] {
        eventually("the replica's carrier is connected again", || async {
            frontend.get("/api/cluster/carrier").await["connected"] == json!(true)
        })
        .await;
    }
    probes_cross(&a, &[&a, &b], "tunnel-probe-after-restart").await;
    calls_reach(&b, &[&node_1, &node_2]).await;

    // A bulk lane dialled where the inference lane is not held: 409.
    let url = format!(
        "{}/api/cluster/connect?lane=bulk",
        b.url().replacen("http", "ws", 1)
    );
    let mut request = url.into_client_request().unwrap();
    request.headers_mut().insert(
        "authorization",
        format!("Bearer {}", credential(dir_1.path()))
            .parse()
            .unwrap(),
    );
    request
        .headers_mut()
        .insert("x-switchyard-node", node_1.parse().unwrap());
    match tokio_tungstenite::connect_async(request).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 409)
        }
        other => panic!("expected 409, got {:?}", other.map(|(_, r)| r.status())),
    }
    drop((a, b));
    tokio::task::spawn_blocking(move || {
        let mut pg = pg;
        pg.stop()
    })
    .await
    .unwrap()
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_set_across_two_frontends_and_two_workers_survives_a_killed_server() {
    let mut nats = NatsServer::start(&[]);
    let nats_url = nats.address();
    let database_url = fresh_database().await;
    let a = Frontend::start(&database_url, &["--nats-url", &nats_url]);
    let b = Frontend::start(&database_url, &["--nats-url", &nats_url]);
    let carrier = b.get("/api/cluster/carrier").await;
    assert_eq!(carrier["carrier"], "nats", "{carrier}");

    let token = a.registration_token().await;
    let (dir_1, dir_2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let _worker_1 = WorkerProcess::start(
        a.url(),
        &token,
        "gpu-1",
        dir_1.path(),
        &worker_flags(Some(&nats)),
    );
    let _worker_2 = WorkerProcess::start(
        b.url(),
        &token,
        "gpu-2",
        dir_2.path(),
        &worker_flags(Some(&nats)),
    );
    let node_1 = wait_for_identity(dir_1.path()).await;
    let node_2 = wait_for_identity(dir_2.path()).await;

    calls_reach(&a, &[&node_1, &node_2]).await;
    calls_reach(&b, &[&node_1, &node_2]).await;
    probes_cross(&a, &[&a, &b], "nats-probe-1").await;

    // The NATS server goes away and comes back: every process reconnects.
    nats.kill();
    nats.restart();
    for frontend in [&a, &b] {
        eventually("the replica's carrier is connected again", || async {
            frontend.get("/api/cluster/carrier").await["connected"] == json!(true)
        })
        .await;
    }
    calls_reach(&b, &[&node_1, &node_2]).await;
    probes_cross(&b, &[&a, &b], "nats-probe-2").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_row_naming_an_unknown_carrier_stops_the_start() {
    let database_url = fresh_database().await;
    {
        let first = Frontend::start(&database_url, &[]);
        assert_eq!(first.get("/api/cluster/carrier").await["carrier"], "tunnel");
    }
    let client = switchyard_tests::db::connect(&database_url).await;
    client
        .execute("UPDATE cluster_carrier SET carrier = 'carrier-pigeon'", &[])
        .await
        .unwrap();
    let data_dir = tempfile::tempdir().unwrap();
    let output = tokio::process::Command::new(switchyard_tests::process::binary())
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--database-url",
            &database_url,
        ])
        .arg("--data-dir")
        .arg(data_dir.path())
        .env("SWITCHYARD_ADMIN_TOKEN", ADMIN_TOKEN)
        .output()
        .await
        .unwrap();
    assert!(
        !output.status.success(),
        "serve started with an unknown carrier"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("carrier-pigeon") && stderr.contains("does not run"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nats_row_pinned_before_its_streams_rode_sessions_pins_the_tunnel_at_start() {
    let nats = NatsServer::start(&[]);
    let nats_url = nats.address();
    let database_url = fresh_database().await;
    let pinned = {
        let first = Frontend::start(&database_url, &["--nats-url", &nats_url]);
        let carrier = first.get("/api/cluster/carrier").await;
        assert_eq!(carrier["carrier"], "nats", "{carrier}");
        carrier["plugins"].clone()
    };
    assert!(pinned["tunnel"]["sha256"].is_string(), "{pinned}");
    // A row from before: the `nats` component alone.
    let client = switchyard_tests::db::connect(&database_url).await;
    client
        .execute(
            "UPDATE cluster_carrier SET plugins = plugins - 'tunnel'",
            &[],
        )
        .await
        .unwrap();

    let again = Frontend::start(&database_url, &["--nats-url", &nats_url]);
    let carrier = again.get("/api/cluster/carrier").await;
    assert_eq!(carrier["plugins"], pinned, "{carrier}");
}
