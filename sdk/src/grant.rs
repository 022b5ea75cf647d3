//! Write grant evaluators the way policies are written.
//!
//! A grant evaluator is a component that exports
//! `switchyard:grant/evaluator@0.1.0`: a check of its settings and one
//! function that judges whether a federated call is inside the grant it
//! claims and, when it is, what it charges the grant (requests, concurrent
//! slots, model bytes, tokens). The host keeps the counters and charges
//! them in one conditional update; the evaluator only judges, so its
//! look at [`Usage`] is a fast path, never the authority.
//!
//! Implement [`GrantEvaluator`] (settings as a serde type implementing
//! [`crate::Validate`], as a policy's), export it with
//! [`crate::export_grant_evaluator!`], and test it natively with
//! [`crate::testing::grant`]:
//!
//! ```
//! use switchyard_sdk::grant::{Charge, FederatedCall, Grant, GrantDecision, GrantEvaluator, Usage};
//! use switchyard_sdk::Validate;
//!
//! #[derive(serde::Deserialize)]
//! #[serde(deny_unknown_fields)]
//! pub struct Settings {}
//! impl Validate for Settings {}
//!
//! pub struct Unexpired;
//! impl GrantEvaluator for Unexpired {
//!     type Settings = Settings;
//!     fn evaluate(_: &Settings, call: &FederatedCall, grant: &Grant, _: &Usage, now_unix_ms: u64) -> GrantDecision {
//!         if now_unix_ms >= grant.expires_at_unix_ms {
//!             return GrantDecision::outside("grant_expired", format!("grant {} has expired", grant.id));
//!         }
//!         GrantDecision::Inside(Charge { requests: 1, concurrent: 1, model_bytes: 0, tokens: call.tokens })
//!     }
//! }
//!
//! switchyard_sdk::export_grant_evaluator!(Unexpired);
//! ```

use std::any::Any;
use std::cell::RefCell;
use std::rc::Rc;

use serde::de::DeserializeOwned;

pub use crate::bindings::grant::switchyard::grant::types::{
    Charge, FederatedCall, Grant, GrantDecision, Usage,
};
use crate::policy::parse_document;
use crate::{Denial, Validate};

/// Deny code of an evaluation on an instance whose settings were never
/// accepted (the host always validates first, so this means a host bug).
pub use crate::decision::NOT_CONFIGURED;

/// A grant evaluator: its settings and the one judgement.
pub trait GrantEvaluator {
    /// The settings document of a binding, parsed from JSON.
    type Settings: DeserializeOwned + Validate + 'static;

    /// Whether `call` is inside `grant`, given what the grant has used so
    /// far (`usage`, as the host last counted it) and the host's clock
    /// (`now_unix_ms`, passed in so that native tests can fix it), and
    /// what the call charges when it is.
    fn evaluate(
        settings: &Self::Settings,
        call: &FederatedCall,
        grant: &Grant,
        usage: &Usage,
        now_unix_ms: u64,
    ) -> GrantDecision;
}

impl GrantDecision {
    /// Outside the grant, with a stable code and a message for the caller.
    pub fn outside(code: impl Into<String>, message: impl Into<String>) -> Self {
        GrantDecision::Outside(Denial::new(code, message))
    }
}

/// Parses and validates a settings document the way the host's
/// `validate-settings` call does (an empty document reads as `{}`).
///
/// The document must be a JSON object: serde reads a struct whose fields
/// all have defaults from `[]` too, and an operator who bound `[]` meant
/// something this evaluator would silently not do.
pub fn parse_settings<E: GrantEvaluator>(json: &str) -> Result<E::Settings, String> {
    if !json.trim().is_empty() && !json.trim_start().starts_with('{') {
        return Err("invalid settings: the document must be a JSON object".into());
    }
    parse_document(json)
}

/// What [`crate::export_grant_evaluator!`] calls; not for direct use.
#[doc(hidden)]
pub mod export {
    use super::*;

    thread_local! {
        // One component exports one evaluator: one slot, as for policies.
        static SETTINGS: RefCell<Option<Rc<dyn Any>>> = const { RefCell::new(None) };
    }

    /// `validate-settings`: parses, validates and keeps the settings; a
    /// refused document drops the ones accepted before (fail closed).
    pub fn validate_settings<E: GrantEvaluator>(json: String) -> Result<(), String> {
        crate::export::route_panics_to_the_host_log();
        let (kept, result): (Option<Rc<dyn Any>>, _) = match parse_settings::<E>(&json) {
            Ok(settings) => (Some(Rc::new(settings)), Ok(())),
            Err(message) => (None, Err(message)),
        };
        SETTINGS.with(|slot| *slot.borrow_mut() = kept);
        result
    }

    /// `evaluate`, on the host's clock.
    pub fn evaluate<E: GrantEvaluator>(
        call: FederatedCall,
        grant: Grant,
        usage: Usage,
    ) -> GrantDecision {
        let settings = SETTINGS.with(|slot| slot.borrow().clone());
        match settings
            .as_ref()
            .and_then(|s| s.downcast_ref::<E::Settings>())
        {
            Some(settings) => {
                E::evaluate(settings, &call, &grant, &usage, crate::clock::now_unix_ms())
            }
            None => GrantDecision::Outside(crate::decision::not_configured()),
        }
    }
}

