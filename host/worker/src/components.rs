//! The carrier components a worker runs: named by the heartbeat's carrier
//! news (name, version, SHA-256), fetched from the frontend with the node's
//! own credential, checked against the digest the news named before they
//! are kept or compiled, and kept on disk by digest.

use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::StatusCode;
use switchyard_carrier::{ComponentSpec, DigestMismatch};
use switchyard_protocol::carrier::ComponentRef;

use crate::identity::Identity;

/// How long one component fetch may take. Fetches run in the heartbeat
/// loop (a set starts only once its components are here), so this bounds
/// how long a stuck frontend delays the next heartbeat; a component from
/// another language may be tens of MB (an 18 MB Python policy, measured),
/// seconds on any link a frontend and its workers share.
const FETCH_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a component is not there to run.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The bytes the frontend sent are not the ones the news named.
    #[error("refused: {0}")]
    Digest(#[from] DigestMismatch),
    /// The frontend answered with something other than the bytes.
    #[error("the frontend answered {status} for {name}@{version}")]
    Answered {
        /// The answer's status.
        status: StatusCode,
        /// Plugin name.
        name: String,
        /// Version.
        version: String,
    },
    /// No answer, or the cache folder failed.
    #[error("{0}")]
    Io(String),
}

/// Components kept under the worker's data folder, by digest.
#[derive(Debug, Clone)]
pub struct ComponentCache {
    dir: PathBuf,
    http: reqwest::Client,
}

impl ComponentCache {
    /// The cache in `<data_dir>/components`.
    pub fn new(data_dir: &Path) -> Self {
        Self {
            dir: data_dir.join("components"),
            http: reqwest::Client::builder()
                .timeout(FETCH_TIMEOUT)
                .build()
                .expect("an HTTP client"),
        }
    }

    /// The component `wanted` names: from the cache if the bytes kept there
    /// still have its digest, else fetched from the identity's frontend.
    pub async fn get(
        &self,
        identity: &Identity,
        wanted: &ComponentRef,
    ) -> Result<ComponentSpec, FetchError> {
        let sha256 = wanted.sha256.to_ascii_lowercase();
        if !sha256.bytes().all(|b| b.is_ascii_hexdigit()) || sha256.len() != 64 {
            return Err(FetchError::Io(format!(
                "{}@{} names no SHA-256 ({})",
                wanted.name, wanted.version, wanted.sha256
            )));
        }
        let path = self.dir.join(format!("{sha256}.wasm"));
        if let Ok(kept) = tokio::fs::read(&path).await {
            match ComponentSpec::pinned(&wanted.name, &wanted.version, kept, &sha256) {
                Ok(spec) => return Ok(spec),
                // A damaged file is fetched again, never run.
                Err(e) => {
                    tracing::warn!(error = %e, "a kept component changed on disk; fetching it again")
                }
            }
        }
        let bytes = self.fetch(identity, wanted).await?;
        let spec = ComponentSpec::pinned(&wanted.name, &wanted.version, bytes, &sha256)?;
        self.keep(&path, &spec.bytes).await?;
        tracing::info!(plugin = %spec.name, version = %spec.version, sha256 = %spec.sha256, "carrier component fetched");
        Ok(spec)
    }

    async fn fetch(
        &self,
        identity: &Identity,
        wanted: &ComponentRef,
    ) -> Result<Vec<u8>, FetchError> {
        let url = format!(
            "{}/api/plugins/{}/{}/component",
            identity.frontend, wanted.name, wanted.version
        );
        let response = self
            .http
            .get(url)
            .bearer_auth(&identity.credential)
            .header("x-switchyard-node", &identity.node_id)
            .send()
            .await
            .map_err(|e| FetchError::Io(format!("{}: {e}", identity.frontend)))?;
        if response.status() != StatusCode::OK {
            return Err(FetchError::Answered {
                status: response.status(),
                name: wanted.name.clone(),
                version: wanted.version.clone(),
            });
        }
        let bytes = response
            .bytes()
            .await
            .map_err(|e| FetchError::Io(format!("{}: {e}", identity.frontend)))?;
        Ok(bytes.to_vec())
    }

    /// Writes the verified bytes under their digest (a whole file or none:
    /// written aside, then renamed).
    async fn keep(&self, path: &Path, bytes: &[u8]) -> Result<(), FetchError> {
        let io = |e: std::io::Error| FetchError::Io(format!("{}: {e}", self.dir.display()));
        tokio::fs::create_dir_all(&self.dir).await.map_err(io)?;
        let partial = path.with_extension("partial");
        tokio::fs::write(&partial, bytes).await.map_err(io)?;
        tokio::fs::rename(&partial, path).await.map_err(io)
    }
}
