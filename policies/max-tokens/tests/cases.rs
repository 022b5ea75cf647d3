//! Named cases on the fixtures in `test_data/`, run natively with the SDK's
//! harness.

use policy_max_tokens::MaxTokens;
use switchyard_sdk::serde_json::{Value, json};
use switchyard_sdk::testing::{
    Expect, Testcase, expect_invalid_settings, expect_valid_settings, settings_file,
};
use switchyard_sdk::{AdmissionPoint, FederationPatch, InferencePatch};

fn deny() -> Value {
    settings_file("test_data/settings.json")
}

fn clamp() -> Value {
    json!({ "max_tokens": 4096, "mode": "clamp" })
}

fn inference(name: &'static str, fixture: &'static str, settings: Value, expect: Expect) {
    Testcase {
        name,
        point: AdmissionPoint::Inference,
        fixture,
        settings,
        expect,
    }
    .run::<MaxTokens>();
}

fn federation(name: &'static str, fixture: &'static str, settings: Value, expect: Expect) {
    Testcase {
        name,
        point: AdmissionPoint::Federation,
        fixture,
        settings,
        expect,
    }
    .run::<MaxTokens>();
}

#[test]
fn shipped_settings_are_valid_and_deny() {
    let settings = expect_valid_settings::<MaxTokens>(deny());
    assert_eq!(settings.max_tokens, 4096);
    assert_eq!(settings.mode, policy_max_tokens::Mode::Deny);
}

#[test]
fn deny_mode_allows_a_request_under_the_cap() {
    inference(
        "under cap",
        "test_data/inference-512.json",
        deny(),
        Expect::Allow,
    );
}

#[test]
fn deny_mode_allows_a_request_at_the_cap() {
    inference(
        "at cap",
        "test_data/inference-4096.json",
        deny(),
        Expect::Allow,
    );
}

#[test]
fn deny_mode_refuses_a_request_over_the_cap() {
    inference(
        "over cap",
        "test_data/inference-8192.json",
        deny(),
        Expect::DenyWithMessage {
            code: "max_tokens_exceeded",
            contains: "max_tokens must be at most 4096, got 8192",
        },
    );
}

#[test]
fn deny_mode_allows_a_request_without_max_tokens() {
    inference(
        "no max_tokens",
        "test_data/inference-no-max-tokens.json",
        deny(),
        Expect::Allow,
    );
}

#[test]
fn mode_defaults_to_deny() {
    inference(
        "mode left out",
        "test_data/inference-8192.json",
        json!({ "max_tokens": 4096 }),
        Expect::Deny {
            code: "max_tokens_exceeded",
        },
    );
}

#[test]
fn clamp_mode_lowers_a_request_over_the_cap() {
    inference(
        "clamped",
        "test_data/inference-8192.json",
        clamp(),
        Expect::Patch(
            InferencePatch {
                max_tokens: Some(4096),
            }
            .into(),
        ),
    );
}

#[test]
fn clamp_mode_gives_the_cap_to_a_request_without_max_tokens() {
    inference(
        "cap given",
        "test_data/inference-no-max-tokens.json",
        clamp(),
        Expect::Patch(
            InferencePatch {
                max_tokens: Some(4096),
            }
            .into(),
        ),
    );
}

#[test]
fn clamp_mode_leaves_a_request_under_the_cap_alone() {
    inference(
        "under cap, clamp",
        "test_data/inference-512.json",
        clamp(),
        Expect::Allow,
    );
}

#[test]
fn federation_over_the_cap_is_refused() {
    federation(
        "federated over cap",
        "test_data/federation-8192.json",
        deny(),
        Expect::Deny {
            code: "max_tokens_exceeded",
        },
    );
}

#[test]
fn federation_is_clamped_in_clamp_mode() {
    federation(
        "federated clamped",
        "test_data/federation-8192.json",
        clamp(),
        Expect::Patch(
            FederationPatch {
                max_tokens: Some(4096),
            }
            .into(),
        ),
    );
    federation(
        "federated, no max_tokens",
        "test_data/federation-no-max-tokens.json",
        clamp(),
        Expect::Patch(
            FederationPatch {
                max_tokens: Some(4096),
            }
            .into(),
        ),
    );
}

#[test]
fn deploy_is_not_judged() {
    assert_eq!(
        <MaxTokens as switchyard_sdk::Policy>::points(),
        vec![AdmissionPoint::Inference, AdmissionPoint::Federation]
    );
}

#[test]
fn zero_cap_is_refused() {
    expect_invalid_settings::<MaxTokens>(
        json!({ "max_tokens": 0 }),
        "max_tokens must be at least 1, got 0",
    );
}

#[test]
fn unknown_mode_is_refused() {
    expect_invalid_settings::<MaxTokens>(
        json!({ "max_tokens": 10, "mode": "truncate" }),
        "unknown variant `truncate`, expected `deny` or `clamp`",
    );
}

#[test]
fn typos_and_missing_cap_are_refused() {
    expect_invalid_settings::<MaxTokens>(json!({ "max_token": 10 }), "unknown field `max_token`");
    expect_invalid_settings::<MaxTokens>(json!({}), "missing field `max_tokens`");
    expect_invalid_settings::<MaxTokens>(json!({ "max_tokens": -1 }), "invalid value");
}
