use serde_json::json;

use super::*;
use crate::toy::{Toy, ToySettings};
use crate::{DeployPatch, InferencePatch};

fn case(settings: Value, expect: Expect) -> Testcase {
    Testcase {
        name: "toy",
        point: AdmissionPoint::Inference,
        fixture: "test_data/inference.json",
        settings,
        expect,
    }
}

#[test]
fn allow_case_passes() {
    let decision = case(json!({ "max_prompt_tokens": 500 }), Expect::Allow).run::<Toy>();
    assert_eq!(decision, Decision::Allow);
}

#[test]
fn deny_case_passes() {
    case(
        json!({ "max_prompt_tokens": 100 }),
        Expect::DenyWithMessage {
            code: "prompt_too_long",
            contains: "too",
        },
    )
    .run::<Toy>();
}

#[test]
fn patch_case_passes() {
    case(
        json!({ "max_prompt_tokens": 500, "clamp_to": 256 }),
        Expect::Patch(
            InferencePatch {
                max_tokens: Some(256),
            }
            .into(),
        ),
    )
    .run::<Toy>();
}

#[test]
fn settings_built_in_rust_work() {
    let settings = to_json(&ToySettings {
        max_prompt_tokens: 500,
        clamp_to: None,
    });
    case(settings, Expect::Allow).run::<Toy>();
}

#[test]
#[should_panic(expected = "[toy] expected deny `prompt_too_long`, got allow")]
fn mismatch_names_the_case_and_both_decisions() {
    case(
        json!({ "max_prompt_tokens": 500 }),
        Expect::Deny {
            code: "prompt_too_long",
        },
    )
    .run::<Toy>();
}

#[test]
#[should_panic(expected = "expected patch {\"deploy\"")]
fn patch_of_another_point_does_not_match() {
    case(
        json!({ "max_prompt_tokens": 500, "clamp_to": 256 }),
        Expect::Patch(
            DeployPatch {
                memory_per_gpu_bytes: Some(256),
            }
            .into(),
        ),
    )
    .run::<Toy>();
}

#[test]
#[should_panic(
    expected = "[toy] settings were refused: max_prompt_tokens must be at least 1, got 0"
)]
fn refused_settings_fail_the_case() {
    case(json!({ "max_prompt_tokens": 0 }), Expect::Allow).run::<Toy>();
}

#[test]
#[should_panic(expected = "cannot read fixture test_data/missing.json")]
fn missing_fixture_is_named() {
    Testcase {
        fixture: "test_data/missing.json",
        ..case(json!({ "max_prompt_tokens": 1 }), Expect::Allow)
    }
    .run::<Toy>();
}

#[test]
#[should_panic(expected = "not a valid inference request")]
fn fixture_of_another_point_is_refused() {
    Testcase {
        fixture: "test_data/deploy.json",
        ..case(json!({ "max_prompt_tokens": 1 }), Expect::Allow)
    }
    .run::<Toy>();
}

#[test]
fn unsupported_point_denies_by_default() {
    Testcase {
        point: AdmissionPoint::Deploy,
        fixture: "test_data/deploy.json",
        ..case(
            json!({ "max_prompt_tokens": 1 }),
            Expect::Deny {
                code: crate::decision::POINT_NOT_SUPPORTED,
            },
        )
    }
    .run::<Toy>();
}

#[test]
fn invalid_settings_are_reported() {
    let message = expect_invalid_settings::<Toy>(json!({ "max_prompt_tokens": 0 }), "at least 1");
    assert_eq!(message, "max_prompt_tokens must be at least 1, got 0");
    expect_invalid_settings::<Toy>(json!({ "max_prompt": 3 }), "unknown field `max_prompt`");
    expect_invalid_settings::<Toy>(json!({}), "missing field `max_prompt_tokens`");
}

#[test]
#[should_panic(expected = "settings were accepted, expected them refused")]
fn valid_settings_fail_expect_invalid() {
    expect_invalid_settings::<Toy>(json!({ "max_prompt_tokens": 3 }), "");
}

#[test]
fn valid_settings_are_parsed() {
    let settings = expect_valid_settings::<Toy>(json!({ "max_prompt_tokens": 3 }));
    assert_eq!(settings.max_prompt_tokens, 3);
}
