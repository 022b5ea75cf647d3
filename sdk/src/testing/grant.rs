//! The native test harness of grant evaluators, as [`super::Testcase`] is
//! for policies.
//!
//! A fixture is one JSON file in the evaluator's `test_data/` holding what
//! the host would pass: `{"call": {...}, "grant": {...}, "usage": {...}}`
//! in the serde form of the WIT records (snake_case field names,
//! `model_bytes`, `expires_at_unix_ms`). The clock is the case's
//! `now_unix_ms`, so expiry tests do not depend on the day they run.
//!
//! ```no_run
//! # use switchyard_sdk::grant::{Charge, FederatedCall, Grant, GrantDecision, GrantEvaluator, Usage};
//! # #[derive(serde::Deserialize)] struct Settings {}
//! # impl switchyard_sdk::Validate for Settings {}
//! # struct Standard;
//! # impl GrantEvaluator for Standard {
//! #     type Settings = Settings;
//! #     fn evaluate(_: &Settings, _: &FederatedCall, _: &Grant, _: &Usage, _: u64) -> GrantDecision {
//! #         GrantDecision::Inside(Charge { requests: 1, concurrent: 1, model_bytes: 0, tokens: 0 })
//! #     }
//! # }
//! use switchyard_sdk::serde_json::json;
//! use switchyard_sdk::testing::grant::{GrantCase, GrantExpect};
//!
//! GrantCase {
//!     name: "an expired grant",
//!     fixture: "test_data/inference.json",
//!     settings: json!({}),
//!     now_unix_ms: 4_000_000_000_000,
//!     expect: GrantExpect::Outside { code: "grant_expired" },
//! }
//! .run::<Standard>();
//! ```

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::read_fixture;
use crate::grant::{Charge, FederatedCall, Grant, GrantDecision, GrantEvaluator, parse_settings};

/// What the host passes to `evaluate`: a fixture file's content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Judged {
    /// The call.
    pub call: FederatedCall,
    /// The grant it claims.
    pub grant: Grant,
    /// What the grant has used so far.
    pub usage: crate::grant::Usage,
}

/// Reads a fixture (relative to the crate under test).
#[track_caller]
pub fn judged(path: &str) -> Judged {
    let text = read_fixture(path).unwrap_or_else(|e| panic!("{e}"));
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{path} is not a {{call, grant, usage}} fixture: {e}"))
}

/// One named case.
#[derive(Debug, Clone)]
pub struct GrantCase {
    /// Shown in every failure message.
    pub name: &'static str,
    /// Path of the fixture, relative to the crate.
    pub fixture: &'static str,
    /// The binding's settings.
    pub settings: Value,
    /// The host's clock for this case.
    pub now_unix_ms: u64,
    /// The decision expected.
    pub expect: GrantExpect,
}

/// What a [`GrantCase`] expects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GrantExpect {
    /// Inside, charging exactly this.
    Inside(Charge),
    /// Outside with this code, whatever the message.
    Outside {
        /// The expected code.
        code: &'static str,
    },
    /// Outside with this code and a message containing the text.
    OutsideWithMessage {
        /// The expected code.
        code: &'static str,
        /// Text the message must contain.
        contains: &'static str,
    },
}

impl GrantCase {
    /// Reads the fixture and runs [`GrantCase::run_on`].
    #[track_caller]
    pub fn run<E: GrantEvaluator>(&self) -> GrantDecision {
        self.run_on::<E>(&judged(self.fixture))
    }

    /// Validates the settings, judges `judged` (a fixture, perhaps edited
    /// by the test) and checks the decision, panicking with the case's
    /// name, the expectation and the answer on a mismatch.
    #[track_caller]
    pub fn run_on<E: GrantEvaluator>(&self, judged: &Judged) -> GrantDecision {
        let name = self.name;
        let settings = parse_settings::<E>(&self.settings.to_string()).unwrap_or_else(|e| {
            panic!(
                "[{name}] settings were refused: {e}\n  settings: {}",
                self.settings
            )
        });
        let decision = E::evaluate(
            &settings,
            &judged.call,
            &judged.grant,
            &judged.usage,
            self.now_unix_ms,
        );
        if !self.expect.matches(&decision) {
            panic!(
                "[{name}] expected {:?}, got {decision:?}\n  fixture: {}\n  settings: {}",
                self.expect, self.fixture, self.settings,
            );
        }
        decision
    }
}

impl GrantExpect {
    fn matches(&self, decision: &GrantDecision) -> bool {
        match (self, decision) {
            (GrantExpect::Inside(charge), GrantDecision::Inside(got)) => charge == got,
            (GrantExpect::Outside { code }, GrantDecision::Outside(denial)) => denial.code == *code,
            (GrantExpect::OutsideWithMessage { code, contains }, GrantDecision::Outside(d)) => {
                d.code == *code && d.message.contains(contains)
            }
            _ => false,
        }
    }
}

/// Checks that `settings` are refused with a message containing
/// `message_contains`; returns the message.
#[track_caller]
pub fn expect_invalid_settings<E: GrantEvaluator>(
    settings: Value,
    message_contains: &str,
) -> String {
    match parse_settings::<E>(&settings.to_string()) {
        Ok(_) => panic!("settings were accepted, expected them refused: {settings}"),
        Err(message) if message.contains(message_contains) => message,
        Err(message) => panic!(
            "settings were refused with {message:?}, expected a message containing {message_contains:?}\n  settings: {settings}"
        ),
    }
}

/// Checks that `settings` are accepted and returns them parsed.
#[track_caller]
pub fn expect_valid_settings<E: GrantEvaluator>(settings: Value) -> E::Settings {
    parse_settings::<E>(&settings.to_string())
        .unwrap_or_else(|e| panic!("settings were refused: {e}\n  settings: {settings}"))
}

/// A call with nothing set but the peer and operation: a start for tests
/// that build their calls in Rust.
pub fn call(peer: &str, operation: &str) -> FederatedCall {
    FederatedCall {
        peer: peer.into(),
        operation: operation.into(),
        service: None,
        model: None,
        machines: Vec::new(),
        model_bytes: 0,
        tokens: 0,
    }
}
