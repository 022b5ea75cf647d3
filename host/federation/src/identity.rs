//! The cluster's identity: one ed25519 key, kept in a private file and
//! never anywhere else (not in PostgreSQL, not in logs, not in an answer;
//! the database keeps only the public key).
//!
//! The file holds one line, `switchyard-cluster-key-v1 <64 hex of the
//! seed>\n`, mode 0600 in a directory created 0700. Every replica of a
//! cluster is given the same file. Like ssh with a private key, loading
//! refuses a file that group or others may access: a key that others could
//! have read is not a key this cluster alone holds.
//!
//! Keys, signatures and nonces travel as lowercase hex, one textual form
//! each, so a stored public key compares as a string.

use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use rand::TryRngCore;
use zeroize::Zeroizing;

/// The first word of a key file: names the format, so a later one can be
/// told apart.
const FILE_TAG: &str = "switchyard-cluster-key-v1";

/// The most bytes read from a key file: the line is 91 bytes; anything
/// much larger is not a key file and is not read whole.
const MAX_FILE: u64 = 1024;

/// A file or directory mode bit for group or others: any of them set and
/// the key is refused.
const GROUP_OTHER_BITS: u32 = 0o077;

/// This cluster's signing key. Its `Debug` shows the public key only; the
/// secret is wiped from memory when the key is dropped.
pub struct ClusterKey {
    signing: SigningKey,
}

/// Why a key file could not be written or read. Names the path, never the
/// file's content.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// `init` found a file already there; it is left untouched.
    #[error("{path} already exists; a cluster key is never overwritten")]
    Exists {
        /// The key file.
        path: PathBuf,
    },
    /// No file at the path.
    #[error("no cluster key at {path} (create one with `switchyard federation key init`)")]
    Missing {
        /// The key file.
        path: PathBuf,
    },
    /// The file is not a cluster key file.
    #[error("{path} is not a cluster key file: {reason}")]
    Unreadable {
        /// The key file.
        path: PathBuf,
        /// What is wrong with it (never its content).
        reason: String,
    },
    /// Group or others may access the file.
    #[error(
        "{path} has mode {mode:04o}: a cluster key must not be accessible by group or others (chmod 600)"
    )]
    Permissions {
        /// The key file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The file system refused.
    #[error("cluster key {path}: {source}")]
    Io {
        /// The key file.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
}

/// Why a signature does not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// The public key is not 64 lowercase hex characters of an ed25519 key.
    #[error("the public key is not 64 lowercase hex characters of an ed25519 key")]
    MalformedKey,
    /// The signature is not 128 lowercase hex characters.
    #[error("the signature is not 128 lowercase hex characters")]
    MalformedSignature,
    /// The signature is not the key's over this message.
    #[error("the signature does not verify")]
    BadSignature,
}

impl ClusterKey {
    /// A new key from the operating system's random source.
    pub fn generate() -> ClusterKey {
        let mut seed = Zeroizing::new([0u8; 32]);
        // The OS source directly, as ssh-keygen does, rather than a
        // user-space generator seeded from it. Without it no key can be
        // made at all.
        rand::rngs::OsRng
            .try_fill_bytes(seed.as_mut())
            .expect("the operating system's random source failed");
        ClusterKey {
            signing: SigningKey::from_bytes(&seed),
        }
    }

