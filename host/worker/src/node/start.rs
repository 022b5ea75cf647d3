//! `engine.start`'s request, parsed once into the [`EngineSpec`] the worker
//! runs, under the worker's own [`EngineStartPolicy`].
//!
//! The request comes from whoever can reach the worker's control verbs, so
//! it must not choose what runs: the model is named by SHA-256 and resolved
//! to the placement cache's verified copy, and arguments, environment and
//! a model path are refused unless this worker's operator allowed them
//! (`--allow-engine-arg`, `--allow-engine-env`, `--allow-engine-model-path`).
//! Trusted systems draw the same line: Kubernetes' kubelet runs only the pod
//! spec the API server admitted, and Nomad clients refuse task drivers and
//! host volumes the client's own config did not enable.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use switchyard_protocol::control::EngineStart;

use crate::engines::EngineSpec;
use crate::placement::valid_digest;

/// The longest replica id and served model name accepted.
const MAX_NAME: usize = 256;
/// The most GPUs one engine may be pinned to (more than any machine has).
const MAX_GPUS: usize = 64;

/// What this worker's operator lets an `engine.start` request choose beyond
/// the model (by SHA-256), the kind, the name and the GPUs. The default
/// allows nothing more.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EngineStartPolicy {
    /// Engine arguments a request may append (exact strings).
    pub extra_args: BTreeSet<String>,
    /// Environment variables a request may set (names).
    pub env: BTreeSet<String>,
    /// Folders a request's `model_path` may lie under (instead of a
    /// `model_sha256` from the placement cache); empty: none.
    pub model_roots: Vec<PathBuf>,
}

/// Why an `engine.start` request was refused: a stable code and a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct StartRefusal {
    /// `invalid_request`, `not_allowed` or `model_missing`.
    pub code: &'static str,
    /// For the operator.
    pub message: String,
}

fn refuse(code: &'static str, message: impl Into<String>) -> StartRefusal {
    StartRefusal {
        code,
        message: message.into(),
    }
}

fn valid_name(what: &str, value: &str) -> Result<(), StartRefusal> {
    if value.is_empty() || value.len() > MAX_NAME || value.chars().any(char::is_control) {
        return Err(refuse(
            "invalid_request",
            format!("{what} must be 1-{MAX_NAME} characters without control characters"),
        ));
    }
    Ok(())
}

impl EngineStartPolicy {
    /// Parses `payload` into the spec to run; `cache` gives the placement
    /// cache's path of a complete file by SHA-256.
    pub fn parse(
        &self,
        payload: &[u8],
        cache: impl Fn(&str) -> PathBuf,
    ) -> Result<EngineSpec, StartRefusal> {
        let request: EngineStart = serde_json::from_slice(payload)
            .map_err(|e| refuse("invalid_request", e.to_string()))?;
        valid_name("id", &request.id)?;
        valid_name("served_model_name", &request.served_model_name)?;
        if request.gpus.len() > MAX_GPUS {
            return Err(refuse(
                "invalid_request",
                format!("at most {MAX_GPUS} GPUs, got {}", request.gpus.len()),
            ));
        }
        if let Some(arg) = request
            .extra_args
            .iter()
            .find(|a| !self.extra_args.contains(*a))
        {
            return Err(refuse(
                "not_allowed",
                format!("this worker does not allow the engine argument `{arg}`"),
            ));
        }
        if let Some(name) = request.env.keys().find(|k| !self.env.contains(*k)) {
            return Err(refuse(
                "not_allowed",
                format!("this worker does not allow setting `{name}` in an engine's environment"),
            ));
        }
        // Older frontends send an empty `model_path` beside `model_sha256`.
        let model_path = request.model_path.filter(|p| !p.as_os_str().is_empty());
        let model_path = match (request.model_sha256, model_path) {
            (Some(_), Some(_)) => {
                return Err(refuse(
                    "invalid_request",
                    "name the model by model_sha256 or model_path, not both",
                ));
            }
            (Some(sha256), None) => {
                if !valid_digest(&sha256) {
                    return Err(refuse(
                        "invalid_request",
                        "model_sha256 must be a lowercase hex SHA-256",
                    ));
                }
                let path = cache(&sha256);
                if !path.is_file() {
                    return Err(refuse(
                        "model_missing",
                        format!("file {sha256} is not in this worker's placement cache"),
                    ));
                }
                path
            }
            (None, Some(path)) => self.allowed_model_path(&path)?,
            (None, None) => {
                return Err(refuse("invalid_request", "model_sha256 is required"));
            }
        };
        Ok(EngineSpec {
            id: request.id,
            kind: request.kind,
            model_path,
            served_model_name: request.served_model_name,
            gpus: request.gpus,
            extra_args: request.extra_args,
            env: request.env,
            token_delay_ms: request.token_delay_ms,
        })
    }

