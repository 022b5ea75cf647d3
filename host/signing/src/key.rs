//! A plugin signing key. The private file holds one line,
//! `switchyard-signing-key-v1 <64 hex of the seed>\n`, mode 0600, and is
//! never overwritten; the public file beside it (`<file>.pub`) holds the
//! public key as 64 lowercase hex, which is what `switchyard trust add`
//! reads. Like ssh, loading refuses a private file that group or others
//! may access. No error ever quotes a key file's content.

use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use ed25519_dalek::VerifyingKey;
use rand::TryRngCore;
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

/// The first word of a private key file.
const FILE_TAG: &str = "switchyard-signing-key-v1";

/// The most bytes read from a key file: the private line is 91 bytes.
const MAX_FILE: u64 = 1024;

/// Mode bits for group or others: any set and a private key is refused.
const GROUP_OTHER_BITS: u32 = 0o077;

/// Hex characters of a key id: 64 bits of the key's SHA-256 tell a
/// handful of release keys apart and stay short enough to type.
const KEY_ID_HEX: usize = 16;

/// A signing key. `Debug` shows the key id only; the seed is wiped when
/// the key is dropped (ed25519-dalek's `zeroize` feature).
pub struct SigningKey {
    pub(crate) inner: ed25519_dalek::SigningKey,
}

/// Why a key file could not be written or read: names the path and what
/// is wrong, never the content.
#[derive(Debug, thiserror::Error)]
pub enum KeyFileError {
    /// The private file (or its `.pub`) is already there; it is left alone.
    #[error("{0} already exists; a signing key is never overwritten")]
    Exists(PathBuf),
    /// The file is not a key file of the expected kind.
    #[error("{path} is not {expected}")]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// What it should have been.
        expected: &'static str,
    },
    /// Group or others may access the private file.
    #[error(
        "{path} has mode {mode:04o}: a signing key must not be accessible by group or others (chmod 600)"
    )]
    Permissions {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The file system refused.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
}

impl SigningKey {
    /// A new key from the operating system's random source.
    pub fn generate() -> SigningKey {
        let mut seed = Zeroizing::new([0u8; 32]);
        // The OS source directly, as ssh-keygen does; without it no key
        // can be made at all.
        rand::rngs::OsRng
            .try_fill_bytes(seed.as_mut())
            .expect("the operating system's random source failed");
        SigningKey {
            inner: ed25519_dalek::SigningKey::from_bytes(&seed),
        }
    }

    /// Generates a key and writes `path` (0600) and `path.pub`; refuses
    /// when either exists.
    pub fn generate_files(path: &Path) -> Result<SigningKey, KeyFileError> {
        let public = public_path(path);
        for file in [path, public.as_path()] {
            if fs::symlink_metadata(file).is_ok() {
                return Err(KeyFileError::Exists(file.to_path_buf()));
            }
        }
        let key = SigningKey::generate();
        let line = Zeroizing::new(format!(
            "{FILE_TAG} {}\n",
            hex::encode(key.inner.as_bytes())
        ));
        write_new(path, line.as_bytes(), 0o600)?;
        write_new(&public, format!("{}\n", key.public_key()).as_bytes(), 0o644)?;
        Ok(key)
    }

    /// Reads the private key at `path`.
    pub fn load(path: &Path) -> Result<SigningKey, KeyFileError> {
        let io_err = |source| KeyFileError::Io {
            path: path.to_path_buf(),
            source,
        };
        let unreadable = || KeyFileError::Unreadable {
            path: path.to_path_buf(),
            expected: "a signing key file (`switchyard trust keygen` writes one)",
        };
        let mode = fs::metadata(path).map_err(io_err)?.permissions().mode() & 0o7777;
        if mode & GROUP_OTHER_BITS != 0 {
            return Err(KeyFileError::Permissions {
                path: path.to_path_buf(),
                mode,
            });
        }
        let text = read_bounded(path)?;
        let seed = text
            .trim_end_matches('\n')
            .strip_prefix(FILE_TAG)
            .and_then(|rest| rest.strip_prefix(' '))
            .and_then(decode_hex::<32>)
            .map(Zeroizing::new)
            .ok_or_else(unreadable)?;
        Ok(SigningKey {
            inner: ed25519_dalek::SigningKey::from_bytes(&seed),
        })
    }

    /// The public key, 64 lowercase hex.
    pub fn public_key(&self) -> String {
        hex::encode(self.inner.verifying_key().as_bytes())
    }

