//! The worker's verified placement cache: model files by SHA-256 under
//! `<data-dir>/models`. A file arrives in ranges (at most 64 MiB each) into
//! `partial/<sha256>`, whose length is the durable offset a resumed
//! transfer starts from; only a complete file with the declared SHA-256
//! moves to `blobs/sha256/<sha256>` and becomes usable. One transfer per
//! file at a time; the disk reserve is checked before a transfer starts.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};

pub use switchyard_protocol::control::FileState;
pub use switchyard_protocol::limits::MAX_RANGE;

/// Why a range was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    /// Another transfer of this file is running.
    #[error("file {0} is already being transferred")]
    Busy(String),
    /// The range does not start at the durable offset.
    #[error("the range starts at {given}, the durable offset is {durable}")]
    WrongOffset {
        /// Where the sender started.
        given: u64,
        /// Where the file ends here.
        durable: u64,
    },
    /// Too large a range, or past the declared size.
    #[error("invalid range: {0}")]
    InvalidRange(String),
    /// Not enough disk.
    #[error("{needed} bytes needed beside the reserve, {available} available")]
    NoSpace {
        /// Bytes still to come plus the reserve.
        needed: u64,
        /// Bytes free.
        available: u64,
    },
    /// The complete file hashes to something else: it was discarded.
    #[error("file {expected} arrived corrupted (SHA-256 {actual}); discarded")]
    Corrupted {
        /// The declared digest.
        expected: String,
        /// What arrived.
        actual: String,
    },
    /// The stream ended before the range did.
    #[error("the range ended early: {0}")]
    Short(String),
    /// The disk.
    #[error("placement cache: {0}")]
    Io(String),
}

impl From<std::io::Error> for PlacementError {
    fn from(e: std::io::Error) -> Self {
        PlacementError::Io(e.to_string())
    }
}

/// The cache.
#[derive(Debug, Clone)]
pub struct Placement {
    root: PathBuf,
    reserve: u64,
    busy: Arc<Mutex<HashSet<String>>>,
}

/// Holds a file's transfer slot.
#[derive(Debug)]
struct Slot {
    digest: String,
    busy: Arc<Mutex<HashSet<String>>>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.busy.lock().expect("busy lock").remove(&self.digest);
    }
}

