//! The node's identity: its id and its own credential, kept in
//! `<data-dir>/node.json` (mode 0600) so a restart does not re-register.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::WorkerError;

/// What registration returned.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Identity {
    /// The node id.
    pub node_id: String,
    /// The node's own credential (a secret).
    pub credential: String,
    /// The frontend that issued it.
    pub frontend: String,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The credential never reaches a log.
        f.debug_struct("Identity")
            .field("node_id", &self.node_id)
            .field("frontend", &self.frontend)
            .finish_non_exhaustive()
    }
}

fn path(data_dir: &Path) -> PathBuf {
    data_dir.join("node.json")
}

fn error(path: &Path, e: impl std::fmt::Display) -> WorkerError {
    WorkerError::Identity {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// The stored identity, if there is one.
pub fn load(data_dir: &Path) -> Result<Option<Identity>, WorkerError> {
    let path = path(data_dir);
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| error(&path, e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(error(&path, e)),
    }
}

/// Stores an identity, readable only by this user.
pub fn store(data_dir: &Path, identity: &Identity) -> Result<(), WorkerError> {
    let path = path(data_dir);
    std::fs::create_dir_all(data_dir).map_err(|e| error(&path, e))?;
    let tmp = path.with_extension("json.tmp");
    let text = serde_json::to_string_pretty(identity).map_err(|e| error(&path, e))?;
    std::fs::write(&tmp, text).map_err(|e| error(&tmp, e))?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| error(&tmp, e))?;
    std::fs::rename(&tmp, &path).map_err(|e| error(&path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_private_and_never_debug_printed() {
        let dir = tempfile::tempdir().unwrap();
        assert!(load(dir.path()).unwrap().is_none());
        let identity = Identity {
            node_id: "node_1".into(),
            credential: "sy_secret".into(),
            frontend: "http://f".into(),
        };
        store(dir.path(), &identity).unwrap();
        assert_eq!(load(dir.path()).unwrap(), Some(identity.clone()));
        let mode = std::fs::metadata(dir.path().join("node.json"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(!format!("{identity:?}").contains("sy_secret"));
    }
}
