//! The components and requests the benchmark uses.

use std::path::PathBuf;
use std::sync::Arc;

use sha2::{Digest, Sha256};
use switchyard_runtime::Runtime;
use switchyard_runtime::admission::{Chain, ChainEntry};
use switchyard_runtime::loader::ComponentSource;
use switchyard_runtime::policy::{PolicyPlugin, PolicySource};

/// `SWITCHYARD_PLUGINS_DIR`, or `$CARGO_TARGET_DIR/plugins`, or `./target/plugins`.
pub fn plugins_dir() -> PathBuf {
    std::env::var_os("SWITCHYARD_PLUGINS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("target"))
                .join("plugins")
        })
}

/// The three inference policies of the chain, with their settings.
pub const CHAIN: [(&str, &str); 3] = [
    (
        "model-allowlist",
        r#"{"rules":[{"project":"research","models":["llama-3-*","mistral-7b"]}],"default":["demo-*"]}"#,
    ),
    ("max-tokens", r#"{"max_tokens":4096,"mode":"deny"}"#),
    ("deny-weekends", r#"{"days":[]}"#),
];

/// A typical allowed request (every policy runs).
pub const REQUEST: &str = r#"{"caller":{"key_id":"k1","project":"research","scopes":["inference"]},"model":"llama-3-8b","endpoint":"/v1/chat/completions","prompt_tokens":12,"max_tokens":512,"stream":false}"#;

/// A component's bytes and digest.
pub fn component(name: &str) -> (Vec<u8>, String) {
    let path = plugins_dir().join(format!("{name}.wasm"));
    let bytes = std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run scripts/build-guests.sh)", path.display()));
    let sha = hex::encode(Sha256::digest(&bytes));
    (bytes, sha)
}

/// Loads one policy.
pub fn load(runtime: &Arc<Runtime>, name: &str, settings: &str) -> Arc<PolicyPlugin> {
    let (bytes, sha256) = component(name);
    PolicyPlugin::load(
        runtime,
        PolicySource {
            component: ComponentSource {
                name,
                version: "bench",
                bytes: &bytes,
                sha256: &sha256,
            },
            settings,
        },
    )
    .unwrap_or_else(|e| panic!("loading {name}: {e}"))
}

/// The chain of [`CHAIN`].
pub fn chain(runtime: &Arc<Runtime>, generation: i64) -> Chain {
    Chain::new(
        switchyard_runtime::admission::AdmissionPoint::Inference,
        generation,
        CHAIN
            .iter()
            .map(|(name, settings)| ChainEntry {
                policy: load(runtime, name, settings),
                mode: Default::default(),
                fail: Default::default(),
                log: Default::default(),
            })
            .collect(),
    )
}

/// The `switchyard` binary beside this bench, or `None` (said, for
/// `section`) when it is not built.
pub(crate) fn switchyard_bin(section: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().expect("current exe");
    let bin = exe.with_file_name("switchyard");
    if bin.is_file() {
        return Some(bin);
    }
    println!(
        "(skipping {section}: {} is not built; scripts/bench.sh builds it)",
        bin.display()
    );
    None
}

/// A two-thread tokio runtime, as the whole-cluster benches drive their load.
pub(crate) fn two_thread_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio")
}