pub(crate) fn valid_digest(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl Placement {
    /// The cache under `root`, keeping `reserve` bytes of disk free.
    pub fn open(root: &Path, reserve: u64) -> std::io::Result<Self> {
        std::fs::create_dir_all(root.join("blobs/sha256"))?;
        std::fs::create_dir_all(root.join("partial"))?;
        Ok(Self {
            root: root.to_path_buf(),
            reserve,
            busy: Arc::default(),
        })
    }

    /// Where a complete file lives.
    pub fn path(&self, sha256: &str) -> PathBuf {
        self.root.join("blobs/sha256").join(sha256)
    }

    fn partial(&self, sha256: &str) -> PathBuf {
        self.root.join("partial").join(sha256)
    }

    /// What is here of a file of `size` bytes.
    pub fn state(&self, sha256: &str, size: u64) -> FileState {
        if !valid_digest(sha256) {
            return FileState::Absent;
        }
        if std::fs::metadata(self.path(sha256)).is_ok_and(|m| m.len() == size) {
            return FileState::Complete;
        }
        match std::fs::metadata(self.partial(sha256)) {
            Ok(m) if m.len() <= size => FileState::Partial { offset: m.len() },
            _ => FileState::Absent,
        }
    }

    /// Writes one range of a file of `size` bytes, starting at `offset`
    /// (which must be the durable offset), from `chunks`; returns the new
    /// durable offset and whether the file is now complete and verified.
    pub async fn receive<S>(
        &self,
        sha256: &str,
        size: u64,
        offset: u64,
        length: u64,
        mut chunks: S,
    ) -> Result<(u64, bool), PlacementError>
    where
        S: futures::Stream<Item = Result<Bytes, String>> + Unpin,
    {
        use futures::StreamExt;
        if !valid_digest(sha256) {
            return Err(PlacementError::InvalidRange("not a SHA-256".into()));
        }
        if length > MAX_RANGE || offset.checked_add(length).is_none_or(|end| end > size) {
            return Err(PlacementError::InvalidRange(format!(
                "{length} bytes at {offset} of {size} (at most {MAX_RANGE} per range)"
            )));
        }
        let _slot = self.claim(sha256)?;
        let durable = match self.state(sha256, size) {
            FileState::Complete => return Ok((size, true)),
            FileState::Partial { offset } => offset,
            FileState::Absent => 0,
        };
        if offset != durable {
            return Err(PlacementError::WrongOffset {
                given: offset,
                durable,
            });
        }
        let available = available_bytes(&self.root)?;
        let needed = (size - durable).saturating_add(self.reserve);
        if available < needed {
            return Err(PlacementError::NoSpace { needed, available });
        }
        let mut file = tokio::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.partial(sha256))
            .await?;
        let mut written = 0u64;
        while written < length {
            let Some(chunk) = chunks.next().await else {
                break;
            };
            let chunk = chunk.map_err(PlacementError::Short)?;
            let take = chunk.len().min((length - written) as usize);
            file.write_all(&chunk[..take]).await?;
            written += take as u64;
        }
        // What was written is durable before it is reported.
        file.sync_all().await?;
        let offset = durable + written;
        if written < length {
            return Err(PlacementError::Short(format!(
                "{written} of {length} bytes; resume at {offset}"
            )));
        }
        if offset < size {
            return Ok((offset, false));
        }
        let actual = hash_file(&self.partial(sha256)).await?;
        if actual != sha256 {
            tokio::fs::remove_file(self.partial(sha256)).await?;
            return Err(PlacementError::Corrupted {
                expected: sha256.to_string(),
                actual,
            });
        }
        tokio::fs::rename(self.partial(sha256), self.path(sha256)).await?;
        Ok((size, true))
    }

    /// The SHA-256s of the complete, verified files, sorted: a file is
    /// under `blobs/` only once verified. At most `limit` of them.
    pub fn held(&self, limit: usize) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(self.root.join("blobs/sha256")) else {
            return Vec::new();
        };
        let mut held: Vec<String> = entries
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|name| valid_digest(name))
            .collect();
        held.sort();
        held.truncate(limit);
        held
    }

    /// Removes a file, complete or partial.
    pub async fn delete(&self, sha256: &str) -> Result<(), PlacementError> {
        if !valid_digest(sha256) {
            return Err(PlacementError::InvalidRange("not a SHA-256".into()));
        }
        let _slot = self.claim(sha256)?;
        for path in [self.path(sha256), self.partial(sha256)] {
            match tokio::fs::remove_file(path).await {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
                _ => {}
            }
        }
        Ok(())
    }

    fn claim(&self, sha256: &str) -> Result<Slot, PlacementError> {
        if !self
            .busy
            .lock()
            .expect("busy lock")
            .insert(sha256.to_string())
        {
            return Err(PlacementError::Busy(sha256.to_string()));
        }
        Ok(Slot {
            digest: sha256.to_string(),
            busy: self.busy.clone(),
        })
    }
}

async fn hash_file(path: &Path) -> Result<String, PlacementError> {
    let mut file = tokio::fs::File::open(path).await?;
    file.seek(std::io::SeekFrom::Start(0)).await?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buffer).await?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// Free bytes on the file system holding `path`.
fn available_bytes(path: &Path) -> Result<u64, PlacementError> {
    disk_space(path)
        .map(|(_, available)| available)
        .map_err(PlacementError::Io)
}