    /// The key's id.
    pub fn key_id(&self) -> String {
        key_id(&self.inner.verifying_key())
    }
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("key_id", &self.key_id())
            .finish_non_exhaustive()
    }
}

/// Where the public half of the private key at `path` is written.
pub fn public_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".pub");
    PathBuf::from(name)
}

/// Reads a public key file (64 hex, surrounding whitespace allowed).
/// A private key file given by mistake is refused without being echoed.
pub fn read_public_file(path: &Path) -> Result<String, KeyFileError> {
    let text = read_bounded(path)?;
    let expected = if text.starts_with(FILE_TAG) {
        "a public key: it is a private signing key; give its .pub file"
    } else {
        "a public key file (64 hex characters, as `switchyard trust keygen` writes to FILE.pub)"
    };
    parse_public_key(text.trim())
        .map(|key| hex::encode(key.as_bytes()))
        .ok_or_else(|| KeyFileError::Unreadable {
            path: path.to_path_buf(),
            expected,
        })
}

/// A key's id: the first 16 hex characters of the SHA-256 of its bytes.
pub fn key_id(key: &VerifyingKey) -> String {
    let mut id = hex::encode(Sha256::digest(key.as_bytes()));
    id.truncate(KEY_ID_HEX);
    id
}

/// Parses a public key: 64 lowercase hex of a valid ed25519 point that is
/// not a weak (small-order) key, whose signatures would prove nothing.
pub fn parse_public_key(text: &str) -> Option<VerifyingKey> {
    decode_hex::<32>(text)
        .and_then(|bytes| VerifyingKey::from_bytes(&bytes).ok())
        .filter(|key| !key.is_weak())
}

/// Exactly `N` bytes from `2 * N` lowercase hex characters.
pub(crate) fn decode_hex<const N: usize>(text: &str) -> Option<[u8; N]> {
    let lower = text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    let mut out = [0u8; N];
    (lower && text.len() == 2 * N && hex::decode_to_slice(text, &mut out).is_ok()).then_some(out)
}

fn read_bounded(path: &Path) -> Result<Zeroizing<String>, KeyFileError> {
    let mut text = Zeroizing::new(String::new());
    let file = fs::File::open(path).map_err(|source| KeyFileError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    file.take(MAX_FILE)
        .read_to_string(&mut text)
        .map_err(|_| KeyFileError::Unreadable {
            path: path.to_path_buf(),
            expected: "a key file (UTF-8 text)",
        })?;
    Ok(text)
}

/// Writes a new file with `mode` and syncs it; refuses an existing one.
fn write_new(path: &Path, bytes: &[u8], mode: u32) -> Result<(), KeyFileError> {
    let io_err = |source: io::Error| match source.kind() {
        io::ErrorKind::AlreadyExists => KeyFileError::Exists(path.to_path_buf()),
        _ => KeyFileError::Io {
            path: path.to_path_buf(),
            source,
        },
    };
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(io_err)?;
    file.write_all(bytes).map_err(io_err)?;
    file.sync_all().map_err(io_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keygen_writes_a_private_file_for_its_owner_and_a_public_one_and_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("release.key");
        let key = SigningKey::generate_files(&path).unwrap();
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(
            SigningKey::load(&path).unwrap().public_key(),
            key.public_key()
        );
        let public = read_public_file(&public_path(&path)).unwrap();
        assert_eq!(public, key.public_key());
        assert_eq!(key.key_id().len(), 16);
        assert!(matches!(
            SigningKey::generate_files(&path),
            Err(KeyFileError::Exists(_))
        ));
        assert!(!format!("{key:?}").contains(&hex::encode(key.inner.as_bytes())));
    }

    #[test]
    fn a_private_key_others_may_read_or_given_as_public_is_refused_unquoted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k");
        let key = SigningKey::generate_files(&path).unwrap();
        let seed = hex::encode(key.inner.as_bytes());
        let why = read_public_file(&path).unwrap_err().to_string();
        assert!(why.contains("private signing key"), "{why}");
        assert!(!why.contains(&seed));
        fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
        assert!(matches!(
            SigningKey::load(&path),
            Err(KeyFileError::Permissions { .. })
        ));
    }

    #[test]
    fn a_public_key_is_lowercase_hex_of_a_strong_point() {
        let key = SigningKey::generate();
        assert!(parse_public_key(&key.public_key()).is_some());
        assert!(parse_public_key(&key.public_key().to_uppercase()).is_none());
        assert!(parse_public_key("00").is_none());
        // The identity point: small order, so weak.
        let identity = format!("01{}", "00".repeat(31));
        assert!(parse_public_key(&identity).is_none());
    }
}
