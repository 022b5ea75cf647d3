//! The decision: find the rule that applies, match the model against it.

use switchyard_sdk::{
    Denial, FederationDecision, FederationRequest, InferenceDecision, InferenceRequest,
    TransferDecision, TransferRequest,
};

use crate::Settings;
use crate::pattern::matches;
use crate::settings::Subject;

/// Deny code of a model the applicable rule does not list.
pub const MODEL_NOT_ALLOWED: &str = "model_not_allowed";

/// Judges the model of an inference request: the caller's key rule, else
/// its project's rule, else the default list.
pub fn evaluate_inference(settings: &Settings, request: &InferenceRequest) -> InferenceDecision {
    let caller = &request.caller;
    let key = Some(Subject::Key(&caller.key_id));
    let project = caller.project.as_deref().map(Subject::Project);
    match judge(settings, [key, project], &request.model) {
        Ok(()) => InferenceDecision::Allow,
        Err(denial) => InferenceDecision::Deny(denial),
    }
}

/// Judges the model of a copy into this cluster (a peer's model copied
/// into the library) as an inference request's: the caller's key rule,
/// else its project's rule, else the default list.
pub fn evaluate_transfer(settings: &Settings, request: &TransferRequest) -> TransferDecision {
    let caller = &request.caller;
    let key = Some(Subject::Key(&caller.key_id));
    let project = caller.project.as_deref().map(Subject::Project);
    match judge(settings, [key, project], &request.model) {
        Ok(()) => TransferDecision::Allow,
        Err(denial) => TransferDecision::Deny(denial),
    }
}

/// Judges the model of a federated call: the peer's rule, else the
/// default list. A call that names no model is allowed.
pub fn evaluate_federation(settings: &Settings, request: &FederationRequest) -> FederationDecision {
    let Some(model) = &request.model else {
        return FederationDecision::Allow;
    };
    match judge(settings, [Some(Subject::Peer(&request.peer)), None], model) {
        Ok(()) => FederationDecision::Allow,
        Err(denial) => FederationDecision::Deny(denial),
    }
}

/// Checks `model` against the first of `subjects` that has a rule, or the
/// default list.
fn judge(
    settings: &Settings,
    subjects: [Option<Subject<'_>>; 2],
    model: &str,
) -> Result<(), Denial> {
    let rule = subjects
        .into_iter()
        .flatten()
        .find_map(|subject| Some((subject, settings.rule_for(subject)?)));
    let (whom, patterns) = match rule {
        Some((subject, patterns)) => (format!("for {subject}"), patterns),
        None => ("by default".to_string(), settings.default.as_slice()),
    };
    if patterns.iter().any(|pattern| matches(pattern, model)) {
        return Ok(());
    }
    let allowed = if patterns.is_empty() {
        "none".to_string()
    } else {
        patterns.join(", ")
    };
    Err(Denial::new(
        MODEL_NOT_ALLOWED,
        format!("model {model:?} is not allowed {whom} (allowed: {allowed})"),
    ))
}
