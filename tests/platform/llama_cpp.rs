//! The `llama-cpp` engine kind on a real `llama-server` (built by
//! scripts/test.sh from the llama.cpp that llama-cpp-python vendors), serving
//! a tiny GGUF with random weights that the test writes: started, probed,
//! asked, killed and healed, stopped. Random weights give random text, so
//! only status codes, the response's shape and `usage` are checked.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use switchyard_worker::engines::{Engine, EngineBinaries, EngineKind, EngineSpec, EngineState};

/// Loading the tiny model takes well under a second; this is for a loaded machine.
const PATIENCE: Duration = Duration::from_secs(60);
/// At most this many tokens per completion.
const MAX_TOKENS: u64 = 8;

fn pid(state: &EngineState) -> Option<u32> {
    match state {
        EngineState::Ready { pid } => Some(*pid),
        _ => None,
    }
}

/// Writes the tiny GGUF with tests/clients/tiny_gguf.py.
fn write_tiny_model(python: &str, out: &Path) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/tiny_gguf.py");
    let output = std::process::Command::new(python)
        .arg(script)
        .arg(out)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "tiny_gguf.py failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llama_server_serves_a_tiny_gguf_and_is_restarted_when_killed() {
    let python = std::env::var("SWITCHYARD_PYTHON").expect(
        "SWITCHYARD_PYTHON names a Python with the gguf package: scripts/test.sh provides it",
    );
    let llama_server = std::env::var("SWITCHYARD_LLAMA_SERVER").expect(
        "SWITCHYARD_LLAMA_SERVER names llama.cpp's llama-server: scripts/test.sh builds it",
    );
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("tiny.gguf");
    write_tiny_model(&python, &model);

    let spec = EngineSpec {
        id: "replica-1".into(),
        kind: EngineKind::LlamaCpp,
        model_path: model,
        served_model_name: "tiny".into(),
        gpus: vec![],
        extra_args: vec![],
        env: Default::default(),
        token_delay_ms: 0,
    };
    let binaries = EngineBinaries {
        llama_server: PathBuf::from(llama_server),
        ..EngineBinaries::default()
    };
    let engine = Engine::start(spec, binaries).unwrap();
    assert!(
        engine.wait_for(PATIENCE, |s| pid(s).is_some()).await,
        "{:?}",
        engine.state()
    );

    let http = reqwest::Client::new();
    let models: Value = http
        .get(format!("{}/v1/models", engine.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["data"][0]["id"], "tiny", "{models}");

    let request = json!({
        "model": "tiny",
        "messages": [{"role": "user", "content": "Hello!"}],
        "max_tokens": MAX_TOKENS,
        "seed": 42,
    });
    let answer = http
        .post(format!("{}/v1/chat/completions", engine.url()))
        .json(&request)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let answer: Value = answer.json().await.unwrap();
    assert_eq!(
        answer["choices"][0]["message"]["role"], "assistant",
        "{answer}"
    );
    let tokens = answer["usage"]["completion_tokens"].as_u64();
    assert!(
        tokens.is_some_and(|n| (1..=MAX_TOKENS).contains(&n)),
        "{answer}"
    );

    let mut streamed = request.clone();
    streamed["stream"] = json!(true);
    let stream = http
        .post(format!("{}/v1/chat/completions", engine.url()))
        .json(&streamed)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let body = stream.text().await.unwrap();
    assert!(body.trim_end().ends_with("data: [DONE]"), "{body}");

    // Killed: shown as restarting, then healthy again as a new process.
    let first = pid(&engine.state()).unwrap();
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &first.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    assert!(
        engine
            .wait_for(PATIENCE, |s| matches!(
                s,
                EngineState::Restarting { attempt: 1, .. }
            ))
            .await,
        "{:?}",
        engine.state()
    );
    assert!(
        engine
            .wait_for(PATIENCE, |s| pid(s).is_some_and(|p| p != first))
            .await,
        "{:?}",
        engine.state()
    );
    assert_eq!(engine.restarts(), 1);

    engine.stop().await;
    assert!(
        matches!(engine.state(), EngineState::Stopped { .. }),
        "{:?}",
        engine.state()
    );
}
