//! `{{name}}`: an admission policy for Switchyard. As generated it refuses
//! inference requests whose prompt is longer than the binding allows;
//! replace that rule with yours, and the cases with your own.
//!
//! Settings (`test_data/settings.json`):
//!
//! ```json
//! { "max_prompt_tokens": 4096 }
//! ```
//!
//! A longer prompt is denied with [`PROMPT_TOO_LONG`]. Point: `inference`.

use serde::Deserialize;
use switchyard_sdk::{AdmissionPoint, InferenceDecision, InferenceRequest, Policy, Validate};

/// Deny code of a prompt over the limit.
pub const PROMPT_TOO_LONG: &str = "prompt_too_long";

/// The settings of a binding; unknown fields are refused so that a typo
/// does not pass silently.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// The longest prompt allowed, in tokens.
    pub max_prompt_tokens: u32,
}

impl Validate for Settings {
    fn validate(&self) -> Result<(), String> {
        if self.max_prompt_tokens == 0 {
            return Err("max_prompt_tokens must be at least 1, got 0".into());
        }
        Ok(())
    }
}

/// The decision, a plain function that tests call natively.
pub fn evaluate_inference(settings: &Settings, request: &InferenceRequest) -> InferenceDecision {
    if request.prompt_tokens > settings.max_prompt_tokens {
        return InferenceDecision::deny(
            PROMPT_TOO_LONG,
            format!(
                "the prompt has {} tokens; at most {} are allowed",
                request.prompt_tokens, settings.max_prompt_tokens
            ),
        );
    }
    InferenceDecision::Allow
}

/// The policy as the component exports it.
pub struct ThisPolicy;

impl Policy for ThisPolicy {
    type Settings = Settings;

    fn points() -> Vec<AdmissionPoint> {
        vec![AdmissionPoint::Inference]
    }

    fn evaluate_inference(settings: &Settings, request: &InferenceRequest) -> InferenceDecision {
        evaluate_inference(settings, request)
    }
}

switchyard_sdk::export_policy!(ThisPolicy);
