//! Exporting a [`Policy`] as the component's `admission` interface.
//!
//! [`crate::export_policy!`] writes a small `Guest` impl in the policy's
//! crate that calls the generic functions here; they keep the settings the
//! instance accepted and hand them to the policy on every evaluation.

use std::any::Any;
use std::cell::RefCell;
use std::rc::Rc;

use crate::decision::not_configured;
use crate::policy::{Policy, parse_settings};
use crate::{
    AdmissionPoint, DeployDecision, DeployRequest, FederationDecision, FederationRequest,
    InferenceDecision, InferenceRequest, TransferDecision, TransferRequest,
};

thread_local! {
    // One component exports one policy, so one slot is enough; `Any` lets
    // this non-generic static hold that policy's settings type. A component
    // instance is single-threaded, and natively each test thread gets its
    // own slot.
    static SETTINGS: RefCell<Option<Rc<dyn Any>>> = const { RefCell::new(None) };
}

/// Runs `f` on the accepted settings, or returns `None` when there are none.
fn with_settings<P: Policy, R>(f: impl FnOnce(&P::Settings) -> R) -> Option<R> {
    // Cloned out of the cell so that no borrow is held while the policy runs.
    let settings = SETTINGS.with(|slot| slot.borrow().clone())?;
    settings.downcast_ref::<P::Settings>().map(f)
}

/// `points`.
#[doc(hidden)]
pub fn points<P: Policy>() -> Vec<AdmissionPoint> {
    P::points()
}

/// `validate-settings`: parses, validates and keeps the settings. A refused
/// document also drops the settings accepted before, so the instance fails
/// closed rather than judging with stale ones.
#[doc(hidden)]
pub fn validate_settings<P: Policy>(json: String) -> Result<(), String> {
    // The host calls this first on every fresh instance.
    route_panics_to_the_host_log();
    let (kept, result): (Option<Rc<dyn Any>>, _) = match parse_settings::<P>(&json) {
        Ok(settings) => (Some(Rc::new(settings)), Ok(())),
        Err(message) => (None, Err(message)),
    };
    SETTINGS.with(|slot| *slot.borrow_mut() = kept);
    result
}

/// Sends a panic's message to the host's logger, tagged with the plugin,
/// instead of stderr, where a host's empty WASI context drops it. The panic
/// still traps, and the host turns the trap into an error for that call.
pub(crate) fn route_panics_to_the_host_log() {
    #[cfg(target_arch = "wasm32")]
    {
        static INSTALLED: std::sync::Once = std::sync::Once::new();
        INSTALLED.call_once(|| {
            std::panic::set_hook(Box::new(|info| {
                crate::log::error(format!("plugin panicked: {info}"));
            }));
        });
    }
}

/// `evaluate-inference`.
#[doc(hidden)]
pub fn evaluate_inference<P: Policy>(request: InferenceRequest) -> InferenceDecision {
    with_settings::<P, _>(|settings| P::evaluate_inference(settings, &request))
        .unwrap_or_else(|| InferenceDecision::Deny(not_configured()))
}

/// `evaluate-deploy`.
#[doc(hidden)]
pub fn evaluate_deploy<P: Policy>(request: DeployRequest) -> DeployDecision {
    with_settings::<P, _>(|settings| P::evaluate_deploy(settings, &request))
        .unwrap_or_else(|| DeployDecision::Deny(not_configured()))
}

/// `evaluate-transfer`.
#[doc(hidden)]
pub fn evaluate_transfer<P: Policy>(request: TransferRequest) -> TransferDecision {
    with_settings::<P, _>(|settings| P::evaluate_transfer(settings, &request))
        .unwrap_or_else(|| TransferDecision::Deny(not_configured()))
}

/// `evaluate-federation`.
#[doc(hidden)]
pub fn evaluate_federation<P: Policy>(request: FederationRequest) -> FederationDecision {
    with_settings::<P, _>(|settings| P::evaluate_federation(settings, &request))
        .unwrap_or_else(|| FederationDecision::Deny(not_configured()))
}

