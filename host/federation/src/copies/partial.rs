//! A file being copied: its bytes so far under the library's partial
//! folder (`<library>/partial/<copy id>/<sha256>`) and the SHA-256 of that
//! prefix. Opening it truncates to the durable offset (bytes past it were
//! never recorded as held) and rehashes the prefix, so a pause, a restart
//! or a lost link goes on from exactly what the database says.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};

/// One file's partial bytes, open for appending.
pub(crate) struct Partial {
    path: PathBuf,
    file: tokio::fs::File,
    hasher: Sha256,
    /// Bytes written and hashed.
    held: u64,
    /// Bytes fsync'd.
    synced: u64,
}

impl std::fmt::Debug for Partial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Partial")
            .field("path", &self.path)
            .field("held", &self.held)
            .finish_non_exhaustive()
    }
}

/// Where the partial bytes of `sha256` for copy `copy` live.
pub(crate) fn partial_path(root: &Path, copy: &str, sha256: &str) -> PathBuf {
    root.join(copy).join(sha256)
}

impl Partial {
    /// Opens (or makes) the partial file and keeps its first `durable`
    /// bytes, rehashed. Answers it and the offset it holds: less than
    /// `durable` when the file is shorter (it was kept on another
    /// replica's disk, or lost).
    pub(crate) async fn open(path: PathBuf, durable: u64) -> std::io::Result<Self> {
        if let Some(dir) = path.parent() {
            tokio::fs::create_dir_all(dir).await?;
        }
        let mut file = tokio::fs::File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .await?;
        let length = file.metadata().await?.len();
        let held = durable.min(length);
        file.set_len(held).await?;
        let mut hasher = Sha256::new();
        file.seek(std::io::SeekFrom::Start(0)).await?;
        let mut left = held;
        let mut buffer = vec![0u8; 1 << 20];
        while left > 0 {
            let want = buffer.len().min(left as usize);
            let n = file.read(&mut buffer[..want]).await?;
            if n == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the partial file shrank while it was rehashed",
                ));
            }
            hasher.update(&buffer[..n]);
            left -= n as u64;
        }
        file.seek(std::io::SeekFrom::Start(held)).await?;
        Ok(Self {
            path,
            file,
            hasher,
            held,
            synced: held,
        })
    }

    /// Bytes written and hashed.
    pub(crate) fn held(&self) -> u64 {
        self.held
    }

    /// Appends `bytes`.
    pub(crate) async fn append(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.file.write_all(bytes).await?;
        self.hasher.update(bytes);
        self.held += bytes.len() as u64;
        Ok(())
    }

    /// Makes everything written durable; answers the durable offset.
    pub(crate) async fn sync(&mut self) -> std::io::Result<u64> {
        if self.synced != self.held {
            self.file.flush().await?;
            self.file.sync_data().await?;
            self.synced = self.held;
        }
        Ok(self.synced)
    }

    /// The SHA-256 of everything written (lowercase hex), and the path.
    pub(crate) async fn finish(mut self) -> std::io::Result<(String, PathBuf)> {
        self.sync().await?;
        Ok((hex::encode(self.hasher.finalize()), self.path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reopening_truncates_to_the_durable_offset_and_rehashes_the_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let path = partial_path(dir.path(), "copy_1", &"ab".repeat(32));
        let mut partial = Partial::open(path.clone(), 0).await.unwrap();
        partial.append(b"hello ").await.unwrap();
        assert_eq!(partial.sync().await.unwrap(), 6);
        // Written but never recorded durable: dropped on the next open.
        partial.append(b"lost").await.unwrap();
        drop(partial);
        let mut partial = Partial::open(path.clone(), 6).await.unwrap();
        assert_eq!(partial.held(), 6);
        partial.append(b"world").await.unwrap();
        let (digest, _) = partial.finish().await.unwrap();
        assert_eq!(digest, hex::encode(Sha256::digest(b"hello world")));
    }

    #[tokio::test]
    async fn a_file_shorter_than_the_durable_offset_holds_what_it_has() {
        let dir = tempfile::tempdir().unwrap();
        let path = partial_path(dir.path(), "copy_2", &"cd".repeat(32));
        let partial = Partial::open(path.clone(), 100).await.unwrap();
        assert_eq!(partial.held(), 0);
        assert!(path.exists(), "made empty");
    }
}
