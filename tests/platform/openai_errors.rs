//! The official `openai` Python client against a real frontend: each kind
//! of error the frontend answers itself (an unknown model, a bad key, a key
//! without the scope, a refused batch, a body that is not JSON) reaches the
//! client as OpenAI's own would, with `type`, `code` and `param`.

use reqwest::{Method, StatusCode};
use serde_json::json;
use switchyard_tests::cluster::Cluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_client_reads_each_v1_error_kind_with_openai_s_type() {
    let cluster = Cluster::start().await;
    let key = cluster.inference_key().await;
    let (status, narrow) = cluster
        .call(
            Method::POST,
            "/api/keys",
            Some(json!({"name": "narrow", "scopes": ["models:manage"]})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{narrow}");
    let python = std::env::var("SWITCHYARD_PYTHON").expect(
        "SWITCHYARD_PYTHON names a Python with the openai package: scripts/test.sh provides it",
    );
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/openai_errors.py");
    let output = tokio::process::Command::new(python)
        .arg(script)
        .args([
            cluster.serve.url.as_str(),
            key.as_str(),
            narrow["token"].as_str().unwrap(),
        ])
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success() && String::from_utf8_lossy(&output.stdout).trim() == "ok",
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
