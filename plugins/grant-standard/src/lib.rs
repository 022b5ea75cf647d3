//! `grant-standard`: the grant evaluator every cluster runs until an
//! operator binds another (`PUT /api/federation/evaluator`). It applies the
//! reference's rules to a federated call and the grant it claims:
//!
//! 1. `peer_denied`: the settings put the calling peer outside every grant.
//! 2. `wrong_peer`: the grant is another peer's.
//! 3. `grant_expired`: the host's clock is at or past `expires_at_unix_ms`.
//! 4. `operation_not_granted`: the call's operation is not among the
//!    grant's `operations` (`unknown_operation` for one that is none of
//!    `inference`, `inference:manage`, `models:transfer`).
//! 5. `service_not_granted`, `model_not_granted`: the call names a service
//!    (a model revision, `model@revision`) the grant does not list.
//!    `machine_not_granted`: a machine the call places work on is not
//!    listed. A grant lists exact resources, as its operator approved
//!    them: an empty list grants none, never all.
//! 6. `tokens_over_limit`: the call asks more tokens than the settings'
//!    `max_tokens_per_call` (a call that names no `max_tokens`, 0, passes).
//! 7. The fast path on what the grant used (`requests_exhausted`,
//!    `concurrency_exhausted`, `model_bytes_exhausted`): the call's charge
//!    would pass a limit that is already reached. The host's conditional
//!    `UPDATE` of the counters decides in the end; this only spares it a
//!    round trip, and a stale `usage` can never let a call through there.
//!
//! Inside, a call charges: `inference` one request and one concurrent slot
//! (released by the host when the call ends); `inference:manage` one
//! request; `models:transfer` the bytes it moves; every call its `tokens`.
//!
//! Settings (`test_data/settings.json`; all keys optional, others refused):
//!
//! ```json
//! { "deny_peers": ["eu-west"], "max_tokens_per_call": 4096 }
//! ```
//!
//! # Layout
//!
//! - `settings.rs`: [`Settings`] and their validation
//! - `evaluate.rs`: [`evaluate`], the rules as a plain function (tests and
//!   tools call it natively) and [`charge`]

mod evaluate;
mod settings;

pub use evaluate::{charge, evaluate};
pub use settings::Settings;

use switchyard_sdk::grant::{FederatedCall, Grant, GrantDecision, GrantEvaluator, Usage};

/// The evaluator as the component exports it.
pub struct Standard;

impl GrantEvaluator for Standard {
    type Settings = Settings;

    fn evaluate(
        settings: &Settings,
        call: &FederatedCall,
        grant: &Grant,
        usage: &Usage,
        now_unix_ms: u64,
    ) -> GrantDecision {
        evaluate(settings, call, grant, usage, now_unix_ms)
    }
}

switchyard_sdk::export_grant_evaluator!(Standard);
