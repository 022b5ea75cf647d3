//! The engine supervisor on a real child process: the reference engine
//! (`switchyard engine reference`) started, probed, killed and healed with
//! backoff, drained and stopped.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use switchyard_tests::process::binary;
use switchyard_worker::engines::{Engine, EngineBinaries, EngineKind, EngineSpec, EngineState};

const PATIENCE: Duration = Duration::from_secs(30);

fn pid(state: &EngineState) -> Option<u32> {
    match state {
        EngineState::Ready { pid } => Some(*pid),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_engine_is_restarted_and_a_drain_waits_for_requests_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("tiny.bin");
    std::fs::write(&model, b"weights of a model that does not exist").unwrap();
    let spec = EngineSpec {
        id: "replica-1".into(),
        kind: EngineKind::Reference,
        model_path: model,
        served_model_name: "tiny".into(),
        gpus: vec![],
        extra_args: vec![],
        env: Default::default(),
        token_delay_ms: 0,
    };
    let binaries = EngineBinaries {
        switchyard: binary(),
        ..EngineBinaries::default()
    };
    let engine = Arc::new(Engine::start(spec, binaries).unwrap());
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
    assert_eq!(models["data"][0]["id"], "tiny");
    let answer = http
        .post(format!("{}/v1/chat/completions", engine.url()))
        .json(&json!({"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);

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
            .await
    );
    assert!(
        engine
            .wait_for(PATIENCE, |s| pid(s).is_some_and(|p| p != first))
            .await,
        "{:?}",
        engine.state()
    );
    assert_eq!(engine.restarts(), 1);

    // A drain refuses new requests and waits for the one in flight.
    let in_flight = engine.admit().expect("admitted while ready");
    let draining = {
        let engine = engine.clone();
        tokio::spawn(async move { engine.drain(PATIENCE).await })
    };
    assert!(
        engine
            .wait_for(PATIENCE, |s| *s == EngineState::Draining)
            .await
    );
    assert!(engine.admit().is_none(), "no new request while draining");
    assert!(!draining.is_finished(), "the drain waits for the request");
    drop(in_flight);
    draining.await.unwrap();
    assert!(matches!(engine.state(), EngineState::Stopped { .. }));
}
