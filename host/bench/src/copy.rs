//! Federated model copy: a 256 MiB revision copied from beta's library
//! into alpha's over the link between two clusters on this machine (each a
//! `switchyard serve` on its own database, no worker): beta offers and
//! grants it (`models:transfer`), alpha starts the copy and polls it until
//! complete. Every range of 64 MiB is judged and charged by beta, crosses
//! the link's bulk lane on a fresh stream, is appended, fsync'd and
//! recorded durable on alpha, and the whole file is verified by SHA-256
//! before it enters alpha's library. Beside it, the same file's local
//! verified staging to a worker (`staging`) and `sha256sum` plus `cp`.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::json;
use sha2::{Digest, Sha256};
use switchyard_store::embedded::EmbeddedPostgres;
use switchyard_tests::ADMIN_TOKEN;
use switchyard_tests::federation::{Member, grant};

use crate::stats::header;

/// Where the harness makes each cluster's database.
const DATABASE_VAR: &str = "SWITCHYARD_TEST_DATABASE_URL";

pub fn run() {
    let beside = std::env::current_exe()
        .expect("current exe")
        .with_file_name("switchyard");
    if !beside.is_file() && std::env::var_os("SWITCHYARD_BIN").is_none() {
        println!("(skipping copy: the switchyard binary is not built beside this one)");
        return;
    }
    if std::env::var_os(DATABASE_VAR).is_none() {
        return run_on_private_postgres();
    }
    let (baseline, staged) = crate::staging::measure();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    let (copied, charged) = runtime.block_on(measure());
    header(
        "Federated model copy: a 256 MiB revision from beta's library into alpha's over the link (bulk lane, 64 MiB ranges judged and charged, fsync, verify) beside local staging",
        &["path", "MB/s", "ratio to staging"],
    );
    println!(
        "| sha256sum, then cp | {baseline:.0} | {:.2} |",
        baseline / staged
    );
    println!("| library to placement cache (staging) | {staged:.0} | 1.00 |");
    println!(
        "| peer's library to this library (federated copy) | {copied:.0} | {:.2} |",
        copied / staged
    );
    println!();
    println!("beta charged {charged} model bytes to the grant for the {SIZE} bytes copied");
    println!();
}

const SIZE: u64 = crate::staging::SIZE as u64;

/// See [`crate::federation`]: a private PostgreSQL for a child run when
/// the harness's variable is not set.
fn run_on_private_postgres() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut pg = EmbeddedPostgres::start(&dir.path().join("pg")).expect("a private PostgreSQL");
    let mut child = Command::new(std::env::current_exe().expect("current exe"))
        .arg("copy")
        .env(DATABASE_VAR, pg.url())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the copy section in a child process");
    let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
    let mut banner = true;
    for line in stdout.lines().map_while(Result::ok) {
        if banner && (line.starts_with("switchyard-bench (") || line.is_empty()) {
            continue;
        }
        banner = false;
        println!("{line}");
    }
    let status = child.wait().expect("the child's exit");
    let _ = pg.stop();
    assert!(status.success(), "the copy section failed: {status}");
}

/// Pairs the clusters, copies the revision; the rate (MB/s) and what beta
/// charged.
async fn measure() -> (f64, u64) {
    let (alpha, beta) = tokio::join!(Member::bare("alpha"), Member::bare("beta"));
    alpha.join(&beta).await;
    let bytes = crate::staging::pseudo_random(SIZE as usize);
    let digest = hex::encode(Sha256::digest(&bytes));
    let uploaded = reqwest::Client::new()
        .put(format!("{}/api/library/blobs/{digest}", beta.url()))
        .bearer_auth(ADMIN_TOKEN)
        .body(bytes)
        .send()
        .await
        .expect("upload");
    assert_eq!(uploaded.status(), StatusCode::CREATED);
    beta.expect(
        StatusCode::CREATED,
        Method::POST,
        "/api/models",
        Some(json!({"id": "bench", "revision": "r1",
            "files": [{"path": "model.bin", "size": SIZE, "sha256": digest}]})),
    )
    .await;
    beta.expect(
        StatusCode::CREATED,
        Method::POST,
        "/api/federation/offers",
        Some(json!({"resource": {"kind": "model", "model": "bench", "revision": "r1"}})),
    )
    .await;
    let spec = json!({"models": ["bench@r1"], "operations": ["models:transfer"], "lifetime_s": 3600,
                      "max_concurrent": 4, "max_requests": 100, "max_model_bytes": 1u64 << 32});
    let id = grant(&beta, &alpha, &["models:transfer"], spec).await;

    let started = Instant::now();
    let copy = alpha
        .expect(
            StatusCode::ACCEPTED,
            Method::POST,
            "/api/federation/copies",
            Some(json!({"peer": "beta", "model": "bench", "revision": "r1"})),
        )
        .await;
    let path = format!("/api/federation/copies/{}", copy["id"].as_str().unwrap());
    loop {
        let copy = alpha.expect(StatusCode::OK, Method::GET, &path, None).await;
        match copy["state"].as_str() {
            Some("complete") => break,
            Some("running" | "waiting") => {}
            _ => panic!("the copy did not complete: {copy}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let rate = SIZE as f64 / started.elapsed().as_secs_f64() / 1e6;
    let grant = beta
        .expect(
            StatusCode::OK,
            Method::GET,
            &format!("/api/federation/grants/{id}"),
            None,
        )
        .await;
    (rate, grant["usage"]["model_bytes"].as_u64().unwrap_or(0))
}
