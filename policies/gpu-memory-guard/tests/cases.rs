//! Named cases on the fixtures in `test_data/`, run natively with the SDK's
//! harness. The fixtures' GPUs have 80 and 70 GiB free; with the shipped
//! fraction of 0.9 their limits are 72 and 63 GiB.

use policy_gpu_memory_guard::GpuMemoryGuard;
use switchyard_sdk::AdmissionPoint;
use switchyard_sdk::serde_json::{Value, json};
use switchyard_sdk::testing::{
    Expect, Testcase, expect_invalid_settings, expect_valid_settings, settings_file,
};

fn shipped() -> Value {
    settings_file("test_data/settings.json")
}

fn deploy(name: &'static str, fixture: &'static str, settings: Value, expect: Expect) {
    Testcase {
        name,
        point: AdmissionPoint::Deploy,
        fixture,
        settings,
        expect,
    }
    .run::<GpuMemoryGuard>();
}

#[test]
fn shipped_settings_are_valid() {
    let settings = expect_valid_settings::<GpuMemoryGuard>(shipped());
    assert_eq!(settings.max_fraction_of_free, 0.9);
}

#[test]
fn claim_under_every_limit_is_allowed() {
    deploy(
        "40 GiB fits",
        "test_data/deploy-fits.json",
        shipped(),
        Expect::Allow,
    );
}

#[test]
fn claim_over_one_gpu_names_that_gpu() {
    let decision = deploy_decision("70 GiB on GPU 1", "test_data/deploy-over-one-gpu.json");
    assert!(
        decision.contains(
            "GPU 1 (NVIDIA H100 80GB HBM3): claim 70.0 GiB is above the limit of 63.0 GiB (0.9 of 70.0 GiB free)"
        ),
        "{decision}"
    );
    assert!(!decision.contains("GPU 0"), "{decision}");
}

#[test]
fn claim_over_every_gpu_names_them_all() {
    let decision = deploy_decision("75 GiB on both", "test_data/deploy-over-all-gpus.json");
    assert!(
        decision.contains(
            "GPU 0 (NVIDIA H100 80GB HBM3): claim 75.0 GiB is above the limit of 72.0 GiB"
        ),
        "{decision}"
    );
    assert!(
        decision.contains(
            "GPU 1 (NVIDIA H100 80GB HBM3): claim 75.0 GiB is above the limit of 63.0 GiB"
        ),
        "{decision}"
    );
    assert!(
        decision.starts_with("deployment llama-3-8b-a on node gpu-node-1"),
        "{decision}"
    );
}

/// Runs a case expected to be denied and returns the message.
fn deploy_decision(name: &'static str, fixture: &'static str) -> String {
    let decision = Testcase {
        name,
        point: AdmissionPoint::Deploy,
        fixture,
        settings: shipped(),
        expect: Expect::Deny {
            code: "gpu_memory_exceeded",
        },
    }
    .run::<GpuMemoryGuard>();
    match decision {
        switchyard_sdk::Decision::Deny(denial) => denial.message,
        other => panic!("expected a denial, got {other:?}"),
    }
}

#[test]
fn fraction_of_one_allows_all_free_memory() {
    deploy(
        "all free, fraction 1",
        "test_data/deploy-all-free.json",
        json!({ "max_fraction_of_free": 1.0 }),
        Expect::Allow,
    );
    deploy(
        "all free, fraction 0.9",
        "test_data/deploy-all-free.json",
        shipped(),
        Expect::Deny {
            code: "gpu_memory_exceeded",
        },
    );
}

#[test]
fn deployment_without_gpus_is_allowed() {
    deploy(
        "no GPUs",
        "test_data/deploy-no-gpus.json",
        shipped(),
        Expect::Allow,
    );
}

#[test]
fn fraction_defaults_to_nine_tenths() {
    let settings = expect_valid_settings::<GpuMemoryGuard>(json!({}));
    assert_eq!(settings.max_fraction_of_free, 0.9);
}

#[test]
fn fraction_out_of_range_is_refused() {
    for fraction in [json!(0), json!(-0.5), json!(1.5)] {
        expect_invalid_settings::<GpuMemoryGuard>(
            json!({ "max_fraction_of_free": fraction }),
            "max_fraction_of_free must be greater than 0 and at most 1, got",
        );
    }
    expect_invalid_settings::<GpuMemoryGuard>(json!({ "max_fraction_of_free": 1.5 }), "got 1.5");
}

#[test]
fn typos_and_wrong_types_are_refused() {
    expect_invalid_settings::<GpuMemoryGuard>(
        json!({ "max_fraction": 0.5 }),
        "unknown field `max_fraction`",
    );
    expect_invalid_settings::<GpuMemoryGuard>(
        json!({ "max_fraction_of_free": "90%" }),
        "invalid type: string \"90%\", expected f64",
    );
}

#[test]
fn only_deploy_is_judged() {
    assert_eq!(
        <GpuMemoryGuard as switchyard_sdk::Policy>::points(),
        vec![AdmissionPoint::Deploy]
    );
}