/// Total and available bytes of the file system holding `path`.
// The statvfs field types differ by platform (u32 or u64).
#[allow(clippy::unnecessary_cast)]
pub fn disk_space(path: &Path) -> Result<(u64, u64), String> {
    let stat = nix::sys::statvfs::statvfs(path).map_err(|e| e.to_string())?;
    let block = stat.fragment_size() as u64;
    Ok((
        stat.blocks() as u64 * block,
        stat.blocks_available() as u64 * block,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(bytes: &[u8]) -> String {
        hex::encode(Sha256::digest(bytes))
    }

    fn chunks(bytes: &[u8]) -> impl futures::Stream<Item = Result<Bytes, String>> + Unpin {
        let parts: Vec<Result<Bytes, String>> = bytes
            .chunks(1000)
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        futures::stream::iter(parts)
    }

    #[tokio::test]
    async fn an_interrupted_transfer_resumes_from_its_durable_offset() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Placement::open(dir.path(), 0).unwrap();
        let file: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let sha = digest(&file);
        let size = file.len() as u64;
        assert_eq!(cache.state(&sha, size), FileState::Absent);
        // The first range is cut after 2500 of 4000 bytes.
        let cut = cache
            .receive(&sha, size, 0, 4000, chunks(&file[..2500]))
            .await;
        assert!(matches!(cut, Err(PlacementError::Short(_))), "{cut:?}");
        assert_eq!(cache.state(&sha, size), FileState::Partial { offset: 2500 });
        // A sender that starts elsewhere is told where to resume.
        let wrong = cache
            .receive(&sha, size, 0, 4000, chunks(&file[..4000]))
            .await;
        assert_eq!(
            wrong,
            Err(PlacementError::WrongOffset {
                given: 0,
                durable: 2500
            })
        );
        let (offset, complete) = cache
            .receive(&sha, size, 2500, 7500, chunks(&file[2500..]))
            .await
            .unwrap();
        assert_eq!((offset, complete), (size, true));
        assert_eq!(cache.state(&sha, size), FileState::Complete);
        assert_eq!(std::fs::read(cache.path(&sha)).unwrap(), file);
    }

    #[tokio::test]
    async fn a_corrupted_byte_is_detected_and_never_usable() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Placement::open(dir.path(), 0).unwrap();
        let file = vec![7u8; 5000];
        let sha = digest(&file);
        let mut corrupted = file.clone();
        corrupted[4321] ^= 0x01;
        let outcome = cache.receive(&sha, 5000, 0, 5000, chunks(&corrupted)).await;
        assert!(
            matches!(outcome, Err(PlacementError::Corrupted { .. })),
            "{outcome:?}"
        );
        assert_eq!(cache.state(&sha, 5000), FileState::Absent, "discarded");
        assert!(!cache.path(&sha).exists());
    }

    #[tokio::test]
    async fn ranges_are_bounded_and_the_disk_reserve_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Placement::open(dir.path(), 0).unwrap();
        let sha = digest(b"x");
        let too_long = cache
            .receive(&sha, u64::MAX, 0, MAX_RANGE + 1, chunks(b""))
            .await;
        assert!(matches!(too_long, Err(PlacementError::InvalidRange(_))));
        let past_end = cache.receive(&sha, 10, 5, 6, chunks(b"")).await;
        assert!(matches!(past_end, Err(PlacementError::InvalidRange(_))));
        let greedy = Placement::open(dir.path(), u64::MAX / 2).unwrap();
        let refused = greedy.receive(&sha, 1, 0, 1, chunks(b"x")).await;
        assert!(
            matches!(refused, Err(PlacementError::NoSpace { .. })),
            "{refused:?}"
        );
    }

    #[tokio::test]
    async fn only_complete_files_are_held() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Placement::open(dir.path(), 0).unwrap();
        let (whole, part) = (vec![1u8; 3000], vec![2u8; 3000]);
        cache
            .receive(&digest(&whole), 3000, 0, 3000, chunks(&whole))
            .await
            .unwrap();
        let _ = cache
            .receive(&digest(&part), 3000, 0, 3000, chunks(&part[..1000]))
            .await;
        // Something that is not a digest is not reported.
        std::fs::write(dir.path().join("blobs/sha256/notes.txt"), b"x").unwrap();
        assert_eq!(cache.held(10), vec![digest(&whole)]);
        assert!(cache.held(0).is_empty(), "bounded");
        cache.delete(&digest(&whole)).await.unwrap();
        assert!(cache.held(10).is_empty());
    }

    #[tokio::test]
    async fn one_transfer_per_file_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Placement::open(dir.path(), 0).unwrap();
        let sha = digest(b"held");
        let _held = cache.claim(&sha).unwrap();
        let second = cache.receive(&sha, 4, 0, 4, chunks(b"held")).await;
        assert_eq!(second, Err(PlacementError::Busy(sha)));
    }
}
