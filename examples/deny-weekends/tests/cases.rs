//! The policy's cases: the decision at fixed times through the plain
//! function, and the exported policy on today's clock through the SDK's
//! harness.

use example_deny_weekends::{
    DAY_NOT_ALLOWED, DenyWeekends, Settings, evaluate_inference_at, weekday_at,
};
use switchyard_sdk::serde_json::{self, json};
use switchyard_sdk::testing::{
    Expect, Testcase, expect_invalid_settings, expect_valid_settings, settings_file,
};
use switchyard_sdk::{AdmissionPoint, InferenceDecision, InferenceRequest, clock};

/// 2024-06-01T12:00:00Z, a Saturday.
const SATURDAY_NOON_UTC: u64 = 1_717_243_200_000;
/// 2024-06-03T12:00:00Z, a Monday.
const MONDAY_NOON_UTC: u64 = 1_717_416_000_000;
/// 2024-06-02T23:30:00Z: Sunday in UTC, Monday in UTC+01:00.
const SUNDAY_LATE_UTC: u64 = 1_717_371_000_000;

fn request() -> InferenceRequest {
    serde_json::from_str(include_str!("../test_data/inference.json")).unwrap()
}

fn shipped() -> Settings {
    expect_valid_settings::<DenyWeekends>(settings_file("test_data/settings.json"))
}

#[test]
fn saturday_is_closed() {
    let decision = evaluate_inference_at(&shipped(), &request(), SATURDAY_NOON_UTC);
    assert_eq!(
        decision,
        InferenceDecision::deny(
            DAY_NOT_ALLOWED,
            "inference on llama-3-8b-instruct is closed on saturdays (UTC+00:00)"
        )
    );
}

#[test]
fn monday_is_open() {
    let decision = evaluate_inference_at(&shipped(), &request(), MONDAY_NOON_UTC);
    assert_eq!(decision, InferenceDecision::Allow);
}

#[test]
fn the_offset_moves_midnight() {
    let utc = shipped();
    let paris = Settings {
        utc_offset_minutes: 60,
        ..shipped()
    };
    assert!(matches!(
        evaluate_inference_at(&utc, &request(), SUNDAY_LATE_UTC),
        InferenceDecision::Deny(_)
    ));
    assert_eq!(
        evaluate_inference_at(&paris, &request(), SUNDAY_LATE_UTC),
        InferenceDecision::Allow
    );
}

#[test]
fn no_days_means_always_open_on_the_real_clock() {
    Testcase {
        name: "no closed days",
        point: AdmissionPoint::Inference,
        fixture: "test_data/inference.json",
        settings: json!({ "days": [] }),
        expect: Expect::Allow,
    }
    .run::<DenyWeekends>();
}

#[test]
fn today_closed_is_denied_on_the_real_clock() {
    // Today and tomorrow, so that a run across midnight still denies.
    let now = clock::now_unix_ms();
    let today = weekday_at(now, 0);
    let tomorrow = weekday_at(now + 24 * 60 * 60 * 1000, 0);
    Testcase {
        name: "today closed",
        point: AdmissionPoint::Inference,
        fixture: "test_data/inference.json",
        settings: json!({ "days": [today, tomorrow] }),
        expect: Expect::Deny {
            code: DAY_NOT_ALLOWED,
        },
    }
    .run::<DenyWeekends>();
}

#[test]
fn days_default_to_the_weekend() {
    assert_eq!(expect_valid_settings::<DenyWeekends>(json!({})), shipped());
}

#[test]
fn bad_settings_are_refused() {
    expect_invalid_settings::<DenyWeekends>(
        json!({ "days": ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"] }),
        "days lists all seven days, so every request would be denied",
    );
    expect_invalid_settings::<DenyWeekends>(
        json!({ "utc_offset_minutes": 900 }),
        "utc_offset_minutes must be between -720 and 840, got 900",
    );
    expect_invalid_settings::<DenyWeekends>(
        json!({ "days": ["funday"] }),
        "unknown variant `funday`",
    );
}
