//! The live carrier switch under load: two `serve` replicas on a private
//! PostgreSQL, two workers, a real nats-server and the reference engine
//! serving a model on both workers; 8 chat clients (streaming and not,
//! both frontends) and a probe every 20 ms (a broadcast every replica must
//! hear, a unit one replica must handle) while the cluster moves
//! `nats → tunnel` and back, 5 times each way. Per direction: the median of
//! request → commit and commit → settled as the database clock recorded
//! them (`carrier_changes`, shown as `last_change`), failed requests,
//! broadcasts lost or repeated, units lost or repeated. The cluster is the
//! end-to-end suite's (`switchyard_tests::switch`).

use std::time::{Duration, Instant};

use serde_json::json;
use switchyard_store::embedded::EmbeddedPostgres;
use switchyard_tests::nats::worker_flags;
use switchyard_tests::switch::{Cluster, Load, Nats, Probes, change, count_probes, eventually};

use crate::stats::header;

/// Changes each way.
const ROUNDS: usize = 5;
/// Chat clients.
const CLIENTS: usize = 8;

#[derive(Default)]
struct Direction {
    to_commit_ms: Vec<f64>,
    to_settle_ms: Vec<f64>,
    requests: usize,
    failed: usize,
    broadcasts_lost: usize,
    broadcasts_repeated: usize,
    units_lost: usize,
    units_repeated: usize,
    probes: usize,
    probes_failed: usize,
}

fn median(samples: &mut [f64]) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples.get(samples.len() / 2).copied().unwrap_or(f64::NAN)
}

pub fn run() {
    if !std::env::current_exe()
        .expect("current exe")
        .with_file_name("switchyard")
        .is_file()
        && std::env::var_os("SWITCHYARD_BIN").is_none()
    {
        println!("(skipping switch: the switchyard binary is not built beside this one)");
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("tokio");
    let pg_dir = tempfile::tempdir().expect("temp dir");
    let mut pg = EmbeddedPostgres::start(&pg_dir.path().join("pg")).expect("a private PostgreSQL");
    let directions = runtime.block_on(measure(pg.url()));
    let _ = pg.stop();
    header(
        &format!(
            "Live carrier switch under {CLIENTS} chat clients and a probe every 20 ms (median of {ROUNDS} changes each way)"
        ),
        &[
            "direction",
            "request → commit (ms)",
            "commit → settled (ms)",
            "requests",
            "failed",
            "broadcasts lost/repeated",
            "units lost/repeated",
            "probes (failed)",
        ],
    );
    for (name, mut d) in directions {
        println!(
            "| {name} | {:.0} | {:.0} | {} | {} | {}/{} | {}/{} | {} ({}) |",
            median(&mut d.to_commit_ms),
            median(&mut d.to_settle_ms),
            d.requests,
            d.failed,
            d.broadcasts_lost,
            d.broadcasts_repeated,
            d.units_lost,
            d.units_repeated,
            d.probes,
            d.probes_failed,
        );
    }
    println!();
}

async fn measure(database_url: String) -> Vec<(&'static str, Direction)> {
    let nats = Nats::start();
    let url = nats.address();
    let mut cluster = Cluster::start(database_url, 2, &["--nats-url", &url]).await;
    cluster.start_worker("gpu-1", 0, &worker_flags(Some(&nats.server)));
    cluster.start_worker("gpu-2", 1, &worker_flags(Some(&nats.server)));
    cluster.workers_attached("nats").await;
    cluster.deploy(2, 10).await;
    let urls: Vec<String> = (0..2).map(|i| cluster.url(i).to_string()).collect();
    let key = cluster.key.clone().expect("a key");
    let mut to_tunnel = Direction::default();
    let mut to_nats = Direction::default();
    for round in 0..ROUNDS {
        for (target, direction) in [("tunnel", &mut to_tunnel), ("nats", &mut to_nats)] {
            let load = Load::start(&cluster.http, &urls, &key, CLIENTS);
            let probes = Probes::start(
                &cluster.http,
                &urls,
                &format!("{target}-{round}"),
                Duration::from_millis(20),
            );
            let warm = Instant::now();
            eventually("requests before the change", || async {
                load.completed_between(warm, Instant::now()) >= CLIENTS
            })
            .await;
            let moved = change(&cluster, round % 2, json!({"target": target}), target).await;
            eventually("requests after the change", || async {
                load.completed_between(moved.settled, Instant::now()) >= CLIENTS
            })
            .await;
            let posted = probes.stop().await;
            let (completed, failures) = load.stop().await;
            let count = count_probes(
                &cluster.http,
                &urls,
                &posted,
                moved.committed,
                Duration::from_secs(10),
            )
            .await;
            direction
                .to_commit_ms
                .push(moved.record["prepare_ms"].as_f64().unwrap_or(f64::NAN));
            direction
                .to_settle_ms
                .push(moved.record["drain_ms"].as_f64().unwrap_or(f64::NAN));
            direction.requests += completed + failures.len();
            direction.failed += failures.len();
            direction.probes_failed += count.failed_posts.len();
            direction.broadcasts_lost += count.lost_broadcasts.len();
            direction.broadcasts_repeated += count.repeated_broadcasts.len();
            direction.units_lost += count.lost_units.len();
            direction.units_repeated += count.repeated_units.len();
            direction.probes += posted.len();
            if !failures.is_empty() || !count.clean() {
                eprintln!("{target} #{round}: failures {failures:?}; probes {count:?}");
            }
            // Everything follows the new set before the next change.
            cluster.workers_attached(target).await;
        }
    }
    vec![("nats → tunnel", to_tunnel), ("tunnel → nats", to_nats)]
}