    /// Generates a key and writes it to `path`, creating missing parent
    /// directories with mode 0700. Refuses with [`KeyError::Exists`] when
    /// the file exists. The file appears whole or not at all: it is
    /// written to a temporary file (0600) beside it, synced, and then
    /// hard-linked into place, which unlike a rename never replaces a file
    /// another process created meanwhile.
    pub fn init_file(path: &Path) -> Result<ClusterKey, KeyError> {
        let io_err = |source| KeyError::Io {
            path: path.to_path_buf(),
            source,
        };
        if fs::symlink_metadata(path).is_ok() {
            return Err(KeyError::Exists {
                path: path.to_path_buf(),
            });
        }
        let dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(io_err)?;
        let key = ClusterKey::generate();
        let line = Zeroizing::new(format!(
            "{FILE_TAG} {}\n",
            hex::encode(key.signing.as_bytes())
        ));
        let temp = dir.join(format!(
            ".{}.tmp-{}",
            path.file_name().and_then(|n| n.to_str()).unwrap_or("key"),
            &crate::proof::new_nonce()[..16]
        ));
        let written = write_new(&temp, line.as_bytes()).and_then(|()| fs::hard_link(&temp, path));
        let _ = fs::remove_file(&temp);
        match written {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                return Err(KeyError::Exists {
                    path: path.to_path_buf(),
                });
            }
            Err(e) => return Err(io_err(e)),
        }
        // The link must survive a crash too; the directory entry is durable
        // once the directory is synced.
        fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io_err)?;
        Ok(key)
    }

    /// Reads the key at `path`: [`KeyError::Missing`] when there is no
    /// file, [`KeyError::Permissions`] when group or others may access it,
    /// [`KeyError::Unreadable`] when it is not a key file.
    pub fn load_file(path: &Path) -> Result<ClusterKey, KeyError> {
        let unreadable = |reason: &str| KeyError::Unreadable {
            path: path.to_path_buf(),
            reason: reason.to_string(),
        };
        let meta = match fs::metadata(path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(KeyError::Missing {
                    path: path.to_path_buf(),
                });
            }
            Err(source) => {
                return Err(KeyError::Io {
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        if !meta.is_file() {
            return Err(unreadable("not a regular file"));
        }
        let mode = meta.permissions().mode() & 0o7777;
        if mode & GROUP_OTHER_BITS != 0 {
            return Err(KeyError::Permissions {
                path: path.to_path_buf(),
                mode,
            });
        }
        let mut text = Zeroizing::new(String::new());
        fs::File::open(path)
            .and_then(|f| f.take(MAX_FILE).read_to_string(&mut text))
            .map_err(|_| unreadable("not UTF-8 text"))?;
        let seed = text
            .strip_suffix('\n')
            .unwrap_or(&text)
            .strip_prefix(FILE_TAG)
            .and_then(|rest| rest.strip_prefix(' '))
            .and_then(decode_hex::<32>)
            .map(Zeroizing::new)
            .ok_or_else(|| unreadable(&format!("expected one line `{FILE_TAG} <64 hex>`")))?;
        Ok(ClusterKey {
            signing: SigningKey::from_bytes(&seed),
        })
    }

    /// The public key, lowercase hex (64 characters).
    pub fn public_key(&self) -> String {
        hex::encode(self.signing.verifying_key().as_bytes())
    }

    /// The signature of `message`, lowercase hex (128 characters).
    pub fn sign(&self, message: &[u8]) -> String {
        hex::encode(self.signing.sign(message).to_bytes())
    }
}

impl std::fmt::Debug for ClusterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterKey")
            .field("public_key", &self.public_key())
            .finish_non_exhaustive()
    }
}

/// Checks that `signature_hex` is `public_key_hex`'s signature of `message`.
///
/// Strict verification (`verify_strict`): rejects weak public keys and
/// malleable signatures, so one message has one valid signature per key.
pub fn verify(
    public_key_hex: &str,
    message: &[u8],
    signature_hex: &str,
) -> Result<(), VerifyError> {
    let key = parse_public_key(public_key_hex)?;
    let signature = decode_hex::<64>(signature_hex)
        .map(|bytes| Signature::from_bytes(&bytes))
        .ok_or(VerifyError::MalformedSignature)?;
    key.verify_strict(message, &signature)
        .map_err(|_| VerifyError::BadSignature)
}

/// Parses a public key: 64 lowercase hex characters of a valid point.
pub(crate) fn parse_public_key(hex: &str) -> Result<VerifyingKey, VerifyError> {
    decode_hex::<32>(hex)
        .and_then(|bytes| VerifyingKey::from_bytes(&bytes).ok())
        .ok_or(VerifyError::MalformedKey)
}

/// Decodes exactly `N` bytes from `2 * N` lowercase hex characters.
pub(crate) fn decode_hex<const N: usize>(text: &str) -> Option<[u8; N]> {
    let lower = text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    let mut out = [0u8; N];
    (lower && text.len() == 2 * N && hex::decode_to_slice(text, &mut out).is_ok()).then_some(out)
}

/// Writes `bytes` to a new file (mode 0600) and syncs it.
fn write_new(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Whether this replica may serve federation: its key against the public
/// key the database stored for the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdentityState {
    /// The key is the stored one (or none was stored yet).
    Verified,
    /// No key configured: federation is suspended.
    Missing,
    /// The key is not the stored one (a swapped file, a restored backup):
    /// federation is suspended until an operator pairs again.
    Mismatch,
}

impl IdentityState {
    /// `verified`, `identity_missing` or `identity_mismatch`, as status
    /// shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            IdentityState::Verified => "verified",
            IdentityState::Missing => "identity_missing",
            IdentityState::Mismatch => "identity_mismatch",
        }
    }
}

impl std::fmt::Display for IdentityState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The state of this replica's identity: no key is [`IdentityState::Missing`];
/// a stored public key other than the key's is [`IdentityState::Mismatch`];
/// no stored key yet is [`IdentityState::Verified`] (the caller then stores
/// this key's public key).
pub fn identity_state(key: Option<&ClusterKey>, stored_public_key: Option<&str>) -> IdentityState {
    match (key, stored_public_key) {
        (None, _) => IdentityState::Missing,
        (Some(key), Some(stored)) if key.public_key() != stored => IdentityState::Mismatch,
        (Some(_), _) => IdentityState::Verified,
    }
}

