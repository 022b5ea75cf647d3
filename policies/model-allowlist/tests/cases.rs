//! Named cases on the fixtures in `test_data/`, run natively with the SDK's
//! harness, with the shipped `test_data/settings.json` unless said.

use policy_model_allowlist::ModelAllowlist;
use switchyard_sdk::AdmissionPoint;
use switchyard_sdk::serde_json::{Value, json};
use switchyard_sdk::testing::{
    Expect, Testcase, expect_invalid_settings, expect_valid_settings, settings_file,
};

const DENIED: Expect = Expect::Deny {
    code: "model_not_allowed",
};

fn shipped() -> Value {
    settings_file("test_data/settings.json")
}

fn inference(name: &'static str, fixture: &'static str, expect: Expect) {
    Testcase {
        name,
        point: AdmissionPoint::Inference,
        fixture,
        settings: shipped(),
        expect,
    }
    .run::<ModelAllowlist>();
}

fn federation(name: &'static str, fixture: &'static str, expect: Expect) {
    Testcase {
        name,
        point: AdmissionPoint::Federation,
        fixture,
        settings: shipped(),
        expect,
    }
    .run::<ModelAllowlist>();
}

#[test]
fn shipped_settings_are_valid() {
    let settings = expect_valid_settings::<ModelAllowlist>(shipped());
    assert_eq!(settings.rules.len(), 3);
}

#[test]
fn project_rule_allows_its_patterns() {
    inference(
        "research may call llama-3-*",
        "test_data/inference-research-llama.json",
        Expect::Allow,
    );
    inference(
        "research may call mistral-7b",
        "test_data/inference-research-mistral.json",
        Expect::Allow,
    );
}

#[test]
fn project_rule_refuses_other_models() {
    inference(
        "research may not call gpt-4o",
        "test_data/inference-research-gpt.json",
        Expect::DenyWithMessage {
            code: "model_not_allowed",
            contains: r#"model "gpt-4o" is not allowed for project research (allowed: llama-3-*, mistral-7b)"#,
        },
    );
}

#[test]
fn project_rule_replaces_the_default() {
    inference(
        "research may not call demo-* either",
        "test_data/inference-research-demo.json",
        DENIED,
    );
}

#[test]
fn key_rule_wins_over_its_project() {
    inference(
        "k-admin may call anything",
        "test_data/inference-admin-gpt.json",
        Expect::Allow,
    );
}

#[test]
fn callers_without_a_rule_get_the_default() {
    inference(
        "no project, demo model",
        "test_data/inference-anonymous-demo.json",
        Expect::Allow,
    );
    inference(
        "no project, llama",
        "test_data/inference-anonymous-llama.json",
        Expect::DenyWithMessage {
            code: "model_not_allowed",
            contains: "is not allowed by default (allowed: demo-*)",
        },
    );
    inference(
        "project without a rule",
        "test_data/inference-sales-llama.json",
        DENIED,
    );
}

#[test]
fn empty_default_allows_nothing() {
    Testcase {
        name: "no default",
        point: AdmissionPoint::Inference,
        fixture: "test_data/inference-anonymous-demo.json",
        settings: json!({ "rules": [] }),
        expect: Expect::DenyWithMessage {
            code: "model_not_allowed",
            contains: "(allowed: none)",
        },
    }
    .run::<ModelAllowlist>();
}

#[test]
fn peer_rule_judges_federated_calls() {
    federation(
        "eu-west may call llama-3-*",
        "test_data/federation-eu-llama.json",
        Expect::Allow,
    );
    federation(
        "eu-west may not call mistral",
        "test_data/federation-eu-mistral.json",
        Expect::DenyWithMessage {
            code: "model_not_allowed",
            contains: "for peer eu-west",
        },
    );
    federation(
        "us-east gets the default",
        "test_data/federation-us-demo.json",
        Expect::Allow,
    );
}

#[test]
fn federated_call_without_a_model_is_allowed() {
    federation(
        "no model to check",
        "test_data/federation-eu-no-model.json",
        Expect::Allow,
    );
}

#[test]
fn rule_must_name_one_subject() {
    expect_invalid_settings::<ModelAllowlist>(
        json!({ "rules": [{ "models": ["*"] }] }),
        "rule 1 must name exactly one of key_id, project, peer",
    );
    expect_invalid_settings::<ModelAllowlist>(
        json!({ "rules": [
            { "project": "a", "models": [] },
            { "project": "b", "key_id": "k", "models": [] },
        ] }),
        "rule 2 must name exactly one of key_id, project, peer",
    );
}

#[test]
fn duplicate_rules_are_refused() {
    expect_invalid_settings::<ModelAllowlist>(
        json!({ "rules": [
            { "project": "research", "models": ["a"] },
            { "project": "research", "models": ["b"] },
        ] }),
        "rule 2: project research already has a rule",
    );
}

#[test]
fn star_in_the_middle_is_refused() {
    expect_invalid_settings::<ModelAllowlist>(
        json!({ "rules": [{ "key_id": "k1", "models": ["llama-*-8b"] }] }),
        r#"rule 1 (key k1): pattern "llama-*-8b" is not supported: `*` may only end a pattern"#,
    );
    expect_invalid_settings::<ModelAllowlist>(
        json!({ "default": [""] }),
        "default: a pattern may not be empty",
    );
}

#[test]
fn typos_are_refused() {
    expect_invalid_settings::<ModelAllowlist>(
        json!({ "rules": [{ "projet": "research", "models": [] }] }),
        "unknown field `projet`",
    );
    expect_invalid_settings::<ModelAllowlist>(
        json!({ "defaults": [] }),
        "unknown field `defaults`",
    );
}

fn transfer(name: &'static str, fixture: &'static str, expect: Expect) {
    Testcase {
        name,
        point: AdmissionPoint::Transfer,
        fixture,
        settings: shipped(),
        expect,
    }
    .run::<ModelAllowlist>();
}

#[test]
fn a_copy_is_judged_by_the_callers_rules() {
    transfer(
        "research may copy llama-3-*",
        "test_data/transfer-research-llama.json",
        Expect::Allow,
    );
    transfer(
        "research may not copy gpt",
        "test_data/transfer-research-gpt.json",
        DENIED,
    );
}
