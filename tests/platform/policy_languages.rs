//! One policy in three languages: the model allowlist in Rust
//! (policies/model-allowlist), Python and JavaScript (examples/) passes the
//! same cases file and refuses the same `/v1` requests with the same code
//! and message when served; `switchyard policy new` writes a project in
//! each language that builds and passes its own cases.
//!
//! The components come from scripts/build-guests.sh (Rust) and
//! scripts/build-policy-examples.sh (Python, JavaScript); the scaffolds are
//! built with the tools scripts/common.sh's `ensure_policy_toolchains`
//! installs (`$COMPONENTIZE_PY`, `$JCO`, else their place in the target dir).

use std::path::{Path, PathBuf};
use std::process::Command;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use switchyard_tests::db::fresh_database;
use switchyard_tests::plugins::{self, component};
use switchyard_tests::process::binary;
use switchyard_tests::replica::Replica;

/// Each language's component and the folder of its cases file.
const LANGUAGES: [(&str, &str); 3] = [
    ("model-allowlist", "policies/model-allowlist"),
    ("model-allowlist-python", "examples/model-allowlist-python"),
    ("model-allowlist-js", "examples/model-allowlist-js"),
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs `command`, failing the test with its output unless it exits 0.
fn succeed(command: &mut Command, what: &str) -> String {
    let output = command.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    let text = format!(
        "{}\n--- stderr ---\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "{what} failed:\n{text}");
    text
}

#[test]
fn the_three_languages_pass_the_same_cases() {
    for (name, folder) in LANGUAGES {
        let wasm = plugins::dir().join(format!("{name}.wasm"));
        let cases = repo().join(folder).join("cases.json");
        let out = succeed(
            Command::new(binary())
                .args(["policy", "test"])
                .arg(&wasm)
                .arg("--cases")
                .arg(&cases),
            &format!("{name} on {}", cases.display()),
        );
        assert!(out.contains("23 cases: 23 passed, 0 failed"), "{out}");
    }
    // One cases file for all three, so that none of them drifts.
    let texts: Vec<String> = LANGUAGES
        .iter()
        .map(|(_, folder)| std::fs::read_to_string(repo().join(folder).join("cases.json")).unwrap())
        .collect();
    assert!(
        texts.iter().all(|t| *t == texts[0]),
        "the cases files differ"
    );
    let fixtures = repo().join(LANGUAGES[0].1).join("test_data");
    for entry in std::fs::read_dir(&fixtures).unwrap() {
        let file = entry.unwrap().file_name();
        let rust = std::fs::read(fixtures.join(&file)).unwrap();
        for (name, folder) in &LANGUAGES[1..] {
            let copy = std::fs::read(repo().join(folder).join("test_data").join(&file));
            assert_eq!(copy.ok(), Some(rust.clone()), "{name}: test_data/{file:?}");
        }
    }
}

/// Status, code and message of a chat completion for `model`.
async fn chat(replica: &Replica, token: &str, model: &str) -> (StatusCode, String, String) {
    let (status, body) = replica
        .call(
            replica
                .http
                .post(format!("{}/v1/chat/completions", replica.url))
                .bearer_auth(token)
                .json(&json!({"model": model, "messages": [{"role": "user", "content": "hi"}]})),
        )
        .await;
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    (
        status,
        text(&body["error"]["code"]),
        text(&body["error"]["message"]),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn served_the_three_languages_deny_the_same_requests() {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = Replica::on(&db, dir.path()).await;
    let (status, created) = replica
        .call(
            replica
                .admin(Method::POST, "/api/keys")
                .json(&json!({"name": "app", "scopes": ["inference"]})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let token = created["token"].as_str().unwrap().to_string();
    let key_id = created["key"]["id"].as_str().unwrap().to_string();
    // `/v1` callers carry no project: a key rule and the default decide.
    let settings = json!({
        "rules": [{"key_id": key_id, "models": ["llama-3-*"]}],
        "default": ["demo-*"],
    });

    let mut answers = Vec::new();
    for (name, _) in LANGUAGES {
        let (status, body) = replica.push(name, "1.0.0", &component(name)).await;
        assert_eq!(status, StatusCode::CREATED, "{name}: {body}");
        let (status, body) = replica
            .set_chain(
                "inference",
                json!([{"plugin": name, "version": "1.0.0", "settings": settings, "mode": "enforce"}]),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{name}: {body}");

        let refused = chat(&replica, &token, "gpt-4o").await;
        let other_key_rule = chat(&replica, &token, "demo-tiny").await;
        let allowed = chat(&replica, &token, "llama-3-8b-instruct").await;
        assert_eq!(
            (refused.0, refused.1.as_str()),
            (StatusCode::FORBIDDEN, "model_not_allowed"),
            "{name}: {refused:?}"
        );
        assert_eq!(
            other_key_rule.1, "model_not_allowed",
            "{name}: the key's rule replaces the default: {other_key_rule:?}"
        );
        // Allowed, then not found: nothing serves the model.
        assert_eq!(
            (allowed.0, allowed.1.as_str()),
            (StatusCode::NOT_FOUND, "model_not_found"),
            "{name}: {allowed:?}"
        );
        answers.push((name, refused, other_key_rule));
    }
    for (name, refused, other) in &answers[1..] {
        assert_eq!(
            (refused, other),
            (&answers[0].1, &answers[0].2),
            "{name} answers as the Rust policy does"
        );
    }
    replica.stop().await;
}

/// A tool the test command installs, from its variable or its place in
/// the target dir.
fn tool(variable: &str, in_target: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(variable) {
        return path.into();
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target"));
    target.join(in_target)
}

/// `policy new` into a temporary folder, then the project's own build.sh,
/// which builds the component and runs its tests and cases.
fn scaffold_builds_and_passes(lang: &str, env: &[(&str, PathBuf)]) {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("prompt-limit");
    succeed(
        Command::new(binary())
            .args(["policy", "new", "prompt-limit", "--lang", lang, "--dir"])
            .arg(&project),
        &format!("policy new --lang {lang}"),
    );
    let mut build = Command::new(project.join("build.sh"));
    build.env("SWITCHYARD", binary());
    for (name, value) in env {
        build.env(name, value);
    }
    let out = succeed(&mut build, &format!("{lang} scaffold's build.sh"));
    assert!(out.contains("6 cases: 6 passed, 0 failed"), "{out}");
    assert!(project.join("prompt-limit.wasm").is_file(), "{out}");
}

#[test]
fn policy_new_writes_a_python_project_that_passes_its_cases() {
    scaffold_builds_and_passes(
        "python",
        &[(
            "COMPONENTIZE_PY",
            tool("COMPONENTIZE_PY", "componentize-py/bin/componentize-py"),
        )],
    );
}

#[test]
fn policy_new_writes_a_js_project_that_passes_its_cases() {
    scaffold_builds_and_passes(
        "js",
        &[("JCO", tool("JCO", "js-tools/node_modules/.bin/jco"))],
    );
}

#[test]
fn policy_new_writes_a_rust_project_that_passes_its_tests_and_cases() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("prompt-limit");
    succeed(
        Command::new(binary())
            .args(["policy", "new", "prompt-limit", "--lang", "rust", "--dir"])
            .arg(&project),
        "policy new --lang rust",
    );
    // The workspace's lock file pins the versions this checkout builds
    // with, so that the shared target dir's builds are reused and cargo
    // needs no registry (offline).
    std::fs::copy(repo().join("Cargo.lock"), project.join("Cargo.lock")).unwrap();
    let out = succeed(
        Command::new(project.join("build.sh"))
            .env("SWITCHYARD", binary())
            .env("CARGO_NET_OFFLINE", "true"),
        "rust scaffold's build.sh",
    );
    assert!(out.contains("test result: ok. 3 passed"), "{out}");
    assert!(out.contains("6 cases: 6 passed, 0 failed"), "{out}");
    assert!(project.join("prompt-limit.wasm").is_file(), "{out}");
}
