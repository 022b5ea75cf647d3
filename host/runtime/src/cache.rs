//! Compiled components, cached in memory and on disk per (SHA-256, engine
//! configuration). Only files this host wrote are ever deserialized.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use wasmtime::Engine;
use wasmtime::component::Component;

use crate::error::LoadError;

/// The compile cache of one engine.
pub(crate) struct CompileCache {
    /// `<cache_dir>/<engine compatibility hash>`, or nothing for memory only.
    dir: Option<PathBuf>,
    memory: Mutex<HashMap<String, Component>>,
}

/// Where a component came from, for logs and benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompileSource {
    /// Already compiled in this process.
    Memory,
    /// Deserialized from the on-disk cache.
    Disk,
    /// Compiled now.
    Compiled,
}

impl CompileCache {
    pub(crate) fn new(engine: &Engine, dir: Option<PathBuf>) -> Self {
        // Precompiled bytes only load into an engine of the same configuration,
        // so the directory is keyed by the engine's compatibility hash.
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let dir = dir.map(|d| d.join(format!("{:016x}", hasher.finish())));
        Self {
            dir,
            memory: Mutex::new(HashMap::new()),
        }
    }

    /// The compiled component for `sha256`, compiling `bytes` only on a miss.
    /// The caller has already checked that `bytes` hash to `sha256`.
    pub(crate) fn get_or_compile(
        &self,
        engine: &Engine,
        sha256: &str,
        bytes: &[u8],
    ) -> Result<(Component, CompileSource), LoadError> {
        if let Some(component) = self.memory.lock().expect("cache lock").get(sha256) {
            return Ok((component.clone(), CompileSource::Memory));
        }
        let path = self.dir.as_ref().map(|d| d.join(format!("{sha256}.cwasm")));
        let (component, source) = match path.as_deref().and_then(|p| load(engine, p)) {
            Some(component) => (component, CompileSource::Disk),
            None => {
                let component = Component::new(engine, bytes)
                    .map_err(|e| LoadError::Compile(format!("{e:#}")))?;
                if let Some(path) = &path {
                    store(&component, path);
                }
                (component, CompileSource::Compiled)
            }
        };
        self.memory
            .lock()
            .expect("cache lock")
            .insert(sha256.to_string(), component.clone());
        Ok((component, source))
    }
}

fn load(engine: &Engine, path: &Path) -> Option<Component> {
    if !path.is_file() {
        return None;
    }
    // SAFETY: the file sits in this host's private cache directory, was written
    // by `store` below from a component this host compiled, and is keyed by the
    // engine's compatibility hash; wasmtime still checks its header.
    #[allow(unsafe_code)]
    let loaded = unsafe { Component::deserialize_file(engine, path) };
    match loaded {
        Ok(component) => Some(component),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "ignoring unusable cached component");
            None
        }
    }
}

/// Writes atomically (temporary file, then rename) so a reader never sees half a file.
fn store(component: &Component, path: &Path) {
    let result = (|| -> std::io::Result<()> {
        let bytes = component.serialize().map_err(std::io::Error::other)?;
        let dir = path.parent().expect("cache path has a parent");
        std::fs::create_dir_all(dir)?;
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("component");
        let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
        std::fs::write(&tmp, bytes)?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        tracing::warn!(path = %path.display(), error = %e, "could not cache compiled component");
    }
}
