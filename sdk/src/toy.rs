//! A tiny policy for the SDK's own tests: inference only, denies prompts
//! longer than `max_prompt_tokens`, patches `max_tokens` down to
//! `clamp_to` when set.

use serde::{Deserialize, Serialize};

use crate::{
    AdmissionPoint, InferenceDecision, InferencePatch, InferenceRequest, Policy, Validate,
};

pub(crate) struct Toy;

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ToySettings {
    pub(crate) max_prompt_tokens: u32,
    #[serde(default)]
    pub(crate) clamp_to: Option<u32>,
}

impl Validate for ToySettings {
    fn validate(&self) -> Result<(), String> {
        if self.max_prompt_tokens == 0 {
            return Err("max_prompt_tokens must be at least 1, got 0".into());
        }
        Ok(())
    }
}

impl Policy for Toy {
    type Settings = ToySettings;

    fn points() -> Vec<AdmissionPoint> {
        vec![AdmissionPoint::Inference]
    }

    fn evaluate_inference(settings: &ToySettings, request: &InferenceRequest) -> InferenceDecision {
        if request.prompt_tokens > settings.max_prompt_tokens {
            return InferenceDecision::deny("prompt_too_long", "too long");
        }
        match (settings.clamp_to, request.max_tokens) {
            (Some(cap), Some(asked)) if asked > cap => InferenceDecision::Patch(InferencePatch {
                max_tokens: Some(cap),
            }),
            _ => InferenceDecision::Allow,
        }
    }
}
