//! The node's identity: its id and its own credential, kept in
//! `<data-dir>/node.json` (mode 0600) so a restart does not re-register.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
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

/// Stores an identity, readable only by this user, durably: the credential
/// is never in a file another user can read, not even for a moment, and a
/// crash leaves the old identity or the new one, never a torn file. (The
/// write-temp, fsync, rename, fsync-directory sequence is what SQLite and
/// etcd's WAL use for the same promise.)
pub fn store(data_dir: &Path, identity: &Identity) -> Result<(), WorkerError> {
    let path = path(data_dir);
    std::fs::create_dir_all(data_dir).map_err(|e| error(&path, e))?;
    let tmp = path.with_extension("json.tmp");
    let text = serde_json::to_string_pretty(identity).map_err(|e| error(&path, e))?;
    // A leftover from a crash, or a link planted there, is removed, never
    // written through: `create_new` (O_EXCL) does not follow links.
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(error(&tmp, e)),
        _ => {}
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| error(&tmp, e))?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| error(&tmp, e))?;
    drop(file);
    std::fs::rename(&tmp, &path).map_err(|e| error(&path, e))?;
    std::fs::File::open(data_dir)
        .and_then(|dir| dir.sync_all())
        .map_err(|e| error(data_dir, e))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_link_planted_at_the_temporary_file_is_not_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "unchanged").unwrap();
        std::os::unix::fs::symlink(&victim, dir.path().join("node.json.tmp")).unwrap();
        let identity = Identity {
            node_id: "node_1".into(),
            credential: "sy_secret".into(),
            frontend: "http://f".into(),
        };
        store(dir.path(), &identity).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "unchanged");
        assert_eq!(load(dir.path()).unwrap(), Some(identity));
        let stored = std::fs::symlink_metadata(dir.path().join("node.json")).unwrap();
        assert!(stored.file_type().is_file());
        assert_eq!(stored.permissions().mode() & 0o777, 0o600);
    }

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
