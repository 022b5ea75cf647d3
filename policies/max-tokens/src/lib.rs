//! `max-tokens`: caps the `max_tokens` of inference requests and federated
//! calls.
//!
//! Settings (`test_data/settings.json`):
//!
//! ```json
//! { "max_tokens": 4096, "mode": "deny" }
//! ```
//!
//! - `max_tokens` (required, at least 1): the cap.
//! - `mode`: `"deny"` (default) refuses a request asking for more, with
//!   code [`MAX_TOKENS_EXCEEDED`]; `"clamp"` allows it with a patch that
//!   lowers `max_tokens` to the cap, and also gives the cap to a request
//!   that did not say (whose length the engine would otherwise choose).
//!
//! In `deny` mode a request without `max_tokens` is allowed.
//!
//! Points: `inference`, `federation`.
//!
//! # Layout
//!
//! - `settings.rs`: [`Settings`] and their validation
//! - `evaluate.rs`: [`evaluate_inference`] and [`evaluate_federation`], plain
//!   functions that tests and benchmarks call natively

mod evaluate;
mod settings;

pub use evaluate::{MAX_TOKENS_EXCEEDED, evaluate_federation, evaluate_inference};
pub use settings::{Mode, Settings};

use switchyard_sdk::{
    AdmissionPoint, FederationDecision, FederationRequest, InferenceDecision, InferenceRequest,
    Policy,
};

/// The policy as the component exports it.
pub struct MaxTokens;

impl Policy for MaxTokens {
    type Settings = Settings;

    fn points() -> Vec<AdmissionPoint> {
        vec![AdmissionPoint::Inference, AdmissionPoint::Federation]
    }

    fn evaluate_inference(settings: &Settings, request: &InferenceRequest) -> InferenceDecision {
        evaluate_inference(settings, request)
    }

    fn evaluate_federation(settings: &Settings, request: &FederationRequest) -> FederationDecision {
        evaluate_federation(settings, request)
    }
}

switchyard_sdk::export_policy!(MaxTokens);
