//! The reference engine: a small OpenAI-compatible server whose "model" is a
//! deterministic word generator, for clusters without GPUs and for tests.
//!
//! It reads and hashes a model file (any file: the SHA-256 digest is its
//! identity), then answers `/v1/chat/completions`, `/v1/completions`,
//! `/v1/embeddings` and `/v1/models` like an inference server would:
//! streaming included, paced by configurable delays, refusing work beyond a
//! concurrency limit with 429. The same (model file, prompt, seed) always
//! gives the same answer, so end-to-end tests can check what came back, and
//! `GET /stats` shows what reached the engine.
//!
//! Tokens are words: a completion token is `" word"`, and prompt tokens are
//! counted as whitespace-separated words, an approximation of a tokenizer
//! that is stable and easy to check.
//!
//! # Layout
//! - [`config`]: what the engine is started with, [`ReferenceConfig`].
//! - [`model`]: opening and hashing the model file.
//! - [`prompt`]: chat messages or text, and how they are counted.
//! - [`generator`]: the deterministic words and embeddings.
//! - [`decode`]: one completion: pacing, `max_tokens`, stop words.
//! - [`openai`]: the wire format (requests, their validation, responses, errors).
//! - [`concurrency`]: the concurrency limit and per-request accounting.
//! - [`stats`]: the counters behind `GET /stats`.
//! - [`state`]: what handlers share.
//! - [`stream`]: server-sent events.
//! - [`routes`]: one file per endpoint; [`router`] builds them.
//! - [`error`]: [`EngineError`], why the engine could not start or serve.

pub mod concurrency;
pub mod config;
pub mod decode;
pub mod error;
pub mod generator;
pub mod model;
pub mod openai;
pub mod prompt;
pub mod routes;
pub mod state;
pub mod stats;
pub mod stream;

use std::future::Future;

use tokio::net::TcpListener;
use tokio::sync::oneshot;

pub use config::ReferenceConfig;
pub use error::EngineError;
pub use routes::router;
pub use state::EngineState;
pub use stats::StatsSnapshot;

use model::ModelFile;

/// Binds `config.listen` and [`serve`]s on it.
pub async fn run(
    config: ReferenceConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), EngineError> {
    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|source| EngineError::Bind {
            addr: config.listen,
            source,
        })?;
    serve(listener, config, shutdown).await
}

/// Serves the engine on `listener` until `shutdown` resolves, then stops
/// accepting and returns once the requests in flight have finished (streams
/// are bounded by `max_tokens`, so they do).
///
/// A model file that cannot be opened is an error before anything is served.
/// The file is then hashed while the server already answers `/health` with
/// 503, and 200 once it is loaded; a read error while hashing stops the
/// server and is returned.
pub async fn serve(
    listener: TcpListener,
    config: ReferenceConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), EngineError> {
    let file = ModelFile::open(&config)?;
    let state = EngineState::loading(&config);
    let (load_failed, load_error) = oneshot::channel();
    let loaded = state.clone();
    // Loading runs inside the shutdown future so that a failed load stops
    // the server the same way a shutdown does.
    let stop = async move {
        tokio::pin!(shutdown);
        tokio::select! {
            () = &mut shutdown => {}
            result = file.load() => match result {
                Ok(model) => {
                    tracing::info!(model = %model.name, digest = %hex::encode(model.digest), "model loaded");
                    loaded.set_loaded(model);
                    shutdown.await;
                }
                Err(error) => {
                    let _ = load_failed.send(error);
                }
            },
        }
    };
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "reference engine listening");
    }
    // Streamed tokens are small writes: without TCP_NODELAY each would wait
    // for the client's delayed ACK (about 40 ms).
    let listener = axum::serve::ListenerExt::tap_io(listener, |socket| {
        let _ = socket.set_nodelay(true);
    });
    axum::serve(listener, router(state))
        .with_graceful_shutdown(stop)
        .await
        .map_err(EngineError::Serve)?;
    match load_error.await {
        Ok(error) => Err(error),
        Err(_) => Ok(()),
    }
}
