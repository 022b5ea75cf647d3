//! Request records the suites send.

use serde_json::{Value, json};

/// An inference request for `model` from `project`, asking for `max_tokens`.
pub fn inference(project: &str, model: &str, max_tokens: Option<u32>) -> Value {
    json!({
        "caller": {"key_id": "k-test", "project": project, "scopes": ["inference"]},
        "model": model,
        "endpoint": "/v1/chat/completions",
        "prompt_tokens": 12,
        "max_tokens": max_tokens,
        "stream": false,
    })
}

/// A deploy request claiming `claim_gib` on one GPU with `free_gib` free.
pub fn deploy(claim_gib: u64, free_gib: u64) -> Value {
    let gib = 1u64 << 30;
    json!({
        "caller": {"key_id": "k-test", "project": null, "scopes": ["admin"]},
        "deployment": "d1",
        "model": "demo-tiny",
        "revision": "r1",
        "engine": "reference",
        "node": "node-1",
        "node_labels": [["zone", "a"]],
        "gpus": [{"index": 0, "name": "H200", "memory_total_bytes": 141 * gib, "memory_free_bytes": free_gib * gib}],
        "memory_per_gpu_bytes": claim_gib * gib,
    })
}
