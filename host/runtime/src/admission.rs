//! Admission points, their requests and decisions, and the ordered chain
//! that judges a request: the first enforced deny or throttle wins, patches compose.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::bindings::Denial;
use crate::bindings::policy_types as wit;
use crate::bindings::policy_types_v0_2 as wit_v0_2;
use crate::error::CallError;
use crate::inline::InlineGate;
use crate::policy::PolicyPlugin;

pub use wit::{
    Caller, DeployPatch, DeployRequest, FederationPatch, FederationRequest, Gpu, InferencePatch,
    InferenceRequest, TransferPatch, TransferRequest,
};
pub use wit_v0_2::{RateLimit, Throttle};

/// Where in the system a chain is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AdmissionPoint {
    /// Every OpenAI-compatible request.
    Inference,
    /// Placing an engine replica on a node.
    Deploy,
    /// A model copy.
    Transfer,
    /// A call from a peer cluster.
    Federation,
}

impl AdmissionPoint {
    /// All points, in a stable order.
    pub const ALL: [AdmissionPoint; 4] = [
        AdmissionPoint::Inference,
        AdmissionPoint::Deploy,
        AdmissionPoint::Transfer,
        AdmissionPoint::Federation,
    ];

    /// The name used in routes and the database.
    pub fn as_str(self) -> &'static str {
        match self {
            AdmissionPoint::Inference => "inference",
            AdmissionPoint::Deploy => "deploy",
            AdmissionPoint::Transfer => "transfer",
            AdmissionPoint::Federation => "federation",
        }
    }

    /// Parses [`AdmissionPoint::as_str`]'s output.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == s)
    }
}

impl std::fmt::Display for AdmissionPoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<wit::AdmissionPoint> for AdmissionPoint {
    fn from(p: wit::AdmissionPoint) -> Self {
        match p {
            wit::AdmissionPoint::Inference => AdmissionPoint::Inference,
            wit::AdmissionPoint::Deploy => AdmissionPoint::Deploy,
            wit::AdmissionPoint::Transfer => AdmissionPoint::Transfer,
            wit::AdmissionPoint::Federation => AdmissionPoint::Federation,
        }
    }
}

/// A request at one point.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum AdmissionRequest {
    /// At [`AdmissionPoint::Inference`].
    Inference(InferenceRequest),
    /// At [`AdmissionPoint::Deploy`].
    Deploy(DeployRequest),
    /// At [`AdmissionPoint::Transfer`].
    Transfer(TransferRequest),
    /// At [`AdmissionPoint::Federation`].
    Federation(FederationRequest),
}

impl AdmissionRequest {
    /// Parses the JSON record of `point` (snake_case fields; optional fields may be left out).
    pub fn from_json(
        point: AdmissionPoint,
        json: serde_json::Value,
    ) -> Result<Self, serde_json::Error> {
        Ok(match point {
            AdmissionPoint::Inference => Self::Inference(serde_json::from_value(json)?),
            AdmissionPoint::Deploy => Self::Deploy(serde_json::from_value(json)?),
            AdmissionPoint::Transfer => Self::Transfer(serde_json::from_value(json)?),
            AdmissionPoint::Federation => Self::Federation(serde_json::from_value(json)?),
        })
    }

    /// The point this request belongs to.
    pub fn point(&self) -> AdmissionPoint {
        match self {
            Self::Inference(_) => AdmissionPoint::Inference,
            Self::Deploy(_) => AdmissionPoint::Deploy,
            Self::Transfer(_) => AdmissionPoint::Transfer,
            Self::Federation(_) => AdmissionPoint::Federation,
        }
    }

    /// Applies a patch. A patch may only tighten: a value above the current one is ignored.
    fn apply(&mut self, patch: &Patch) -> Result<(), CallError> {
        fn lower<T: Ord + Copy>(current: &mut Option<T>, to: Option<T>) {
            if let Some(to) = to {
                *current = Some(current.map_or(to, |c| c.min(to)));
            }
        }
        match (self, patch) {
            (Self::Inference(r), Patch::Inference(p)) => lower(&mut r.max_tokens, p.max_tokens),
            (Self::Federation(r), Patch::Federation(p)) => lower(&mut r.max_tokens, p.max_tokens),
            (Self::Deploy(r), Patch::Deploy(p)) => {
                if let Some(to) = p.memory_per_gpu_bytes {
                    r.memory_per_gpu_bytes = r.memory_per_gpu_bytes.min(to);
                }
            }
            // A transfer's rate limit is not part of its request; it is carried in the patch.
            (Self::Transfer(_), Patch::Transfer(_)) => {}
            (request, patch) => {
                return Err(CallError::InvalidAnswer(format!(
                    "a {} patch at the {} point",
                    patch.point(),
                    request.point()
                )));
            }
        }
        Ok(())
    }
}