/// Exports a [`GrantEvaluator`] implementation as the component's
/// `switchyard:grant/evaluator@0.1.0` interface. Call it once, at the root
/// of the evaluator's crate (`crate-type = ["cdylib", "rlib"]`).
///
/// `validate-settings` parses the JSON into `GrantEvaluator::Settings`,
/// runs [`crate::Validate::validate`] and keeps the result; `evaluate`
/// hands them to the evaluator with the host's clock. An evaluation before
/// any settings were accepted is outside with [`NOT_CONFIGURED`]. The
/// exports exist only for `wasm32`, so several evaluators link into one
/// native test binary.
#[macro_export]
macro_rules! export_grant_evaluator {
    ($evaluator:ty) => {
        const _: fn() = || {
            fn assert_evaluator<E: $crate::grant::GrantEvaluator>() {}
            assert_evaluator::<$evaluator>();
        };

        #[cfg(target_arch = "wasm32")]
        #[doc(hidden)]
        mod __switchyard_grant_export {
            #[allow(unused_imports)]
            use super::*;
            use $crate::bindings::grant::exports::switchyard::grant::evaluator::Guest;

            /// The type wit-bindgen's export macro wants: it names an ident.
            pub struct Exported;

            impl Guest for Exported {
                fn validate_settings(
                    settings: ::std::string::String,
                ) -> ::std::result::Result<(), ::std::string::String> {
                    $crate::grant::export::validate_settings::<$evaluator>(settings)
                }
                fn evaluate(
                    call: $crate::grant::FederatedCall,
                    grant: $crate::grant::Grant,
                    usage: $crate::grant::Usage,
                ) -> $crate::grant::GrantDecision {
                    $crate::grant::export::evaluate::<$evaluator>(call, grant, usage)
                }
            }

            $crate::bindings::grant::__export_grant_evaluator!(Exported with_types_in $crate::bindings::grant);
        }
    };
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    /// Inside while `requests` stays under the settings' cap.
    struct Capped;

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct CapSettings {
        cap: u64,
    }

    impl Validate for CapSettings {
        fn validate(&self) -> Result<(), String> {
            if self.cap == 0 {
                return Err("cap must be at least 1".into());
            }
            Ok(())
        }
    }

    impl GrantEvaluator for Capped {
        type Settings = CapSettings;
        fn evaluate(
            settings: &CapSettings,
            call: &FederatedCall,
            _grant: &Grant,
            usage: &Usage,
            _now: u64,
        ) -> GrantDecision {
            if usage.requests >= settings.cap {
                return GrantDecision::outside("capped", "no more");
            }
            GrantDecision::Inside(Charge {
                requests: 1,
                concurrent: 1,
                model_bytes: 0,
                tokens: call.tokens,
            })
        }
    }

    fn call() -> FederatedCall {
        FederatedCall {
            peer: "p".into(),
            operation: "inference".into(),
            service: None,
            model: None,
            machines: Vec::new(),
            model_bytes: 0,
            tokens: 7,
        }
    }

    fn grant() -> Grant {
        Grant {
            id: "g".into(),
            peer: "p".into(),
            operations: vec!["inference".into()],
            services: Vec::new(),
            models: Vec::new(),
            machines: Vec::new(),
            expires_at_unix_ms: u64::MAX,
            max_concurrent: 1,
            max_requests: 1,
            max_model_bytes: 0,
        }
    }

    fn usage(requests: u64) -> Usage {
        Usage {
            concurrent: 0,
            requests,
            model_bytes: 0,
        }
    }

    #[test]
    fn evaluating_before_settings_is_outside_and_not_configured() {
        match export::evaluate::<Capped>(call(), grant(), usage(0)) {
            GrantDecision::Outside(denial) => assert_eq!(denial.code, NOT_CONFIGURED),
            other => panic!("expected outside, got {other:?}"),
        }
    }

    #[test]
    fn accepted_settings_are_used_and_refused_ones_drop_them() {
        export::validate_settings::<Capped>(r#"{"cap": 2}"#.into()).unwrap();
        assert_eq!(
            export::evaluate::<Capped>(call(), grant(), usage(1)),
            GrantDecision::Inside(Charge {
                requests: 1,
                concurrent: 1,
                model_bytes: 0,
                tokens: 7
            })
        );
        assert!(matches!(
            export::evaluate::<Capped>(call(), grant(), usage(2)),
            GrantDecision::Outside(_)
        ));
        let refused = export::validate_settings::<Capped>(r#"{"cap": 0}"#.into()).unwrap_err();
        assert_eq!(refused, "cap must be at least 1");
        match export::evaluate::<Capped>(call(), grant(), usage(0)) {
            GrantDecision::Outside(denial) => assert_eq!(denial.code, NOT_CONFIGURED),
            other => panic!("expected outside, got {other:?}"),
        }
    }

    #[test]
    fn unknown_settings_are_refused_by_serde() {
        let error = parse_settings::<Capped>(r#"{"cap": 1, "typo": 2}"#)
            .err()
            .expect("refused");
        assert!(error.contains("unknown field `typo`"), "{error}");
    }
}
