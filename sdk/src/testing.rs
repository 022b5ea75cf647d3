//! A native test harness in the manner of Kubewarden's `Testcase`.
//!
//! Request fixtures are JSON files in the policy's `test_data/`, in the
//! serde form of the point's request type: the WIT field names in
//! snake_case (`key_id`, `prompt_tokens`), lists as arrays, `option` fields
//! that may be left out. Settings are JSON as an operator would write them,
//! so a test also exercises parsing (`deny_unknown_fields`, defaults).
//!
//! ```no_run
//! # use switchyard_sdk::{AdmissionPoint, InferencePatch};
//! # use switchyard_sdk::serde_json::json;
//! use switchyard_sdk::testing::{Expect, Testcase};
//! # #[derive(serde::Deserialize)]
//! # struct Settings {}
//! # impl switchyard_sdk::Validate for Settings {}
//! # struct MaxTokens;
//! # impl switchyard_sdk::Policy for MaxTokens {
//! #     type Settings = Settings;
//! #     fn points() -> Vec<AdmissionPoint> { vec![] }
//! # }
//!
//! Testcase {
//!     name: "a long answer is clamped",
//!     point: AdmissionPoint::Inference,
//!     fixture: "test_data/inference-4096.json",
//!     settings: json!({ "max_tokens": 1024, "mode": "clamp" }),
//!     expect: Expect::Patch(InferencePatch { max_tokens: Some(1024) }.into()),
//! }
//! .run::<MaxTokens>();
//! ```
//!
//! Every check panics with the case's name, what was expected and what came
//! back, which is what `cargo test` shows.

use std::path::PathBuf;

use serde::Serialize;
use serde_json::Value;

use crate::{AdmissionPoint, Decision, Patch, Policy, evaluate_json, parse_settings};

/// One named case: a request fixture evaluated at a point with settings.
#[derive(Debug, Clone)]
pub struct Testcase {
    /// Shown in every failure message.
    pub name: &'static str,
    /// The point whose request the fixture holds.
    pub point: AdmissionPoint,
    /// Path of the request JSON, relative to the crate (`CARGO_MANIFEST_DIR`).
    pub fixture: &'static str,
    /// The binding's settings; see [`settings_file`] and [`to_json`].
    pub settings: Value,
    /// The decision the case expects.
    pub expect: Expect,
}

/// What a [`Testcase`] expects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// Allowed as asked.
    Allow,
    /// Denied with this code, whatever the message.
    Deny {
        /// The expected deny code.
        code: &'static str,
    },
    /// Denied with this code and a message containing the text.
    DenyWithMessage {
        /// The expected deny code.
        code: &'static str,
        /// Text the message must contain.
        contains: &'static str,
    },
    /// Allowed with exactly this patch; the patch's point must be the case's.
    Patch(Patch),
    /// Throttled with this code, whatever the message and limits.
    Throttle {
        /// The expected code.
        code: &'static str,
    },
    /// Allowed and flagged with this code.
    Flag {
        /// The expected code.
        code: &'static str,
    },
}

impl Testcase {
    /// Validates the settings, evaluates the fixture and checks the
    /// decision, panicking with a clear message on any mismatch. Returns
    /// the decision for further checks.
    #[track_caller]
    pub fn run<P: Policy>(&self) -> Decision {
        let name = self.name;
        let settings = parse_settings::<P>(&self.settings.to_string()).unwrap_or_else(|e| {
            panic!(
                "[{name}] settings were refused: {e}\n  settings: {}",
                self.settings
            )
        });
        let request = read_fixture(self.fixture).unwrap_or_else(|e| panic!("[{name}] {e}"));
        let decision = evaluate_json::<P>(self.point, &settings, &request)
            .unwrap_or_else(|e| panic!("[{name}] fixture {}: {e}", self.fixture));
        if !self.expect.matches(&decision) {
            panic!(
                "[{name}] expected {}, got {}\n  fixture: {}\n  settings: {}",
                self.expect.describe(),
                describe(&decision),
                self.fixture,
                self.settings,
            );
        }
        decision
    }
}

