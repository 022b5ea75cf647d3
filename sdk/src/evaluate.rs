//! Evaluating a policy natively on a request given as JSON.

use serde::de::DeserializeOwned;

use crate::{AdmissionPoint, Decision, Policy};

/// Evaluates `request_json` (the serde form of the point's request type) at
/// `point` with settings already parsed by [`crate::parse_settings`].
///
/// This is what the test harness runs; tools and benchmarks can call it too.
/// The error says which point's request the JSON failed to be.
pub fn evaluate_json<P: Policy>(
    point: AdmissionPoint,
    settings: &P::Settings,
    request_json: &str,
) -> Result<Decision, String> {
    Ok(match point {
        AdmissionPoint::Inference => {
            P::evaluate_inference(settings, &parse(point, request_json)?).into()
        }
        AdmissionPoint::Deploy => P::evaluate_deploy(settings, &parse(point, request_json)?).into(),
        AdmissionPoint::Transfer => {
            P::evaluate_transfer(settings, &parse(point, request_json)?).into()
        }
        AdmissionPoint::Federation => {
            P::evaluate_federation(settings, &parse(point, request_json)?).into()
        }
    })
}

fn parse<T: DeserializeOwned>(point: AdmissionPoint, json: &str) -> Result<T, String> {
    serde_json::from_str(json).map_err(|e| format!("not a valid {point} request: {e}"))
}