/// A patch a point defines.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Patch {
    /// Inference: a lower `max_tokens`.
    Inference(InferencePatch),
    /// Deploy: a lower memory claim per GPU.
    Deploy(DeployPatch),
    /// Transfer: a rate limit.
    Transfer(TransferPatch),
    /// Federation: a lower `max_tokens`.
    Federation(FederationPatch),
}

impl Patch {
    fn point(&self) -> AdmissionPoint {
        match self {
            Patch::Inference(_) => AdmissionPoint::Inference,
            Patch::Deploy(_) => AdmissionPoint::Deploy,
            Patch::Transfer(_) => AdmissionPoint::Transfer,
            Patch::Federation(_) => AdmissionPoint::Federation,
        }
    }

    /// Folds `other` into `self`, keeping the tighter value of each field.
    fn merge(&mut self, other: &Patch) {
        fn min<T: Ord + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
            match (a, b) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        }
        match (self, other) {
            (Patch::Inference(a), Patch::Inference(b)) => {
                a.max_tokens = min(a.max_tokens, b.max_tokens)
            }
            (Patch::Federation(a), Patch::Federation(b)) => {
                a.max_tokens = min(a.max_tokens, b.max_tokens)
            }
            (Patch::Deploy(a), Patch::Deploy(b)) => {
                a.memory_per_gpu_bytes = min(a.memory_per_gpu_bytes, b.memory_per_gpu_bytes)
            }
            (Patch::Transfer(a), Patch::Transfer(b)) => {
                a.max_bytes_per_second = min(a.max_bytes_per_second, b.max_bytes_per_second)
            }
            _ => {}
        }
    }
}

/// One policy's answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decision {
    /// Go ahead.
    Allow,
    /// Refused, with the policy's code and message.
    Deny(Denial),
    /// Go ahead in this form.
    Patch {
        /// The change the point defines.
        patch: Patch,
    },
    /// Refused for now (a rate limit or a budget), with the limits the
    /// client is shown; `policy@0.2.0`'s inference and federation points.
    Throttle(Throttle),
    /// Allowed, and recorded with this code (a soft threshold crossed).
    Flag(Denial),
}

impl Decision {
    /// Whether the request stops here: a deny or a throttle.
    pub fn refuses(&self) -> bool {
        matches!(self, Decision::Deny(_) | Decision::Throttle(_))
    }

    /// The code and message of a refusal or a flag.
    pub fn denial(&self) -> Option<&Denial> {
        match self {
            Decision::Deny(d) | Decision::Flag(d) => Some(d),
            Decision::Throttle(t) => Some(&t.denial),
            Decision::Allow | Decision::Patch { .. } => None,
        }
    }
}

macro_rules! decision_from {
    ($($wit:ident => $patch:ident),*) => {$(
        impl From<wit::$wit> for Decision {
            fn from(d: wit::$wit) -> Self {
                match d {
                    wit::$wit::Allow => Decision::Allow,
                    wit::$wit::Deny(denial) => Decision::Deny(denial),
                    wit::$wit::Patch(p) => Decision::Patch { patch: Patch::$patch(p) },
                }
            }
        }
    )*};
}
decision_from!(
    InferenceDecision => Inference,
    DeployDecision => Deploy,
    TransferDecision => Transfer,
    FederationDecision => Federation
);

/// `policy@0.2.0`'s decisions: 0.1.0's cases, `throttle` and `flag`.
macro_rules! decision_from_v0_2 {
    ($($wit:ident => $patch:ident),*) => {$(
        impl From<wit_v0_2::$wit> for Decision {
            fn from(d: wit_v0_2::$wit) -> Self {
                match d {
                    wit_v0_2::$wit::Allow => Decision::Allow,
                    wit_v0_2::$wit::Deny(denial) => Decision::Deny(denial),
                    wit_v0_2::$wit::Patch(p) => Decision::Patch { patch: Patch::$patch(p) },
                    wit_v0_2::$wit::Throttle(t) => Decision::Throttle(t),
                    wit_v0_2::$wit::Flag(denial) => Decision::Flag(denial),
                }
            }
        }
    )*};
}
decision_from_v0_2!(InferenceDecision => Inference, FederationDecision => Federation);

/// How a chain binds a policy: defined with the admin API's bodies, which
/// the CLI sends and the store keeps.
pub use switchyard_protocol::plugin::{FailMode, Mode};

/// One link of a chain.
#[derive(Debug, Clone)]
pub struct ChainEntry {
    /// The loaded policy.
    pub policy: Arc<PolicyPlugin>,
    /// Enforce or monitor.
    pub mode: Mode,
    /// Fail closed or open.
    pub fail: FailMode,
    /// What the decision log keeps of its answers (the host's recorder reads it).
    pub log: switchyard_protocol::decisions::DecisionLogging,
}

