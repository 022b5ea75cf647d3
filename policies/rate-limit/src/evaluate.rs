//! The decision: each limit that applies to one of the request's subjects
//! is checked against that subject's counters; the first one broken
//! refuses, a crossed soft threshold flags.

use switchyard_sdk::usage::{self, Counters};
use switchyard_sdk::{
    Denial, FederationDecision, FederationRequest, InferenceDecision, InferenceRequest, RateLimit,
    Throttle,
};

use crate::{Limit, Settings};

/// Throttle code of a broken `rpm`, `tpm` or `max_parallel`.
pub const RATE_LIMIT_EXCEEDED: &str = "rate_limit_exceeded";
/// Throttle code of a spent day's or month's budget.
pub const BUDGET_EXCEEDED: &str = "token_budget_exceeded";
/// Deny code of a request that alone may use more than a `tpm`.
pub const REQUEST_TOO_LARGE: &str = "request_exceeds_token_limit";
/// Flag code of a request past a budget's soft threshold.
pub const SOFT_LIMIT: &str = "token_budget_soft_limit";

/// What a request gets, whatever the point.
#[derive(Debug)]
enum Verdict {
    Allow,
    Deny(Denial),
    Throttle(Throttle),
    Flag(Denial),
}

/// Judges an inference request under its key and its key's team (or, for
/// a federated call on the owner's side, its peer).
pub fn evaluate_inference(settings: &Settings, request: &InferenceRequest) -> InferenceDecision {
    let key = &request.caller.key_id;
    let mut subjects = vec![match key.starts_with("peer:") {
        true => key.clone(),
        false => usage::key(key),
    }];
    subjects.extend(request.caller.project.as_deref().map(usage::team));
    let estimate = estimate(settings, request.prompt_tokens, request.max_tokens);
    match judge(settings, &subjects, estimate) {
        Verdict::Allow => InferenceDecision::Allow,
        Verdict::Deny(d) => InferenceDecision::Deny(d),
        Verdict::Throttle(t) => InferenceDecision::Throttle(t),
        Verdict::Flag(d) => InferenceDecision::Flag(d),
    }
}

/// Judges a federated call under its peer.
pub fn evaluate_federation(settings: &Settings, request: &FederationRequest) -> FederationDecision {
    let subjects = [usage::peer(&request.peer)];
    let estimate = estimate(settings, request.prompt_tokens, request.max_tokens);
    match judge(settings, &subjects, estimate) {
        Verdict::Allow => FederationDecision::Allow,
        Verdict::Deny(d) => FederationDecision::Deny(d),
        Verdict::Throttle(t) => FederationDecision::Throttle(t),
        Verdict::Flag(d) => FederationDecision::Flag(d),
    }
}

fn estimate(settings: &Settings, prompt_tokens: u32, max_tokens: Option<u32>) -> u64 {
    u64::from(prompt_tokens) + u64::from(max_tokens.unwrap_or(settings.assumed_max_tokens))
}

fn judge(settings: &Settings, subjects: &[String], estimate: u64) -> Verdict {
    let mut flag = None;
    for subject in subjects {
        let mut counters = None;
        for limit in settings.limits.iter().filter(|l| l.applies_to(subject)) {
            // Read once per subject, and only for a subject some limit names.
            let counters = *counters.get_or_insert_with(|| usage::counters(subject));
            match check(limit, subject, &counters, estimate) {
                Verdict::Allow => {}
                Verdict::Flag(d) => {
                    flag.get_or_insert(d);
                }
                refused => return refused,
            }
        }
    }
    flag.map_or(Verdict::Allow, Verdict::Flag)
}

