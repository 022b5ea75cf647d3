//! `rate-limit`: rate limits and token budgets per API key, team or
//! federated peer, judged over the host's usage counters
//! (`switchyard:policy/usage`): the host counts, this policy decides.
//!
//! Settings (`test_data/settings.json`):
//!
//! ```json
//! {
//!   "limits": [
//!     { "subject": "team:research", "tpm": 100000, "tokens_per_day": 2000000, "soft_ratio": 0.8 },
//!     { "subject": "key:*", "rpm": 60, "max_parallel": 4 },
//!     { "subject": "peer:*", "tpm": 20000, "tokens_per_month": 50000000 }
//!   ],
//!   "assumed_max_tokens": 256
//! }
//! ```
//!
//! - `limits`: each names a `subject`, exact (`team:research`, `key:k_1`,
//!   `peer:acme`) or every subject of a kind (`key:*`: each key its own
//!   count), and any of `rpm` (requests in the last minute), `tpm` (tokens
//!   in the last minute), `max_parallel` (requests in flight),
//!   `tokens_per_day`, `tokens_per_month` (UTC), and `soft_ratio`: the
//!   share of a day's or month's budget past which a request is allowed
//!   but flagged (`token_budget_soft_limit` in the decision log).
//! - `assumed_max_tokens` (default 256): a request's completion tokens when
//!   it does not say `max_tokens`.
//!
//! A request counts under its key (`key:<id>`) and the key's team
//! (`team:<name>`, the request's `project`); a federated call under
//! `peer:<label>`, at the `inference` point on the owner's side and at the
//! `federation` point. Its tokens are estimated as its prompt tokens plus
//! `max_tokens` before it runs; the host charges the engine's count after.
//!
//! Refusals are `throttle`s (429, `rate_limit_error`, OpenAI's
//! `x-ratelimit-*` headers and `Retry-After`): `rate_limit_exceeded` for
//! `rpm`, `tpm` and `max_parallel`, `token_budget_exceeded` for a day's or
//! month's budget. A request that alone asks for more than a `tpm` is
//! denied (`request_exceeds_token_limit`): waiting would not help.
//!
//! Points: `inference`, `federation`.
//!
//! # Layout
//!
//! - `settings.rs`: [`Settings`] and their validation
//! - `evaluate.rs`: [`evaluate_inference`] and [`evaluate_federation`],
//!   plain functions that tests and benchmarks call natively

mod evaluate;
mod settings;

pub use evaluate::{
    BUDGET_EXCEEDED, RATE_LIMIT_EXCEEDED, REQUEST_TOO_LARGE, SOFT_LIMIT, evaluate_federation,
    evaluate_inference,
};
pub use settings::{Limit, Settings};

use switchyard_sdk::{
    AdmissionPoint, FederationDecision, FederationRequest, InferenceDecision, InferenceRequest,
    Policy,
};

/// The policy as the component exports it.
pub struct RateLimit;

impl Policy for RateLimit {
    type Settings = Settings;

    fn points() -> Vec<AdmissionPoint> {
        vec![AdmissionPoint::Inference, AdmissionPoint::Federation]
    }

    fn evaluate_inference(settings: &Settings, request: &InferenceRequest) -> InferenceDecision {
        evaluate_inference(settings, request)
    }

    fn evaluate_federation(settings: &Settings, request: &FederationRequest) -> FederationDecision {
        evaluate_federation(settings, request)
    }
}

switchyard_sdk::export_policy!(RateLimit);
