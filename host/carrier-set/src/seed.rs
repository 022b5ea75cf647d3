//! The carrier components a replica brings: pushed into the plugin registry
//! at start, then resolved from it like any other component. A carrier set
//! always runs what the registry holds (digest-pinned, world-checked), never
//! a file read on the side.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, bail};
use switchyard_carrier::ComponentSpec;
use switchyard_carrier::component::sha256_hex;
use switchyard_carrier::set::Needed;
use switchyard_runtime::PluginKind;
use switchyard_store::Store;
use switchyard_store::plugins::{Inserted, PluginRecord};

/// Who the registry says uploaded a seeded component.
pub const SEEDED_BY: &str = "seed";

/// The carrier components a folder given with `--carrier-plugins` holds.
const FOLDER_COMPONENTS: [(&str, PluginKind); 3] = [
    ("nats", PluginKind::Carrier),
    ("pgbus", PluginKind::Carrier),
    ("tunnel", PluginKind::Tunnel),
];

/// A component a replica seeds the registry with: from `--carrier-plugins`,
/// or built into the binary.
#[derive(Clone)]
pub struct SeedComponent {
    /// Plugin name (`nats`, `pgbus`, `tunnel`).
    pub name: String,
    /// The kind it must be (checked against the world it exports).
    pub kind: PluginKind,
    /// The component's own version.
    pub version: String,
    /// The bytes.
    pub bytes: Arc<[u8]>,
}

impl std::fmt::Debug for SeedComponent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SeedComponent")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("version", &self.version)
            .field("size", &self.bytes.len())
            .finish()
    }
}

impl SeedComponent {
    /// The carrier components in `dir` (`nats.wasm`, `pgbus.wasm`,
    /// `tunnel.wasm`; a missing one is skipped).
    ///
    /// A file carries no version of its own, so its version names its
    /// bytes: `0.0.0+sha256.<first 16 hex digits>` (semver build metadata,
    /// as the built-in carriers' `<crate version>+sha256.<…>`). Seeding the
    /// same file again is then a no-op and a rebuilt file is a new version,
    /// never a conflict.
    pub fn from_dir(dir: &Path) -> anyhow::Result<Vec<Self>> {
        let mut found = Vec::new();
        for (name, kind) in FOLDER_COMPONENTS {
            let path = dir.join(format!("{name}.wasm"));
            if !path.exists() {
                continue;
            }
            let bytes = std::fs::read(&path)
                .with_context(|| format!("reading the {name} component {}", path.display()))?;
            found.push(Self {
                name: name.to_string(),
                kind,
                version: format!("0.0.0+sha256.{}", &sha256_hex(&bytes)[..16]),
                bytes: bytes.into(),
            });
        }
        if found.is_empty() {
            bail!(
                "{} holds no carrier components (nats.wasm, pgbus.wasm, tunnel.wasm)",
                dir.display()
            );
        }
        Ok(found)
    }
}

/// Pushes `seeds` into the registry: the same name, version and digest
/// again is a no-op; the same name and version with another digest is an
/// error (a version names one component, as an upload's does).
pub async fn seed(store: &Store, seeds: &[SeedComponent]) -> anyhow::Result<()> {
    for seed in seeds {
        let sha256 = sha256_hex(&seed.bytes);
        let bytes = seed.bytes.clone();
        let expected = sha256.clone();
        let info =
            tokio::task::spawn_blocking(move || switchyard_runtime::verify(&bytes, &expected))
                .await?
                .with_context(|| format!("the seeded component {}", seed.name))?;
        if info.kind != seed.kind {
            bail!(
                "the seeded component {} is a {} component ({}), not a {}",
                seed.name,
                info.kind.as_str(),
                info.world,
                seed.kind.as_str()
            );
        }
        let record = PluginRecord {
            name: seed.name.clone(),
            version: seed.version.clone(),
            kind: info.kind,
            world: info.world,
            sha256,
            size: seed.bytes.len() as i64,
            uploaded_by: SEEDED_BY.to_string(),
            uploaded_at: String::new(),
            signature: None,
        };
        match store.insert_plugin(&record, &seed.bytes).await? {
            Inserted::Created(r) => {
                tracing::info!(plugin = %r.name, version = %r.version, kind = %r.kind.as_str(), sha256 = %r.sha256, "component seeded")
            }
            Inserted::Existing(_) => {}
            // A shipped policy (or grant evaluator) keeps its plain version
            // so that bindings can name it; a binary rebuilt with other
            // bytes under the same version must still start: the
            // registry's copy (which running bindings are pinned to) stays,
            // and the operator is told.
            Inserted::Conflict(r)
                if matches!(seed.kind, PluginKind::Policy | PluginKind::Grant) =>
            {
                tracing::warn!(
                    plugin = %seed.name,
                    version = %seed.version,
                    registry_sha256 = %r.sha256,
                    shipped_sha256 = %record.sha256,
                    "the registry already holds this version with other bytes; it keeps its \
                     copy (push the shipped one under a new version to use it)"
                )
            }
            Inserted::Conflict(r) => bail!(
                "the carrier component {}@{} given to this replica has sha256 {}, but the plugin \
                 registry holds {}@{} with sha256 {}; give the component a new version",
                seed.name,
                seed.version,
                record.sha256,
                r.name,
                r.version,
                r.sha256
            ),
        }
    }
    Ok(())
}

/// The newest registered version of a component a set needs, with its
/// bytes (by digest) pinned: what a new cluster row, or a change that names
/// no versions, pins (the row's pins then decide what every replica runs).
pub async fn resolve(store: &Store, needed: Needed) -> anyhow::Result<Option<ComponentSpec>> {
    let newest = store
        .plugins(Some(needed.name))
        .await?
        .into_iter()
        .rfind(|r| r.kind == needed.kind);
    let Some(record) = newest else {
        return Ok(None);
    };
    Ok(Some(load(store, &record).await?))
}

/// The component a pin names: the registry's bytes for that digest, under
/// the pinned name and version (`None`: the registry no longer holds it).
pub async fn resolve_pinned(
    store: &Store,
    name: &str,
    pin: &switchyard_protocol::carrier::Pin,
) -> anyhow::Result<Option<ComponentSpec>> {
    let Some(record) = store.plugin(name, &pin.version).await? else {
        return Ok(None);
    };
    if record.sha256 != pin.sha256 {
        bail!(
            "the plugin registry holds {name}@{} with sha256 {}, not the pinned {}",
            pin.version,
            record.sha256,
            pin.sha256
        );
    }
    Ok(Some(load(store, &record).await?))
}

/// A record's bytes from the registry, pinned to its digest.
async fn load(store: &Store, record: &PluginRecord) -> anyhow::Result<ComponentSpec> {
    let bytes = store.plugin_bytes(&record.sha256).await?;
    Ok(ComponentSpec::pinned(
        &record.name,
        &record.version,
        bytes,
        &record.sha256,
    )?)
}

/// Every component `side` runs for a set that the registry holds.
pub async fn resolve_all(
    store: &Store,
    needed: impl IntoIterator<Item = Needed>,
) -> anyhow::Result<Vec<ComponentSpec>> {
    let mut found = Vec::new();
    for needed in needed {
        if let Some(component) = resolve(store, needed).await? {
            found.push(component);
        }
    }
    Ok(found)
}
