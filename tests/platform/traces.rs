//! Traces over OTLP/HTTP against a real cluster: a frontend and a worker
//! exporting to a receiver that decodes the bodies with OpenTelemetry's own
//! protobuf types (`clients/otlp_receiver.py`). Each request is one trace:
//! the frontend's `/v1` span (under the client's `traceparent` when it sent
//! one) with the GenAI attributes, the policy call beneath it, the worker's
//! stream span beneath that, and the worker's call to the engine.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use switchyard_tests::ADMIN_TOKEN;
use switchyard_tests::cluster::Cluster;
use switchyard_tests::otlp::{named, receiver, spans_until};
use switchyard_tests::plugins::{component, sha256};

/// The four spans of one request's trace, checked for their parents.
fn complete(spans: &[Value]) -> bool {
    [
        "POST /v1/chat/completions",
        "policy max-tokens@1",
        "worker /v1/chat/completions",
        "engine POST /v1/chat/completions",
    ]
    .iter()
    .all(|name| named(spans, name).len() == 1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_request_is_one_trace_from_the_client_through_the_worker_to_the_engine() {
    let (_receiver, mut lines, endpoint) = receiver().await;
    let cluster = Cluster::start_with(None, &["--otlp-endpoint", &endpoint]).await;
    let dir = tempfile::tempdir().unwrap();
    let _worker = cluster.worker(
        "w",
        dir.path(),
        &[
            "--gpu",
            "name=L4,memory=24GiB",
            "--otlp-endpoint",
            &endpoint,
        ],
    );
    cluster.deploy_ready(json!({})).await;
    let bytes = component("max-tokens");
    let pushed = reqwest::Client::new()
        .post(format!("{}/api/plugins", cluster.serve.url))
        .bearer_auth(ADMIN_TOKEN)
        .query(&[
            ("name", "max-tokens"),
            ("version", "1"),
            ("sha256", &sha256(&bytes)),
        ])
        .body(bytes)
        .send()
        .await
        .unwrap();
    assert_eq!(pushed.status(), StatusCode::CREATED);
    let chain = json!({"policies": [{"plugin": "max-tokens", "version": "1",
        "settings": {"max_tokens": 64, "mode": "clamp"}}]});
    let (status, body) = cluster
        .call(Method::PUT, "/api/admission/inference", Some(chain))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // The client's own trace: its span is the frontend span's parent.
    let client_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let client_span = "00f067aa0ba902b7";
    let key = cluster.inference_key().await;
    let mut usages = Vec::new();
    for (i, stream) in [false, true, false].into_iter().enumerate() {
        let mut request = reqwest::Client::new()
            .post(format!("{}/v1/chat/completions", cluster.serve.url))
            .bearer_auth(&key)
            .json(&json!({"model": "demo", "max_tokens": 3, "stream": stream,
                "stream_options": {"include_usage": true},
                "messages": [{"role": "user", "content": "trace this request please"}]}));
        if i == 0 {
            request = request.header("traceparent", format!("00-{client_trace}-{client_span}-01"));
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let text = response.text().await.unwrap();
        let usage = text
            .split("data: ")
            .chain([text.as_str()])
            .filter_map(|part| serde_json::from_str::<Value>(part.trim()).ok())
            .find(|v| v["usage"].is_object())
            .map(|v| v["usage"].clone())
            .expect("the answer's usage");
        usages.push(usage);
    }

    let traces = spans_until(&mut lines, |traces| {
        traces.values().filter(|spans| complete(spans)).count() == 3
    })
    .await;
    let complete_traces: Vec<&Vec<Value>> = traces.values().filter(|s| complete(s)).collect();
    assert_eq!(complete_traces.len(), 3, "{traces:#?}");
    assert!(
        traces.contains_key(client_trace),
        "the client's trace: {traces:#?}"
    );
    for spans in complete_traces {
        let frontend = named(spans, "POST /v1/chat/completions")[0];
        let policy = named(spans, "policy max-tokens@1")[0];
        let worker = named(spans, "worker /v1/chat/completions")[0];
        let engine = named(spans, "engine POST /v1/chat/completions")[0];
        assert_eq!(frontend["service"], "switchyard-frontend");
        assert_eq!(
            (worker["service"].as_str(), engine["service"].as_str()),
            (Some("switchyard-worker"), Some("switchyard-worker"))
        );
        // Parents: client → frontend → policy, worker → engine.
        let trace = frontend["trace_id"].as_str().unwrap();
        let expected_parent = if trace == client_trace {
            client_span
        } else {
            ""
        };
        assert_eq!(frontend["parent"], expected_parent, "{frontend}");
        assert_eq!(policy["parent"], frontend["span_id"]);
        assert_eq!(worker["parent"], frontend["span_id"]);
        assert_eq!(engine["parent"], worker["span_id"]);
        assert_eq!(
            (frontend["kind"].as_i64(), engine["kind"].as_i64()),
            (Some(2), Some(3))
        );
        assert_eq!(
            policy["attributes"]["switchyard.admission.decision"],
            "allow"
        );
        // The GenAI conventions, with the engine's own token counts.
        let a = &frontend["attributes"];
        assert_eq!(a["gen_ai.operation.name"], "chat");
        assert_eq!(a["gen_ai.request.model"], "demo");
        assert_eq!(a["gen_ai.request.max_tokens"], 3);
        assert_eq!(a["http.response.status_code"], 200);
        let ttft = a["gen_ai.server.time_to_first_token"].as_f64().unwrap();
        assert!(ttft > 0.0 && ttft < 30.0, "{a}");
        let tokens = (
            a["gen_ai.usage.input_tokens"].clone(),
            a["gen_ai.usage.output_tokens"].clone(),
        );
        assert!(
            usages
                .iter()
                .any(|u| (u["prompt_tokens"].clone(), u["completion_tokens"].clone()) == tokens),
            "{a} against {usages:?}"
        );
        // The engine call happens inside the frontend's span.
        assert!(
            engine["start"].as_u64() >= frontend["start"].as_u64(),
            "{engine} {frontend}"
        );
    }
}