/// One limit against one subject's counters.
fn check(limit: &Limit, subject: &str, c: &Counters, estimate: u64) -> Verdict {
    let shown = shown(limit, c);
    let throttle = |code: &str, message: String, limits: RateLimit| {
        Verdict::Throttle(Throttle {
            denial: Denial::new(code, message),
            limits,
        })
    };
    let minute_retry = c.minute_reset_ms.max(1000);
    if let Some(max) = limit.max_parallel.filter(|max| c.in_flight >= *max) {
        let message = format!(
            "{subject}: {} requests in flight, at most {max}",
            c.in_flight
        );
        return throttle(
            RATE_LIMIT_EXCEEDED,
            message,
            RateLimit {
                retry_after_ms: 1000,
                ..shown
            },
        );
    }
    if let Some(rpm) = limit.rpm.filter(|rpm| c.requests_last_minute >= *rpm) {
        let message = format!(
            "{subject}: {} requests in the last minute, at most {rpm}",
            c.requests_last_minute
        );
        return throttle(
            RATE_LIMIT_EXCEEDED,
            message,
            RateLimit {
                retry_after_ms: minute_retry,
                ..shown
            },
        );
    }
    if let Some(tpm) = limit.tpm {
        if estimate > tpm {
            return Verdict::Deny(Denial::new(
                REQUEST_TOO_LARGE,
                format!(
                    "this request may use {estimate} tokens, more than {subject}'s {tpm} per minute"
                ),
            ));
        }
        if c.tokens_last_minute + estimate > tpm {
            let message = format!(
                "{subject}: {} of {tpm} tokens per minute used; this request may use {estimate}",
                c.tokens_last_minute
            );
            return throttle(
                RATE_LIMIT_EXCEEDED,
                message,
                RateLimit {
                    retry_after_ms: minute_retry,
                    ..shown
                },
            );
        }
    }
    budgets(limit, subject, c, estimate, shown)
}

/// A day's and a month's budget: throttled past it, flagged past its
/// soft share.
fn budgets(limit: &Limit, subject: &str, c: &Counters, estimate: u64, shown: RateLimit) -> Verdict {
    let budgets = [
        (limit.tokens_per_day, c.tokens_today, c.day_reset_ms, "day"),
        (
            limit.tokens_per_month,
            c.tokens_this_month,
            c.month_reset_ms,
            "month",
        ),
    ];
    let mut flag = None;
    for (budget, used, reset_ms, period) in budgets {
        let Some(budget) = budget else { continue };
        if used + estimate > budget {
            let message = format!(
                "{subject}: {used} of {budget} tokens this {period} used; this request may use {estimate}"
            );
            let limits = RateLimit {
                limit_tokens: Some(budget),
                remaining_tokens: Some(budget.saturating_sub(used)),
                reset_tokens_ms: Some(reset_ms),
                retry_after_ms: reset_ms.max(1000),
                ..shown
            };
            return Verdict::Throttle(Throttle {
                denial: Denial::new(BUDGET_EXCEEDED, message),
                limits,
            });
        }
        let soft = limit.soft_ratio.map(|r| r * budget as f64);
        if soft.is_some_and(|soft| (used + estimate) as f64 > soft) {
            flag.get_or_insert_with(|| {
                Denial::new(
                    SOFT_LIMIT,
                    format!(
                        "{subject}: {} of {budget} tokens this {period} with this request",
                        used + estimate
                    ),
                )
            });
        }
    }
    flag.map_or(Verdict::Allow, Verdict::Flag)
}

/// The limits a refused client is shown: the per-minute ones this limit sets.
fn shown(limit: &Limit, c: &Counters) -> RateLimit {
    RateLimit {
        limit_requests: limit.rpm,
        remaining_requests: limit
            .rpm
            .map(|rpm| rpm.saturating_sub(c.requests_last_minute)),
        reset_requests_ms: limit.rpm.map(|_| c.minute_reset_ms),
        limit_tokens: limit.tpm,
        remaining_tokens: limit
            .tpm
            .map(|tpm| tpm.saturating_sub(c.tokens_last_minute)),
        reset_tokens_ms: limit.tpm.map(|_| c.minute_reset_ms),
        retry_after_ms: 1000,
    }
}
