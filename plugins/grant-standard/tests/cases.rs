//! Named cases on the fixtures in `test_data/`, run natively with the SDK's
//! grant harness, with the shipped `test_data/settings.json` unless said.

use switchyard_plugin_grant_standard::{Settings, Standard};
use switchyard_sdk::grant::{Charge, GrantDecision};
use switchyard_sdk::serde_json::{Value, json};
use switchyard_sdk::testing::grant::{
    GrantCase, GrantExpect, Judged, expect_invalid_settings, expect_valid_settings, judged,
};
use switchyard_sdk::testing::settings_file;

/// Before every fixture grant's expiry (1 900 000 000 000).
const NOW: u64 = 1_800_000_000_000;

fn shipped() -> Value {
    settings_file("test_data/settings.json")
}

fn case(name: &'static str, fixture: &'static str, expect: GrantExpect) -> GrantCase {
    GrantCase {
        name,
        fixture,
        settings: shipped(),
        now_unix_ms: NOW,
        expect,
    }
}

/// Runs a case on the fixture as `edit` changes it.
fn edited(
    name: &'static str,
    fixture: &'static str,
    edit: impl FnOnce(&mut Judged),
    code: &'static str,
) {
    let mut judged = judged(fixture);
    edit(&mut judged);
    case(name, fixture, GrantExpect::Outside { code }).run_on::<Standard>(&judged);
}

#[test]
fn the_shipped_settings_are_valid_and_empty() {
    assert_eq!(
        expect_valid_settings::<Standard>(shipped()),
        Settings::default()
    );
    assert_eq!(
        expect_valid_settings::<Standard>(json!({})),
        Settings::default()
    );
}

#[test]
fn inference_inside_its_grant_charges_a_request_a_slot_and_its_tokens() {
    case(
        "inference",
        "test_data/inference.json",
        GrantExpect::Inside(Charge {
            requests: 1,
            concurrent: 1,
            model_bytes: 0,
            tokens: 512,
        }),
    )
    .run::<Standard>();
}

#[test]
fn managing_charges_a_request_and_no_slot() {
    // Every slot is taken (usage.concurrent == max_concurrent): managing
    // takes none, so it is still inside.
    case(
        "inference:manage",
        "test_data/manage.json",
        GrantExpect::Inside(Charge {
            requests: 1,
            concurrent: 0,
            model_bytes: 0,
            tokens: 0,
        }),
    )
    .run::<Standard>();
}

#[test]
fn a_transfer_charges_the_bytes_it_moves() {
    case(
        "models:transfer",
        "test_data/transfer.json",
        GrantExpect::Inside(Charge {
            requests: 0,
            concurrent: 0,
            model_bytes: 64 << 20,
            tokens: 0,
        }),
    )
    .run::<Standard>();
}

#[test]
fn an_expired_grant_is_outside_from_its_expiry_on() {
    let at_expiry = GrantCase {
        now_unix_ms: 1_900_000_000_000,
        ..case(
            "at expiry",
            "test_data/inference.json",
            GrantExpect::OutsideWithMessage {
                code: "grant_expired",
                contains: "grant g1 has expired",
            },
        )
    };
    at_expiry.run::<Standard>();
    GrantCase {
        now_unix_ms: 1_899_999_999_999,
        ..case(
            "one ms before expiry",
            "test_data/inference.json",
            GrantExpect::Inside(Charge {
                requests: 1,
                concurrent: 1,
                model_bytes: 0,
                tokens: 512,
            }),
        )
    }
    .run::<Standard>();
}

#[test]
fn an_operation_the_grant_does_not_list_is_outside() {
    edited(
        "transfer under an inference grant",
        "test_data/inference.json",
        |j| j.call.operation = "models:transfer".into(),
        "operation_not_granted",
    );
    edited(
        "an operation nobody knows",
        "test_data/inference.json",
        |j| j.call.operation = "shell".into(),
        "unknown_operation",
    );
}

