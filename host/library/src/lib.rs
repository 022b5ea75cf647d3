//! The model library's bytes: files content-addressed under
//! `<library>/blobs/sha256/<hex>`. A blob is written to a temporary file
//! while its SHA-256 is computed and renamed into place only when it
//! matches, so a file under its digest is always whole and verified.
//!
//! Each replica has its own library folder (`<data-dir>/library`) unless
//! `--library-dir` names shared storage. A replica that lacks a blob some
//! manifest names fetches it from another replica that holds it
//! ([`Library::fetch_from_peers`], `GET /api/cluster/library/blobs/{sha256}`
//! with the cluster's relay secret), verified like an upload; so every
//! replica can stage every registered model, whichever replica imported it.
//!
//! [`fetch`] brings model files in by URL (`POST /api/models/fetch`), past
//! the address guard, into the same verified store.

pub mod fetch;

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use switchyard_store::keys::random_id;

/// Why a blob was not stored.
#[derive(Debug, thiserror::Error)]
pub enum LibraryError {
    /// The bytes hash to something else. What they hash to is logged, not
    /// answered: echoed, it would tell a fetch's caller the digest of a
    /// page it cannot read.
    #[error("the bytes do not hash to the declared SHA-256 {expected}; nothing was kept")]
    DigestMismatch {
        /// What the uploader said.
        expected: String,
    },
    /// The upload ended early or failed.
    #[error("the upload failed: {0}")]
    Upload(String),
    /// More bytes than the library takes in one blob.
    #[error("the blob holds more than {limit} bytes, the most the library takes")]
    TooLarge {
        /// The limit.
        limit: u64,
    },
    /// The disk.
    #[error("library storage: {0}")]
    Io(#[from] std::io::Error),
}

/// Why a blob a manifest names could not be had from the other replicas.
#[derive(Debug, thiserror::Error)]
pub enum PeerFetchError {
    /// Not a digest, so no replica can be asked for it.
    #[error("`{0}` is not a SHA-256")]
    NotADigest(String),
    /// No other replica heartbeats.
    #[error("blob {0} is not in this replica's library and no other replica is up")]
    NoPeer(String),
    /// Every replica asked failed; what each answered.
    #[error("blob {sha256} is not in this replica's library nor fetched from another: {tried}")]
    PeersFailed {
        /// The blob.
        sha256: String,
        /// `peer: what happened`, for each peer, `; `-separated.
        tried: String,
    },
    /// The peers or the relay secret could not be looked up.
    #[error("looking the other replicas up: {0}")]
    Store(#[from] switchyard_store::StoreError),
    /// The HTTP client could not be built.
    #[error("an HTTP client for the other replicas: {0}")]
    Client(String),
    /// One file of a revision.
    #[error("{path}: {source}")]
    File {
        /// The file's path in the revision.
        path: String,
        /// Why.
        source: Box<PeerFetchError>,
    },
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
    max_bytes: u64,
}

/// The largest blob taken, by default: above the biggest single GGUF files
/// published (about 50 GB for one shard on the common hubs) with room to
/// spare, and well short of filling a frontend's disk by mistake (the same
/// bound as a fetch by URL, [`fetch::MAX_FETCH_BYTES`]).
pub const MAX_BLOB_BYTES: u64 = 256 << 30;
/// Age after which a file in `incoming/` is debris of a crash: a live
/// upload writes at least every body idle timeout (30 s) and a live fetch
/// every stall timeout (60 s), so an hour without a write is no transfer.
pub const INCOMING_GRACE: Duration = Duration::from_secs(60 * 60);
/// Age after which a blob no manifest names is removed: a client uploads
/// a model's files, then registers the manifest; a day leaves room for
/// the largest models on slow links and for a retried registration.
pub const UNREGISTERED_GRACE: Duration = Duration::from_secs(24 * 60 * 60);
/// How often the library is swept for both (and once at start).
pub const COLLECT_EVERY: Duration = Duration::from_secs(60 * 60);

/// What a sweep removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Collected {
    /// Temporary files left by crashed or abandoned transfers.
    pub incoming: usize,
    /// Blobs no manifest names.
    pub blobs: usize,
    /// Their bytes, together.
    pub bytes: u64,
}

/// How long connecting to another replica for a blob may take.
const PEER_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a blob's bytes from another replica may stall before that
/// replica is given up on (the next one is tried; a stall is not a size limit).
const PEER_STALL_TIMEOUT: Duration = Duration::from_secs(30);

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
            max_bytes: MAX_BLOB_BYTES,
        })
    }

    /// The same library taking blobs of at most `max_bytes`.
    pub fn with_max_bytes(mut self, max_bytes: u64) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    /// The largest blob taken.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// Where model copies from peer clusters keep their partial bytes
    /// (one folder per copy; not swept: a copy's record owns them).
    pub fn partial_dir(&self) -> PathBuf {
        self.root.join("partial")
    }

    /// Moves a file whose SHA-256 the caller verified into place as blob
    /// `sha256` (a rename: the file must be on the library's file system).
    pub fn adopt(&self, sha256: &str, from: &Path) -> std::io::Result<()> {
        if !valid_digest(sha256) {
            return Err(std::io::Error::other(format!(
                "`{sha256}` is not a SHA-256"
            )));
        }
        std::fs::rename(from, self.blob_path(sha256))
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
            tracing::info!(expected, actual = %actual, "a blob did not match its declared digest");
            return Err(LibraryError::DigestMismatch {
                expected: expected.to_string(),
            });
        }
        let target = self.blob_path(expected);
        if self.has(expected, size) {
            // Uploaded again: the grace before an unregistered blob is
            // collected counts from now.
            if let Ok(file) = std::fs::File::options().write(true).open(&target) {
                let _ = file.set_modified(std::time::SystemTime::now());
            }
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
            if size > self.max_bytes {
                return Err(LibraryError::TooLarge {
                    limit: self.max_bytes,
                });
            }
            file.write_all(&chunk).await?;
        }
        file.sync_all().await?;
        Ok((hex::encode(hasher.finalize()), size))
    }

    /// Makes sure the library holds `sha256` (of `size` bytes): when it
    /// does not, fetches it from the first of `peers` (other replicas'
    /// addresses) that has it, presenting the relay `secret`. The bytes are
    /// verified against the digest like an upload. The error says what each
    /// peer answered.
    pub async fn fetch_from_peers(
        &self,
        peers: &[String],
        secret: &str,
        sha256: &str,
        size: u64,
    ) -> Result<(), PeerFetchError> {
        if self.has(sha256, size) {
            return Ok(());
        }
        if !valid_digest(sha256) {
            return Err(PeerFetchError::NotADigest(sha256.into()));
        }
        let http = reqwest::Client::builder()
            .connect_timeout(PEER_CONNECT_TIMEOUT)
            .read_timeout(PEER_STALL_TIMEOUT)
            .build()
            .map_err(|e| PeerFetchError::Client(e.to_string()))?;
        let mut tried = Vec::new();
        for peer in peers {
            let url = format!(
                "{}/api/cluster/library/blobs/{sha256}",
                peer.trim_end_matches('/')
            );
            let answer = http
                .get(&url)
                .header(switchyard_protocol::carrier::RELAY_HEADER, secret)
                .send()
                .await
                .and_then(|r| r.error_for_status());
            let response = match answer {
                Ok(response) => response,
                Err(e) => {
                    tried.push(format!("{peer}: {}", e.without_url()));
                    continue;
                }
            };
            match self.put(sha256, Box::pin(response.bytes_stream())).await {
                Ok((_, got)) if got == size => {
                    tracing::info!(sha256, peer, size, "blob fetched from another replica");
                    return Ok(());
                }
                Ok((_, got)) => tried.push(format!("{peer}: {got} bytes, not {size}")),
                Err(e) => tried.push(format!("{peer}: {e}")),
            }
        }
        if tried.is_empty() {
            return Err(PeerFetchError::NoPeer(sha256.into()));
        }
        Err(PeerFetchError::PeersFailed {
            sha256: sha256.into(),
            tried: tried.join("; "),
        })
    }

    /// The blob's bytes as a stream, from the start, if the library holds it.
    pub async fn read(
        &self,
        sha256: &str,
    ) -> Option<(
        u64,
        impl Stream<Item = std::io::Result<Bytes>> + Send + use<>,
    )> {
        use tokio::io::AsyncReadExt;
        let size = self.size(sha256)?;
        let file = tokio::fs::File::open(self.blob_path(sha256)).await.ok()?;
        let chunks = futures::stream::unfold(Some(file), |file| async move {
            let mut file = file?;
            let mut buffer = vec![0u8; 256 * 1024];
            match file.read(&mut buffer).await {
                Ok(0) => None,
                Ok(n) => {
                    buffer.truncate(n);
                    Some((Ok(Bytes::from(buffer)), Some(file)))
                }
                Err(e) => Some((Err(e), None)),
            }
        });
        Some((size, chunks))
    }

    /// Removes what no transfer and no manifest will use: files in
    /// `incoming/` not written for `incoming_grace` (a crash's debris), and
    /// blobs not in `referenced` not written for `unregistered_grace`
    /// (uploaded, never registered). A registration racing the removal of
    /// a blob that old finds it missing and asks for the upload again.
    pub async fn collect(
        &self,
        referenced: std::collections::HashSet<String>,
        incoming_grace: Duration,
        unregistered_grace: Duration,
    ) -> std::io::Result<Collected> {
        let root = self.root.clone();
        tokio::task::spawn_blocking(move || {
            let mut collected = Collected::default();
            let old = |meta: &std::fs::Metadata, grace: Duration| {
                meta.modified()
                    .ok()
                    .and_then(|at| at.elapsed().ok())
                    .is_some_and(|age| age > grace)
            };
            for entry in std::fs::read_dir(root.join("incoming"))? {
                let entry = entry?;
                let meta = entry.metadata()?;
                if meta.is_file()
                    && old(&meta, incoming_grace)
                    && std::fs::remove_file(entry.path()).is_ok()
                {
                    collected.incoming += 1;
                    collected.bytes += meta.len();
                }
            }
            for entry in std::fs::read_dir(root.join("blobs/sha256"))? {
                let entry = entry?;
                let meta = entry.metadata()?;
                let name = entry.file_name();
                let Some(digest) = name.to_str() else {
                    continue;
                };
                if meta.is_file()
                    && !referenced.contains(digest)
                    && old(&meta, unregistered_grace)
                    && std::fs::remove_file(entry.path()).is_ok()
                {
                    collected.blobs += 1;
                    collected.bytes += meta.len();
                }
            }
            Ok(collected)
        })
        .await
        .map_err(std::io::Error::other)?
    }

    /// Removes a blob no revision uses any more.
    pub async fn remove(&self, sha256: &str) -> std::io::Result<()> {
        match tokio::fs::remove_file(self.blob_path(sha256)).await {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

/// How recent another replica's heartbeat must be for it to be asked for a
/// blob (replicas heartbeat every 5 s).
const PEER_FRESH: Duration = Duration::from_secs(30);

/// Makes sure `library` (of the replica `instance_id`) holds every file of
/// `revision`, fetching those it lacks from the other replicas.
pub async fn ensure_revision(
    library: &Library,
    store: &switchyard_store::Store,
    instance_id: &str,
    revision: &switchyard_store::models::ModelRevision,
) -> Result<(), PeerFetchError> {
    for file in &revision.files {
        ensure_blob(
            library,
            store,
            instance_id,
            &file.sha256,
            file.size.max(0) as u64,
        )
        .await
        .map_err(|e| PeerFetchError::File {
            path: file.path.clone(),
            source: Box::new(e),
        })?;
    }
    Ok(())
}

/// Makes sure `library` (of the replica `instance_id`) holds the blob,
/// fetching it from the other replicas when it does not.
pub async fn ensure_blob(
    library: &Library,
    store: &switchyard_store::Store,
    instance_id: &str,
    sha256: &str,
    size: u64,
) -> Result<(), PeerFetchError> {
    if library.has(sha256, size) {
        return Ok(());
    }
    let peers = store.peer_addresses(instance_id, PEER_FRESH).await?;
    let secret = store.relay_secret().await?;
    library
        .fetch_from_peers(&peers, &secret, sha256, size)
        .await
}

/// Sweeps the library at start and every [`COLLECT_EVERY`] until `stop`
/// ([`Library::collect`]); a sweep is skipped while the database does not
/// answer (which blobs are registered is not known then).
pub async fn collect_garbage(
    store: switchyard_store::Store,
    library: Library,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        match store.referenced_blobs().await {
            Ok(referenced) => {
                match library
                    .collect(referenced, INCOMING_GRACE, UNREGISTERED_GRACE)
                    .await
                {
                    Ok(c) if c == Collected::default() => {}
                    Ok(c) => tracing::info!(
                        incoming = c.incoming,
                        blobs = c.blobs,
                        bytes = c.bytes,
                        "library swept: removed transfer debris and unregistered blobs"
                    ),
                    Err(e) => tracing::warn!(error = %e, "sweeping the library failed"),
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "library sweep skipped: the database did not answer")
            }
        }
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(COLLECT_EVERY) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::time::{Duration, SystemTime};

    use super::*;

    fn aged(path: &Path, bytes: &[u8], age: Duration) {
        std::fs::write(path, bytes).unwrap();
        let file = std::fs::File::options().write(true).open(path).unwrap();
        file.set_modified(SystemTime::now() - age).unwrap();
    }

    #[tokio::test]
    async fn a_sweep_removes_old_debris_and_old_unregistered_blobs_only() {
        let dir = tempfile::tempdir().unwrap();
        let library = Library::open(dir.path()).unwrap();
        let hour = Duration::from_secs(3600);
        let incoming = dir.path().join("incoming");
        aged(&incoming.join("crashed"), b"half a file", 2 * hour);
        aged(&incoming.join("live"), b"in flight", Duration::ZERO);
        let (registered, unregistered, fresh) = ("a".repeat(64), "b".repeat(64), "c".repeat(64));
        aged(&library.blob_path(&registered), b"kept", 48 * hour);
        aged(&library.blob_path(&unregistered), b"gone", 48 * hour);
        aged(&library.blob_path(&fresh), b"young", hour);
        let referenced = HashSet::from([registered.clone()]);
        let collected = library.collect(referenced, hour, 24 * hour).await.unwrap();
        assert_eq!(
            collected,
            Collected {
                incoming: 1,
                blobs: 1,
                bytes: 15
            }
        );
        assert!(!incoming.join("crashed").exists() && incoming.join("live").exists());
        assert!(library.size(&registered).is_some() && library.size(&fresh).is_some());
        assert!(library.size(&unregistered).is_none());
    }

    #[tokio::test]
    async fn a_blob_over_the_limit_is_refused_and_nothing_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let library = Library::open(dir.path()).unwrap().with_max_bytes(10);
        let bytes = Bytes::from_static(b"eleven byte");
        let digest = hex::encode(Sha256::digest(&bytes));
        let body = futures::stream::iter([Ok::<_, std::io::Error>(bytes)]);
        let put = library.put(&digest, body).await;
        assert!(
            matches!(put, Err(LibraryError::TooLarge { limit: 10 })),
            "{put:?}"
        );
        assert!(library.size(&digest).is_none());
        assert!(
            std::fs::read_dir(dir.path().join("incoming"))
                .unwrap()
                .next()
                .is_none()
        );
    }
}
