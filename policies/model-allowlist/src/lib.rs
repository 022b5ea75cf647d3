//! `model-allowlist`: which models a project, an API key or a peer cluster
//! may call, and which a key may copy into the library from a peer.
//!
//! Settings (`test_data/settings.json`):
//!
//! ```json
//! {
//!   "rules": [
//!     { "project": "research", "models": ["llama-3-*", "mistral-7b"] },
//!     { "key_id": "k-admin", "models": ["*"] },
//!     { "peer": "eu-west", "models": ["llama-3-*"] }
//!   ],
//!   "default": ["demo-*"]
//! }
//! ```
//!
//! - Each rule names exactly one of `key_id`, `project` (inference and
//!   transfer) or `peer` (federation), and the models it may call. No two rules name the
//!   same key, project or peer.
//! - A pattern is a model id, or a prefix ending in `*` (`llama-3-*`); `*`
//!   alone matches every model. Matching is case-sensitive.
//! - The most specific rule decides, and only that rule: for an inference
//!   request or a transfer (a model copy) the caller's key rule, else its
//!   project's rule, else
//!   `default`; for a federated call the peer's rule, else `default`. A key
//!   rule can therefore narrow or widen what its project may call.
//! - `default` (optional, empty when left out) covers everyone without a
//!   rule; empty means nothing is allowed.
//! - A federated call that names no model is allowed: there is nothing to
//!   check.
//!
//! A refused model is denied with [`MODEL_NOT_ALLOWED`].
//!
//! Points: `inference`, `transfer`, `federation`.
//!
//! # Layout
//!
//! - `settings.rs`: [`Settings`], [`Rule`] and their validation
//! - `pattern.rs`: matching a model id against `*`-suffix patterns
//! - `evaluate.rs`: [`evaluate_inference`], [`evaluate_transfer`] and
//!   [`evaluate_federation`],
//!   plain functions that tests and benchmarks call natively

mod evaluate;
mod pattern;
mod settings;

pub use evaluate::{MODEL_NOT_ALLOWED, evaluate_federation, evaluate_inference, evaluate_transfer};
pub use pattern::matches;
pub use settings::{Rule, Settings};

use switchyard_sdk::{
    AdmissionPoint, FederationDecision, FederationRequest, InferenceDecision, InferenceRequest,
    Policy, TransferDecision, TransferRequest,
};

/// The policy as the component exports it.
pub struct ModelAllowlist;

impl Policy for ModelAllowlist {
    type Settings = Settings;

    fn points() -> Vec<AdmissionPoint> {
        vec![
            AdmissionPoint::Inference,
            AdmissionPoint::Transfer,
            AdmissionPoint::Federation,
        ]
    }

    fn evaluate_inference(settings: &Settings, request: &InferenceRequest) -> InferenceDecision {
        evaluate_inference(settings, request)
    }

    fn evaluate_transfer(settings: &Settings, request: &TransferRequest) -> TransferDecision {
        evaluate_transfer(settings, request)
    }

    fn evaluate_federation(settings: &Settings, request: &FederationRequest) -> FederationDecision {
        evaluate_federation(settings, request)
    }
}

switchyard_sdk::export_policy!(ModelAllowlist);
