//! The components this binary carries (`switchyard-artifacts`), as `serve`
//! and `up` hand them to the server, which seeds its plugin registry with
//! them at start.

use switchyard_artifacts::Shipped;
use switchyard_carrier::component::sha256_hex;
use switchyard_runtime::PluginKind;
use switchyard_server::SeedComponent;

/// The built-in components a replica seeds: the shipped policies and the
/// shipped grant evaluator always (in the registry; the evaluator is in
/// force until another is bound), the carriers unless `--carrier-plugins`
/// names a folder of them, which then takes their place.
pub fn seeds(carrier_folder: bool) -> Vec<SeedComponent> {
    switchyard_artifacts::shipped()
        .iter()
        .filter(|shipped| bound_by_name(shipped.kind) || !carrier_folder)
        .map(seed)
        .collect()
}

fn seed(shipped: &Shipped) -> SeedComponent {
    // A version names one component, and a set runs the newest version of
    // each carrier. A carrier is never bound by hand, so a rebuilt one (a
    // new binary, same crate version) carries its digest as build metadata
    // and is a new version rather than a conflict that stops the start; a
    // policy keeps the plain version an admin binds (`max-tokens@0.1.0`).
    let version = match bound_by_name(shipped.kind) {
        true => shipped.version.to_string(),
        false => format!(
            "{}+sha256.{}",
            shipped.version,
            &sha256_hex(shipped.bytes)[..16]
        ),
    };
    SeedComponent {
        name: shipped.name.to_string(),
        kind: shipped.kind,
        version,
        bytes: shipped.bytes.into(),
    }
}

/// Policies and grant evaluators are bound by `name@version`, so they keep
/// their crate's plain version.
fn bound_by_name(kind: PluginKind) -> bool {
    matches!(kind, PluginKind::Policy | PluginKind::Grant)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_carrier_folder_takes_the_place_of_the_built_in_carriers_only() {
        let names = |seeds: Vec<SeedComponent>| -> Vec<String> {
            seeds.into_iter().map(|s| s.name).collect()
        };
        assert_eq!(
            names(seeds(false)),
            [
                "nats",
                "pgbus",
                "tunnel",
                "model-allowlist",
                "max-tokens",
                "rate-limit",
                "gpu-memory-guard",
                "grant-standard"
            ]
        );
        assert_eq!(
            names(seeds(true)),
            [
                "model-allowlist",
                "max-tokens",
                "rate-limit",
                "gpu-memory-guard",
                "grant-standard"
            ]
        );
    }

    #[test]
    fn policies_keep_their_version_and_carriers_name_their_bytes() {
        let shipped = switchyard_artifacts::shipped();
        for seed in seeds(false) {
            let own = shipped
                .iter()
                .find(|s| s.name == seed.name)
                .expect("every seed is shipped")
                .version;
            if bound_by_name(seed.kind) {
                assert_eq!(seed.version, own);
            } else {
                let digest = sha256_hex(&seed.bytes);
                assert_eq!(seed.version, format!("{own}+sha256.{}", &digest[..16]));
            }
        }
        // Versions are the components' own: the tunnel targets the 0.2.0
        // tunnel world and says so, whatever the host's version is.
        let tunnel = shipped.iter().find(|s| s.name == "tunnel").unwrap();
        assert_eq!(tunnel.version, "0.2.0");
    }
}
