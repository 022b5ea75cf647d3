//! The cluster's main job end to end, with real processes on each carrier
//! set: a model imported into the library, a deployment of the reference
//! engine placed on a worker (its file staged over the bulk lane and
//! verified), and OpenAI requests through the frontend: listed, completed,
//! streamed, clamped and denied by the inference chain.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use switchyard_tests::ADMIN_TOKEN;
use switchyard_tests::db::fresh_database;
use switchyard_tests::nats::{NatsServer, worker_flags};
use switchyard_tests::plugins::{component, sha256};
use switchyard_tests::process::{ServeProcess, WorkerProcess};

const PATIENCE: Duration = Duration::from_secs(60);

struct Api {
    url: String,
    http: reqwest::Client,
}

impl Api {
    async fn send(&self, request: reqwest::RequestBuilder) -> (StatusCode, Value) {
        let response = request.send().await.unwrap();
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    fn admin(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.url))
            .bearer_auth(ADMIN_TOKEN)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_serves_openai_requests_through_the_chain_on_the_tunnel_set() {
    serves_through_the_chain(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_serves_openai_requests_through_the_chain_on_the_nats_set() {
    let nats = NatsServer::start(&[]);
    serves_through_the_chain(Some(&nats)).await;
}

/// The whole path on one carrier set: `nats` when a server is given (the
/// worker then serves streams on its own address), else `tunnel`.
async fn serves_through_the_chain(nats: Option<&NatsServer>) {
    let database_url = fresh_database().await;
    let data_dir = tempfile::tempdir().unwrap();
    let nats_url = nats.map(NatsServer::address);
    let serve = ServeProcess::on_set(&database_url, data_dir.path(), nats_url.as_deref(), &[]);
    let api = Api {
        url: serve.url.clone(),
        http: reqwest::Client::new(),
    };
    use reqwest::Method;

    // A worker with a declared GPU.
    let (_, token) = api
        .send(
            api.admin(Method::POST, "/api/nodes/registration-tokens")
                .json(&json!({"name": "e2e"})),
        )
        .await;
    let worker_dir = tempfile::tempdir().unwrap();
    let mut worker_args = vec!["--gpu".to_string(), "name=H200,memory=141GiB".to_string()];
    worker_args.extend(worker_flags(nats));
    let _worker = WorkerProcess::start(
        &serve.url,
        token["value"].as_str().unwrap(),
        "gpu-1",
        worker_dir.path(),
        &worker_args,
    );

    // A model in the library: 3 MiB of weights.
    let weights: Vec<u8> = (0..3 * 1024 * 1024u32).map(|i| (i % 239) as u8).collect();
    let digest = hex::encode(Sha256::digest(&weights));
    let (status, _) = api
        .send(
            api.admin(Method::PUT, &format!("/api/library/blobs/{digest}"))
                .body(weights.clone()),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, body) = api
        .send(api.admin(Method::POST, "/api/models").json(&json!({
            "id": "demo-tiny", "revision": "r1",
            "files": [{"path": "tiny.gguf", "size": weights.len(), "sha256": digest}],
        })))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");

    // The inference chain: demo-* models only, max_tokens clamped to 5.
    for name in ["model-allowlist", "max-tokens"] {
        let bytes = component(name);
        let (status, body) = api
            .send(
                api.admin(Method::POST, "/api/plugins")
                    .query(&[
                        ("name", name),
                        ("version", "1.0.0"),
                        ("sha256", &sha256(&bytes)),
                    ])
                    .body(bytes),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let (status, body) = api
        .send(api.admin(Method::PUT, "/api/admission/inference").json(&json!({"policies": [
            {"plugin": "model-allowlist", "version": "1.0.0", "settings": {"rules": [], "default": ["demo-*"]}, "mode": "enforce"},
            {"plugin": "max-tokens", "version": "1.0.0", "settings": {"max_tokens": 5, "mode": "clamp"}, "mode": "enforce"},
        ]})))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // Deploy on one GPU; wait until the replica serves.
    let (status, created) = api
        .send(api.admin(Method::POST, "/api/deployments").json(&json!({
            "model": "demo-tiny", "revision": "r1", "engine": "reference", "gpus_per_replica": 1,
            "gpu_memory_bytes": 1 << 30,
        })))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["id"].as_str().unwrap().to_string();
    let started = Instant::now();
    loop {
        let (_, shown) = api
            .send(api.admin(Method::GET, &format!("/api/deployments/{id}")))
            .await;
        let replicas = shown["replicas_status"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if replicas.iter().any(|r| r["state"] == "ready") {
            assert_eq!(replicas[0]["gpus"], json!([0]), "{shown}");
            break;
        }
        assert!(
            replicas.iter().all(|r| r["state"] != "failed"),
            "a replica failed: {shown}"
        );
        assert!(started.elapsed() < PATIENCE, "never ready: {shown}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The worker holds the verified copy.
    let cached = worker_dir.path().join("models/blobs/sha256").join(&digest);
    assert_eq!(std::fs::read(cached).unwrap(), weights);

    // A key with the inference scope.
    let (_, key) = api
        .send(
            api.admin(Method::POST, "/api/keys")
                .json(&json!({"name": "app", "scopes": ["inference"]})),
        )
        .await;
    let key = key["token"].as_str().unwrap().to_string();
    let v1 = |path: &str| {
        api.http
            .post(format!("{}{path}", api.url))
            .bearer_auth(&key)
    };
    let (status, models) = api
        .send(
            api.http
                .get(format!("{}/v1/models", api.url))
                .bearer_auth(&key),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(models["data"][0]["id"], "demo-tiny");

    // Completed, with max_tokens clamped by the chain (the reference engine
    // generates exactly what it is allowed).
    let (status, answer) = api
        .send(v1("/v1/chat/completions").json(&json!({
            "model": "demo-tiny", "max_tokens": 8192,
            "messages": [{"role": "user", "content": "hello there"}],
        })))
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["object"], "chat.completion");
    assert_eq!(answer["usage"]["completion_tokens"], 5, "{answer}");

    // A limit of the wrong type or range is refused with its field named
    // before the clamp runs: the clamp would otherwise write 5 over it.
    for (field, value) in [
        ("max_tokens", json!(-5)),
        ("max_tokens", json!("ten")),
        ("max_tokens", json!(8.5)),
        ("max_completion_tokens", json!(0)),
        ("stream", json!("yes")),
    ] {
        let mut body =
            json!({"model": "demo-tiny", "messages": [{"role": "user", "content": "hi"}]});
        body[field] = value.clone();
        let (status, answer) = api.send(v1("/v1/chat/completions").json(&body)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{field}={value}: {answer}");
        assert_eq!(answer["error"]["type"], "invalid_request_error", "{answer}");
        assert_eq!(answer["error"]["param"], field, "{answer}");
    }

    // Streamed: SSE chunks, then [DONE].
    let response = v1("/v1/chat/completions")
        .json(
            &json!({"model": "demo-tiny", "max_tokens": 3, "stream": true,
                      "messages": [{"role": "user", "content": "hi"}]}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let text = response.text().await.unwrap();
    let events: Vec<&str> = text.lines().filter(|l| l.starts_with("data: ")).collect();
    assert!(events.len() >= 4, "{text}");
    assert_eq!(events.last(), Some(&"data: [DONE]"));

    // The official OpenAI Python client (from PyPI) lists, completes and streams.
    let python = std::env::var("SWITCHYARD_PYTHON").expect(
        "SWITCHYARD_PYTHON names a Python with the openai package: scripts/test.sh provides it",
    );
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/openai_client.py");
    let output = tokio::process::Command::new(python)
        .arg(script)
        .args([&api.url, &key, "demo-tiny"])
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );

    // Embeddings and text completions travel the same way.
    let (status, embedded) = api
        .send(v1("/v1/embeddings").json(&json!({"model": "demo-tiny", "input": "a sentence"})))
        .await;
    assert_eq!(status, StatusCode::OK, "{embedded}");
    assert_eq!(
        embedded["data"][0]["embedding"].as_array().unwrap().len(),
        64
    );

    // Denied by the chain: another model; unknown to the cluster: 404.
    let (status, denied) = api
        .send(v1("/v1/chat/completions").json(&json!({
            "model": "secret-model", "messages": [{"role": "user", "content": "hi"}],
        })))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{denied}");
    assert!(denied["error"]["code"].is_string(), "{denied}");
    let (status, _) = api
        .send(v1("/v1/chat/completions").json(&json!({
            "model": "demo-other", "messages": [{"role": "user", "content": "hi"}],
        })))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // No key, no answer.
    let (status, _) = api
        .send(api.http.get(format!("{}/v1/models", api.url)))
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}
