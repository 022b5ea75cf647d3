//! Resident memory of an idle `switchyard serve` (embedded PostgreSQL) with
//! the three shipped policies pushed and bound. PostgreSQL's own processes
//! are not counted: they are the database, not the server.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;

use crate::fixtures::component;
use crate::stats::header;

const TOKEN: &str = "sy_bench_admin_token_0123456789abcdef";

pub fn run() {
    let Some(bin) = crate::fixtures::switchyard_bin("idle memory") else {
        return;
    };
    let data = tempfile::tempdir().expect("temp dir");
    let mut child = Command::new(&bin)
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data.path().join("data"))
        .env("SWITCHYARD_ADMIN_TOKEN", TOKEN)
        .env("RUST_LOG", "warn")
        .env_remove("DATABASE_URL")
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawning switchyard serve");
    let stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let url = stdout
        .lines()
        .map_while(Result::ok)
        .find_map(|l| l.strip_prefix("listening on ").map(str::to_string))
        .expect("serve printed its address");

    let http = reqwest::blocking::Client::new();
    let bind = |point: &str, policies: serde_json::Value| {
        let response = http
            .put(format!("{url}/api/admission/{point}"))
            .bearer_auth(TOKEN)
            .json(&json!({"policies": policies}))
            .send()
            .expect("set chain");
        assert!(
            response.status().is_success(),
            "binding {point}: {}",
            response.text().unwrap_or_default()
        );
    };
    for name in ["model-allowlist", "max-tokens", "gpu-memory-guard"] {
        let (bytes, sha) = component(name);
        let response = http
            .post(format!("{url}/api/plugins"))
            .query(&[("name", name), ("version", "1"), ("sha256", &sha)])
            .bearer_auth(TOKEN)
            .body(bytes)
            .send()
            .expect("push");
        assert!(response.status().is_success(), "pushing {name}");
    }
    let settings = |name: &str| -> serde_json::Value {
        let path = format!(
            "{}/../../policies/{name}/test_data/settings.json",
            env!("CARGO_MANIFEST_DIR")
        );
        serde_json::from_str(&std::fs::read_to_string(path).expect("settings")).expect("json")
    };
    bind(
        "inference",
        json!([
            {"plugin": "model-allowlist", "version": "1", "settings": settings("model-allowlist")},
            {"plugin": "max-tokens", "version": "1", "settings": settings("max-tokens")},
        ]),
    );
    bind(
        "deploy",
        json!([{"plugin": "gpu-memory-guard", "version": "1", "settings": settings("gpu-memory-guard")}]),
    );

    std::thread::sleep(Duration::from_secs(3));
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
    let rss_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    let _ = child.wait();

    header("Idle server", &["what", "resident memory (MiB)"]);
    println!(
        "| switchyard serve, three policies bound, idle 3 s | {:.1} |",
        rss_kib as f64 / 1024.0
    );
    println!();
}
