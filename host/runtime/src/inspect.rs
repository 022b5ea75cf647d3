//! What a component is, read from its top-level exports and their types
//! without compiling it: upload checks stay cheap even for an 18 MB component
//! built from Python.

use serde::Serialize;

use crate::error::LoadError;

/// The plugin kinds, defined with the registry's records and the API's
/// bodies.
pub use switchyard_protocol::plugin::PluginKind;

/// One world this host serves: the interface a component must export to target it.
struct ServedWorld {
    kind: PluginKind,
    world: &'static str,
    export: &'static str,
}

/// The worlds and versions this build serves.
const SERVED: &[ServedWorld] = &[
    // The newest version first.
    ServedWorld {
        kind: PluginKind::Policy,
        world: "switchyard:policy/admission-policy@0.2.0",
        export: "switchyard:policy/admission@0.2.0",
    },
    ServedWorld {
        kind: PluginKind::Policy,
        world: POLICY_WORLD_V0_1,
        export: "switchyard:policy/admission@0.1.0",
    },
    ServedWorld {
        kind: PluginKind::Grant,
        world: "switchyard:grant/grant-evaluator@0.1.0",
        export: "switchyard:grant/evaluator@0.1.0",
    },
    // The newest version first.
    ServedWorld {
        kind: PluginKind::Carrier,
        world: CARRIER_WORLD,
        export: "switchyard:carrier/protocol@0.4.0",
    },
    ServedWorld {
        kind: PluginKind::Carrier,
        world: CARRIER_WORLD_V0_3,
        export: "switchyard:carrier/protocol@0.3.0",
    },
    ServedWorld {
        kind: PluginKind::Carrier,
        world: CARRIER_WORLD_V0_1,
        export: "switchyard:carrier/protocol@0.1.0",
    },
    // The newest version first.
    ServedWorld {
        kind: PluginKind::Tunnel,
        world: TUNNEL_WORLD,
        export: "switchyard:carrier/session@0.2.0",
    },
    ServedWorld {
        kind: PluginKind::Tunnel,
        world: TUNNEL_WORLD_V0_1,
        export: "switchyard:carrier/session@0.1.0",
    },
];

/// The policy world's first version, still loaded (no usage counters, no
/// `throttle` or `flag`).
pub(crate) const POLICY_WORLD_V0_1: &str = "switchyard:policy/admission-policy@0.1.0";
/// The carrier world with packed messages (spans of one buffer).
pub(crate) const CARRIER_WORLD: &str = "switchyard:carrier/carrier@0.4.0";
/// The carrier world with payload bypass (held payloads, body claims), still loaded.
pub(crate) const CARRIER_WORLD_V0_3: &str = "switchyard:carrier/carrier@0.3.0";
/// The carrier world's first version, still loaded (payloads cross the guest).
pub(crate) const CARRIER_WORLD_V0_1: &str = "switchyard:carrier/carrier@0.1.0";
/// The tunnel world this build's tunnel plugin targets.
pub(crate) const TUNNEL_WORLD: &str = "switchyard:carrier/tunnel@0.2.0";
/// The tunnel world's first version, still loaded (its `open` answers a string).
pub(crate) const TUNNEL_WORLD_V0_1: &str = "switchyard:carrier/tunnel@0.1.0";

/// What [`inspect`] found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ComponentInfo {
    /// The plugin kind.
    pub kind: PluginKind,
    /// The world and version it targets, e.g. `switchyard:policy/admission-policy@0.1.0`.
    pub world: String,
}

/// Every world this host serves, for error messages.
pub fn served_worlds() -> String {
    SERVED
        .iter()
        .map(|w| w.world)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Validates the bytes as a component, finds the world it targets and checks
/// the types of what it exports against that world.
pub fn inspect(bytes: &[u8]) -> Result<ComponentInfo, LoadError> {
    let exports = top_level_exports(bytes)?;
    if let Some(served) = SERVED
        .iter()
        .find(|w| exports.iter().any(|e| e == w.export))
    {
        crate::world_types::check_export(bytes, served.export)?;
        return Ok(ComponentInfo {
            kind: served.kind,
            world: served.world.to_string(),
        });
    }
    let found = if exports.is_empty() {
        "nothing".to_string()
    } else {
        exports.join(", ")
    };
    Err(LoadError::UnsupportedWorld {
        found,
        served: served_worlds(),
    })
}

fn top_level_exports(bytes: &[u8]) -> Result<Vec<String>, LoadError> {
    use wasmparser::{Encoding, Parser, Payload};

    let invalid = |e: wasmparser::BinaryReaderError| {
        LoadError::InvalidComponent(format!("{} (at byte {:#x})", e.message(), e.offset()))
    };
    let mut depth = 0usize;
    let mut exports = Vec::new();
    for payload in Parser::new(0).parse_all(bytes) {
        match payload.map_err(invalid)? {
            Payload::Version { encoding, .. } => {
                if depth == 0 && encoding != Encoding::Component {
                    return Err(LoadError::InvalidComponent(
                        "this is a core module; build a component (cargo build --target wasm32-wasip2)"
                            .into(),
                    ));
                }
                depth += 1;
            }
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentExportSection(reader) if depth == 1 => {
                for export in reader {
                    exports.push(export.map_err(invalid)?.name.name.to_string());
                }
            }
            _ => {}
        }
    }
    if depth != 0 || bytes.len() < 8 {
        return Err(LoadError::InvalidComponent("truncated binary".into()));
    }
    wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all())
        .validate_all(bytes)
        .map_err(invalid)?;
    Ok(exports)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_not_a_component() {
        let err = inspect(b"hello, world").unwrap_err();
        assert!(matches!(err, LoadError::InvalidComponent(_)), "{err}");
    }

    #[test]
    fn a_core_module_is_refused_with_a_hint() {
        // The smallest valid core module: magic and version 1.
        let module = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];
        let err = inspect(&module).unwrap_err();
        assert!(err.to_string().contains("core module"), "{err}");
    }

    #[test]
    fn an_empty_component_names_what_is_served() {
        // The smallest valid component: magic, version 0x0d, layer 1.
        let component = [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];
        match inspect(&component).unwrap_err() {
            LoadError::UnsupportedWorld { found, served } => {
                assert_eq!(found, "nothing");
                assert!(served.contains("switchyard:policy/admission-policy@0.1.0"));
            }
            other => panic!("unexpected {other}"),
        }
    }
}
