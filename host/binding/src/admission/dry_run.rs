//! A chain's verdict as the dry run answers it (`protocol::dry_run`): the
//! runtime's decisions and the point's records, in the API's own types.

use switchyard_protocol::dry_run::{DecisionKind, DryRun, DryRunStep, Judgement, StepFailure};
use switchyard_runtime::admission::{Decision, Verdict};

/// The dry run's answer for `verdict`.
pub fn answer(verdict: Verdict) -> DryRun {
    DryRun {
        point: verdict.point.as_str().to_string(),
        generation: verdict.generation,
        judgement: judgement(&verdict.decision),
        // The records are the WIT records' own serde: they cannot fail.
        request: serde_json::to_value(&verdict.request).unwrap_or_default(),
        steps: verdict
            .steps
            .into_iter()
            .map(|step| DryRunStep {
                plugin: step.plugin.to_string(),
                mode: step.mode,
                fail: step.fail,
                judgement: step.decision.as_ref().map(judgement),
                error: step.error.map(|e| StepFailure {
                    kind: e.kind.to_string(),
                    message: e.message,
                }),
                enforced: step.enforced,
                time_us: step.time_us,
            })
            .collect(),
    }
}

fn judgement(decision: &Decision) -> Judgement {
    let (decision, code, message, patch) = match decision {
        Decision::Allow => (DecisionKind::Allow, None, None, None),
        Decision::Deny(denial) => (
            DecisionKind::Deny,
            Some(denial.code.clone()),
            Some(denial.message.clone()),
            None,
        ),
        Decision::Patch { patch } => (
            DecisionKind::Patch,
            None,
            None,
            serde_json::to_value(patch).ok(),
        ),
        Decision::Throttle(t) => (
            DecisionKind::Throttle,
            Some(t.denial.code.clone()),
            Some(t.denial.message.clone()),
            serde_json::to_value(t.limits).ok(),
        ),
        Decision::Flag(flag) => (
            DecisionKind::Flag,
            Some(flag.code.clone()),
            Some(flag.message.clone()),
            None,
        ),
    };
    Judgement {
        decision,
        code,
        message,
        patch,
    }
}