impl Expect {
    fn matches(&self, decision: &Decision) -> bool {
        match (self, decision) {
            (Expect::Allow, Decision::Allow) => true,
            (Expect::Deny { code }, Decision::Deny(denial)) => denial.code == *code,
            (Expect::DenyWithMessage { code, contains }, Decision::Deny(denial)) => {
                denial.code == *code && denial.message.contains(contains)
            }
            (Expect::Patch(expected), Decision::Patch(patch)) => expected == patch,
            (Expect::Throttle { code }, Decision::Throttle(t)) => t.denial.code == *code,
            (Expect::Flag { code }, Decision::Flag(denial)) => denial.code == *code,
            _ => false,
        }
    }

    fn describe(&self) -> String {
        match self {
            Expect::Allow => "allow".into(),
            Expect::Deny { code } => format!("deny `{code}`"),
            Expect::DenyWithMessage { code, contains } => {
                format!("deny `{code}` with a message containing {contains:?}")
            }
            Expect::Patch(patch) => format!("patch {}", json(patch)),
            Expect::Throttle { code } => format!("throttle `{code}`"),
            Expect::Flag { code } => format!("flag `{code}`"),
        }
    }
}

fn describe(decision: &Decision) -> String {
    match decision {
        Decision::Allow => "allow".into(),
        Decision::Deny(denial) => format!("deny `{}`: {}", denial.code, denial.message),
        Decision::Patch(patch) => format!("patch {}", json(patch)),
        Decision::Throttle(t) => format!(
            "throttle `{}`: {} {}",
            t.denial.code,
            t.denial.message,
            json(&t.limits)
        ),
        Decision::Flag(denial) => format!("flag `{}`: {}", denial.code, denial.message),
    }
}

fn json(value: &impl Serialize) -> String {
    serde_json::to_string(value).unwrap_or_else(|e| format!("<unprintable: {e}>"))
}

/// Checks that `settings` are refused and that the message contains
/// `message_contains`; returns the message.
#[track_caller]
pub fn expect_invalid_settings<P: Policy>(settings: Value, message_contains: &str) -> String {
    match parse_settings::<P>(&settings.to_string()) {
        Ok(_) => panic!("settings were accepted, expected them refused: {settings}"),
        Err(message) if message.contains(message_contains) => message,
        Err(message) => panic!(
            "settings were refused with {message:?}, expected a message containing {message_contains:?}\n  settings: {settings}"
        ),
    }
}

/// Checks that `settings` are accepted and returns them parsed.
#[track_caller]
pub fn expect_valid_settings<P: Policy>(settings: Value) -> P::Settings {
    parse_settings::<P>(&settings.to_string())
        .unwrap_or_else(|e| panic!("settings were refused: {e}\n  settings: {settings}"))
}

/// Reads a settings file, relative to the crate, e.g.
/// `settings_file("test_data/settings.json")`.
#[track_caller]
pub fn settings_file(path: &str) -> Value {
    let text = read_fixture(path).unwrap_or_else(|e| panic!("{e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path} is not JSON: {e}"))
}

/// Turns a settings value built in Rust into the JSON a [`Testcase`] takes.
#[track_caller]
pub fn to_json(settings: &impl Serialize) -> Value {
    serde_json::to_value(settings).unwrap_or_else(|e| panic!("settings do not serialize: {e}"))
}

/// Reads a file relative to the crate under test.
fn read_fixture(path: &str) -> Result<String, String> {
    // Cargo sets CARGO_MANIFEST_DIR when it runs tests; the harness lives in
    // the SDK, so the compile-time `env!` would name the SDK instead.
    let full = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_default()
        .join(path);
    std::fs::read_to_string(&full)
        .map_err(|e| format!("cannot read fixture {path} ({}): {e}", full.display()))
}

pub mod grant;
#[cfg(test)]
mod tests;
