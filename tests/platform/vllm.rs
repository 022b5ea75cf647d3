//! The `vllm` engine kind's code path: vLLM itself needs a GPU, so a
//! stand-in module (`tests/clients/vllm_standin`, first on PYTHONPATH)
//! takes its place behind the real command line. Started on two GPUs,
//! probed, ready, asked, stopped; the stand-in records what it was given.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use switchyard_worker::engines::{Engine, EngineBinaries, EngineKind, EngineSpec, EngineState};

const PATIENCE: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_vllm_kind_starts_its_server_pinned_to_its_gpus() {
    let python = std::env::var("SWITCHYARD_PYTHON").unwrap_or_else(|_| "python3".into());
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("weights.safetensors");
    std::fs::write(&model, b"weights").unwrap();
    let record = dir.path().join("started.json");
    let standin = Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/vllm_standin");
    let spec = EngineSpec {
        id: "replica-1".into(),
        kind: EngineKind::Vllm,
        model_path: model.clone(),
        served_model_name: "big".into(),
        gpus: vec![2, 3],
        extra_args: vec![],
        env: [
            ("PYTHONPATH".to_string(), standin.display().to_string()),
            (
                "VLLM_STANDIN_RECORD".to_string(),
                record.display().to_string(),
            ),
        ]
        .into(),
        token_delay_ms: 0,
    };
    let binaries = EngineBinaries {
        python: python.into(),
        ..EngineBinaries::default()
    };
    let engine = Engine::start(spec, binaries).unwrap();
    assert!(
        engine
            .wait_for(PATIENCE, |s| matches!(s, EngineState::Ready { .. }))
            .await,
        "{:?}",
        engine.state()
    );

    let started: Value = serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
    assert_eq!(started["cuda_visible_devices"], "2,3");
    assert_eq!(started["model_exists"], true);
    let argv: Vec<&str> = started["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let flag = |name: &str| {
        let at = argv.iter().position(|a| *a == name).unwrap();
        argv[at + 1]
    };
    assert_eq!(flag("--served-model-name"), "big");
    assert_eq!(flag("--tensor-parallel-size"), "2");
    assert_eq!(flag("--model"), model.display().to_string());

    let http = reqwest::Client::new();
    let answer: Value = http
        .post(format!("{}/v1/chat/completions", engine.url()))
        .json(&json!({"model": "big", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answer["model"], "big", "{answer}");

    engine.stop().await;
    assert!(
        matches!(engine.state(), EngineState::Stopped { .. }),
        "{:?}",
        engine.state()
    );
}
