//! The model library's bytes: files content-addressed under
//! `<library>/blobs/sha256/<hex>`. A blob is written to a temporary file
//! while its SHA-256 is computed and renamed into place only when it
//! matches, so a file under its digest is always whole and verified.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use futures::{Stream, StreamExt};
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use switchyard_store::keys::random_id;

/// Why a blob was not stored.
#[derive(Debug, thiserror::Error)]
pub enum LibraryError {
    /// The bytes hash to something else.
    #[error("the bytes have SHA-256 {actual}, not {expected}")]
    DigestMismatch {
        /// What the uploader said.
        expected: String,
        /// What arrived.
        actual: String,
    },
    /// The upload ended early or failed.
    #[error("the upload failed: {0}")]
    Upload(String),
    /// The disk.
    #[error("library storage: {0}")]
    Io(#[from] std::io::Error),
}

/// Whether a stored blob is new.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// Written now.
    New,
    /// It was there already (the bytes were verified and dropped).
    AlreadyPresent,
}

/// A temporary file under `incoming/`, removed when dropped (after a
/// rename there is nothing left to remove).
struct Incoming(PathBuf);

impl Drop for Incoming {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// One replica's library folder.
#[derive(Debug, Clone)]
pub struct Library {
    root: PathBuf,
}

/// A lowercase hex SHA-256.
pub fn valid_digest(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl Library {
    /// The library under `root` (created if absent).
    pub fn open(root: &Path) -> std::io::Result<Self> {
        std::fs::create_dir_all(root.join("blobs/sha256"))?;
        std::fs::create_dir_all(root.join("incoming"))?;
        Ok(Self {
            root: root.to_path_buf(),
        })
    }

    /// Where the blob with this digest lives.
    pub fn blob_path(&self, sha256: &str) -> PathBuf {
        self.root.join("blobs/sha256").join(sha256)
    }

    /// Whether the blob is stored with this size.
    pub fn has(&self, sha256: &str, size: u64) -> bool {
        std::fs::metadata(self.blob_path(sha256)).is_ok_and(|m| m.is_file() && m.len() == size)
    }

    /// Stores `body` under `expected` once its digest matches.
    pub async fn put<S, E>(&self, expected: &str, body: S) -> Result<(Stored, u64), LibraryError>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        // Removed on every way out but the rename, a dropped future included
        // (a client that went away, a fetch cancelled).
        let incoming = Incoming(self.root.join("incoming").join(random_id(expected)));
        let (actual, size) = self.receive(&incoming.0, body).await?;
        if actual != expected {
            return Err(LibraryError::DigestMismatch {
                expected: expected.to_string(),
                actual,
            });
        }
        let target = self.blob_path(expected);
        if self.has(expected, size) {
            return Ok((Stored::AlreadyPresent, size));
        }
        tokio::fs::rename(&incoming.0, &target).await?;
        Ok((Stored::New, size))
    }

    /// The size of the blob with this digest, if the library holds it.
    pub fn size(&self, sha256: &str) -> Option<u64> {
        if !valid_digest(sha256) {
            return None;
        }
        std::fs::metadata(self.blob_path(sha256))
            .ok()
            .filter(|m| m.is_file())
            .map(|m| m.len())
    }

    async fn receive<S, E>(&self, path: &Path, mut body: S) -> Result<(String, u64), LibraryError>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        let mut file = tokio::fs::File::create(path).await?;
        let mut hasher = Sha256::new();
        let mut size = 0u64;
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| LibraryError::Upload(e.to_string()))?;
            hasher.update(&chunk);
            size += chunk.len() as u64;
            file.write_all(&chunk).await?;
        }
        file.sync_all().await?;
        Ok((hex::encode(hasher.finalize()), size))
    }

    /// Removes a blob no revision uses any more.
    pub async fn remove(&self, sha256: &str) -> std::io::Result<()> {
        match tokio::fs::remove_file(self.blob_path(sha256)).await {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}
