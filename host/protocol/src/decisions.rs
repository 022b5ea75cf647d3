//! The admission decision log: what a binding asks to be recorded, one
//! recorded decision, and the answer of
//! `GET /api/admission/{point}/decisions` that the CLI prints.

use serde::{Deserialize, Serialize};

use crate::plugin::Mode;

/// The allow sampling of a binding that names none: one allow in 100 is
/// recorded. Denials, patches, errors and monitor hits are always recorded;
/// allows are the bulk of traffic and a sample is enough to see they happen.
pub const DEFAULT_ALLOW_SAMPLE: u32 = 100;

/// What the decision log keeps of one binding's answers (flattened into
/// the binding: `log_requests`, `allow_sample`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct DecisionLogging {
    /// Store the request record itself beside its SHA-256 (off by default:
    /// a record names models, projects and key ids).
    #[serde(default)]
    pub log_requests: bool,
    /// Record one allow in this many (`0`: none, `1`: all) [default: 100].
    #[serde(default = "default_allow_sample")]
    pub allow_sample: u32,
}

impl Default for DecisionLogging {
    fn default() -> Self {
        Self {
            log_requests: false,
            allow_sample: DEFAULT_ALLOW_SAMPLE,
        }
    }
}

fn default_allow_sample() -> u32 {
    DEFAULT_ALLOW_SAMPLE
}

text_enum! {
    /// What one policy answered, as recorded.
    pub enum RecordedDecision {
        /// Go ahead (sampled).
        Allow => "allow",
        /// Refused.
        Deny => "deny",
        /// Go ahead changed.
        Patch => "patch",
        /// The call failed (timeout, trap, ...).
        Error => "error",
        /// Refused for now: a rate limit or a budget (429).
        Throttle => "throttle",
        /// Allowed and flagged: a soft threshold crossed.
        Flag => "flag",
    }
}

/// One recorded policy answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct AdmissionDecision {
    /// The record's id: increasing, a `since` cursor.
    pub id: i64,
    /// When the policy answered (RFC 3339, milliseconds).
    pub at: String,
    /// The admission point.
    pub point: String,
    /// The chain's generation.
    pub generation: i64,
    /// The policy's name.
    pub plugin: String,
    /// Its version.
    pub version: String,
    /// The binding's mode.
    pub mode: Mode,
    /// What the policy answered.
    pub decision: RecordedDecision,
    /// The deny code, or the error kind (`timeout`, `trap`, ...).
    pub code: Option<String>,
    /// A monitor-mode deny or patch: what the policy would have done.
    pub monitor: bool,
    /// The caller's API key id (`scheduler` for placements, `peer:<label>`
    /// for a peer's calls); never a token.
    pub key_id: String,
    /// Hex SHA-256 of the request record's canonical JSON (keys sorted, no spaces).
    pub request_sha256: String,
    /// The request record itself, when the binding has `log_requests`.
    #[cfg_attr(feature = "utoipa", schema(value_type = Option<Object>))]
    pub request: Option<serde_json::Value>,
    /// The replica that judged.
    pub replica: String,
}

/// How many records of the filtered set (before `limit`) fall in each kind.
/// `deny`, `patch`, `error` and `allow` count enforced answers; `monitor`
/// counts what monitor-mode bindings would have denied or patched.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct DecisionCounts {
    /// Allows recorded (a sample, see `allow_sample`).
    pub allow: u64,
    /// Enforced denials.
    pub deny: u64,
    /// Enforced patches.
    pub patch: u64,
    /// Failed calls.
    pub error: u64,
    /// Monitor-mode denials and patches.
    pub monitor: u64,
    /// Enforced throttles (a rate limit or a budget: 429).
    pub throttle: u64,
    /// Flags (allowed, a soft threshold recorded).
    pub flag: u64,
}

/// `GET /api/admission/{point}/decisions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct DecisionLog {
    /// The records, oldest first: the first `limit` after `since`, or the
    /// newest `limit` without it.
    pub decisions: Vec<AdmissionDecision>,
    /// Counts over every record the filter matches.
    pub counts: DecisionCounts,
    /// The `since` that asks for the records after these (the last id).
    pub next_since: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::round_trip;

    #[test]
    fn a_binding_without_logging_fields_samples_allows_and_keeps_no_requests() {
        let bare: DecisionLogging = serde_json::from_value(serde_json::json!({})).unwrap();
        assert_eq!(bare, DecisionLogging::default());
        assert!(!bare.log_requests);
        assert_eq!(bare.allow_sample, DEFAULT_ALLOW_SAMPLE);
        round_trip(&DecisionLogging {
            log_requests: true,
            allow_sample: 1,
        });
    }

    #[test]
    fn a_decision_log_round_trips() {
        let json = round_trip(&DecisionLog {
            decisions: vec![AdmissionDecision {
                id: 7,
                at: "2026-12-02T00:00:00.000Z".into(),
                point: "inference".into(),
                generation: 2,
                plugin: "max-tokens".into(),
                version: "1.0.0".into(),
                mode: Mode::Monitor,
                decision: RecordedDecision::Deny,
                code: Some("max_tokens_exceeded".into()),
                monitor: true,
                key_id: "key_1".into(),
                request_sha256: "ab".repeat(32),
                request: None,
                replica: "inst_1".into(),
            }],
            counts: DecisionCounts {
                monitor: 1,
                ..Default::default()
            },
            next_since: Some(7),
        });
        assert_eq!(json["decisions"][0]["decision"], "deny");
        assert_eq!(json["counts"]["monitor"], 1);
    }
}
