//! An OTLP/HTTP receiver for the tracing suites: `clients/otlp_receiver.py`
//! decodes real export bodies with OpenTelemetry's own protobuf types and
//! prints one JSON line a span; these read them, by trace.

use std::collections::HashMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout};

/// The spans the receiver printed, line by line.
pub type SpanLines = Lines<BufReader<ChildStdout>>;

/// The receiver (killed when dropped), its output, and its URL: the
/// endpoint to give `--otlp-endpoint`.
pub async fn receiver() -> (Child, SpanLines, String) {
    let python = std::env::var("SWITCHYARD_PYTHON").expect(
        "SWITCHYARD_PYTHON names a Python with opentelemetry-proto: scripts/test.sh provides it",
    );
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/otlp_receiver.py");
    let mut child = tokio::process::Command::new(python)
        .arg(script)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines
        .next_line()
        .await
        .unwrap()
        .expect("the receiver's port");
    let port = first.strip_prefix("listening ").expect("listening <port>");
    (child, lines, format!("http://127.0.0.1:{port}"))
}

/// Spans by trace id, read until `done` holds for them (at most 30 s).
pub async fn spans_until(
    lines: &mut SpanLines,
    done: impl Fn(&HashMap<String, Vec<Value>>) -> bool,
) -> HashMap<String, Vec<Value>> {
    let mut traces: HashMap<String, Vec<Value>> = HashMap::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done(&traces) {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = tokio::time::timeout(left, lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("spans never came: {traces:#?}"))
            .unwrap()
            .expect("the receiver ended");
        let span: Value = serde_json::from_str(&line).unwrap();
        let trace = span["trace_id"].as_str().unwrap().to_string();
        traces.entry(trace).or_default().push(span);
    }
    traces
}

/// The spans of a trace with this name.
pub fn named<'a>(spans: &'a [Value], name: &str) -> Vec<&'a Value> {
    spans.iter().filter(|s| s["name"] == name).collect()
}
