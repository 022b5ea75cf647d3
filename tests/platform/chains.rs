//! Admission chains through the API: settings refusal, deny, allow, patch,
//! monitor, rollback, and a restart that keeps everything.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use switchyard_tests::db::fresh_database;
use switchyard_tests::plugins::{component, shipped_settings};
use switchyard_tests::replica::Replica;

use crate::requests::{deploy, inference};

async fn push_shipped(replica: &Replica) {
    for name in ["model-allowlist", "max-tokens", "gpu-memory-guard"] {
        let (status, body) = replica.push(name, "1.0.0", &component(name)).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
}

fn binding(plugin: &str, settings: Value, mode: &str) -> Value {
    json!({"plugin": plugin, "version": "1.0.0", "settings": settings, "mode": mode})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_are_validated_by_the_plugin_before_anything_is_stored() {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = Replica::on(&db, dir.path()).await;
    push_shipped(&replica).await;

    let (status, body) = replica
        .set_chain(
            "inference",
            json!([binding(
                "max-tokens",
                json!({"max_tokens": 0, "mode": "deny"}),
                "enforce"
            )]),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"]["code"], "invalid_settings");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_tokens"),
        "{body}"
    );

    // Nothing was stored.
    let (_, shown) = replica
        .call(replica.admin(Method::GET, "/api/admission/inference"))
        .await;
    assert_eq!(shown["generation"], 0, "{shown}");

    // Unknown plugin, a point the policy does not judge (an unknown point
    // needs no database: host/server/src/routes/tests.rs).
    let (status, body) = replica
        .set_chain("inference", json!([binding("nope", json!({}), "enforce")]))
        .await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (StatusCode::NOT_FOUND, json!("plugin_not_found"))
    );
    let (status, body) = replica
        .set_chain(
            "inference",
            json!([binding(
                "gpu-memory-guard",
                shipped_settings("gpu-memory-guard"),
                "enforce"
            )]),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"]["code"], "point_not_supported");
    replica.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deny_allow_patch_and_monitor() {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = Replica::on(&db, dir.path()).await;
    push_shipped(&replica).await;

    // Before any binding everything is allowed.
    let (status, verdict) = replica
        .evaluate("inference", &inference("sales", "gpt-x", Some(10)))
        .await;
    assert_eq!(status, StatusCode::OK, "{verdict}");
    assert_eq!(
        (verdict["decision"].clone(), verdict["generation"].clone()),
        (json!("allow"), json!(0))
    );

    let (status, generation) = replica
        .set_chain(
            "inference",
            json!([
                binding(
                    "model-allowlist",
                    shipped_settings("model-allowlist"),
                    "enforce"
                ),
                binding(
                    "max-tokens",
                    json!({"max_tokens": 1024, "mode": "clamp"}),
                    "enforce"
                ),
            ]),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{generation}");
    assert_eq!(generation["generation"], 1);

    // Deny: the first policy refuses and the chain stops there.
    let (_, verdict) = replica
        .evaluate("inference", &inference("research", "gpt-4o", Some(10)))
        .await;
    assert_eq!(verdict["decision"], "deny", "{verdict}");
    assert_eq!(verdict["code"], "model_not_allowed");
    assert_eq!(
        verdict["steps"].as_array().unwrap().len(),
        1,
        "the chain stops at the first deny"
    );

    // Patch: allowed model, max_tokens clamped, and the request shows it.
    let (_, verdict) = replica
        .evaluate(
            "inference",
            &inference("research", "llama-3-8b", Some(8192)),
        )
        .await;
    assert_eq!(verdict["decision"], "patch", "{verdict}");
    assert_eq!(verdict["patch"]["max_tokens"], 1024);
    assert_eq!(verdict["request"]["max_tokens"], 1024);
    let steps = verdict["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2);
    assert!(steps.iter().all(|s| s["time_us"].as_f64().unwrap() > 0.0));

    // Allow: under the cap.
    let (_, verdict) = replica
        .evaluate("inference", &inference("research", "mistral-7b", Some(100)))
        .await;
    assert_eq!(verdict["decision"], "allow", "{verdict}");

    // Monitor: the would-be deny is reported but not enforced.
    let (status, _) = replica
        .set_chain(
            "inference",
            json!([binding(
                "model-allowlist",
                shipped_settings("model-allowlist"),
                "monitor"
            )]),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (_, verdict) = replica
        .evaluate("inference", &inference("research", "gpt-4o", Some(10)))
        .await;
    assert_eq!(verdict["decision"], "allow", "{verdict}");
    assert_eq!(verdict["steps"][0]["decision"], "deny");
    assert_eq!(verdict["steps"][0]["mode"], "monitor");
    assert_eq!(verdict["steps"][0]["enforced"], false);

    // The deploy point with the GPU memory guard.
    let (status, _) = replica
        .set_chain(
            "deploy",
            json!([binding(
                "gpu-memory-guard",
                shipped_settings("gpu-memory-guard"),
                "enforce"
            )]),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (_, verdict) = replica.evaluate("deploy", &deploy(100, 80)).await;
    assert_eq!(verdict["decision"], "deny", "{verdict}");
    assert_eq!(verdict["code"], "gpu_memory_exceeded");
    let (_, verdict) = replica.evaluate("deploy", &deploy(40, 80)).await;
    assert_eq!(verdict["decision"], "allow", "{verdict}");

    // A malformed request record is a 400 with the field named.
    let (status, body) = replica.evaluate("inference", &json!({"model": 3})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["code"], "invalid_request");

    // Per-plugin metrics.
    let metrics = replica
        .http
        .get(format!("{}/metrics", replica.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("switchyard_plugin_denials_total{plugin=\"model-allowlist@1.0.0\"}"),
        "{metrics}"
    );
    assert!(
        metrics
            .contains("switchyard_plugin_call_duration_seconds_bucket{plugin=\"max-tokens@1.0.0\""),
        "{metrics}"
    );
    assert!(
        metrics.contains("switchyard_admission_generation{point=\"inference\"} 2"),
        "{metrics}"
    );
    replica.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollback_and_a_restart_that_keeps_everything() {
    let db = fresh_database().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = Replica::on(&db, dir.path()).await;
    push_shipped(&replica).await;

    let (status, body) = replica
        .call(replica.admin(Method::POST, "/api/admission/inference/rollback"))
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(body["error"]["code"], "nothing_to_rollback");

    let strict = json!([binding(
        "max-tokens",
        json!({"max_tokens": 100, "mode": "deny"}),
        "enforce"
    )]);
    let loose = json!([binding(
        "max-tokens",
        json!({"max_tokens": 100000, "mode": "deny"}),
        "enforce"
    )]);
    assert_eq!(
        replica.set_chain("inference", strict).await.0,
        StatusCode::OK
    );
    assert_eq!(
        replica.set_chain("inference", loose).await.0,
        StatusCode::OK
    );
    let request = inference("research", "llama-3-8b", Some(5000));
    assert_eq!(
        replica.evaluate("inference", &request).await.1["decision"],
        "allow"
    );

    let (status, generation) = replica
        .call(replica.admin(Method::POST, "/api/admission/inference/rollback"))
        .await;
    assert_eq!(status, StatusCode::OK, "{generation}");
    assert_eq!(generation["generation"], 3);
    assert_eq!(generation["note"], "rollback to 1");
    let (_, verdict) = replica.evaluate("inference", &request).await;
    assert_eq!(
        (verdict["decision"].clone(), verdict["generation"].clone()),
        (json!("deny"), json!(3))
    );
    replica.stop().await;

    // A new process on the same database serves the same chain and knows the same token.
    let replica = Replica::on(&db, dir.path()).await;
    let (_, verdict) = replica.evaluate("inference", &request).await;
    assert_eq!(
        (verdict["decision"].clone(), verdict["generation"].clone()),
        (json!("deny"), json!(3)),
        "{verdict}"
    );
    let (_, list) = replica
        .call(replica.admin(Method::GET, "/api/plugins"))
        .await;
    assert_eq!(list["plugins"].as_array().unwrap().len(), 3);
    let (_, shown) = replica
        .call(replica.admin(Method::GET, "/api/admission/inference"))
        .await;
    let replicas = shown["replicas"].as_array().unwrap();
    assert_eq!(
        replicas.len(),
        1,
        "the stopped replica left the membership: {shown}"
    );
    assert_eq!(replicas[0]["status"], "current");
    replica.stop().await;
}
