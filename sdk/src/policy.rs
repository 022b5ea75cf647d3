//! The trait a policy implements, and the one its settings implement.

use serde::de::DeserializeOwned;

use crate::{
    AdmissionPoint, DeployDecision, DeployRequest, FederationDecision, FederationRequest,
    InferenceDecision, InferenceRequest, TransferDecision, TransferRequest, decision,
};

/// Settings a policy can check beyond what deserializing them checks.
///
/// The host calls `validate-settings` when a policy is bound and shows the
/// error to the operator as is, so write the message for them:
/// `"max_tokens must be at least 1, got 0"`.
pub trait Validate {
    /// Returns `Err(message)` when the settings cannot be used.
    fn validate(&self) -> Result<(), String> {
        Ok(())
    }
}

/// An admission policy: its settings and one function per admission point.
///
/// Functions take the settings the instance accepted and the point's
/// request, and return the point's decision. A point the policy does not
/// list in [`Policy::points`] keeps the default body, which denies with
/// [`decision::POINT_NOT_SUPPORTED`]; the host refuses to bind a policy to
/// such a point, so that default is only a safety net.
///
/// Export the implementation with [`crate::export_policy!`].
pub trait Policy {
    /// The settings document of a binding, parsed from JSON.
    type Settings: DeserializeOwned + Validate + 'static;

    /// The points this policy judges.
    fn points() -> Vec<AdmissionPoint>;

    /// Judges an OpenAI-compatible request.
    fn evaluate_inference(
        _settings: &Self::Settings,
        _request: &InferenceRequest,
    ) -> InferenceDecision {
        InferenceDecision::Deny(decision::point_not_supported(AdmissionPoint::Inference))
    }

    /// Judges placing an engine replica on a node.
    fn evaluate_deploy(_settings: &Self::Settings, _request: &DeployRequest) -> DeployDecision {
        DeployDecision::Deny(decision::point_not_supported(AdmissionPoint::Deploy))
    }

    /// Judges a model file copy.
    fn evaluate_transfer(
        _settings: &Self::Settings,
        _request: &TransferRequest,
    ) -> TransferDecision {
        TransferDecision::Deny(decision::point_not_supported(AdmissionPoint::Transfer))
    }

    /// Judges a call from a peer cluster.
    fn evaluate_federation(
        _settings: &Self::Settings,
        _request: &FederationRequest,
    ) -> FederationDecision {
        FederationDecision::Deny(decision::point_not_supported(AdmissionPoint::Federation))
    }
}

/// Parses and validates a settings document the way the host's
/// `validate-settings` call does.
///
/// An empty document reads as `{}`, so a policy whose settings all have
/// defaults can be bound without a file.
pub fn parse_settings<P: Policy>(json: &str) -> Result<P::Settings, String> {
    parse_document(json)
}

/// The parse and validation of any plugin's settings (a policy's, a grant
/// evaluator's): one rule for every kind.
pub(crate) fn parse_document<S: DeserializeOwned + Validate>(json: &str) -> Result<S, String> {
    let json = if json.trim().is_empty() { "{}" } else { json };
    let settings: S = serde_json::from_str(json).map_err(|e| format!("invalid settings: {e}"))?;
    settings.validate()?;
    Ok(settings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::toy::Toy;

    #[test]
    fn empty_document_reads_as_an_empty_object() {
        let error = parse_settings::<Toy>("  ").unwrap_err();
        assert!(
            error.contains("missing field `max_prompt_tokens`"),
            "{error}"
        );
    }

    #[test]
    fn malformed_json_says_so() {
        let error = parse_settings::<Toy>("{max_prompt_tokens: 1}").unwrap_err();
        assert!(
            error.starts_with("invalid settings: key must be a string"),
            "{error}"
        );
    }

    #[test]
    fn validation_message_is_passed_through() {
        let error = parse_settings::<Toy>(r#"{"max_prompt_tokens": 0}"#).unwrap_err();
        assert_eq!(error, "max_prompt_tokens must be at least 1, got 0");
    }
}
