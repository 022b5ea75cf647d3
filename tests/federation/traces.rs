//! A remote call's trace crosses the federation link: the client's
//! `traceparent` on alpha, alpha's `/v1` span, beta's (the owner's) `/v1`
//! span under it, beta's worker and its engine call, all in the client's
//! trace, exported by both clusters to one OTLP receiver.

use reqwest::StatusCode;
use serde_json::{Value, json};
use switchyard_tests::federation::{Member, grant};
use switchyard_tests::otlp::{named, receiver, spans_until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_calls_spans_on_both_clusters_are_one_trace() {
    let (_receiver, mut lines, endpoint) = receiver().await;
    let otlp = ["--otlp-endpoint", endpoint.as_str()];
    let (alpha, mut beta) = tokio::join!(
        Member::bare_with("alpha", &otlp),
        Member::bare_with("beta", &otlp)
    );
    let dir = tempfile::tempdir().unwrap();
    let worker = beta.cluster.worker(
        "w",
        dir.path(),
        &[
            "--gpu",
            "name=L4,memory=24GiB",
            "--otlp-endpoint",
            &endpoint,
        ],
    );
    beta.deployment = Some(beta.cluster.deploy_ready(json!({})).await);
    alpha.join(&beta).await;
    beta.offer_service("chat").await;
    let spec = json!({"services": ["chat"], "operations": ["inference"], "lifetime_s": 3600,
                      "max_concurrent": 4, "max_requests": 100});
    grant(&beta, &alpha, &["inference"], spec).await;
    let key = alpha.key(&["federation:invoke"]).await;

    let client_trace = "0af7651916cd43dd8448eb211c80319c";
    let client_span = "b7ad6b7169203331";
    let response = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", alpha.url()))
        .bearer_auth(&key)
        .header("traceparent", format!("00-{client_trace}-{client_span}-01"))
        .json(&json!({"model": "beta/chat", "max_tokens": 2,
            "messages": [{"role": "user", "content": "across the link"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let _ = response.text().await.unwrap();

    let traces = spans_until(&mut lines, |traces| {
        traces.get(client_trace).is_some_and(|spans| {
            named(spans, "POST /v1/chat/completions").len() == 2
                && named(spans, "engine POST /v1/chat/completions").len() == 1
        })
    })
    .await;
    let spans = &traces[client_trace];
    let frontends = named(spans, "POST /v1/chat/completions");
    let by_model = |model: &str| -> &Value {
        frontends
            .iter()
            .find(|s| s["attributes"]["gen_ai.request.model"] == model)
            .unwrap_or_else(|| panic!("no /v1 span for {model}: {spans:#?}"))
    };
    // The caller's side names the remote model; the owner's its own.
    let (on_alpha, on_beta) = (by_model("beta/chat"), by_model("demo"));
    let worker_span = named(spans, "worker /v1/chat/completions")[0];
    let engine = named(spans, "engine POST /v1/chat/completions")[0];
    assert_eq!(on_alpha["parent"], client_span, "{on_alpha}");
    assert_eq!(on_beta["parent"], on_alpha["span_id"], "{on_beta}");
    assert_eq!(worker_span["parent"], on_beta["span_id"], "{worker_span}");
    assert_eq!(engine["parent"], worker_span["span_id"], "{engine}");
    // Both sides saw the engine's tokens.
    let tokens = |side: &Value| side["attributes"]["gen_ai.usage.output_tokens"].as_i64();
    assert!(tokens(on_beta).is_some_and(|n| n > 0), "{on_beta}");
    assert_eq!(tokens(on_alpha), tokens(on_beta), "{on_alpha} {on_beta}");
    drop(worker);
}
