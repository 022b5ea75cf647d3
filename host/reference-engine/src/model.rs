//! Loading the model: opening its file and hashing it.
//!
//! The reference engine does not interpret the file; its SHA-256 digest is
//! the model's identity and seeds every answer, so engines on the same file
//! answer the same and engines on different files differ.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use crate::config::ReferenceConfig;
use crate::error::EngineError;

/// How much of the model file is read at a time while hashing: large enough
/// to keep the disk busy, small enough not to matter next to a real model.
const READ_CHUNK: usize = 1 << 20;

/// A loaded model.
#[derive(Debug, Clone)]
pub struct Model {
    /// The name requests use in `model`.
    pub name: String,
    /// SHA-256 of the model file.
    pub digest: [u8; 32],
    /// When it was loaded, in Unix seconds (`created` in `/v1/models`).
    pub created: u64,
}

/// A model file that is open but not hashed yet: opening fails fast on a
/// missing file, hashing a large one takes a while.
#[derive(Debug)]
pub struct ModelFile {
    path: PathBuf,
    name: String,
    file: File,
}

impl ModelFile {
    /// Opens the configured model file and settles the served name.
    pub fn open(config: &ReferenceConfig) -> Result<Self, EngineError> {
        let path = config.model_path.clone();
        let name = match &config.served_model_name {
            Some(name) => name.clone(),
            None => stem(&path)?,
        };
        let file = File::open(&path).map_err(|source| EngineError::OpenModel {
            path: path.clone(),
            source,
        })?;
        let metadata = file.metadata().map_err(|source| EngineError::OpenModel {
            path: path.clone(),
            source,
        })?;
        if !metadata.is_file() {
            return Err(EngineError::NotAFile { path });
        }
        Ok(Self { path, name, file })
    }

    /// Hashes the whole file on a blocking thread. Dropping the future stops
    /// the hashing at the next chunk: the runtime waits for blocking threads
    /// when it shuts down, and an engine stopped while it loads a large file
    /// must exit promptly.
    pub async fn load(self) -> Result<Model, EngineError> {
        let abandoned = AbandonOnDrop(Arc::new(AtomicBool::new(false)));
        let flag = abandoned.0.clone();
        tokio::task::spawn_blocking(move || self.hash(&flag))
            .await
            .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
    }

    fn hash(mut self, abandoned: &AtomicBool) -> Result<Model, EngineError> {
        let mut hasher = Sha256::new();
        let mut buffer = vec![0; READ_CHUNK];
        loop {
            if abandoned.load(Ordering::Relaxed) {
                return Err(EngineError::ReadModel {
                    path: self.path,
                    source: std::io::Error::other("loading was abandoned"),
                });
            }
            let read = match self.file.read(&mut buffer) {
                Ok(0) => break,
                Ok(read) => read,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(source) => {
                    return Err(EngineError::ReadModel {
                        path: self.path,
                        source,
                    });
                }
            };
            hasher.update(&buffer[..read]);
        }
        Ok(Model {
            name: self.name,
            digest: hasher.finalize().into(),
            created: unix_now(),
        })
    }
}

/// Sets its flag when dropped.
struct AbandonOnDrop(Arc<AtomicBool>);

impl Drop for AbandonOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

fn stem(path: &Path) -> Result<String, EngineError> {
    path.file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .ok_or_else(|| EngineError::NoModelName {
            path: path.to_path_buf(),
        })
}

/// The current time in Unix seconds, as OpenAI's `created` fields carry it.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_digest_is_the_files_sha256_and_the_name_its_stem() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tiny.Q4.gguf");
        std::fs::write(&path, b"abc").unwrap();
        let model = ModelFile::open(&ReferenceConfig::new(&path))
            .unwrap()
            .load()
            .await
            .unwrap();
        assert_eq!(model.name, "tiny.Q4");
        assert_eq!(
            hex::encode(model.digest),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn a_directory_is_not_a_model() {
        let dir = tempfile::tempdir().unwrap();
        let err = ModelFile::open(&ReferenceConfig::new(dir.path())).unwrap_err();
        assert!(matches!(err, EngineError::NotAFile { .. }), "{err}");
    }
}
