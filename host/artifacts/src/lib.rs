//! The guest components the `switchyard` binary carries: the carrier
//! components (`nats`, `pgbus`, `tunnel`), the shipped policies
//! (`model-allowlist`, `max-tokens`, `rate-limit`, `gpu-memory-guard`) and the shipped
//! grant evaluator (`grant-standard`), so that deploying the server is
//! copying one file.
//!
//! `build.rs` builds them for wasm32-wasip2 with the workspace's `guest`
//! profile, in a target folder of its own, and `include_bytes!`s them (or
//! takes them from `SWITCHYARD_PREBUILT_GUESTS=DIR`, where
//! `scripts/build-guests.sh` wrote them). Only the binary depends on this
//! crate: the server and the tests of the host libraries build no guest.
//!
//! Layout: `build.rs` holds the list of guests; this file the type.

use switchyard_runtime::PluginKind;

/// One embedded component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shipped {
    /// The registry name, as `scripts/build-guests.sh` names the file (`nats`, `max-tokens`).
    pub name: &'static str,
    /// What it is (checked against the world it exports when it is seeded).
    pub kind: PluginKind,
    /// Its own version (its crate's `version`, not the host's).
    pub version: &'static str,
    /// The component's bytes.
    pub bytes: &'static [u8],
}

include!(concat!(env!("OUT_DIR"), "/shipped.rs"));

/// Every embedded component, carriers first.
pub fn shipped() -> &'static [Shipped] {
    SHIPPED
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_runtime::inspect::inspect;

    #[test]
    fn every_embedded_component_is_a_component_of_the_kind_it_is_shipped_as() {
        for shipped in shipped() {
            let info = inspect(shipped.bytes)
                .unwrap_or_else(|e| panic!("{} is not a valid component: {e}", shipped.name));
            assert_eq!(
                info.kind, shipped.kind,
                "{} targets {}",
                shipped.name, info.world
            );
        }
    }

    #[test]
    fn the_binary_carries_the_carriers_the_shipped_policies_and_grant_standard() {
        let names: Vec<_> = shipped().iter().map(|s| (s.name, s.kind)).collect();
        assert_eq!(
            names,
            [
                ("nats", PluginKind::Carrier),
                ("pgbus", PluginKind::Carrier),
                ("tunnel", PluginKind::Tunnel),
                ("model-allowlist", PluginKind::Policy),
                ("max-tokens", PluginKind::Policy),
                ("rate-limit", PluginKind::Policy),
                ("gpu-memory-guard", PluginKind::Policy),
                ("grant-standard", PluginKind::Grant),
            ]
        );
    }
}
