//! Named cases on the fixtures in `test_data/`, run natively with the SDK's
//! harness (`cargo test`). `cases.json` holds the same cases for the built
//! component (`switchyard policy test {{name}}.wasm --cases cases.json`).

use switchyard_sdk::AdmissionPoint;
use switchyard_sdk::serde_json::{Value, json};
use switchyard_sdk::testing::{Expect, Testcase, expect_invalid_settings, settings_file};
use {{crate_name}}::{PROMPT_TOO_LONG, ThisPolicy};

fn shipped() -> Value {
    settings_file("test_data/settings.json")
}

fn inference(name: &'static str, fixture: &'static str, settings: Value, expect: Expect) {
    Testcase {
        name,
        point: AdmissionPoint::Inference,
        fixture,
        settings,
        expect,
    }
    .run::<ThisPolicy>();
}

#[test]
fn a_short_prompt_is_allowed() {
    inference(
        "short prompt",
        "test_data/short-prompt.json",
        shipped(),
        Expect::Allow,
    );
}

#[test]
fn a_long_prompt_is_refused() {
    inference(
        "long prompt",
        "test_data/long-prompt.json",
        shipped(),
        Expect::Deny {
            code: PROMPT_TOO_LONG,
        },
    );
    inference(
        "long prompt, higher limit",
        "test_data/long-prompt.json",
        json!({ "max_prompt_tokens": 20000 }),
        Expect::Allow,
    );
}

#[test]
fn unusable_settings_are_refused() {
    expect_invalid_settings::<ThisPolicy>(json!({ "max_prompt_tokens": 0 }), "at least 1");
    expect_invalid_settings::<ThisPolicy>(json!({}), "missing field");
    expect_invalid_settings::<ThisPolicy>(json!({ "max_prompt_token": 10 }), "unknown field");
}
