//! The embedded default: `serve` without a database URL starts a private
//! PostgreSQL under the data directory, stops it on exit, reuses it next time;
//! without `--carrier-plugins` it runs the carrier components built into the
//! binary and has put them, the shipped policies and the shipped grant
//! evaluator in its registry.

use reqwest::StatusCode;
use serde_json::Value;
use switchyard_tests::process::ServeProcess;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_without_a_url_runs_a_private_postgres_and_keeps_its_state() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let args = ["--data-dir", data_dir.to_str().unwrap()];
    // Unset (empty removes it): the suites export a components folder for themselves.
    let env = [
        ("DATABASE_URL", ""),
        ("SWITCHYARD_ADMIN_TOKEN", ""),
        ("SWITCHYARD_PLUGINS_DIR", ""),
    ];

    let mut first = ServeProcess::start(&args, &env);
    let token = first
        .stdout
        .iter()
        .find_map(|l| l.strip_prefix("admin token (shown once; store it now): "))
        .expect("the admin token is printed at first start")
        .to_string();
    let http = reqwest::Client::new();
    let response = http
        .get(format!("{}/api/plugins", first.url))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let listed: Value = response.json().await.unwrap();
    let built_in = [
        ("nats", "carrier"),
        ("pgbus", "carrier"),
        ("tunnel", "tunnel"),
        ("model-allowlist", "policy"),
        ("max-tokens", "policy"),
        ("rate-limit", "policy"),
        ("gpu-memory-guard", "policy"),
        ("grant-standard", "grant"),
    ];
    for (name, kind) in built_in {
        assert!(
            listed["plugins"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == name && p["kind"] == kind),
            "{name} ({kind}) is in the registry: {listed}"
        );
    }
    let carrier: Value = http
        .get(format!("{}/api/cluster/carrier", first.url))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(carrier["running"], "tunnel", "{carrier}");
    // Nothing bound: the evaluator in force is the binary's grant-standard.
    let evaluator: Value = http
        .get(format!("{}/api/federation/evaluator", first.url))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (
            &evaluator["generation"],
            &evaluator["plugin"],
            &evaluator["shipped"]
        ),
        (
            &serde_json::json!(0),
            &serde_json::json!("grant-standard"),
            &serde_json::json!(true)
        ),
        "{evaluator}"
    );
    assert!(data_dir.join("postgres/PG_VERSION").is_file());
    assert!(first.terminate(), "serve exits cleanly on SIGTERM");
    assert!(
        !data_dir.join("postgres/postmaster.pid").exists(),
        "PostgreSQL was stopped on exit"
    );

    let mut second = ServeProcess::start(&args, &env);
    assert!(
        !second.stdout.iter().any(|l| l.contains("admin token")),
        "the token is shown only once"
    );
    let status = http
        .get(format!("{}/api/plugins", second.url))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(
        status,
        StatusCode::OK,
        "the first start's token still works"
    );
    assert!(second.terminate());
}
