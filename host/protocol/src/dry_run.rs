//! `POST /api/admission/{point}/evaluate`: what a chain would answer a
//! request record, and each policy's part in it. The request record and a
//! patch keep the shape of the point's WIT record (snake_case fields), so
//! they travel as JSON objects: the point says which record it is.

use serde::{Deserialize, Serialize};

use crate::plugin::{FailMode, Mode};

text_enum! {
    /// A policy's (or the chain's) answer.
    pub enum DecisionKind {
        /// Go ahead.
        Allow => "allow",
        /// Refused, with a code and a message.
        Deny => "deny",
        /// Go ahead in a changed form.
        Patch => "patch",
        /// Refused for now, with limits (429).
        Throttle => "throttle",
        /// Go ahead, flagged with a code.
        Flag => "flag",
    }
}

/// An answer with what it carries: a denial's code and message, a patch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct Judgement {
    /// Allow, deny or patch.
    pub decision: DecisionKind,
    /// A denial's stable code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// A denial's message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// A patch: the change the point's record defines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "utoipa", schema(value_type = Option<Object>))]
    pub patch: Option<serde_json::Value>,
}

/// The chain's final answer and each policy's part in it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct DryRun {
    /// The point (`inference`, `deploy`, `transfer`, `federation`).
    pub point: String,
    /// The chain generation that judged (0: no chain bound).
    pub generation: i64,
    /// The final answer.
    #[serde(flatten)]
    pub judgement: Judgement,
    /// The request as the engine would see it (patches applied).
    #[cfg_attr(feature = "utoipa", schema(value_type = Object))]
    pub request: serde_json::Value,
    /// Each policy evaluated, in order.
    pub steps: Vec<DryRunStep>,
}

/// What one policy of the chain did with the request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct DryRunStep {
    /// `name@version`.
    pub plugin: String,
    /// Enforce or monitor.
    pub mode: Mode,
    /// Fail closed or open.
    pub fail: FailMode,
    /// Its answer; absent when the call failed.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub judgement: Option<Judgement>,
    /// Why the call failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<StepFailure>,
    /// Whether the answer was applied (false in monitor mode, and for a
    /// fail-open error).
    pub enforced: bool,
    /// Time spent in the call, in microseconds.
    pub time_us: f64,
}

/// A failed policy call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct StepFailure {
    /// `timeout`, `memory_limit`, `trap`, ...
    pub kind: String,
    /// What happened.
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_denial_reads_as_the_flat_record_it_always_was() {
        let text = r#"{"point":"inference","generation":3,"decision":"deny","code":"too_long","message":"no",
            "request":{"model":"m"},"steps":[{"plugin":"p@1","mode":"enforce","fail":"closed","decision":"deny",
            "code":"too_long","message":"no","enforced":true,"time_us":4.5},
            {"plugin":"q@1","mode":"monitor","fail":"open","error":{"kind":"trap","message":"boom"},"enforced":false,"time_us":1.0}]}"#;
        let dry: DryRun = serde_json::from_str(text).unwrap();
        assert_eq!(dry.judgement.decision, DecisionKind::Deny);
        assert_eq!(dry.judgement.code.as_deref(), Some("too_long"));
        assert_eq!(
            dry.steps[0].judgement.as_ref().unwrap().decision,
            DecisionKind::Deny
        );
        assert!(dry.steps[1].judgement.is_none());
        assert_eq!(dry.steps[1].error.as_ref().unwrap().kind, "trap");
        let again: serde_json::Value = serde_json::to_value(&dry).unwrap();
        let original: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(again, original);
    }
}
