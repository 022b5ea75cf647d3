//! The components `scripts/build-guests.sh` builds.

use std::path::PathBuf;

use sha2::{Digest, Sha256};

/// Where the built components are.
pub fn dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("SWITCHYARD_PLUGINS_DIR") {
        return dir.into();
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("plugins")
}

/// A built component's bytes, e.g. `component("max-tokens")`.
pub fn component(name: &str) -> Vec<u8> {
    let path = dir().join(format!("{name}.wasm"));
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; build the guests first (scripts/build-guests.sh)",
            path.display()
        )
    })
}

/// Hex SHA-256.
pub fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The default settings a shipped policy carries in `policies/<name>/test_data/settings.json`.
pub fn shipped_settings(name: &str) -> serde_json::Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(format!("../policies/{name}/test_data/settings.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("settings.json is JSON")
}
