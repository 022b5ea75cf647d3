//! `gpu-memory-guard`: a deployment may not claim more than a set fraction
//! of the free memory of any of the GPUs it would get.
//!
//! Settings (`test_data/settings.json`):
//!
//! ```json
//! { "max_fraction_of_free": 0.9 }
//! ```
//!
//! - `max_fraction_of_free` (greater than 0, at most 1; 0.9 when left out):
//!   the share of each GPU's free memory a replica may claim. The rest is
//!   headroom for the CUDA context, fragmentation and other tenants.
//!
//! A replica whose `memory_per_gpu_bytes` is above that share on any of its
//! GPUs is denied with [`GPU_MEMORY_EXCEEDED`]; the message names each such
//! GPU with the claim and the limit in GiB. A replica without GPUs is
//! allowed.
//!
//! Points: `deploy`.
//!
//! # Layout
//!
//! - `settings.rs`: [`Settings`] and their validation
//! - `evaluate.rs`: [`evaluate_deploy`] and [`limit_bytes`], plain functions
//!   that tests and benchmarks call natively

mod evaluate;
mod settings;

pub use evaluate::{GPU_MEMORY_EXCEEDED, evaluate_deploy, limit_bytes};
pub use settings::{DEFAULT_MAX_FRACTION_OF_FREE, Settings};

use switchyard_sdk::{AdmissionPoint, DeployDecision, DeployRequest, Policy};

/// The policy as the component exports it.
pub struct GpuMemoryGuard;

impl Policy for GpuMemoryGuard {
    type Settings = Settings;

    fn points() -> Vec<AdmissionPoint> {
        vec![AdmissionPoint::Deploy]
    }

    fn evaluate_deploy(settings: &Settings, request: &DeployRequest) -> DeployDecision {
        evaluate_deploy(settings, request)
    }
}

switchyard_sdk::export_policy!(GpuMemoryGuard);
