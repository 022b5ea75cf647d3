//! `switchyard policy test`: no server, no database; exit 0 allow, 1 deny, 2 error.

use std::path::Path;
use std::process::Command;

use serde_json::json;
use switchyard_tests::plugins;
use switchyard_tests::process::binary;

use crate::requests::inference;

fn write(dir: &Path, name: &str, value: serde_json::Value) -> String {
    let path = dir.join(name);
    std::fs::write(&path, value.to_string()).unwrap();
    path.to_str().unwrap().to_string()
}

/// Exit code and stdout, with stderr appended after a marker for failure messages.
fn policy_test(args: &[&str]) -> (i32, String) {
    let output = Command::new(binary())
        .args(["policy", "test"])
        .args(args)
        .output()
        .unwrap();
    let text = format!(
        "{}\n--- stderr ---\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code().unwrap_or(-1), text)
}

#[test]
fn exit_codes_follow_the_decision() {
    let dir = tempfile::tempdir().unwrap();
    let wasm = |n: &str| {
        plugins::dir()
            .join(format!("{n}.wasm"))
            .to_str()
            .unwrap()
            .to_string()
    };
    let cap = write(
        dir.path(),
        "cap.json",
        json!({"max_tokens": 1000, "mode": "deny"}),
    );
    let small = write(
        dir.path(),
        "small.json",
        inference("research", "llama-3-8b", Some(10)),
    );
    let big = write(
        dir.path(),
        "big.json",
        inference("research", "llama-3-8b", Some(5000)),
    );
    let args = |request: &str| {
        vec![
            wasm("max-tokens"),
            "--point".into(),
            "inference".into(),
            "--settings".into(),
            cap.clone(),
            "--request".into(),
            request.to_string(),
        ]
    };

    let (code, out) = policy_test(&args(&small).iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("=> allow"), "{out}");
    let (code, out) = policy_test(&args(&big).iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("max_tokens_exceeded"), "{out}");
    assert!(
        out.contains(" us"),
        "each decision is printed with its time: {out}"
    );

    let (code, out) = policy_test(&[&wasm("panic"), "--point", "inference", "--request", &small]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("error trap"), "{out}");

    // A chain of the three shipped inference-capable policies, settings in order.
    let allowlist = write(
        dir.path(),
        "allow.json",
        plugins::shipped_settings("model-allowlist"),
    );
    let clamp = write(
        dir.path(),
        "clamp.json",
        json!({"max_tokens": 256, "mode": "clamp"}),
    );
    let (code, out) = policy_test(&[
        &wasm("model-allowlist"),
        &wasm("max-tokens"),
        &wasm("well-behaved"),
        "--chain",
        "--point",
        "inference",
        "--settings",
        &allowlist,
        "--settings",
        &clamp,
        "--settings",
        &clamp,
        "--request",
        &big,
        "--json",
    ]);
    assert_eq!(code, 0, "{out}");
    let stdout = out.split("\n--- stderr ---").next().unwrap();
    let verdict: serde_json::Value = serde_json::from_str(stdout).unwrap();
    assert_eq!(verdict["decision"], "patch");
    assert_eq!(verdict["request"]["max_tokens"], 256);
    assert_eq!(verdict["steps"].as_array().unwrap().len(), 3);

    let (code, out) = policy_test(&[
        &wasm("max-tokens"),
        &wasm("panic"),
        "--point",
        "inference",
        "--request",
        &small,
    ]);
    assert_eq!(
        code, 2,
        "several components without --chain are refused: {out}"
    );
}

/// A cases file for the shipped `max-tokens`: each kind of expectation, and
/// one case that fails on purpose when `failing` is set.
fn max_tokens_cases(dir: &Path, failing: bool) -> String {
    let mut cases = vec![
        json!({"name": "a small request passes", "point": "inference",
               "request": inference("research", "llama-3-8b", Some(10)),
               "expect": {"decision": "allow"}}),
        json!({"name": "a big one is refused", "point": "inference",
               "request": inference("research", "llama-3-8b", Some(5000)),
               "expect": {"decision": "deny", "code": "max_tokens_exceeded"}}),
        json!({"name": "or clamped", "point": "inference",
               "request": inference("research", "llama-3-8b", Some(5000)),
               "settings": {"max_tokens": 1000, "mode": "clamp"},
               "expect": {"decision": "patch", "patch": {"max_tokens": 1000}}}),
        json!({"name": "a zero cap is refused", "settings": {"max_tokens": 0},
               "expect": {"decision": "invalid_settings"}}),
    ];
    if failing {
        cases.push(
            json!({"name": "this one expects the wrong thing", "point": "inference",
                          "request": inference("research", "llama-3-8b", Some(10)),
                          "expect": {"decision": "deny", "code": "nope"}}),
        );
    }
    write(
        dir,
        "cases.json",
        json!({"settings": {"max_tokens": 1000, "mode": "deny"}, "cases": cases}),
    )
}

/// `policy test --cases`, with the compile cache in its own folder.
fn cases_run(cache: &Path, args: &[&str]) -> (i32, String, String) {
    let output = Command::new(binary())
        .args(["policy", "test"])
        .args(args)
        .env("XDG_CACHE_HOME", cache)
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn cases_pass_or_fail_by_name_and_compile_once() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let component = plugins::dir().join("max-tokens.wasm");
    let component = component.to_str().unwrap();
    let cases = max_tokens_cases(dir.path(), false);

    let (code, out, err) = cases_run(&cache, &[component, "--cases", &cases]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("4 cases: 4 passed, 0 failed"), "{out}");
    assert!(
        err.contains(": compiled in"),
        "the first run compiles: {err}"
    );
    let cached = std::fs::read_dir(cache.join("switchyard/components"))
        .unwrap()
        .flat_map(|engine| std::fs::read_dir(engine.unwrap().path()).unwrap())
        .filter(|f| {
            f.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|e| e == "cwasm")
        })
        .count();
    assert_eq!(cached, 1, "the compiled component is kept on disk");

    let (code, out, err) = cases_run(&cache, &[component, "--cases", &cases]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        err.contains("from the compile cache"),
        "the second run reads the cache: {err}"
    );
    let (_, _, err) = cases_run(&cache, &[component, "--cases", &cases, "--no-cache"]);
    assert!(err.contains(": compiled in"), "--no-cache compiles: {err}");

    let failing = max_tokens_cases(dir.path(), true);
    let (code, out, _) = cases_run(&cache, &[component, "--cases", &failing, "--json"]);
    assert_eq!(code, 1, "{out}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (report["passed"].as_u64(), report["failed"].as_u64()),
        (Some(4), Some(1))
    );
    let failed = &report["cases"][4];
    assert_eq!(failed["name"], "this one expects the wrong thing");
    assert_eq!(failed["passed"], false);
    assert_eq!(failed["got"], "allow");
}

#[test]
fn watch_runs_the_cases_again_when_the_component_changes() {
    use std::io::{BufRead, BufReader};
    use std::time::Duration;

    let dir = tempfile::tempdir().unwrap();
    let component = dir.path().join("policy.wasm");
    std::fs::copy(plugins::dir().join("max-tokens.wasm"), &component).unwrap();
    let cases = max_tokens_cases(dir.path(), false);
    let mut child = Command::new(binary())
        .args(["policy", "test"])
        .arg(&component)
        .args(["--cases", &cases, "--watch"])
        .env("XDG_CACHE_HOME", dir.path().join("cache"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let summary = || loop {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("a run's summary");
        if line.contains(" cases: ") {
            return line;
        }
    };
    assert_eq!(summary(), "4 cases: 4 passed, 0 failed");

    // Another policy in its place (as a rebuild would write it): the cases
    // run again on their own and now fail.
    let rebuilt = dir.path().join("rebuilt.wasm");
    std::fs::copy(plugins::dir().join("well-behaved.wasm"), &rebuilt).unwrap();
    std::fs::rename(&rebuilt, &component).unwrap();
    let again = summary();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        again.starts_with("4 cases: ") && !again.ends_with(" 0 failed"),
        "{again}"
    );
}
