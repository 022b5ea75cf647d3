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
