//! `deny-weekends`: an example policy written from scratch with the SDK,
//! walked through in `README.md`. It denies inference on configured days
//! of the week, read from the host's clock.
//!
//! # Layout
//!
//! - `settings.rs`: [`Settings`] and [`Weekday`]
//! - `calendar.rs`: the weekday of a Unix time
//! - `evaluate.rs`: [`evaluate_inference_at`], the decision for a given time

mod calendar;
mod evaluate;
mod settings;

pub use calendar::weekday_at;
pub use evaluate::{DAY_NOT_ALLOWED, evaluate_inference_at};
pub use settings::{Settings, Weekday};

use switchyard_sdk::{AdmissionPoint, InferenceDecision, InferenceRequest, Policy, clock};

/// The policy as the component exports it.
pub struct DenyWeekends;

impl Policy for DenyWeekends {
    type Settings = Settings;

    fn points() -> Vec<AdmissionPoint> {
        vec![AdmissionPoint::Inference]
    }

    fn evaluate_inference(settings: &Settings, request: &InferenceRequest) -> InferenceDecision {
        // The host's clock in a component, the system clock in native tests.
        evaluate_inference_at(settings, request, clock::now_unix_ms())
    }
}

switchyard_sdk::export_policy!(DenyWeekends);