#[test]
fn services_models_and_machines_must_be_listed() {
    edited(
        "another service",
        "test_data/inference.json",
        |j| j.call.service = Some("chat-large".into()),
        "service_not_granted",
    );
    edited(
        "another revision of the granted model",
        "test_data/inference.json",
        |j| j.call.model = Some("demo-tiny@v2".into()),
        "model_not_granted",
    );
    edited(
        "one machine of two not granted",
        "test_data/manage.json",
        |j| j.call.machines = vec!["node-1".into(), "node-9".into()],
        "machine_not_granted",
    );
    // An empty list grants nothing: exact resources, never "all".
    edited(
        "a grant listing no service",
        "test_data/inference.json",
        |j| j.grant.services.clear(),
        "service_not_granted",
    );
}

#[test]
fn a_call_naming_no_service_or_model_is_not_judged_on_them() {
    let mut j = judged("test_data/inference.json");
    j.call.service = None;
    j.call.model = None;
    j.call.machines.clear();
    case(
        "nothing named",
        "test_data/inference.json",
        GrantExpect::Inside(Charge {
            requests: 1,
            concurrent: 1,
            model_bytes: 0,
            tokens: 512,
        }),
    )
    .run_on::<Standard>(&j);
}

#[test]
fn the_grant_must_be_the_callers() {
    edited(
        "another peer's grant",
        "test_data/inference.json",
        |j| j.call.peer = "globex".into(),
        "wrong_peer",
    );
}

#[test]
fn limits_already_reached_are_refused_early() {
    edited(
        "request count reached",
        "test_data/inference.json",
        |j| j.usage.requests = 100,
        "requests_exhausted",
    );
    edited(
        "every slot taken",
        "test_data/inference.json",
        |j| j.usage.concurrent = 2,
        "concurrency_exhausted",
    );
    edited(
        "bytes would pass the allowance",
        "test_data/transfer.json",
        |j| j.usage.model_bytes = (128 << 20) - 1,
        "model_bytes_exhausted",
    );
    // The last request that fits is inside.
    let mut j = judged("test_data/inference.json");
    j.usage.requests = 99;
    j.usage.concurrent = 1;
    let decision = case(
        "the last request",
        "test_data/inference.json",
        GrantExpect::Inside(Charge {
            requests: 1,
            concurrent: 1,
            model_bytes: 0,
            tokens: 512,
        }),
    )
    .run_on::<Standard>(&j);
    assert!(matches!(decision, GrantDecision::Inside(_)));
}

#[test]
fn settings_deny_peers_and_cap_tokens() {
    GrantCase {
        settings: json!({"deny_peers": ["acme"]}),
        ..case(
            "a denied peer",
            "test_data/inference.json",
            GrantExpect::Outside {
                code: "peer_denied",
            },
        )
    }
    .run::<Standard>();
    GrantCase {
        settings: json!({"max_tokens_per_call": 256}),
        ..case(
            "512 tokens over a 256 cap",
            "test_data/inference.json",
            GrantExpect::OutsideWithMessage {
                code: "tokens_over_limit",
                contains: "at most 256 tokens",
            },
        )
    }
    .run::<Standard>();
    GrantCase {
        settings: json!({"max_tokens_per_call": 512}),
        ..case(
            "exactly at the cap",
            "test_data/inference.json",
            GrantExpect::Inside(Charge {
                requests: 1,
                concurrent: 1,
                model_bytes: 0,
                tokens: 512,
            }),
        )
    }
    .run::<Standard>();
}

#[test]
fn bad_settings_are_refused_with_the_reason() {
    expect_invalid_settings::<Standard>(json!({"deny": ["x"]}), "unknown field `deny`");
    expect_invalid_settings::<Standard>(
        json!({"max_tokens_per_call": 0}),
        "max_tokens_per_call must be at least 1, got 0",
    );
    expect_invalid_settings::<Standard>(json!({"deny_peers": [""]}), "deny_peers[0] is empty");
    expect_invalid_settings::<Standard>(json!({"deny_peers": "acme"}), "invalid settings");
    expect_invalid_settings::<Standard>(json!([]), "invalid settings");
}