/// Exports a [`Policy`] implementation as the component's
/// `switchyard:policy/admission@0.2.0` interface.
///
/// Call it once, at the root of the policy's crate:
///
/// ```
/// use switchyard_sdk::{AdmissionPoint, Policy, Validate};
///
/// #[derive(serde::Deserialize)]
/// pub struct Settings {}
/// impl Validate for Settings {}
///
/// pub struct AllowAll;
/// impl Policy for AllowAll {
///     type Settings = Settings;
///     fn points() -> Vec<AdmissionPoint> {
///         vec![AdmissionPoint::Inference]
///     }
/// }
///
/// switchyard_sdk::export_policy!(AllowAll);
/// ```
///
/// `validate-settings` parses the JSON document into `Policy::Settings`,
/// runs [`crate::Validate::validate`] and keeps the result for the
/// instance; every `evaluate-*` call hands those settings to the policy.
/// An evaluation before any settings were accepted is denied with
/// [`crate::decision::NOT_CONFIGURED`]. A panic is written to the host's
/// log at `error` level, then traps; the host makes that call an error.
///
/// The exports exist only when building for `wasm32`: natively nothing is
/// exported, so several policies can link into one test or benchmark
/// binary without clashing symbols.
#[macro_export]
macro_rules! export_policy {
    ($policy:ty) => {
        // Natively this at least checks that the type is a policy.
        const _: fn() = || {
            fn assert_policy<P: $crate::Policy>() {}
            assert_policy::<$policy>();
        };

        #[cfg(target_arch = "wasm32")]
        #[doc(hidden)]
        mod __switchyard_export {
            #[allow(unused_imports)]
            use super::*;
            use $crate::bindings::exports::switchyard::policy0_2_0::admission::Guest;

            /// The type wit-bindgen's export macro wants: it names an ident.
            pub struct Exported;

            impl Guest for Exported {
                fn points() -> ::std::vec::Vec<$crate::AdmissionPoint> {
                    $crate::export::points::<$policy>()
                }
                fn validate_settings(
                    settings: ::std::string::String,
                ) -> ::std::result::Result<(), ::std::string::String> {
                    $crate::export::validate_settings::<$policy>(settings)
                }
                fn evaluate_inference(
                    request: $crate::InferenceRequest,
                ) -> $crate::InferenceDecision {
                    $crate::export::evaluate_inference::<$policy>(request)
                }
                fn evaluate_deploy(request: $crate::DeployRequest) -> $crate::DeployDecision {
                    $crate::export::evaluate_deploy::<$policy>(request)
                }
                fn evaluate_transfer(
                    request: $crate::TransferRequest,
                ) -> $crate::TransferDecision {
                    $crate::export::evaluate_transfer::<$policy>(request)
                }
                fn evaluate_federation(
                    request: $crate::FederationRequest,
                ) -> $crate::FederationDecision {
                    $crate::export::evaluate_federation::<$policy>(request)
                }
            }

            $crate::bindings::__export_admission_policy!(Exported with_types_in $crate::bindings);
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::NOT_CONFIGURED;
    use crate::toy::Toy;

    fn request(prompt_tokens: u32) -> InferenceRequest {
        serde_json::from_value(serde_json::json!({
            "caller": { "key_id": "k1", "scopes": [] },
            "model": "m",
            "endpoint": "/v1/completions",
            "prompt_tokens": prompt_tokens,
            "stream": false,
        }))
        .unwrap()
    }

    fn denial_code(decision: InferenceDecision) -> Option<String> {
        match decision {
            InferenceDecision::Deny(denial) => Some(denial.code),
            _ => None,
        }
    }

    #[test]
    fn evaluating_before_settings_is_not_configured() {
        let decision = evaluate_inference::<Toy>(request(1));
        assert_eq!(denial_code(decision).as_deref(), Some(NOT_CONFIGURED));
    }

    #[test]
    fn accepted_settings_are_used() {
        validate_settings::<Toy>(r#"{"max_prompt_tokens": 10}"#.into()).unwrap();
        assert_eq!(
            evaluate_inference::<Toy>(request(5)),
            InferenceDecision::Allow
        );
        assert_eq!(
            denial_code(evaluate_inference::<Toy>(request(11))).as_deref(),
            Some("prompt_too_long")
        );
    }

    #[test]
    fn later_settings_replace_earlier_ones() {
        validate_settings::<Toy>(r#"{"max_prompt_tokens": 10}"#.into()).unwrap();
        validate_settings::<Toy>(r#"{"max_prompt_tokens": 100}"#.into()).unwrap();
        assert_eq!(
            evaluate_inference::<Toy>(request(50)),
            InferenceDecision::Allow
        );
    }

    #[test]
    fn refused_settings_drop_the_accepted_ones() {
        validate_settings::<Toy>(r#"{"max_prompt_tokens": 10}"#.into()).unwrap();
        let error = validate_settings::<Toy>(r#"{"max_prompt_tokens": 0}"#.into()).unwrap_err();
        assert_eq!(error, "max_prompt_tokens must be at least 1, got 0");
        let decision = evaluate_inference::<Toy>(request(1));
        assert_eq!(denial_code(decision).as_deref(), Some(NOT_CONFIGURED));
    }

    #[test]
    fn unsupported_points_deny_once_configured() {
        validate_settings::<Toy>(r#"{"max_prompt_tokens": 10}"#.into()).unwrap();
        let request: TransferRequest = serde_json::from_value(serde_json::json!({
            "caller": { "key_id": "k1", "scopes": [] },
            "model": "m", "revision": "main", "file": "model.safetensors",
            "size_bytes": 1, "source": "a", "destination": "b",
        }))
        .unwrap();
        match evaluate_transfer::<Toy>(request) {
            TransferDecision::Deny(denial) => {
                assert_eq!(denial.code, "point_not_supported");
                assert_eq!(
                    denial.message,
                    "this policy does not judge the transfer point"
                );
            }
            other => panic!("expected a denial, got {other:?}"),
        }
        assert_eq!(points::<Toy>(), vec![AdmissionPoint::Inference]);
    }
}
