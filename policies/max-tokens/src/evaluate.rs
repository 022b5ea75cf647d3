//! The decision, shared by the inference and federation points.

use switchyard_sdk::{
    Denial, FederationDecision, FederationPatch, FederationRequest, InferenceDecision,
    InferencePatch, InferenceRequest,
};

use crate::{Mode, Settings};

/// Deny code of a request asking for more than the cap in `deny` mode.
pub const MAX_TOKENS_EXCEEDED: &str = "max_tokens_exceeded";

/// What a request's `max_tokens` gets, whatever the point.
enum Verdict {
    Allow,
    Deny(Denial),
    Clamp(u32),
}

fn judge(settings: &Settings, asked: Option<u32>) -> Verdict {
    let cap = settings.max_tokens;
    match (settings.mode, asked) {
        (_, Some(asked)) if asked <= cap => Verdict::Allow,
        (Mode::Deny, None) => Verdict::Allow,
        (Mode::Deny, Some(asked)) => Verdict::Deny(Denial::new(
            MAX_TOKENS_EXCEEDED,
            format!("max_tokens must be at most {cap}, got {asked}"),
        )),
        // Also when the client did not say: the engine's default may be
        // far above the cap.
        (Mode::Clamp, _) => Verdict::Clamp(cap),
    }
}

/// Judges an inference request's `max_tokens` against the cap.
pub fn evaluate_inference(settings: &Settings, request: &InferenceRequest) -> InferenceDecision {
    match judge(settings, request.max_tokens) {
        Verdict::Allow => InferenceDecision::Allow,
        Verdict::Deny(denial) => InferenceDecision::Deny(denial),
        Verdict::Clamp(cap) => InferenceDecision::Patch(InferencePatch {
            max_tokens: Some(cap),
        }),
    }
}

/// Judges a federated call's `max_tokens` against the cap.
pub fn evaluate_federation(settings: &Settings, request: &FederationRequest) -> FederationDecision {
    match judge(settings, request.max_tokens) {
        Verdict::Allow => FederationDecision::Allow,
        Verdict::Deny(denial) => FederationDecision::Deny(denial),
        Verdict::Clamp(cap) => FederationDecision::Patch(FederationPatch {
            max_tokens: Some(cap),
        }),
    }
}
