//! Named cases on the fixtures in `test_data/`, run natively with the SDK's
//! harness; the host's counters are set per case with `usage::set`.

use policy_rate_limit::{
    BUDGET_EXCEEDED, RATE_LIMIT_EXCEEDED, REQUEST_TOO_LARGE, RateLimit, SOFT_LIMIT,
};
use switchyard_sdk::serde_json::{Value, json};
use switchyard_sdk::testing::{Expect, Testcase, expect_invalid_settings, settings_file};
use switchyard_sdk::usage::{self, Counters};
use switchyard_sdk::{AdmissionPoint, Decision};

fn settings() -> Value {
    settings_file("test_data/settings.json")
}

fn counters(f: impl FnOnce(&mut Counters)) -> Counters {
    let mut c = usage::zero();
    c.minute_reset_ms = 30_000;
    c.day_reset_ms = 3_600_000;
    c.month_reset_ms = 86_400_000;
    f(&mut c);
    c
}

fn run(
    name: &'static str,
    point: AdmissionPoint,
    fixture: &'static str,
    expect: Expect,
) -> Decision {
    Testcase {
        name,
        point,
        fixture,
        settings: settings(),
        expect,
    }
    .run::<RateLimit>()
}

fn inference(name: &'static str, expect: Expect) -> Decision {
    run(
        name,
        AdmissionPoint::Inference,
        "test_data/inference-red.json",
        expect,
    )
}

#[test]
fn fresh_counters_allow() {
    usage::clear();
    inference("nothing counted yet", Expect::Allow);
}

#[test]
fn a_teams_tokens_per_minute_throttle_with_the_limits_shown() {
    usage::clear();
    // 10 prompt + 90 max_tokens = 100 more would pass 1000.
    usage::set("team:red", counters(|c| c.tokens_last_minute = 950));
    let decision = inference(
        "team tpm",
        Expect::Throttle {
            code: RATE_LIMIT_EXCEEDED,
        },
    );
    let Decision::Throttle(t) = decision else {
        unreachable!()
    };
    assert_eq!(t.limits.limit_tokens, Some(1000));
    assert_eq!(t.limits.remaining_tokens, Some(50));
    assert_eq!(t.limits.reset_tokens_ms, Some(30_000));
    assert_eq!(t.limits.retry_after_ms, 30_000);
    assert!(
        t.denial.message.contains("team:red"),
        "{}",
        t.denial.message
    );
    usage::set("team:red", counters(|c| c.tokens_last_minute = 900));
    inference("exactly at the limit", Expect::Allow);
}

#[test]
fn each_key_has_its_own_requests_per_minute_and_parallel_limit() {
    usage::clear();
    usage::set("key:k1", counters(|c| c.requests_last_minute = 60));
    let Decision::Throttle(t) = inference(
        "key rpm",
        Expect::Throttle {
            code: RATE_LIMIT_EXCEEDED,
        },
    ) else {
        unreachable!()
    };
    assert_eq!(
        (t.limits.limit_requests, t.limits.remaining_requests),
        (Some(60), Some(0))
    );
    usage::set("key:k1", counters(|c| c.in_flight = 4));
    inference(
        "key parallel",
        Expect::Throttle {
            code: RATE_LIMIT_EXCEEDED,
        },
    );
    // Another key's counts are not k1's.
    usage::clear();
    usage::set("key:k9", counters(|c| c.in_flight = 4));
    inference("another key's count", Expect::Allow);
}

#[test]
fn a_days_budget_throttles_until_the_day_ends_and_flags_past_its_soft_share() {
    usage::clear();
    usage::set("team:red", counters(|c| c.tokens_today = 9_950));
    let Decision::Throttle(t) = inference(
        "day budget",
        Expect::Throttle {
            code: BUDGET_EXCEEDED,
        },
    ) else {
        unreachable!()
    };
    assert_eq!(
        (t.limits.limit_tokens, t.limits.remaining_tokens),
        (Some(10_000), Some(50))
    );
    assert_eq!(t.limits.retry_after_ms, 3_600_000);
    // 7_950 + 100 is past 80 % of 10_000: allowed, flagged.
    usage::set("team:red", counters(|c| c.tokens_today = 7_950));
    inference("soft threshold", Expect::Flag { code: SOFT_LIMIT });
    usage::set("team:red", counters(|c| c.tokens_today = 7_000));
    inference("below the soft threshold", Expect::Allow);
}

#[test]
fn a_request_larger_than_a_minutes_tokens_is_denied_not_throttled() {
    usage::clear();
    // A peer's tpm is 500; the owner's inference point sees the peer as
    // the caller. 10 + 600 tokens could never fit.
    run(
        "larger than a minute's tokens",
        AdmissionPoint::Inference,
        "test_data/inference-peer-large.json",
        Expect::Deny {
            code: REQUEST_TOO_LARGE,
        },
    );
}

#[test]
fn a_peer_is_judged_at_the_federation_point_by_its_own_counts() {
    usage::clear();
    usage::set("peer:acme", counters(|c| c.tokens_last_minute = 450));
    run(
        "peer tpm",
        AdmissionPoint::Federation,
        "test_data/federation-acme.json",
        Expect::Throttle {
            code: RATE_LIMIT_EXCEEDED,
        },
    );
    usage::set("peer:acme", counters(|c| c.tokens_last_minute = 400));
    run(
        "peer within",
        AdmissionPoint::Federation,
        "test_data/federation-acme.json",
        Expect::Allow,
    );
}

#[test]
fn a_request_without_max_tokens_is_assumed_to_ask_for_the_default() {
    usage::clear();
    // k2 has no team: only `key:*` applies (no tpm there), so it passes.
    run(
        "no max_tokens",
        AdmissionPoint::Inference,
        "test_data/inference-no-max-tokens.json",
        Expect::Allow,
    );
}

#[test]
fn settings_are_checked() {
    expect_invalid_settings::<RateLimit>(json!({ "limits": [] }), "at least one limit");
    expect_invalid_settings::<RateLimit>(
        json!({ "limits": [{ "subject": "user:x", "rpm": 1 }] }),
        "must start with key:, team: or peer:",
    );
    expect_invalid_settings::<RateLimit>(
        json!({ "limits": [{ "subject": "key:a*", "rpm": 1 }] }),
        "end in `*` alone",
    );
    expect_invalid_settings::<RateLimit>(
        json!({ "limits": [{ "subject": "key:*" }] }),
        "sets no limit",
    );
    expect_invalid_settings::<RateLimit>(
        json!({ "limits": [{ "subject": "key:*", "tpm": 0 }] }),
        "tpm must be at least 1",
    );
    expect_invalid_settings::<RateLimit>(
        json!({ "limits": [{ "subject": "key:*", "tpm": 5, "soft_ratio": 0.5 }] }),
        "soft_ratio needs tokens_per_day",
    );
    expect_invalid_settings::<RateLimit>(
        json!({ "limits": [{ "subject": "key:*", "tokens_per_day": 5, "soft_ratio": 1.5 }] }),
        "above 0 and at most 1",
    );
    expect_invalid_settings::<RateLimit>(
        json!({ "limits": [{ "subject": "key:*", "rpm": 5, "burst": 2 }] }),
        "unknown field",
    );
}