    /// `path`, resolved (links followed), if it lies under an allowed root.
    fn allowed_model_path(&self, path: &Path) -> Result<PathBuf, StartRefusal> {
        let not_allowed = || {
            refuse(
                "not_allowed",
                "this worker runs models only from its placement cache (model_sha256)",
            )
        };
        if self.model_roots.is_empty() {
            return Err(not_allowed());
        }
        let resolved = path.canonicalize().map_err(|_| {
            refuse(
                "model_missing",
                format!("{} is not on this worker", path.display()),
            )
        })?;
        self.model_roots
            .iter()
            .filter_map(|root| root.canonicalize().ok())
            .any(|root| resolved.starts_with(root))
            .then_some(resolved)
            .ok_or_else(not_allowed)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const SHA: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn cache_in(dir: &Path) -> impl Fn(&str) -> PathBuf + '_ {
        move |sha: &str| dir.join(sha)
    }

    fn request(extra: serde_json::Value) -> Vec<u8> {
        let mut request = json!({
            "id": "r1", "kind": "reference", "model_sha256": SHA,
            "served_model_name": "tiny", "gpus": [0], "token_delay_ms": 2,
        });
        for (k, v) in extra.as_object().unwrap() {
            request[k] = v.clone();
        }
        serde_json::to_vec(&request).unwrap()
    }

    #[test]
    fn a_model_named_by_sha256_runs_the_cached_copy() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(SHA), b"gguf").unwrap();
        let spec = EngineStartPolicy::default()
            .parse(&request(json!({})), cache_in(dir.path()))
            .unwrap();
        assert_eq!(spec.model_path, dir.path().join(SHA));
        assert!(spec.extra_args.is_empty() && spec.env.is_empty());
        // What the scheduler of older frontends sends.
        let spec = EngineStartPolicy::default()
            .parse(&request(json!({"model_path": ""})), cache_in(dir.path()))
            .unwrap();
        assert_eq!(spec.model_path, dir.path().join(SHA));
    }

    #[test]
    fn by_default_a_request_cannot_set_environment_arguments_or_a_path() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(SHA), b"gguf").unwrap();
        let policy = EngineStartPolicy::default();
        let cases = [
            json!({"env": {"LD_PRELOAD": "/data/blobs/sha256/evil.so"}}),
            json!({"extra_args": ["--chat-template-file", "/etc/shadow"]}),
            json!({"model_sha256": null, "model_path": "/etc/passwd"}),
        ];
        for case in cases {
            let refused = policy
                .parse(&request(case.clone()), cache_in(dir.path()))
                .unwrap_err();
            assert_eq!(refused.code, "not_allowed", "{case}: {refused}");
        }
    }

    #[test]
    fn what_the_operator_allowed_passes_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(SHA), b"gguf").unwrap();
        let models = dir.path().join("models");
        std::fs::create_dir(&models).unwrap();
        std::fs::write(models.join("m.gguf"), b"gguf").unwrap();
        let policy = EngineStartPolicy {
            extra_args: ["--ctx-size".to_string(), "4096".to_string()].into(),
            env: ["HF_HOME".to_string()].into(),
            model_roots: vec![models.clone()],
        };
        let spec = policy
            .parse(
                &request(json!({"extra_args": ["--ctx-size", "4096"], "env": {"HF_HOME": "/x"}})),
                cache_in(dir.path()),
            )
            .unwrap();
        assert_eq!(spec.extra_args, ["--ctx-size", "4096"]);
        let spec = policy
            .parse(
                &request(json!({"model_sha256": null, "model_path": models.join("m.gguf")})),
                cache_in(dir.path()),
            )
            .unwrap();
        assert_eq!(
            spec.model_path,
            models.join("m.gguf").canonicalize().unwrap()
        );
        // Out of the root, through `..`.
        let escaped = models.join("..").join(SHA);
        let refused = policy
            .parse(
                &request(json!({"model_sha256": null, "model_path": escaped})),
                cache_in(dir.path()),
            )
            .unwrap_err();
        assert_eq!(refused.code, "not_allowed");
        let refused = policy
            .parse(
                &request(json!({"env": {"LD_PRELOAD": "x"}})),
                cache_in(dir.path()),
            )
            .unwrap_err();
        assert_eq!(refused.code, "not_allowed");
    }

    #[test]
    fn a_digest_that_is_not_one_cannot_walk_out_of_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        let refused = EngineStartPolicy::default()
            .parse(
                &request(json!({"model_sha256": "../../../etc/passwd"})),
                cache_in(dir.path()),
            )
            .unwrap_err();
        assert_eq!(refused.code, "invalid_request");
        let refused = EngineStartPolicy::default()
            .parse(&request(json!({"unknown": 1})), cache_in(dir.path()))
            .unwrap_err();
        assert_eq!(refused.code, "invalid_request");
    }
}
