//! Schemathesis (from PyPI) against the OpenAPI document of a running
//! replica, with the admin token and with a narrow key: no 500, every error
//! in the `{"error":{"code","message"}}` shape (`tests/clients/api_fuzz_checks.py`),
//! every status and content type as documented.
//!
//! Bounded in the test command: `SWITCHYARD_API_FUZZ_SECONDS` per key
//! (default 45) with a fixed seed, so a failure here is reproducible;
//! `scripts/api-fuzz.sh` runs it long with fresh seeds.

use std::path::Path;
use std::time::Duration;

use reqwest::Method;
use serde_json::json;
use switchyard_tests::db::fresh_database;
use switchyard_tests::plugins;
use switchyard_tests::replica::Replica;

/// The checks every answer must pass.
const CHECKS: &str =
    "not_a_server_error,status_code_conformance,content_type_conformance,error_shape";

/// Routes Schemathesis cannot drive: websocket upgrades (the worker's
/// session and the replicas' relay) and the raw byte streams to a node.
const EXCLUDED_PATHS: &str = "^/api/cluster/(connect|relay)$";

async fn fuzz(replica: &Replica, token: &str, label: &str) {
    let python = std::env::var("SWITCHYARD_PYTHON")
        .expect("SWITCHYARD_PYTHON names a Python with schemathesis: scripts/test.sh provides it");
    let seconds: u64 = std::env::var("SWITCHYARD_API_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(45);
    let seed = std::env::var("SWITCHYARD_API_FUZZ_SEED").unwrap_or_else(|_| "1".into());
    let clients = Path::new(env!("CARGO_MANIFEST_DIR")).join("clients");
    let report = tempfile::tempdir().unwrap();
    let mut command = tokio::process::Command::new(python);
    command
        .args(["-m", "schemathesis.cli", "run"])
        .arg(format!("{}/api/openapi.json", replica.url))
        .args(["--url", &replica.url])
        .args(["--checks", CHECKS])
        .args(["--exclude-path-regex", EXCLUDED_PATHS])
        .args(["--header", &format!("Authorization: Bearer {token}")])
        .args(["--max-time", &seconds.to_string()])
        .args(["--seed", &seed])
        .args(["--workers", "1"])
        .args(["--request-timeout", "20"])
        .args(["--suppress-health-check", "all"])
        .args(["--no-color"])
        .env("SCHEMATHESIS_HOOKS", "api_fuzz_checks")
        .env("PYTHONPATH", &clients)
        .current_dir(report.path())
        .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(seconds * 3 + 120), command.output())
        .await
        .unwrap_or_else(|_| panic!("schemathesis ({label}) did not finish"))
        .expect("schemathesis runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "schemathesis with {label} found failures:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // The summary's count line: "2170 generated, 2170 passed".
    let counts = |l: &&str| {
        l.trim_start().starts_with(|c: char| c.is_ascii_digit()) && l.contains(" generated")
    };
    if let Some(line) = stdout.lines().find(counts) {
        println!("schemathesis with {label}: {}", line.trim());
    }
    // It really ran cases, not an empty selection.
    assert!(
        stdout.contains("passed") && !stdout.contains("No operations"),
        "schemathesis with {label} ran nothing:\n{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_answers_generated_requests_as_documented() {
    let url = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    // On the tunnel carrier set, so that the probe and diagnostics routes
    // run for real rather than answering "no carrier set".
    let replica = Replica::with(&url, dir.path(), |config| {
        config.carrier_plugins = Some(plugins::dir());
    })
    .await;

    // Something to find: a plugin, a chain, and a narrow key.
    let bytes = plugins::component("model-allowlist");
    let (status, _) = replica.push("model-allowlist", "1.0.0", &bytes).await;
    assert!(status.is_success());
    let (status, key) = replica
        .call(
            replica
                .admin(Method::POST, "/api/keys")
                .json(&json!({"name": "fuzz-inference", "scopes": ["inference"]})),
        )
        .await;
    assert!(status.is_success(), "{key}");
    let narrow = key["token"]
        .as_str()
        .expect("the new key's token")
        .to_string();

    fuzz(&replica, switchyard_tests::ADMIN_TOKEN, "the admin token").await;
    fuzz(&replica, &narrow, "an inference key").await;
    replica.stop().await;
}
