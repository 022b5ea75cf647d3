//! The one `wit_bindgen::generate!` for the `admission-policy` world
//! (`@0.2.0`: the host's usage counters, `throttle` and `flag`).
//!
//! Policies never regenerate bindings: they use the types re-exported at the
//! crate root and export themselves with [`crate::export_policy!`], which
//! calls the export macro generated here.

wit_bindgen::generate!({
    path: "../wit",
    world: "switchyard:policy/admission-policy@0.2.0",
    // `switchyard:plugin` lives in another package of the same tree.
    generate_all,
    // The export macro is called from each policy's crate, not from here.
    pub_export_macro: true,
    export_macro_name: "__export_admission_policy",
    default_bindings_module: "switchyard_sdk::bindings",
    // Request fixtures and settings are JSON; `PartialEq` lets the test
    // harness compare decisions.
    additional_derives: [serde::Serialize, serde::Deserialize, PartialEq, Eq],
    // Enum cases read as the CLI spells them: `"inference"`, `{"deny": ...}`.
    additional_type_attributes: {
        "switchyard:policy/types@0.1.0/admission-point": [#[serde(rename_all = "snake_case")]],
        "switchyard:policy/types@0.2.0/inference-decision": [#[serde(rename_all = "snake_case")]],
        "switchyard:policy/types@0.1.0/deploy-decision": [#[serde(rename_all = "snake_case")]],
        "switchyard:policy/types@0.1.0/transfer-decision": [#[serde(rename_all = "snake_case")]],
        "switchyard:policy/types@0.2.0/federation-decision": [#[serde(rename_all = "snake_case")]],
        "switchyard:plugin/types@0.1.0/log-level": [#[serde(rename_all = "snake_case")]],
    },
});

/// The `grant-evaluator` world, generated apart so that a policy's component
/// exports no evaluator and an evaluator's no admission interface. The
/// plugin imports and the `denial` type are the ones above: a grant
/// evaluator's [`crate::Denial`] is a policy's.
#[allow(missing_docs)]
pub mod grant {
    wit_bindgen::generate!({
        path: "../wit",
        world: "switchyard:grant/grant-evaluator@0.1.0",
        with: {
            "switchyard:plugin/types@0.1.0": crate::bindings::switchyard::plugin::types,
            "switchyard:plugin/log@0.1.0": crate::bindings::switchyard::plugin::log,
            "switchyard:plugin/clock@0.1.0": crate::bindings::switchyard::plugin::clock,
        },
        generate_all,
        pub_export_macro: true,
        export_macro_name: "__export_grant_evaluator",
        default_bindings_module: "switchyard_sdk::bindings::grant",
        additional_derives: [serde::Serialize, serde::Deserialize, PartialEq, Eq],
        additional_type_attributes: {
            "switchyard:grant/types@0.1.0/grant-decision": [#[serde(rename_all = "snake_case")]],
        },
    });
}
