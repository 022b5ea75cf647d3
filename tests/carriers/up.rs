//! `switchyard up` from nothing: the embedded PostgreSQL, a frontend, a
//! worker and the reference engine serving the demo model; the printed key
//! answers a chat completion; SIGINT stops all of it, PostgreSQL included.
//! On each carrier set (`up --nats-url` for `nats`): `tunnel` from the
//! components built into the binary (no `--carrier-plugins`), `nats` from a
//! folder given with `--carrier-plugins`. Either way `up` binds the shipped
//! policies and its closing text reports a clamp and a denial that happened.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};
use switchyard_tests::federation::eventually;
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
    let mut printed = Vec::new();
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(120))
            .expect("switchyard up printed its examples");
        printed.push(line.clone());
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
    // The worker got its registration token by environment: no command
    // line (which `ps` shows every user) carries one.
    let workers = processes_under(up.id())
        .into_iter()
        .filter(|args| args.iter().any(|a| a == "worker"))
        .collect::<Vec<_>>();
    assert_eq!(workers.len(), 1, "one local worker: {workers:?}");
    assert!(
        !workers[0].iter().any(|a| a.contains("registration")),
        "{workers:?}"
    );
    // The printed console address answers its sign-in page.
    let console = printed
        .iter()
        .find_map(|l| l.strip_prefix("The web console: "))
        .and_then(|l| l.split_whitespace().next())
        .expect("the console's address is printed");
    let page = reqwest::get(console).await.unwrap();
    assert_eq!(page.url().path(), "/console/sign-in");
    assert!(
        page.text()
            .await
            .unwrap()
            .contains("Admin token or API key")
    );
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
    shipped_policies_are_bound_and_at_work(port, &admin, &printed.join("\n")).await;

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

/// `up` bound the shipped chains (the binary seeded their components), and
/// its closing text reports what the chain did to two real requests: the
/// decision log holds the same two decisions.
async fn shipped_policies_are_bound_and_at_work(port: u16, admin: &str, printed: &str) {
    let admin_get = |path: String| async move {
        reqwest::Client::new()
            .get(format!("http://127.0.0.1:{port}{path}"))
            .bearer_auth(admin)
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()
    };
    let plugins = |chain: &Value| -> Vec<String> {
        chain["policies"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["plugin"].as_str().unwrap().to_string())
            .collect()
    };
    let inference = admin_get("/api/admission/inference".into()).await;
    assert_eq!(
        plugins(&inference),
        ["model-allowlist", "max-tokens"],
        "{inference}"
    );
    let deploy = admin_get("/api/admission/deploy".into()).await;
    assert_eq!(plugins(&deploy), ["gpu-memory-guard"], "{deploy}");

    assert!(
        printed.contains("model-allowlist@") && printed.contains("gpu-memory-guard@"),
        "the chains are printed:\n{printed}"
    );
    assert!(
        printed
            .contains("clamped: asked demo-tiny for max_tokens 1000, got 200 OK with 128 tokens"),
        "a clamp that happened is reported:\n{printed}"
    );
    assert!(
        printed.contains("denied:  asked for gpt-4o, got 403 Forbidden model_not_allowed"),
        "a denial that happened is reported:\n{printed}"
    );
    assert!(
        printed.contains("switchyard admission set inference"),
        "the commands to change them are printed:\n{printed}"
    );

    // The log is written in batches a moment after the decisions.
    let logged = |decisions: &Value, plugin: &str, decision: &str| {
        decisions["decisions"].as_array().unwrap().iter().any(|d| {
            d["plugin"].as_str().unwrap_or("").starts_with(plugin) && d["decision"] == decision
        })
    };
    eventually(
        "the clamp and the denial are in the decision log",
        || async {
            let decisions = admin_get("/api/admission/inference/decisions?limit=100".into()).await;
            (logged(&decisions, "max-tokens", "patch")
                && logged(&decisions, "model-allowlist", "deny"))
            .then_some(())
        },
    )
    .await;
}

/// The command lines of `pid`'s descendants, read from /proc.
fn processes_under(pid: u32) -> Vec<Vec<String>> {
    // Every process's parent, from the field after the name in its `stat`.
    let parent_of = |entry: &std::fs::DirEntry| -> Option<(u32, u32)> {
        let child: u32 = entry.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
        let parent = stat
            .rsplit_once(')')?
            .1
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()?;
        Some((child, parent))
    };
    let links: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|entry| parent_of(&entry))
        .collect();
    let mut found = Vec::new();
    let mut parents = vec![pid];
    while let Some(parent) = parents.pop() {
        for &(child, _) in links.iter().filter(|(_, p)| *p == parent) {
            let cmdline = std::fs::read(format!("/proc/{child}/cmdline")).unwrap_or_default();
            found.push(
                cmdline
                    .split(|b| *b == 0)
                    .filter(|a| !a.is_empty())
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect(),
            );
            parents.push(child);
        }
    }
    found
}
