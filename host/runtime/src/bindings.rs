//! Host-side bindings of every world Switchyard serves, generated once here.

/// The `switchyard:policy/admission-policy@0.2.0` world: the host's usage
/// counters imported, `throttle` and `flag` decisions; its requests are
/// 0.1.0's.
pub mod policy {
    wasmtime::component::bindgen!({
        world: "switchyard:policy/admission-policy@0.2.0",
        path: "../../wit",
        additional_derives: [serde::Serialize, serde::Deserialize, PartialEq],
    });
}

/// The `switchyard:policy/admission-policy@0.1.0` world, still loaded: its
/// types are [`policy`]'s; `policy::v0_1` adapts its two older decisions.
pub mod policy_v0_1 {
    wasmtime::component::bindgen!({
        world: "switchyard:policy/admission-policy@0.1.0",
        path: "../../wit",
        with: {
            "switchyard:plugin/types@0.1.0": crate::bindings::policy::switchyard::plugin::types,
            "switchyard:plugin/log@0.1.0": crate::bindings::policy::switchyard::plugin::log,
            "switchyard:plugin/clock@0.1.0": crate::bindings::policy::switchyard::plugin::clock,
            "switchyard:policy/types@0.1.0": crate::bindings::policy::switchyard::policy0_1_0::types,
        },
    });
}

/// The `switchyard:grant/grant-evaluator@0.1.0` world.
pub mod grant {
    wasmtime::component::bindgen!({
        world: "switchyard:grant/grant-evaluator@0.1.0",
        path: "../../wit",
        additional_derives: [serde::Serialize, serde::Deserialize, PartialEq],
        with: {
            "switchyard:plugin/types@0.1.0": crate::bindings::policy::switchyard::plugin::types,
            "switchyard:plugin/log@0.1.0": crate::bindings::policy::switchyard::plugin::log,
            "switchyard:plugin/clock@0.1.0": crate::bindings::policy::switchyard::plugin::clock,
        },
    });
}

/// The `switchyard:carrier/carrier@0.4.0` world: packed messages, and 0.3.0's
/// types (held payloads, claims, actions) used from there.
pub mod carrier {
    wasmtime::component::bindgen!({
        world: "switchyard:carrier/carrier@0.4.0",
        path: "../../wit",
        additional_derives: [PartialEq],
        with: {
            "switchyard:plugin/types@0.1.0": crate::bindings::policy::switchyard::plugin::types,
            "switchyard:plugin/log@0.1.0": crate::bindings::policy::switchyard::plugin::log,
            "switchyard:plugin/clock@0.1.0": crate::bindings::policy::switchyard::plugin::clock,
        },
    });
}

/// The `switchyard:carrier/carrier@0.3.0` world, still loaded: its types are
/// the ones 0.4.0 uses, shared with [`carrier`]; `carrier::v0_3` adapts the
/// two functions that changed.
pub mod carrier_v0_3 {
    wasmtime::component::bindgen!({
        world: "switchyard:carrier/carrier@0.3.0",
        path: "../../wit",
        additional_derives: [PartialEq],
        with: {
            "switchyard:plugin/types@0.1.0": crate::bindings::policy::switchyard::plugin::types,
            "switchyard:plugin/log@0.1.0": crate::bindings::policy::switchyard::plugin::log,
            "switchyard:plugin/clock@0.1.0": crate::bindings::policy::switchyard::plugin::clock,
            "switchyard:carrier/types@0.3.0": crate::bindings::carrier::switchyard::carrier0_3_0::types,
        },
    });
}

/// The `switchyard:carrier/carrier@0.1.0` world, still loaded: its types are
/// turned into 0.3.0's in one place, `carrier::v0_1`.
pub mod carrier_v0_1 {
    wasmtime::component::bindgen!({
        world: "switchyard:carrier/carrier@0.1.0",
        path: "../../wit",
        additional_derives: [PartialEq],
        with: {
            "switchyard:plugin/types@0.1.0": crate::bindings::policy::switchyard::plugin::types,
            "switchyard:plugin/log@0.1.0": crate::bindings::policy::switchyard::plugin::log,
            "switchyard:plugin/clock@0.1.0": crate::bindings::policy::switchyard::plugin::clock,
        },
    });
}

pub use policy::switchyard::plugin::types::{Denial, LogLevel};
pub use policy::switchyard::policy0_1_0::types as policy_types;
pub use policy::switchyard::policy0_2_0::types as policy_types_v0_2;
pub use policy::switchyard::policy0_2_0::usage as policy_usage;

/// The `switchyard:carrier/tunnel@0.2.0` world: one websocket session.
pub mod tunnel {
    wasmtime::component::bindgen!({
        world: "switchyard:carrier/tunnel@0.2.0",
        path: "../../wit",
        additional_derives: [PartialEq],
        with: {
            "switchyard:plugin/types@0.1.0": crate::bindings::policy::switchyard::plugin::types,
            "switchyard:plugin/log@0.1.0": crate::bindings::policy::switchyard::plugin::log,
        },
    });
}

/// The `switchyard:carrier/tunnel@0.1.0` world, still loaded: its types are
/// turned into 0.2.0's in one place, `tunnel::v0_1`.
pub mod tunnel_v0_1 {
    wasmtime::component::bindgen!({
        world: "switchyard:carrier/tunnel@0.1.0",
        path: "../../wit",
        additional_derives: [PartialEq],
        with: {
            "switchyard:plugin/types@0.1.0": crate::bindings::policy::switchyard::plugin::types,
            "switchyard:plugin/log@0.1.0": crate::bindings::policy::switchyard::plugin::log,
        },
    });
}
