//! Batches as a client runs them: the official `openai` Python client's
//! batch run (`clients/openai_batch.py`), a batch read over `/v1`, and the
//! reference engine a worker runs (to kill it mid-run).

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

/// The Python client's batch run against `url` with `key`: `lines` chat
/// requests to `model`, the batch's owner named when `owner` is given.
/// It prints the batch id first and `ok` once the output checked out.
pub fn python_batch(
    url: &str,
    key: &str,
    model: &str,
    lines: usize,
    owner: Option<&str>,
) -> tokio::process::Child {
    let python = std::env::var("SWITCHYARD_PYTHON").expect(
        "SWITCHYARD_PYTHON names a Python with the openai package: scripts/test.sh provides it",
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/openai_batch.py");
    let mut command = tokio::process::Command::new(python);
    command
        .arg(script)
        .args([url, key, model, &lines.to_string()]);
    if let Some(owner) = owner {
        command.arg(owner);
    }
    command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// The pid of the reference engine the worker under `dir` runs.
pub fn engine_pid(dir: &Path) -> Option<u32> {
    let output = std::process::Command::new("pgrep")
        .args(["-f", &format!("engine reference .*{}", dir.display())])
        .output()
        .unwrap();
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .next()
        .and_then(|pid| pid.trim().parse().ok())
}

/// Sends SIGKILL to `pid`.
pub fn kill(pid: u32) {
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success(), "kill -KILL {pid}");
}

/// A batch as `url` shows it to `key`, with the status.
pub async fn batch(url: &str, key: &str, id: &str) -> (reqwest::StatusCode, Value) {
    let response = reqwest::Client::new()
        .get(format!("{url}/v1/batches/{id}"))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Polls the batch until `done` holds; returns it then.
pub async fn batch_until(
    url: &str,
    key: &str,
    id: &str,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let started = Instant::now();
    loop {
        let (_, shown) = batch(url, key, id).await;
        if done(&shown) {
            return shown;
        }
        assert!(
            started.elapsed() < Duration::from_secs(180),
            "{what}: {shown}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Lines of a batch answered with a 2xx so far.
pub fn completed(batch: &Value) -> i64 {
    batch["request_counts"]["completed"].as_i64().unwrap_or(0)
}

/// Uploads `content` with `purpose` (`POST /v1/files`, a multipart form
/// as OpenAI's clients send it); the status and the answer.
pub async fn upload(
    url: &str,
    key: &str,
    purpose: &str,
    content: &[u8],
) -> (reqwest::StatusCode, Value) {
    upload_form(url, key, &[("purpose", purpose)], content).await
}

/// Uploads `content` with the text `fields` before it (`purpose`,
/// `expires_after[seconds]`, ...); the status and the answer.
pub async fn upload_form(
    url: &str,
    key: &str,
    fields: &[(&str, &str)],
    content: &[u8],
) -> (reqwest::StatusCode, Value) {
    const BOUNDARY: &str = "switchyard-test-boundary";
    let mut body = Vec::new();
    for (name, value) in fields {
        body.extend_from_slice(
            format!(
                "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
            )
            .as_bytes(),
        );
    }
    body.extend_from_slice(
        format!(
            "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"in.jsonl\"\r\n\
             Content-Type: application/jsonl\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(content);
    body.extend_from_slice(format!("\r\n--{BOUNDARY}--\r\n").as_bytes());
    let response = reqwest::Client::new()
        .post(format!("{url}/v1/files"))
        .bearer_auth(key)
        .header(
            "content-type",
            format!("multipart/form-data; boundary={BOUNDARY}"),
        )
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// `method path` with `key` and an optional JSON body; the status and the
/// answer (`null` when it is no JSON).
pub async fn call(
    url: &str,
    key: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (reqwest::StatusCode, Value) {
    let mut request = reqwest::Client::new()
        .request(method, format!("{url}{path}"))
        .bearer_auth(key);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// `lines` chat requests to `model` (8 tokens each), as a batch input file.
pub fn chat_lines(model: &str, lines: usize) -> String {
    (0..lines)
        .map(|i| {
            serde_json::json!({"custom_id": format!("line-{i}"), "method": "POST",
                "url": "/v1/chat/completions",
                "body": {"model": model, "max_tokens": 8,
                         "messages": [{"role": "user", "content": "hi"}]}})
            .to_string()
                + "\n"
        })
        .collect()
}

/// Waits for a Python run to end and checks it said "ok".
pub async fn python_ok(child: tokio::process::Child) {
    let output = tokio::time::timeout(Duration::from_secs(300), child.wait_with_output())
        .await
        .expect("the Python client never finished")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.trim_end().ends_with("ok"),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
