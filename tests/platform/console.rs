//! The web console in a real browser: Debian's chromium driven through
//! chromedriver by `tests/console/run.py` (selenium) against a cluster of
//! real processes started here, whose worker waits for approval. The flows
//! approve it, import a model by URL (served slowly enough to show
//! progress), deploy it, upload a policy, bind a chain and see the dry run
//! deny, stream a prompt and cancel one, dry-run a carrier switch, create
//! and revoke a key, sign out, and check that an inference key sees no
//! admin page. Every page's screenshot is written to the run's folder, and
//! the browser's network log must show no request to another host.

use std::path::Path;
use std::process::Stdio;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use switchyard_tests::ADMIN_TOKEN;
use switchyard_tests::db::fresh_database;
use switchyard_tests::http::FileServer;
use switchyard_tests::process::{ServeProcess, WorkerProcess};
use switchyard_tests::proxy::TcpProxy;

/// The model the browser imports: big enough, at [`IMPORT_RATE`], to take a
/// few seconds, so its progress is drawn.
const MODEL_BYTES: usize = 24 << 20;
const IMPORT_RATE: u64 = 8 << 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_operator_task_works_in_chromium() {
    let browser = ["/usr/bin/chromium", "/usr/bin/chromedriver"];
    for program in browser {
        assert!(
            Path::new(program).is_file(),
            "{program} is missing: scripts/test.sh installs chromium and chromium-driver"
        );
    }
    let python = std::env::var("SWITCHYARD_PYTHON")
        .expect("SWITCHYARD_PYTHON names a Python with selenium: scripts/test.sh provides it");

    let model: Vec<u8> = (0..MODEL_BYTES as u32).map(|i| (i % 251) as u8).collect();
    let files = FileServer::start(vec![("tiny.gguf", model.clone())]).await;
    let file_addr = files.url.trim_start_matches("http://").parse().unwrap();
    let slow = TcpProxy::start_limited(file_addr, Some(IMPORT_RATE)).await;
    let model_url = format!("http://{}/tiny.gguf", slow.addr);

    let database_url = fresh_database().await;
    let data = tempfile::tempdir().unwrap();
    // No --auto-approve: the worker waits for the browser to approve it.
    let serve = ServeProcess::start(
        &[
            "--database-url",
            &database_url,
            "--data-dir",
            data.path().to_str().unwrap(),
            "--fetch-allow-host",
            &slow.addr.to_string(),
        ],
        &[("SWITCHYARD_ADMIN_TOKEN", ADMIN_TOKEN)],
    );
    let http = reqwest::Client::new();
    let call = |method: Method, path: &str, body: Option<Value>| {
        let mut request = http
            .request(method, format!("{}{path}", serve.url))
            .bearer_auth(ADMIN_TOKEN);
        if let Some(body) = body {
            request = request.json(&body);
        }
        async move {
            let response = request.send().await.unwrap();
            let status = response.status();
            (
                status,
                response.json::<Value>().await.unwrap_or(Value::Null),
            )
        }
    };
    let (status, token) = call(
        Method::POST,
        "/api/nodes/registration-tokens",
        Some(json!({"name": "console"})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{token}");
    let worker_dir = tempfile::tempdir().unwrap();
    let _worker = WorkerProcess::start(
        &serve.url,
        token["value"].as_str().unwrap(),
        "gpu-a",
        worker_dir.path(),
        &["--gpu", "name=L4,memory=24GiB"],
    );
    let (status, key) = call(
        Method::POST,
        "/api/keys",
        Some(json!({"name": "app", "scopes": ["inference"]})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{key}");
    switchyard_tests::federation::eventually("the worker to register", || async {
        let (_, nodes) = call(Method::GET, "/api/nodes", None).await;
        nodes["nodes"]
            .as_array()
            .is_some_and(|n| {
                n.iter()
                    .any(|n| n["name"] == "gpu-a" && n["state"] == "pending")
            })
            .then_some(())
    })
    .await;

    let shots = shots_dir();
    let policy = switchyard_tests::plugins::dir().join("model-allowlist.wasm");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("console/run.py");
    // SWITCHYARD_CONSOLE_FLOWS="flows_access flows_keys" runs only those
    // (while writing a page); the test command runs them all.
    let only: Vec<String> = std::env::var("SWITCHYARD_CONSOLE_FLOWS")
        .map(|v| v.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default();
    let output = tokio::process::Command::new(python)
        .arg(script)
        .args(&only)
        .env("SWITCHYARD_CONSOLE_URL", &serve.url)
        .env("SWITCHYARD_ADMIN_TOKEN", ADMIN_TOKEN)
        .env(
            "SWITCHYARD_CONSOLE_INFERENCE_KEY",
            key["token"].as_str().unwrap(),
        )
        .env("SWITCHYARD_CONSOLE_SHOTS", &shots)
        .env("SWITCHYARD_CONSOLE_MODEL_URL", &model_url)
        .env(
            "SWITCHYARD_CONSOLE_MODEL_SHA256",
            hex::encode(sha256(&model)),
        )
        .env("SWITCHYARD_CONSOLE_PENDING_NODE", "gpu-a")
        .env("SWITCHYARD_CONSOLE_POLICY", &policy)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report: Value = stdout
        .lines()
        .last()
        .and_then(|line| serde_json::from_str(line).ok())
        .unwrap_or(Value::Null);
    assert!(
        output.status.success(),
        "the browser flows failed (screenshots in {}): {report:#}\n{stdout}",
        shots.display()
    );
    assert_eq!(report["foreign_requests"], json!([]), "{report:#}");
    assert!(
        report["requests_seen"].as_u64().unwrap_or(0) > 20,
        "{report:#}"
    );

    // What the browser did is what the cluster holds.
    let (_, nodes) = call(Method::GET, "/api/nodes", None).await;
    assert!(
        nodes["nodes"][0]["approved_at"].is_string(),
        "the node was approved: {nodes}"
    );
    let (_, keys) = call(Method::GET, "/api/keys", None).await;
    let revoked = keys["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["name"] == "console-e2e")
        .expect("the key the browser created");
    assert!(revoked["revoked_at"].is_string(), "{revoked}");
    for page in ["sign-in", "overview", "keys", "try-prompt", "forbidden"] {
        assert!(
            shots.join(format!("{page}.png")).is_file(),
            "no screenshot of {page} in {}",
            shots.display()
        );
    }
}

/// Where the run's screenshots go: `SWITCHYARD_CONSOLE_SHOTS`, else
/// `console-shots` in the target folder.
fn shots_dir() -> std::path::PathBuf {
    if let Some(dir) = std::env::var_os("SWITCHYARD_CONSOLE_SHOTS") {
        return dir.into();
    }
    let exe = std::env::current_exe().unwrap();
    let target = exe
        .ancestors()
        .nth(3)
        .expect("target/<profile>/deps/<test>")
        .to_path_buf();
    let dir = target.join("console-shots");
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn sha256(bytes: &[u8]) -> Vec<u8> {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).to_vec()
}