/// The ordered chain of one admission point at one generation.
#[derive(Debug, Clone)]
pub struct Chain {
    /// The point.
    pub point: AdmissionPoint,
    /// The generation it was built from (0: the empty chain before any binding).
    pub generation: i64,
    /// The policies, in order.
    pub entries: Vec<ChainEntry>,
    /// Whether the chain still runs on its caller's task.
    pub inline: InlineGate,
}

/// What one policy of a chain did with a request.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    /// `name@version`.
    pub plugin: Arc<str>,
    /// Enforce or monitor.
    pub mode: Mode,
    /// Fail closed or open.
    pub fail: FailMode,
    /// Its answer, or `None` when the call failed.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Decision>,
    /// Why the call failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<StepError>,
    /// Whether the answer was applied (false in monitor mode, and for a fail-open error).
    pub enforced: bool,
    /// Time spent in the call, in microseconds.
    pub time_us: f64,
}

/// A failed policy call, as reported.
#[derive(Debug, Clone, Serialize)]
pub struct StepError {
    /// `timeout`, `memory_limit`, `trap`, ...
    pub kind: &'static str,
    /// What happened.
    pub message: String,
}

/// The chain's final answer and each policy's part in it.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    /// The point.
    pub point: AdmissionPoint,
    /// The generation that judged.
    pub generation: i64,
    /// The final decision.
    #[serde(flatten)]
    pub decision: Decision,
    /// The request as the engine will see it (patches applied).
    pub request: AdmissionRequest,
    /// Each evaluated policy, in order.
    pub steps: Vec<Step>,
}

/// The code of a denial caused by a failing policy under fail-closed.
pub const POLICY_ERROR_CODE: &str = "policy_error";

impl Chain {
    /// The chain of `entries`, judging on its callers' tasks until it shows
    /// it should not.
    pub fn new(point: AdmissionPoint, generation: i64, entries: Vec<ChainEntry>) -> Self {
        Self {
            point,
            generation,
            entries,
            inline: InlineGate::default(),
        }
    }

    /// The empty chain: everything is allowed.
    pub fn empty(point: AdmissionPoint) -> Self {
        Self::new(point, 0, Vec::new())
    }

    /// Judges a request on the caller's task, while the chain has stayed
    /// quick there ([`InlineGate`]); `None` when it must be judged on a
    /// blocking thread instead ([`Chain::evaluate`] there).
    pub fn evaluate_here(&self, request: &AdmissionRequest) -> Option<Verdict> {
        self.inline
            .run(self.point.as_str(), || self.evaluate(request.clone()))
    }

    /// Judges a request: the first enforced deny (or throttle) wins and
    /// stops the chain; a flag lets it go on;
    /// each enforced patch is applied before the next policy sees the request.
    pub fn evaluate(&self, mut request: AdmissionRequest) -> Verdict {
        let mut steps = Vec::with_capacity(self.entries.len());
        let mut patch: Option<Patch> = None;
        let mut denial: Option<Decision> = None;
        for entry in &self.entries {
            let (result, elapsed) = entry.policy.evaluate_timed(&request);
            let time_us = elapsed.as_secs_f64() * 1e6;
            let enforce = entry.mode == Mode::Enforce;
            let mut step = Step {
                plugin: entry.policy.label().clone(),
                mode: entry.mode,
                fail: entry.fail,
                decision: None,
                error: None,
                enforced: enforce,
                time_us,
            };
            let outcome = result.and_then(|decision| {
                if let (true, Decision::Patch { patch: p }) = (enforce, &decision) {
                    request.apply(p)?;
                    match &mut patch {
                        Some(acc) => acc.merge(p),
                        None => patch = Some(p.clone()),
                    }
                }
                Ok(decision)
            });
            match outcome {
                Ok(decision) => {
                    if !enforce {
                        tracing::info!(plugin = %step.plugin, point = %self.point, ?decision, "monitor-mode decision");
                    } else if decision.refuses() {
                        denial = Some(decision.clone());
                    }
                    step.decision = Some(decision);
                }
                Err(error) => {
                    tracing::warn!(plugin = %step.plugin, point = %self.point, %error, "policy call failed");
                    step.enforced = enforce && entry.fail == FailMode::Closed;
                    if step.enforced {
                        denial = Some(Decision::Deny(Denial {
                            code: POLICY_ERROR_CODE.into(),
                            message: format!("policy {} failed: {error}", step.plugin),
                        }));
                    }
                    step.error = Some(StepError {
                        kind: error.kind(),
                        message: error.to_string(),
                    });
                }
            }
            steps.push(step);
            if denial.is_some() {
                break;
            }
        }
        let decision = match (denial, patch) {
            (Some(refusal), _) => refusal,
            (None, Some(patch)) => Decision::Patch { patch },
            (None, None) => Decision::Allow,
        };
        Verdict {
            point: self.point,
            generation: self.generation,
            decision,
            request,
            steps,
        }
    }
}
