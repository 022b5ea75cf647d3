//! Building decisions, and one view of a decision that fits every point.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::{
    AdmissionPoint, Denial, DeployDecision, DeployPatch, FederationDecision, FederationPatch,
    InferenceDecision, InferencePatch, RateLimit, Throttle, TransferDecision, TransferPatch,
};

/// Deny code of a point the policy does not judge (the default body of
/// every [`crate::Policy`] method).
pub const POINT_NOT_SUPPORTED: &str = "point_not_supported";

/// Deny code of an evaluation on an instance whose settings were never
/// accepted; the host always validates first, so this means a host bug.
pub const NOT_CONFIGURED: &str = "not_configured";

impl Denial {
    /// A denial with a stable code (`model_not_allowed`) and a message for
    /// the person who reads it.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        Denial {
            code: code.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Denial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl AdmissionPoint {
    /// Every admission point, in WIT order.
    pub const ALL: [AdmissionPoint; 4] = [
        AdmissionPoint::Inference,
        AdmissionPoint::Deploy,
        AdmissionPoint::Transfer,
        AdmissionPoint::Federation,
    ];

    /// The point's name as the CLI and JSON spell it (`"inference"`).
    pub fn as_str(self) -> &'static str {
        match self {
            AdmissionPoint::Inference => "inference",
            AdmissionPoint::Deploy => "deploy",
            AdmissionPoint::Transfer => "transfer",
            AdmissionPoint::Federation => "federation",
        }
    }
}

impl fmt::Display for AdmissionPoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The denial every unsupported point answers with.
pub fn point_not_supported(point: AdmissionPoint) -> Denial {
    Denial::new(
        POINT_NOT_SUPPORTED,
        format!("this policy does not judge the {point} point"),
    )
}

/// The denial of an instance asked to evaluate before its settings were
/// accepted.
pub fn not_configured() -> Denial {
    Denial::new(
        NOT_CONFIGURED,
        "the policy was evaluated before its settings were accepted",
    )
}

/// A `deny(code, message)` constructor on each point's decision type.
macro_rules! deny_constructor {
    ($($decision:ident),*) => {$(
        impl $decision {
            /// Denies with a stable code and a message for the caller.
            pub fn deny(code: impl Into<String>, message: impl Into<String>) -> Self {
                $decision::Deny(Denial::new(code, message))
            }
        }
    )*};
}
deny_constructor!(
    InferenceDecision,
    DeployDecision,
    TransferDecision,
    FederationDecision
);

/// A `throttle(code, message, limits)` and a `flag(code, message)`
/// constructor on the decisions that have them.
macro_rules! throttle_constructor {
    ($($decision:ident),*) => {$(
        impl $decision {
            /// Refuses for now (429), showing the client `limits`.
            pub fn throttle(
                code: impl Into<String>,
                message: impl Into<String>,
                limits: RateLimit,
            ) -> Self {
                $decision::Throttle(Throttle {
                    denial: Denial::new(code, message),
                    limits,
                })
            }

            /// Allows, recorded in the decision log with this code.
            pub fn flag(code: impl Into<String>, message: impl Into<String>) -> Self {
                $decision::Flag(Denial::new(code, message))
            }
        }
    )*};
}
throttle_constructor!(InferenceDecision, FederationDecision);

/// A decision at any point: what the test harness and tools compare.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Go ahead as asked.
    Allow,
    /// Refused.
    Deny(Denial),
    /// Go ahead with the changes of the patch.
    Patch(Patch),
    /// Refused for now, with the limits the client is shown.
    Throttle(Throttle),
    /// Allowed, and recorded with this code.
    Flag(Denial),
}

/// The patch of one point.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Patch {
    /// A lower `max_tokens`.
    Inference(InferencePatch),
    /// A lower memory claim per GPU.
    Deploy(DeployPatch),
    /// A rate limit.
    Transfer(TransferPatch),
    /// A lower `max_tokens`.
    Federation(FederationPatch),
}

impl Patch {
    /// The point this patch belongs to.
    pub fn point(&self) -> AdmissionPoint {
        match self {
            Patch::Inference(_) => AdmissionPoint::Inference,
            Patch::Deploy(_) => AdmissionPoint::Deploy,
            Patch::Transfer(_) => AdmissionPoint::Transfer,
            Patch::Federation(_) => AdmissionPoint::Federation,
        }
    }
}

/// `From` each point's decision and patch into [`Decision`] and [`Patch`];
/// the points after `;` also throttle and flag.
macro_rules! point_conversions {
    ($($decision:ident, $patch:ident => $case:ident $(| $throttle:ident)?;)*) => {$(
        impl From<$patch> for Patch {
            fn from(patch: $patch) -> Self {
                Patch::$case(patch)
            }
        }

        impl From<$decision> for Decision {
            fn from(decision: $decision) -> Self {
                match decision {
                    $decision::Allow => Decision::Allow,
                    $decision::Deny(denial) => Decision::Deny(denial),
                    $decision::Patch(patch) => Decision::Patch(Patch::$case(patch)),
                    $(
                        $decision::$throttle(throttle) => Decision::Throttle(throttle),
                        $decision::Flag(denial) => Decision::Flag(denial),
                    )?
                }
            }
        }
    )*};
}
point_conversions! {
    InferenceDecision, InferencePatch => Inference | Throttle;
    DeployDecision, DeployPatch => Deploy;
    TransferDecision, TransferPatch => Transfer;
    FederationDecision, FederationPatch => Federation | Throttle;
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::InferenceRequest;

    #[test]
    fn decisions_serialize_in_snake_case() {
        let allow = serde_json::to_value(InferenceDecision::Allow).unwrap();
        assert_eq!(allow, json!("allow"));
        let deny = serde_json::to_value(InferenceDecision::deny("c", "m")).unwrap();
        assert_eq!(deny, json!({ "deny": { "code": "c", "message": "m" } }));
        let patch =
            serde_json::to_value(Decision::from(InferenceDecision::Patch(InferencePatch {
                max_tokens: Some(5),
            })))
            .unwrap();
        assert_eq!(
            patch,
            json!({ "patch": { "inference": { "max_tokens": 5 } } })
        );
    }

    #[test]
    fn points_read_as_the_cli_spells_them() {
        for point in AdmissionPoint::ALL {
            let value = serde_json::to_value(point).unwrap();
            assert_eq!(value, json!(point.as_str()));
            assert_eq!(point.to_string(), point.as_str());
        }
    }

    #[test]
    fn requests_may_leave_out_options() {
        let request: InferenceRequest = serde_json::from_value(json!({
            "caller": { "key_id": "k1", "scopes": ["inference"] },
            "model": "m",
            "endpoint": "/v1/chat/completions",
            "prompt_tokens": 3,
            "stream": true,
        }))
        .unwrap();
        assert_eq!(request.caller.project, None);
        assert_eq!(request.max_tokens, None);
        assert!(request.stream);
    }

    #[test]
    fn conversions_keep_the_point() {
        let decision: Decision = DeployDecision::Patch(DeployPatch {
            memory_per_gpu_bytes: Some(1),
        })
        .into();
        match decision {
            Decision::Patch(patch) => assert_eq!(patch.point(), AdmissionPoint::Deploy),
            other => panic!("expected a patch, got {other:?}"),
        }
        let denial = Denial::new("code", "message");
        assert_eq!(denial.to_string(), "code: message");
    }
}
