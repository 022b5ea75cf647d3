//! `switchyard up` from nothing: the embedded PostgreSQL, a frontend, a
//! worker and the reference engine serving the demo model; the printed key
//! answers a chat completion; SIGINT stops all of it, PostgreSQL included.
//! On each carrier set (`up --nats-url` for `nats`): `tunnel` from the
//! components built into the binary (no `--carrier-plugins`, whose shipped
//! policies then bind by name), `nats` from a folder given with
//! `--carrier-plugins`.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};
use switchyard_tests::nats::NatsServer;
use switchyard_tests::plugins;
use switchyard_tests::process::binary;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_runs_a_whole_cluster_from_its_built_in_components_and_stops_on_ctrl_c() {
    up_answers_and_stops(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_on_the_nats_set_with_a_components_folder_answers_and_stops_on_ctrl_c() {
    let nats = NatsServer::start(&[]);
    up_answers_and_stops(Some(&nats)).await;
}

/// `up` on the `nats` set with `--carrier-plugins` when a server is given,
/// else on `tunnel` with the built-in components.
async fn up_answers_and_stops(nats: Option<&NatsServer>) {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut command = Command::new(binary());
    command
        .args([
            "up",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--token-delay-ms",
            "0",
        ])
        .arg("--data-dir")
        .arg(&data_dir)
        .env("RUST_LOG", "warn")
        .env_remove("DATABASE_URL")
        .env_remove("SWITCHYARD_NATS_URL")
        // The suites export it for their own use; `up` would read it.
        .env_remove("SWITCHYARD_PLUGINS_DIR")
        .stdout(Stdio::piped());
    if let Some(nats) = nats {
        command.args(["--nats-url", &nats.address()]);
        command.arg("--carrier-plugins").arg(plugins::dir());
    }
    let mut up = command.spawn().unwrap();
    let stdout = up.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let mut key = None;
    let mut admin = String::new();
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(120))
            .expect("switchyard up printed its examples");
        if let Some(found) = line.strip_prefix("Inference key: ") {
            key = Some(found.to_string());
        }
        if let Some(found) = line.strip_prefix("Admin token: ") {
            admin = found.to_string();
        }
        if line.starts_with("Ctrl-C stops") {
            break;
        }
    }
    let key = key.expect("the inference key is printed");
    let answer: Value = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{port}/v1/chat/completions"))
        .bearer_auth(&key)
        .json(&json!({"model": "demo-tiny", "max_tokens": 4,
                      "messages": [{"role": "user", "content": "Hello!"}]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answer["usage"]["completion_tokens"], 4, "{answer}");
    let carrier: Value = reqwest::Client::new()
        .get(format!("http://127.0.0.1:{port}/api/cluster/carrier"))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let expected = if nats.is_some() { "nats" } else { "tunnel" };
    assert_eq!(carrier["running"], expected, "{carrier}");
    if nats.is_none() {
        shipped_policies_bind_by_name(port, &admin).await;
    }

    let interrupted = Command::new("kill")
        .args(["-INT", &up.id().to_string()])
        .status()
        .unwrap();
    assert!(interrupted.success());
    let status = up.wait().unwrap();
    assert!(status.success(), "up exits cleanly: {status}");
    assert!(
        !data_dir.join("postgres/postmaster.pid").exists(),
        "PostgreSQL was stopped"
    );
    let engines = Command::new("pgrep")
        .args(["-f", &format!("engine reference.*{}", data_dir.display())])
        .status()
        .unwrap();
    assert!(!engines.success(), "no engine left running");
}

/// The binary put its policies in the registry, not bound: one binds by
/// name and version with its shipped settings and judges the next request.
async fn shipped_policies_bind_by_name(port: u16, admin: &str) {
    let admin_call = |method: reqwest::Method, path: &str| {
        reqwest::Client::new()
            .request(
                method,
                format!("http://127.0.0.1:{port}/api/admission/{path}"),
            )
            .bearer_auth(admin)
    };
    let shown: Value = admin_call(reqwest::Method::GET, "inference")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(shown["generation"], 0, "nothing is bound: {shown}");

    let chain = json!({"policies": [{"plugin": "max-tokens", "version": "0.1.0",
                                     "settings": plugins::shipped_settings("max-tokens")}]});
    let bound = admin_call(reqwest::Method::PUT, "inference")
        .json(&chain)
        .send()
        .await
        .unwrap();
    let status = bound.status();
    assert!(
        status.is_success(),
        "{status}: {}",
        bound.text().await.unwrap()
    );
    let request = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../policies/max-tokens/test_data/inference-8192.json"
    ))
    .unwrap();
    let verdict: Value = admin_call(reqwest::Method::POST, "inference/evaluate")
        .header("content-type", "application/json")
        .body(request)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(verdict["decision"], "deny", "{verdict}");
}
