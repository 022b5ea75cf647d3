//! [`ComponentSpec`]: which component runs a carrier or a tunnel session,
//! pinned by its SHA-256.

use std::sync::Arc;

use sha2::{Digest, Sha256};
use switchyard_runtime::loader::ComponentSource;

/// A component the host runs, with the digest every load checks before
/// compiling. Cloning shares the bytes.
#[derive(Clone)]
pub struct ComponentSpec {
    /// Plugin name (also the carrier's name in logs).
    pub name: String,
    /// The component's own version, as the registry holds it.
    pub version: String,
    /// The component bytes.
    pub bytes: Arc<[u8]>,
    /// Their pinned SHA-256, hex.
    pub sha256: String,
}

/// The bytes a component came with do not have the digest it was pinned to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("component {name}@{version}: expected sha256 {expected}, the bytes have {found}")]
pub struct DigestMismatch {
    /// Plugin name.
    pub name: String,
    /// Version.
    pub version: String,
    /// The pinned digest.
    pub expected: String,
    /// The bytes' digest.
    pub found: String,
}

/// SHA-256 of `bytes`, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

impl ComponentSpec {
    /// Bytes pinned to the digest they have (a component this process was
    /// given by its operator: a file, or one built in).
    pub fn new(name: &str, version: &str, bytes: impl Into<Arc<[u8]>>) -> Self {
        let bytes = bytes.into();
        Self {
            name: name.to_string(),
            version: version.to_string(),
            sha256: sha256_hex(&bytes),
            bytes,
        }
    }

    /// Bytes that must have `expected` (a component fetched from elsewhere);
    /// anything else is refused before it is compiled or kept.
    pub fn pinned(
        name: &str,
        version: &str,
        bytes: impl Into<Arc<[u8]>>,
        expected: &str,
    ) -> Result<Self, DigestMismatch> {
        let spec = Self::new(name, version, bytes);
        if spec.sha256 != expected.to_ascii_lowercase() {
            return Err(DigestMismatch {
                name: spec.name,
                version: spec.version,
                expected: expected.to_string(),
                found: spec.sha256,
            });
        }
        Ok(spec)
    }

    /// What the runtime's loader takes (it checks the digest again).
    pub fn source(&self) -> ComponentSource<'_> {
        ComponentSource {
            name: &self.name,
            version: &self.version,
            bytes: &self.bytes,
            sha256: &self.sha256,
        }
    }
}

impl std::fmt::Debug for ComponentSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ComponentSpec")
            .field("name", &self.name)
            .field("version", &self.version)
            .field("sha256", &self.sha256)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_with_another_digest_are_refused() {
        let good = ComponentSpec::new("tunnel", "0.1.0", &b"component"[..]);
        let pinned = ComponentSpec::pinned("tunnel", "0.1.0", &b"component"[..], &good.sha256);
        assert_eq!(pinned.unwrap().sha256, good.sha256);
        let err =
            ComponentSpec::pinned("tunnel", "0.1.0", &b"tampered"[..], &good.sha256).unwrap_err();
        assert_eq!(err.expected, good.sha256);
        assert_ne!(err.found, good.sha256);
        assert!(err.to_string().contains("tunnel@0.1.0"), "{err}");
    }
}
