//! The decision: compare the claim with each GPU's allowed share.

use switchyard_sdk::{DeployDecision, DeployRequest, Gpu};

use crate::Settings;

/// Deny code of a claim above the allowed share of a GPU's free memory.
pub const GPU_MEMORY_EXCEEDED: &str = "gpu_memory_exceeded";

const GIB: f64 = (1u64 << 30) as f64;

/// The most a replica may claim on `gpu`, in bytes.
pub fn limit_bytes(settings: &Settings, gpu: &Gpu) -> u64 {
    // f64 is exact for byte counts below 2^53 (8 PiB); the cast saturates.
    (gpu.memory_free_bytes as f64 * settings.max_fraction_of_free).floor() as u64
}

/// Judges a deployment: denied when its per-GPU claim is above
/// [`limit_bytes`] on any of its GPUs, naming every such GPU.
pub fn evaluate_deploy(settings: &Settings, request: &DeployRequest) -> DeployDecision {
    let claim = request.memory_per_gpu_bytes;
    let over: Vec<String> = request
        .gpus
        .iter()
        .filter_map(|gpu| {
            let limit = limit_bytes(settings, gpu);
            (claim > limit).then(|| {
                format!(
                    "GPU {} ({}): claim {:.1} GiB is above the limit of {:.1} GiB ({} of {:.1} GiB free)",
                    gpu.index,
                    gpu.name,
                    claim as f64 / GIB,
                    limit as f64 / GIB,
                    settings.max_fraction_of_free,
                    gpu.memory_free_bytes as f64 / GIB,
                )
            })
        })
        .collect();
    if over.is_empty() {
        return DeployDecision::Allow;
    }
    DeployDecision::deny(
        GPU_MEMORY_EXCEEDED,
        format!(
            "deployment {} on node {} claims too much GPU memory: {}",
            request.deployment,
            request.node,
            over.join("; ")
        ),
    )
}