/// Where the key lives when `--federation-key` is not given:
/// `<data_dir>/federation/cluster.key`.
pub fn default_key_path(data_dir: &Path) -> PathBuf {
    data_dir.join("federation").join("cluster.key")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set_mode(path: &Path, mode: u32) {
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn an_initialised_key_loads_back_from_a_private_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = default_key_path(dir.path());
        let key = ClusterKey::init_file(&path).unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        assert_eq!(
            ClusterKey::load_file(&path).unwrap().public_key(),
            key.public_key()
        );
        // Only the key file: the temporary file is gone.
        assert_eq!(fs::read_dir(path.parent().unwrap()).unwrap().count(), 1);
    }

    #[test]
    fn init_never_overwrites_an_existing_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cluster.key");
        ClusterKey::init_file(&path).unwrap();
        let before = fs::read(&path).unwrap();
        assert!(matches!(
            ClusterKey::init_file(&path),
            Err(KeyError::Exists { .. })
        ));
        assert_eq!(fs::read(&path).unwrap(), before);
    }

    #[test]
    fn a_missing_file_is_missing() {
        let dir = tempfile::tempdir().unwrap();
        let err = ClusterKey::load_file(&dir.path().join("none")).unwrap_err();
        assert!(matches!(err, KeyError::Missing { .. }), "{err}");
    }

    #[test]
    fn a_key_group_or_others_may_read_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cluster.key");
        ClusterKey::init_file(&path).unwrap();
        for mode in [0o640, 0o604, 0o660, 0o610] {
            set_mode(&path, mode);
            let err = ClusterKey::load_file(&path).unwrap_err();
            assert!(
                matches!(err, KeyError::Permissions { mode: m, .. } if m == mode),
                "{err}"
            );
        }
        set_mode(&path, 0o400);
        ClusterKey::load_file(&path).unwrap();
    }

    #[test]
    fn a_file_that_is_not_a_key_is_unreadable_and_its_content_is_never_shown() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cluster.key");
        let seed = "ab".repeat(32);
        for content in [
            "garbage".to_string(),
            format!("other-tag {seed}\n"),
            format!("{FILE_TAG} {}\n", "AB".repeat(32)),
            format!("{FILE_TAG} {}\n", &seed[2..]),
            format!("{FILE_TAG}  {seed}\n"),
            format!("{FILE_TAG} {seed}\n\n"),
        ] {
            let _ = fs::remove_file(&path);
            write_new(&path, content.as_bytes()).unwrap();
            let err = ClusterKey::load_file(&path).unwrap_err();
            assert!(matches!(err, KeyError::Unreadable { .. }), "{err}");
            assert!(
                !err.to_string().to_lowercase().contains(&seed[..16]),
                "{err}"
            );
        }
        let _ = fs::remove_file(&path);
        write_new(&path, format!("{FILE_TAG} {seed}\n").as_bytes()).unwrap();
        ClusterKey::load_file(&path).unwrap();
    }

    #[test]
    fn debug_shows_the_public_key_and_never_the_secret() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cluster.key");
        let key = ClusterKey::init_file(&path).unwrap();
        let file = fs::read_to_string(&path).unwrap();
        let seed = file.trim_end().rsplit(' ').next().unwrap();
        let debug = format!("{key:?}");
        assert!(debug.contains(&key.public_key()), "{debug}");
        assert!(!debug.contains(seed));
    }

    #[test]
    fn a_signature_verifies_for_its_key_and_message_only() {
        let key = ClusterKey::generate();
        let other = ClusterKey::generate();
        let signature = key.sign(b"terms");
        assert_eq!(key.public_key().len(), 64);
        assert_eq!(signature.len(), 128);
        assert_eq!(verify(&key.public_key(), b"terms", &signature), Ok(()));
        assert_eq!(
            verify(&key.public_key(), b"terms!", &signature),
            Err(VerifyError::BadSignature)
        );
        assert_eq!(
            verify(&other.public_key(), b"terms", &signature),
            Err(VerifyError::BadSignature)
        );
        let upper = key.public_key().to_uppercase();
        for bad_key in ["", "zz", upper.as_str(), &key.public_key()[2..]] {
            assert_eq!(
                verify(bad_key, b"terms", &signature),
                Err(VerifyError::MalformedKey)
            );
        }
        for bad_signature in ["", &signature[2..], &signature.to_uppercase()] {
            assert_eq!(
                verify(&key.public_key(), b"terms", bad_signature),
                Err(VerifyError::MalformedSignature)
            );
        }
    }

    #[test]
    fn identity_state_compares_the_key_with_the_stored_public_key() {
        let key = ClusterKey::generate();
        let other = ClusterKey::generate().public_key();
        assert_eq!(identity_state(None, None), IdentityState::Missing);
        assert_eq!(identity_state(None, Some(&other)), IdentityState::Missing);
        assert_eq!(identity_state(Some(&key), None), IdentityState::Verified);
        assert_eq!(
            identity_state(Some(&key), Some(&key.public_key())),
            IdentityState::Verified
        );
        assert_eq!(
            identity_state(Some(&key), Some(&other)),
            IdentityState::Mismatch
        );
        assert_eq!(IdentityState::Mismatch.as_str(), "identity_mismatch");
        assert_eq!(IdentityState::Missing.to_string(), "identity_missing");
    }
}
