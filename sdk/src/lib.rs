//! Write Switchyard admission policies and grant evaluators in Rust.
//!
//! A grant evaluator (the `grant-evaluator` world: is a federated call
//! inside its grant, and what does it charge) is written the same way: a
//! settings type implementing [`Validate`], a [`grant::GrantEvaluator`]
//! impl, [`export_grant_evaluator!`], native cases with
//! [`testing::grant`]; `plugins/grant-standard` is the shipped one. The
//! tour below shows a policy.
//!
//! An admission policy is a WebAssembly component that exports
//! `switchyard:policy/admission@0.2.0`: the points it judges, a check of its
//! settings, and one function per admission point from that point's request
//! to a decision (allow, deny with a code and a message, or allow with a
//! patch; at the inference and federation points also throttle, a 429
//! with the limits the client is shown, or flag, allowed and recorded). A
//! policy may read the host's usage counters of a key, team or peer
//! ([`usage::counters`]). This crate holds the bindings, a [`Policy`] trait to implement,
//! an [`export_policy!`] macro, logging and clock helpers, and a native test
//! harness.
//!
//! # Tour
//!
//! 1. **Settings, with validation.** An operator binds a policy with a JSON
//!    settings document. Make it a serde type (reject typos with
//!    `deny_unknown_fields`) and implement [`Validate`] for what serde
//!    cannot check. The message goes to the operator as is.
//!
//!    ```
//!    use serde::Deserialize;
//!    use switchyard_sdk::Validate;
//!
//!    #[derive(Debug, Deserialize)]
//!    #[serde(deny_unknown_fields)]
//!    pub struct Settings {
//!        pub max_tokens: u32,
//!    }
//!
//!    impl Validate for Settings {
//!        fn validate(&self) -> Result<(), String> {
//!            if self.max_tokens == 0 {
//!                return Err("max_tokens must be at least 1, got 0".into());
//!            }
//!            Ok(())
//!        }
//!    }
//!    ```
//!
//! 2. **A function from a point's request to a decision.** Keep the logic in
//!    a plain public function (benchmarks and tools call it natively), and
//!    implement [`Policy`]: the points you judge and the per-point methods.
//!    Points you leave out deny with `point_not_supported`.
//!
//!    ```
//!    # use serde::Deserialize;
//!    # #[derive(Debug, Deserialize)]
//!    # pub struct Settings { pub max_tokens: u32 }
//!    # impl switchyard_sdk::Validate for Settings {}
//!    use switchyard_sdk::{AdmissionPoint, InferenceDecision, InferenceRequest, Policy};
//!
//!    pub fn evaluate_inference(settings: &Settings, request: &InferenceRequest) -> InferenceDecision {
//!        match request.max_tokens {
//!            Some(asked) if asked > settings.max_tokens => InferenceDecision::deny(
//!                "max_tokens_exceeded",
//!                format!("max_tokens must be at most {}, got {asked}", settings.max_tokens),
//!            ),
//!            _ => InferenceDecision::Allow,
//!        }
//!    }
//!
//!    pub struct MaxTokens;
//!
//!    impl Policy for MaxTokens {
//!        type Settings = Settings;
//!        fn points() -> Vec<AdmissionPoint> {
//!            vec![AdmissionPoint::Inference]
//!        }
//!        fn evaluate_inference(settings: &Settings, request: &InferenceRequest) -> InferenceDecision {
//!            evaluate_inference(settings, request)
//!        }
//!    }
//!    ```
//!
//! 3. **Export it** with `switchyard_sdk::export_policy!(MaxTokens);` at the
//!    root of the crate, whose `Cargo.toml` says
//!    `[lib] crate-type = ["cdylib", "rlib"]` (the `cdylib` is the component,
//!    the `rlib` is for native tests and benchmarks). The macro parses and
//!    keeps the settings on `validate-settings` and hands them to your
//!    functions on every evaluation.
//!
//! 4. **Test natively with fixture files.** Put request JSON in `test_data/`
//!    and write named [`testing::Testcase`]s; `cargo test` runs them without
//!    a host. Keep sensible default settings in `test_data/settings.json`.
//!    Use [`log`] to write lines (stderr in tests) and [`clock`] for time.
//!
//! 5. **Build the component:**
//!    `cargo build --release --target wasm32-wasip2`
//!    (`rustup target add wasm32-wasip2` once). The component is
//!    `target/wasm32-wasip2/release/<crate>.wasm`, about 150 KB with
//!    `opt-level = "s"`, LTO and `strip` (this workspace's `guest` profile,
//!    `--profile guest`, sets them), most of it std's formatting and serde_json.
//!
//! 6. **Push and bind it:**
//!    `switchyard plugin push max_tokens.wasm --name max-tokens --version 0.1.0`,
//!    then `switchyard admission set inference --policy max-tokens@0.1.0
//!    --settings settings.json`. The host validates the settings on every
//!    fresh instance before it judges anything.
//!
//! 7. **Try it without a cluster:**
//!    `switchyard policy test max_tokens.wasm --point inference
//!    --settings settings.json --request test_data/request.json` prints the
//!    decision and its time.
//!
//! # Layout
//!
//! - `bindings.rs`: the one `wit_bindgen::generate!`; its types are
//!   re-exported here
//! - `policy.rs`: [`Policy`], [`Validate`], [`parse_settings`]
//! - `decision.rs`: deny constructors and the point-independent [`Decision`]
//! - `export.rs`: [`export_policy!`] and the settings each instance keeps
//! - `evaluate.rs`: [`evaluate_json`], evaluating a request given as JSON
//! - `log.rs`, `clock.rs`, `usage.rs`: the host imports, with native
//!   fallbacks (`usage`'s counters are set by the test in native runs)
//! - `testing.rs`: the native test harness; `testing/grant.rs` the grant
//!   evaluators' ([`testing::grant::GrantCase`])
//! - `grant.rs`: the grant-evaluator path: [`grant::GrantEvaluator`],
//!   [`export_grant_evaluator!`], settings parsed as a policy's (see below)
//! - `toy.rs`: a tiny policy for the SDK's own tests; fixtures in `test_data/`
#![deny(missing_docs)]

// Generated code: its items carry the WIT docs where the WIT has them.
#[allow(missing_docs)]
pub mod bindings;
pub mod clock;
pub mod decision;
mod evaluate;
#[doc(hidden)]
pub mod export;
pub mod grant;
pub mod log;
mod policy;
pub mod testing;
#[cfg(test)]
mod toy;
pub mod usage;

pub use bindings::switchyard::plugin::types::{Denial, LogLevel};
pub use bindings::switchyard::policy0_1_0::types::{
    AdmissionPoint, Caller, DeployDecision, DeployPatch, DeployRequest, FederationPatch,
    FederationRequest, Gpu, InferencePatch, InferenceRequest, TransferDecision, TransferPatch,
    TransferRequest,
};
pub use bindings::switchyard::policy0_2_0::types::{
    FederationDecision, InferenceDecision, RateLimit, Throttle,
};
pub use decision::{Decision, Patch};
pub use evaluate::evaluate_json;
pub use policy::{Policy, Validate, parse_settings};
// Re-exported so that policies agree with the SDK on their versions.
pub use serde;
pub use serde_json;
