//! What the engine is started with.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// How a reference engine is configured.
#[derive(Debug, Clone)]
pub struct ReferenceConfig {
    /// The model file. Its SHA-256 digest seeds the generator, so two engines
    /// on the same file answer the same; its contents are otherwise unused.
    pub model_path: PathBuf,
    /// The name requests must use in `model`; `None` serves the file's stem
    /// (`models/tiny.gguf` is served as `tiny`).
    pub served_model_name: Option<String>,
    /// Where [`run`](crate::run) listens ([`serve`](crate::serve) takes a bound listener).
    pub listen: SocketAddr,
    /// Time spent generating each token.
    pub token_delay: Duration,
    /// Time spent on the prompt before the first token (prefill), once per request.
    pub first_token_delay: Duration,
    /// Requests served at once; beyond it the engine answers 429 instead of
    /// queueing. `None` for no limit.
    pub max_concurrency: Option<usize>,
}

impl ReferenceConfig {
    /// A configuration for `model_path` with no delays, no concurrency limit,
    /// the file's stem as model name and `127.0.0.1:8000` as address.
    pub fn new(model_path: impl Into<PathBuf>) -> Self {
        Self {
            model_path: model_path.into(),
            served_model_name: None,
            listen: SocketAddr::from(([127, 0, 0, 1], 8000)),
            token_delay: Duration::ZERO,
            first_token_delay: Duration::ZERO,
            max_concurrency: None,
        }
    }
}
